/* decode — ZeroMQ frames -> validated ddp_msg_t.
 *
 * Two layers: the msgpack layer (this file) checks that every required key
 * is there with the right msgpack type, integer ranges that the C field can
 * hold, string lengths and bin sizes; then proto_validate applies the
 * semantic rules shared with the encoder. Unknown keys are ignored so a
 * newer sender can add fields without breaking older receivers.
 */
#include "proto/codec.h"
#include "common/errbuf.h"

#include "proto/mp.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Narrowing conveniences over mp_opt_uint (optional keys). */
static int opt_u32(const mp_reader_t *r, const char *key, uint32_t *out)
{
    uint64_t v = *out;
    int rc = mp_opt_uint(r, key, UINT32_MAX, &v);
    *out = (uint32_t)v;
    return rc;
}

static int opt_u8(const mp_reader_t *r, const char *key, uint8_t *out)
{
    uint64_t v = *out;
    int rc = mp_opt_uint(r, key, UINT8_MAX, &v);
    *out = (uint8_t)v;
    return rc;
}

/* An optional bin of exactly `len` bytes copied into dst. */
static int opt_fixed_bin(const mp_reader_t *r, const char *key, void *dst, size_t len, bool *present)
{
    bool dup;
    *present = false;
    if (!mp_find(r, key, &dup))
        return dup ? -1 : 0;
    const void *p;
    if (mp_get_bin(r, key, len, key, &p))
        return -1;
    memcpy(dst, p, len);
    *present = true;
    return 0;
}

/* The optional auth keys: a token without a session (or the reverse) is
 * malformed; job is optional with them. */
static int d_auth(const mp_reader_t *r, ddp_auth_t *a)
{
    bool have_token;
    if (mp_opt_str(r, "job", a->job, sizeof a->job) ||
        mp_opt_uint(r, "session", UINT64_MAX, &a->session) ||
        opt_fixed_bin(r, "token", a->token, DDP_TOKEN_LEN, &have_token))
        return -1;
    if (have_token != (a->session != 0))
        return mp_fail(r, "'token' and a non-zero 'session' come together");
    return 0;
}

static int d_join(const mp_reader_t *r, ddp_join_t *m)
{
    return mp_get_u8(r, "role", 0, UINT8_MAX, &m->role) ||
           mp_get_u32(r, "pid", 0, UINT32_MAX, &m->pid) ||
           mp_get_i32(r, "want_rank", INT32_MIN, INT32_MAX, &m->want_rank) ||
           mp_get_str(r, "name", m->name, sizeof m->name) ||
           mp_get_str(r, "host", m->host, sizeof m->host) ||
           mp_get_str(r, "backend", m->backend, sizeof m->backend) ||
           mp_opt_str(r, "ring", m->ring, sizeof m->ring) ||
           mp_opt_str(r, "config", m->config, sizeof m->config) ||
           mp_opt_str(r, "job", m->job, sizeof m->job) ||
           opt_u32(r, "shard", &m->shard) || opt_u32(r, "shards", &m->shards) ||
           opt_u8(r, "nccl", &m->nccl) || mp_opt_str(r, "failed", m->failed, sizeof m->failed)
               ? -1 : 0;
}

static int d_welcome(const mp_reader_t *r, ddp_welcome_t *m)
{
    bool have_token;
    if (mp_get_i32(r, "rank", INT32_MIN, INT32_MAX, &m->rank) ||
        mp_get_i32(r, "world", INT32_MIN, INT32_MAX, &m->world) ||
        mp_get_str(r, "job", m->job, sizeof m->job) || opt_u8(r, "train", &m->train) ||
        mp_opt_str(r, "next_ring", m->next_ring, sizeof m->next_ring) ||
        mp_opt_uint(r, "session", UINT64_MAX, &m->session) ||
        opt_fixed_bin(r, "token", m->token, DDP_TOKEN_LEN, &have_token) ||
        opt_fixed_bin(r, "secret", m->secret, DDP_SECRET_LEN, &m->has_secret) ||
        opt_u32(r, "gen", &m->gen) || opt_u8(r, "joining", &m->joining) ||
        opt_u8(r, "nccl", &m->nccl))
        return -1;
    if (have_token != (m->session != 0))
        return mp_fail(r, "'token' and a non-zero 'session' come together");
    return 0;
}

static int d_plan(const mp_reader_t *r, ddp_plan_t *m)
{
    size_t nc = 0, np = 0;
    if (mp_get_u32(r, "epoch", 0, UINT32_MAX, &m->epoch) ||
        mp_get_u8(r, "phase", 0, UINT8_MAX, &m->phase) ||
        mp_get_uint(r, "n", 0, DDP_MAX_SAMPLES, &m->n) ||
        mp_get_str(r, "dataset", m->dataset, sizeof m->dataset) ||
        mp_opt_uint(r, "skip", DDP_MAX_SAMPLES, &m->skip) || d_auth(r, &m->auth))
        return -1;
    if (mp_get_strv(r, "class_names", SIZE_MAX, DDP_MAX_CLASSES, DDP_MAX_STR, false,
                    &m->class_names, &nc))
        return -1;
    m->num_classes = (uint32_t)nc;
    return mp_get_strv(r, "paths", (size_t)m->n, SIZE_MAX, DDP_MAX_STR, true, &m->paths, &np) ||
           mp_opt_u32v(r, "present", m->num_classes, &m->present, &m->npresent);
}

static int d_credit(const mp_reader_t *r, ddp_credit_t *m)
{
    if (mp_get_str(r, "worker", m->worker, sizeof m->worker) ||
        mp_get_u32(r, "credits", 0, UINT32_MAX, &m->credits) || opt_u32(r, "gen", &m->gen) ||
        d_auth(r, &m->auth))
        return -1;
    bool dup;
    m->rank = -1;
    if (mp_find(r, "rank", &dup) && mp_get_i32(r, "rank", -1, INT32_MAX, &m->rank))
        return -1;
    if (dup)
        return -1;
    const msgpack_object *o = mp_find(r, "acks", &dup);
    if (dup)
        return -1;
    if (!o)
        return mp_fail(r, "missing key 'acks'");
    /* The ack count is implied by the bin length; bound it before copying. */
    if (o->type == MSGPACK_OBJECT_BIN) {
        if (o->via.bin.size % 8)
            return mp_fail(r, "'acks' bin is %" PRIu32 " bytes, want a multiple of 8",
                           o->via.bin.size);
        if (o->via.bin.size / 8 > DDP_MAX_ACKS)
            return mp_fail(r, "%" PRIu32 " acks, want at most %d", o->via.bin.size / 8,
                           DDP_MAX_ACKS);
        m->n_acks = o->via.bin.size / 8;
    }
    return mp_dup_bin(r, "acks", (size_t)m->n_acks * 8, "n_acks*8", (void **)&m->acks);
}

static int d_heartbeat(const mp_reader_t *r, ddp_heartbeat_t *m)
{
    return mp_get_str(r, "worker", m->worker, sizeof m->worker) ||
           mp_get_i32(r, "rank", INT32_MIN, INT32_MAX, &m->rank) ||
           mp_get_uint(r, "batches_done", 0, UINT64_MAX, &m->batches_done) ||
           mp_opt_uint(r, "rejected", UINT64_MAX, &m->rejected) || d_auth(r, &m->auth)
               ? -1 : 0;
}

/* wire 1, train: the augmentation (validate.c checks the values) */
static int d_batch_augment(const mp_reader_t *r, ddp_batch_t *m)
{
    double v[DDP_AUG_DOUBLES];
    const void *p;
    if (mp_get_uint(r, "aug_seed", 0, UINT64_MAX, &m->aug_seed) ||
        mp_get_u8(r, "aug", 0, UINT8_MAX, &m->aug_flags) ||
        mp_get_bin(r, "augment", sizeof v, "7*8", &p))
        return -1;
    memcpy(v, p, sizeof v); /* the frame's bytes need not be aligned */
    m->aug_scale[0] = v[0], m->aug_scale[1] = v[1];
    m->aug_ratio[0] = v[2], m->aug_ratio[1] = v[3];
    m->aug_flip_p = v[4];
    m->aug_degrees[0] = v[5], m->aug_degrees[1] = v[6];
    return 0;
}

static int d_batch(const mp_reader_t *r, ddp_batch_t *m)
{
    uint16_t *dims[3] = {&m->c, &m->h, &m->w};
    const char *keys[3] = {"c", "h", "w"};
    if (mp_get_uint(r, "seq", 0, UINT64_MAX, &m->seq) ||
        mp_get_u32(r, "epoch", 0, UINT32_MAX, &m->epoch) ||
        mp_get_u8(r, "phase", 0, UINT8_MAX, &m->phase) ||
        mp_get_u32(r, "n", 0, DDP_MAX_BATCH, &m->n) || mp_opt_uint(r, "step", UINT64_MAX, &m->step) ||
        opt_u32(r, "global_count", &m->global_count) || opt_u32(r, "gen", &m->gen) ||
        mp_opt_uint(r, "steps_per_epoch", UINT64_MAX, &m->steps_per_epoch))
        return -1;
    for (int i = 0; i < 3; i++) {
        uint64_t v;
        if (mp_get_uint(r, keys[i], 0, UINT16_MAX, &v))
            return -1;
        *dims[i] = (uint16_t)v;
    }
    if (mp_dup_bin(r, "ids", (size_t)m->n * 8, "n*8", (void **)&m->ids) ||
        mp_dup_bin(r, "labels", (size_t)m->n * 4, "n*4", (void **)&m->labels) ||
        opt_u8(r, "wire", &m->wire))
        return -1;
    bool bad = false;   /* pos: a train part of a sharded dataset */
    if ((mp_find(r, "pos", &bad) && m->n &&
         mp_dup_bin(r, "pos", (size_t)m->n * 4, "n*4", (void **)&m->pos)) || bad)
        return -1;
    if (m->wire == DDP_WIRE_UINT8)
        return 0;
    /* encoded samples: their sizes and the transform (validate.c checks them) */
    uint64_t resize;
    if (mp_get_uint(r, "resize", 0, UINT16_MAX, &resize) ||
        mp_get_u8(r, "crop", 0, UINT8_MAX, &m->crop) ||
        mp_get_u8(r, "dct", 0, UINT8_MAX, &m->dct))
        return -1;
    m->resize = (uint16_t)resize;
    if (m->phase == DDP_PHASE_TRAIN && d_batch_augment(r, m))
        return -1;
    return mp_dup_bin(r, "sizes", (size_t)m->n * 4, "n*4", (void **)&m->sizes);
}

static int d_end(const mp_reader_t *r, ddp_end_t *m)
{
    return mp_get_u32(r, "epoch", 0, UINT32_MAX, &m->epoch) ||
           mp_get_u8(r, "phase", 0, UINT8_MAX, &m->phase)
               ? -1 : 0;
}

/* Optional "nprob" + "probs": the quantized softmax of every class. */
static int d_result_probs(const mp_reader_t *r, ddp_result_t *m)
{
    bool bad = false;
    if (!mp_find(r, "nprob", &bad))
        return bad ? -1 : 0;
    if (mp_get_u32(r, "nprob", 1, DDP_MAX_CLASSES, &m->nprob))
        return -1;
    return mp_dup_bin(r, "probs", (size_t)m->n * m->nprob * 2, "n*nprob*2", (void **)&m->probs);
}

/* optional 'failed' (n flags) with its 'why' (--wire jpeg: decode failures at gpud) */
static int d_result_failed(const mp_reader_t *r, ddp_result_t *m)
{
    bool bad = false;
    if (!mp_find(r, "failed", &bad))
        return bad ? -1 : 0;
    if (mp_dup_bin(r, "failed", m->n, "n", (void **)&m->failed))
        return -1;
    size_t want = 0, got = 0;
    for (uint32_t i = 0; i < m->n; i++)
        want += m->failed[i] != 0;
    int rc = mp_get_strv(r, "why", want, DDP_MAX_BATCH, DDP_MAX_WHY, false, &m->why, &got);
    m->nwhy = (uint32_t)got;
    return rc;
}

static int d_result(const mp_reader_t *r, ddp_result_t *m)
{
    if (mp_get_i32(r, "rank", INT32_MIN, INT32_MAX, &m->rank) ||
        mp_get_u32(r, "epoch", 0, UINT32_MAX, &m->epoch) ||
        mp_get_u8(r, "phase", 0, UINT8_MAX, &m->phase) ||
        mp_get_uint(r, "seq", 0, UINT64_MAX, &m->seq) ||
        mp_get_u32(r, "n", 1, DDP_MAX_BATCH, &m->n) ||
        mp_get_u32(r, "k", 1, DDP_MAX_K, &m->k) ||
        mp_get_double(r, "compute_s", &m->compute_s) || mp_opt_double(r, "lr", &m->lr) ||
        mp_opt_uint(r, "step", UINT64_MAX, &m->step) || opt_u32(r, "gen", &m->gen) ||
        mp_opt_double(r, "loss_scale", &m->loss_scale) ||
        mp_opt_uint(r, "skipped_steps", UINT64_MAX, &m->skipped_steps) || d_auth(r, &m->auth))
        return -1;
    size_t n = m->n;
    return mp_dup_bin(r, "ids", n * 8, "n*8", (void **)&m->ids) ||
           mp_dup_bin(r, "labels", n * 4, "n*4", (void **)&m->labels) ||
           mp_dup_bin(r, "topk", n * m->k * 4, "n*k*4", (void **)&m->topk) ||
           mp_dup_bin(r, "loss", n * 4, "n*4", (void **)&m->loss) || d_result_probs(r, m) ||
           d_result_failed(r, m)
               ? -1 : 0;
}

static int d_failed(const mp_reader_t *r, ddp_failed_t *m)
{
    bool bad = false;
    m->label = -1;
    if (mp_find(r, "label", &bad) && mp_get_i32(r, "label", 0, DDP_MAX_CLASSES - 1, &m->label))
        return -1;
    if (bad)
        return -1;
    return mp_get_u32(r, "epoch", 0, UINT32_MAX, &m->epoch) ||
           mp_get_u8(r, "phase", 0, UINT8_MAX, &m->phase) ||
           mp_get_uint(r, "id", 0, UINT64_MAX, &m->id) ||
           mp_get_str(r, "path", m->path, sizeof m->path) ||
           mp_get_str(r, "reason", m->reason, sizeof m->reason) || d_auth(r, &m->auth)
               ? -1 : 0;
}

static int d_issued(const mp_reader_t *r, ddp_issued_t *m)
{
    if (mp_get_uint(r, "seq", 0, UINT64_MAX, &m->seq) ||
        mp_get_u32(r, "epoch", 0, UINT32_MAX, &m->epoch) ||
        mp_get_u8(r, "phase", 0, UINT8_MAX, &m->phase) ||
        mp_get_i32(r, "rank", INT32_MIN, INT32_MAX, &m->rank) ||
        mp_get_u32(r, "n", 0, DDP_MAX_BATCH, &m->n) ||
        mp_opt_uint(r, "rejected", UINT64_MAX, &m->rejected) || d_auth(r, &m->auth))
        return -1;
    return mp_dup_bin(r, "ids", (size_t)m->n * 8, "n*8", (void **)&m->ids) ||
           mp_dup_bin(r, "labels", (size_t)m->n * 4, "n*4", (void **)&m->labels)
               ? -1 : 0;
}

static int d_reissue(const mp_reader_t *r, ddp_reissue_t *m)
{
    return mp_get_uint(r, "seq", 0, UINT64_MAX, &m->seq) ||
           mp_get_u32(r, "epoch", 0, UINT32_MAX, &m->epoch) ||
           mp_get_u8(r, "phase", 0, UINT8_MAX, &m->phase) ||
           mp_get_i32(r, "rank", INT32_MIN, INT32_MAX, &m->rank) ||
           mp_get_str(r, "reason", m->reason, sizeof m->reason)
               ? -1 : 0;
}

static int d_epoch(const mp_reader_t *r, ddp_epoch_t *m)
{
    return mp_get_u32(r, "epoch", 0, UINT32_MAX, &m->epoch) ||
           mp_get_u8(r, "decision", 0, UINT8_MAX, &m->decision) ||
           mp_get_u32(r, "streak", 0, UINT32_MAX, &m->streak) ||
           mp_get_double(r, "val_top1", &m->val_top1) ||
           mp_get_str(r, "reason", m->reason, sizeof m->reason)
               ? -1 : 0;
}

static int d_members(const mp_reader_t *r, ddp_members_t *m)
{
    size_t count = 0;
    bool have_token;
    /* world bounds the names array: checked before it is read */
    if (mp_get_u32(r, "gen", 0, UINT32_MAX, &m->gen) ||
        mp_get_i32(r, "rank", INT32_MIN, INT32_MAX, &m->rank) ||
        mp_get_i32(r, "world", 1, DDP_MAX_WORLD, &m->world) ||
        mp_get_str(r, "next_ring", m->next_ring, sizeof m->next_ring) ||
        mp_get_uint(r, "step", 0, UINT64_MAX, &m->step) ||
        mp_get_u32(r, "epoch", 0, UINT32_MAX, &m->epoch) ||
        mp_get_str(r, "reason", m->reason, sizeof m->reason) ||
        mp_opt_uint(r, "session", UINT64_MAX, &m->session) ||
        opt_fixed_bin(r, "token", m->token, DDP_TOKEN_LEN, &have_token) ||
        opt_u8(r, "paused", &m->paused) || opt_u8(r, "nccl", &m->nccl))
        return -1;
    if (have_token != (m->session != 0))
        return mp_fail(r, "'token' and a non-zero 'session' come together");
    return mp_get_strv(r, "names", (size_t)m->world, SIZE_MAX, DDP_MAX_NAME, false, &m->names,
                       &count);
}

static int d_step(const mp_reader_t *r, ddp_step_t *m)
{
    return mp_get_i32(r, "rank", INT32_MIN, INT32_MAX, &m->rank) ||
           mp_get_u32(r, "gen", 0, UINT32_MAX, &m->gen) ||
           mp_get_u32(r, "epoch", 0, UINT32_MAX, &m->epoch) ||
           mp_get_uint(r, "step", 0, UINT64_MAX, &m->step) ||
           mp_get_u8(r, "status", 0, UINT8_MAX, &m->status) ||
           mp_get_i32(r, "suspect", INT32_MIN, INT32_MAX, &m->suspect) || d_auth(r, &m->auth)
               ? -1 : 0;
}

static int d_commit(const mp_reader_t *r, ddp_commit_t *m)
{
    return mp_get_u32(r, "gen", 0, UINT32_MAX, &m->gen) ||
           mp_get_u32(r, "epoch", 0, UINT32_MAX, &m->epoch) ||
           mp_get_uint(r, "step", 0, UINT64_MAX, &m->step) || opt_u8(r, "snapshot", &m->snapshot)
               ? -1 : 0;
}

static int d_state(const mp_reader_t *r, ddp_state_t *m)
{
    return mp_get_u32(r, "gen", 0, UINT32_MAX, &m->gen) ||
           mp_get_u32(r, "epoch", 0, UINT32_MAX, &m->epoch) ||
           mp_get_uint(r, "step", 0, UINT64_MAX, &m->step) || d_auth(r, &m->auth)
               ? -1 : 0;
}

static int d_ncclid(const mp_reader_t *r, ddp_ncclid_t *m)
{
    const void *id;
    if (mp_get_u32(r, "gen", 0, UINT32_MAX, &m->gen) ||
        mp_get_i32(r, "world", INT32_MIN, INT32_MAX, &m->world) ||
        mp_get_bin(r, "id", DDP_NCCL_ID_LEN, "id", &id) || d_auth(r, &m->auth))
        return -1;
    memcpy(m->id, id, DDP_NCCL_ID_LEN);
    return 0;
}

static int d_code_reason(const mp_reader_t *r, int32_t *code, char *reason, size_t cap)
{
    return mp_get_i32(r, "code", INT32_MIN, INT32_MAX, code) ||
           mp_get_str(r, "reason", reason, cap)
               ? -1 : 0;
}

static int d_body(const mp_reader_t *r, ddp_msg_t *out)
{
    switch (out->type) {
    case DDP_JOIN: return d_join(r, &out->u.join);
    case DDP_WELCOME: return d_welcome(r, &out->u.welcome);
    case DDP_PLAN: return d_plan(r, &out->u.plan);
    case DDP_CREDIT: return d_credit(r, &out->u.credit);
    case DDP_HEARTBEAT: return d_heartbeat(r, &out->u.heartbeat);
    case DDP_BATCH: return d_batch(r, &out->u.batch);
    case DDP_END: return d_end(r, &out->u.end);
    case DDP_RESULT: return d_result(r, &out->u.result);
    case DDP_FAILED: return d_failed(r, &out->u.failed);
    case DDP_STOP: return d_code_reason(r, &out->u.stop.code, out->u.stop.reason,
                                        sizeof out->u.stop.reason);
    case DDP_DONE: return d_code_reason(r, &out->u.done.code, out->u.done.reason,
                                        sizeof out->u.done.reason);
    case DDP_EPOCH: return d_epoch(r, &out->u.epoch);
    case DDP_ISSUED: return d_issued(r, &out->u.issued);
    case DDP_REISSUE: return d_reissue(r, &out->u.reissue);
    case DDP_MEMBERS: return d_members(r, &out->u.members);
    case DDP_STEP: return d_step(r, &out->u.step);
    case DDP_COMMIT: return d_commit(r, &out->u.commit);
    case DDP_STATE: return d_state(r, &out->u.state);
    case DDP_NCCLID: return d_ncclid(r, &out->u.ncclid);
    }
    return mp_fail(r, "unknown type");
}

/* Version, type, body. */
static int d_map(const msgpack_object *map, ddp_msg_t *out, char *err, size_t errlen)
{
    mp_reader_t r = {.map = map, .what = "message", .err = err, .errlen = errlen};
    uint64_t v, t;
    if (mp_get_uint(&r, "v", 0, UINT64_MAX, &v))
        return -1;
    if (v != DDP_PROTO_VERSION)
        return mp_fail(&r, "protocol version %" PRIu64 ", want %d", v, DDP_PROTO_VERSION);
    if (mp_get_uint(&r, "t", 1, DDP_TYPE_MAX, &t))
        return -1;
    out->type = (ddp_type_t)t;
    r.what = proto_type_name(out->type);
    return d_body(&r, out);
}

/* Where a type keeps its second (data) frame: BATCH's pixels, STATE's
 * image; NULL for the types that have none. */
static zframe_t **data_slot(ddp_msg_t *m)
{
    return m->type == DDP_BATCH ? &m->u.batch.pixels
           : m->type == DDP_STATE ? &m->u.state.image : NULL;
}

/* Decodes the header frame; pixels is borrowed (the caller decides whether
 * it is moved or copied into the result). */
static int decode_frames(const void *data, size_t size, zframe_t *pixels, ddp_msg_t *out,
                         char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    msgpack_unpacked u;
    int rc = mp_parse(&u, data, size, err, errlen);
    if (rc == 0)
        rc = d_map(&u.data, out, err, errlen);
    msgpack_unpacked_destroy(&u);
    zframe_t **slot = rc == 0 ? data_slot(out) : NULL;
    if (rc == 0 && !slot && pixels) {
        err_set(err, errlen, "%s: unexpected 2nd frame of %zu bytes (only BATCH and STATE "
                 "have one)", proto_type_name(out->type), zframe_size(pixels));
        rc = -1;
    }
    if (rc == 0 && slot) {
        *slot = pixels; /* borrowed for validation only */
        rc = proto_validate(out, err, errlen);
        *slot = NULL;
    } else if (rc == 0) {
        rc = proto_validate(out, err, errlen);
    }
    if (rc != 0)
        ddp_msg_clear(out);
    return rc;
}

int proto_decode_bytes(const void *data, size_t size, zframe_t *pixels, ddp_msg_t *out,
                       char *err, size_t errlen)
{
    char scratch[8];
    if (!err || !errlen) {
        err = scratch;
        errlen = sizeof scratch;
    }
    if (!out)
        return -1;
    if (!data && size) {
        memset(out, 0, sizeof *out);
        err_set(err, errlen, "NULL data");
        return -1;
    }
    if (decode_frames(data, size, pixels, out, err, errlen) != 0)
        return -1;
    zframe_t **slot = data_slot(out);
    if (slot && pixels) {
        /* The caller keeps its frame; proto_decode is the zero-copy path. */
        *slot = zframe_dup(pixels);
        if (!*slot) {
            err_set(err, errlen, "%s: out of memory copying the data frame",
                     proto_type_name(out->type));
            ddp_msg_clear(out);
            return -1;
        }
    }
    return 0;
}

int proto_decode(zmsg_t *zmsg, ddp_msg_t *out, char *err, size_t errlen)
{
    char scratch[8];
    if (!err || !errlen) {
        err = scratch;
        errlen = sizeof scratch;
    }
    if (!out)
        return -1;
    size_t frames = zmsg ? zmsg_size(zmsg) : 0;
    if (frames == 0 || frames > 2) {
        memset(out, 0, sizeof *out); /* decode_frames zeroes it on the other paths */
        err_set(err, errlen, "message has %zu frames, want 1 (or 2 for BATCH, STATE)", frames);
        return -1;
    }
    zframe_t *head = zmsg_first(zmsg);
    zframe_t *pixels = frames == 2 ? zmsg_next(zmsg) : NULL;
    if (decode_frames(zframe_data(head), zframe_size(head), pixels, out, err, errlen) != 0)
        return -1;
    if (pixels) { /* success and BATCH or STATE: move the data frame, no copy */
        zmsg_remove(zmsg, pixels);
        *data_slot(out) = pixels;
    }
    return 0;
}
