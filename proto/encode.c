/* encode — ddp_msg_t -> ZeroMQ multipart message (msgpack map [+ pixels]).
 *
 * Every map starts with "v" (version) and "t" (type); the other keys are the
 * struct field names (PROTOCOL.md lists them). A struct that breaks the
 * rules of proto_validate is refused with an error log, so a daemon can
 * never emit what its peers would reject.
 */
#include "common/log.h"
#include "proto/codec.h"

#include "proto/mp.h"

#include <string.h>

/* Map header with room for "v" and "t" plus nkeys fields. */
static int put_head(msgpack_packer *pk, ddp_type_t type, size_t nkeys)
{
    return msgpack_pack_map(pk, 2 + nkeys) || mp_put_uint(pk, "v", DDP_PROTO_VERSION) ||
           mp_put_uint(pk, "t", (uint64_t)type);
}

/* The auth keys (job, session, token) are sent only with a session. */
static size_t auth_keys(const ddp_auth_t *a) { return a->session ? 3 : 0; }

static int put_auth(msgpack_packer *pk, const ddp_auth_t *a)
{
    if (!a->session)
        return 0;
    return mp_put_str(pk, "job", a->job) || mp_put_uint(pk, "session", a->session) ||
           mp_put_bin(pk, "token", a->token, DDP_TOKEN_LEN);
}

/* gen is optional with 0 absent: sent only when non-zero, so eval traffic
 * and generation 0 keep their bytes. */
static int put_gen(msgpack_packer *pk, uint32_t gen)
{
    return gen ? mp_put_uint(pk, "gen", gen) : 0;
}

static int pack_join(msgpack_packer *pk, const ddp_join_t *m)
{
    bool sharded = m->shards > 1; /* absent = 0 of 1: older loaderds' bytes */
    return put_head(pk, DDP_JOIN, 7 + (m->config[0] ? 1 : 0) + (sharded ? 2 : 0) +
                                  (m->job[0] ? 1 : 0) + (m->nccl ? 1 : 0) +
                                  (m->failed[0] ? 1 : 0)) ||
           (m->nccl && mp_put_uint(pk, "nccl", m->nccl)) ||
           (m->failed[0] && mp_put_str(pk, "failed", m->failed)) ||
           (m->config[0] && mp_put_str(pk, "config", m->config)) ||
           (m->job[0] && mp_put_str(pk, "job", m->job)) ||
           (sharded && (mp_put_uint(pk, "shard", m->shard) ||
                        mp_put_uint(pk, "shards", m->shards))) ||
           mp_put_uint(pk, "role", m->role) ||
           mp_put_uint(pk, "pid", m->pid) || mp_put_int(pk, "want_rank", m->want_rank) ||
           mp_put_str(pk, "name", m->name) || mp_put_str(pk, "host", m->host) ||
           mp_put_str(pk, "backend", m->backend) || mp_put_str(pk, "ring", m->ring);
}

static int pack_welcome(msgpack_packer *pk, const ddp_welcome_t *m)
{
    size_t extra = (m->session ? 2 : 0) + (m->has_secret ? 1 : 0) + (m->gen ? 1 : 0) +
                   (m->joining ? 1 : 0) + (m->nccl ? 1 : 0);
    return put_head(pk, DDP_WELCOME, 5 + extra) || put_gen(pk, m->gen) ||
           (m->nccl && mp_put_uint(pk, "nccl", m->nccl)) ||
           (m->joining && mp_put_uint(pk, "joining", m->joining)) ||
           mp_put_int(pk, "rank", m->rank) ||
           mp_put_int(pk, "world", m->world) || mp_put_str(pk, "job", m->job) ||
           mp_put_uint(pk, "train", m->train) || mp_put_str(pk, "next_ring", m->next_ring) ||
           (m->session && (mp_put_uint(pk, "session", m->session) ||
                           mp_put_bin(pk, "token", m->token, DDP_TOKEN_LEN))) ||
           (m->has_secret && mp_put_bin(pk, "secret", m->secret, DDP_SECRET_LEN));
}

static int pack_plan(msgpack_packer *pk, const ddp_plan_t *m)
{
    /* num_classes is the length of class_names and n the length of paths:
     * the wire carries each count once, so they cannot disagree. */
    return put_head(pk, DDP_PLAN,
                    (m->paths ? 7 : 6) + (m->present ? 1 : 0) + auth_keys(&m->auth)) ||
           put_auth(pk, &m->auth) || mp_put_uint(pk, "epoch", m->epoch) ||
           mp_put_uint(pk, "skip", m->skip) ||
           mp_put_uint(pk, "phase", m->phase) || mp_put_uint(pk, "n", m->n) ||
           mp_put_strv(pk, "class_names", m->class_names, m->num_classes) ||
           mp_put_str(pk, "dataset", m->dataset) ||
           (m->paths && mp_put_strv(pk, "paths", m->paths, m->n)) ||
           (m->present &&
            mp_put_bin(pk, "present", m->present, (size_t)m->npresent * sizeof *m->present));
}

static int pack_credit(msgpack_packer *pk, const ddp_credit_t *m)
{
    bool rank = m->rank >= 0;   /* optional: older senders have none */
    return put_head(pk, DDP_CREDIT, (rank ? 4 : 3) + (m->gen ? 1 : 0) + auth_keys(&m->auth)) ||
           put_auth(pk, &m->auth) || put_gen(pk, m->gen) || mp_put_str(pk, "worker", m->worker) ||
           mp_put_uint(pk, "credits", m->credits) ||
           mp_put_bin(pk, "acks", m->acks, (size_t)m->n_acks * 8) ||
           (rank && mp_put_int(pk, "rank", m->rank));
}

static int pack_heartbeat(msgpack_packer *pk, const ddp_heartbeat_t *m)
{
    return put_head(pk, DDP_HEARTBEAT, 4 + auth_keys(&m->auth)) || put_auth(pk, &m->auth) ||
           mp_put_str(pk, "worker", m->worker) || mp_put_int(pk, "rank", m->rank) ||
           mp_put_uint(pk, "batches_done", m->batches_done) ||
           mp_put_uint(pk, "rejected", m->rejected);
}

/* wire 1, train: the augmentation's config and seed (the draws are gpud's) */
static int put_augment(msgpack_packer *pk, const ddp_batch_t *m)
{
    double v[DDP_AUG_DOUBLES] = {m->aug_scale[0], m->aug_scale[1], m->aug_ratio[0],
                                 m->aug_ratio[1], m->aug_flip_p, m->aug_degrees[0],
                                 m->aug_degrees[1]};
    return mp_put_uint(pk, "aug_seed", m->aug_seed) || mp_put_uint(pk, "aug", m->aug_flags) ||
           mp_put_bin(pk, "augment", v, sizeof v);
}

/* wire 1 (--wire jpeg): the file sizes and the transform gpud applies */
static int put_wire(msgpack_packer *pk, const ddp_batch_t *m)
{
    if (m->wire == DDP_WIRE_UINT8)
        return 0;
    return mp_put_uint(pk, "wire", m->wire) ||
           mp_put_bin(pk, "sizes", m->sizes, (size_t)m->n * 4) ||
           mp_put_uint(pk, "resize", m->resize) || mp_put_uint(pk, "crop", m->crop) ||
           mp_put_uint(pk, "dct", m->dct) ||
           (m->phase == DDP_PHASE_TRAIN && put_augment(pk, m));
}

static int pack_batch(msgpack_packer *pk, const ddp_batch_t *m)
{
    bool pos = m->pos && m->n;
    return put_head(pk, DDP_BATCH, 11 + (m->gen ? 1 : 0) + (pos ? 1 : 0) +
                                      (m->steps_per_epoch ? 1 : 0) +
                                      (m->wire ? (m->phase == DDP_PHASE_TRAIN ? 8 : 5) : 0)) ||
           put_gen(pk, m->gen) || put_wire(pk, m) ||
           (m->steps_per_epoch && mp_put_uint(pk, "steps_per_epoch", m->steps_per_epoch)) ||
           (pos && mp_put_bin(pk, "pos", m->pos, (size_t)m->n * 4)) ||
           mp_put_uint(pk, "seq", m->seq) ||
           mp_put_uint(pk, "step", m->step) || mp_put_uint(pk, "global_count", m->global_count) ||
           mp_put_uint(pk, "epoch", m->epoch) || mp_put_uint(pk, "phase", m->phase) ||
           mp_put_uint(pk, "n", m->n) || mp_put_uint(pk, "c", m->c) ||
           mp_put_uint(pk, "h", m->h) || mp_put_uint(pk, "w", m->w) ||
           mp_put_bin(pk, "ids", m->ids, (size_t)m->n * 8) ||
           mp_put_bin(pk, "labels", m->labels, (size_t)m->n * 4);
}

static int pack_end(msgpack_packer *pk, const ddp_end_t *m)
{
    return put_head(pk, DDP_END, 2) || mp_put_uint(pk, "epoch", m->epoch) ||
           mp_put_uint(pk, "phase", m->phase);
}

static int pack_result(msgpack_packer *pk, const ddp_result_t *m)
{
    return put_head(pk, DDP_RESULT,
                    13 + (m->gen ? 1 : 0) + (m->nprob ? 2 : 0) + (m->failed ? 2 : 0) +
                        (m->loss_scale > 0 ? 2 : 0) + auth_keys(&m->auth)) ||
           (m->loss_scale > 0 && (mp_put_double(pk, "loss_scale", m->loss_scale) ||
                                  mp_put_uint(pk, "skipped_steps", m->skipped_steps))) ||
           (m->failed && (mp_put_bin(pk, "failed", m->failed, m->n) ||
                          mp_put_strv(pk, "why", m->why, m->nwhy))) ||
           (m->nprob && (mp_put_uint(pk, "nprob", m->nprob) ||
                         mp_put_bin(pk, "probs", m->probs, (size_t)m->n * m->nprob * 2))) ||
           put_auth(pk, &m->auth) || put_gen(pk, m->gen) ||
           mp_put_int(pk, "rank", m->rank) ||
           mp_put_double(pk, "lr", m->lr) || mp_put_uint(pk, "step", m->step) ||
           mp_put_uint(pk, "epoch", m->epoch) || mp_put_uint(pk, "phase", m->phase) ||
           mp_put_uint(pk, "seq", m->seq) || mp_put_uint(pk, "n", m->n) ||
           mp_put_uint(pk, "k", m->k) || mp_put_bin(pk, "ids", m->ids, (size_t)m->n * 8) ||
           mp_put_bin(pk, "labels", m->labels, (size_t)m->n * 4) ||
           mp_put_bin(pk, "topk", m->topk, (size_t)m->n * m->k * 4) ||
           mp_put_bin(pk, "loss", m->loss, (size_t)m->n * 4) ||
           mp_put_double(pk, "compute_s", m->compute_s);
}

static int pack_failed(msgpack_packer *pk, const ddp_failed_t *m)
{
    return put_head(pk, DDP_FAILED, 5 + (m->label >= 0 ? 1 : 0) + auth_keys(&m->auth)) ||
           put_auth(pk, &m->auth) || (m->label >= 0 && mp_put_int(pk, "label", m->label)) ||
           mp_put_uint(pk, "epoch", m->epoch) ||
           mp_put_uint(pk, "phase", m->phase) || mp_put_uint(pk, "id", m->id) ||
           mp_put_str(pk, "path", m->path) || mp_put_str(pk, "reason", m->reason);
}

static int pack_epoch(msgpack_packer *pk, const ddp_epoch_t *m)
{
    return put_head(pk, DDP_EPOCH, 5) || mp_put_uint(pk, "epoch", m->epoch) ||
           mp_put_uint(pk, "decision", m->decision) || mp_put_uint(pk, "streak", m->streak) ||
           mp_put_double(pk, "val_top1", m->val_top1) || mp_put_str(pk, "reason", m->reason);
}

static int pack_issued(msgpack_packer *pk, const ddp_issued_t *m)
{
    return put_head(pk, DDP_ISSUED, 8 + auth_keys(&m->auth)) || put_auth(pk, &m->auth) ||
           mp_put_uint(pk, "seq", m->seq) || mp_put_uint(pk, "epoch", m->epoch) ||
           mp_put_uint(pk, "phase", m->phase) || mp_put_int(pk, "rank", m->rank) ||
           mp_put_uint(pk, "n", m->n) || mp_put_bin(pk, "ids", m->ids, (size_t)m->n * 8) ||
           mp_put_bin(pk, "labels", m->labels, (size_t)m->n * 4) ||
           mp_put_uint(pk, "rejected", m->rejected);
}

static int pack_reissue(msgpack_packer *pk, const ddp_reissue_t *m)
{
    return put_head(pk, DDP_REISSUE, 5) || mp_put_uint(pk, "seq", m->seq) ||
           mp_put_uint(pk, "epoch", m->epoch) || mp_put_uint(pk, "phase", m->phase) ||
           mp_put_int(pk, "rank", m->rank) || mp_put_str(pk, "reason", m->reason);
}

static int pack_members(msgpack_packer *pk, const ddp_members_t *m)
{
    return put_head(pk, DDP_MEMBERS, 8 + (m->session ? 2 : 0) + (m->paused ? 1 : 0) +
                                     (m->nccl ? 1 : 0)) ||
           (m->paused && mp_put_uint(pk, "paused", m->paused)) ||
           (m->nccl && mp_put_uint(pk, "nccl", m->nccl)) || mp_put_uint(pk, "gen", m->gen) ||
           mp_put_int(pk, "rank", m->rank) || mp_put_int(pk, "world", m->world) ||
           mp_put_str(pk, "next_ring", m->next_ring) || mp_put_uint(pk, "step", m->step) ||
           mp_put_uint(pk, "epoch", m->epoch) ||
           mp_put_strv(pk, "names", m->names, (size_t)m->world) ||
           mp_put_str(pk, "reason", m->reason) ||
           (m->session && (mp_put_uint(pk, "session", m->session) ||
                           mp_put_bin(pk, "token", m->token, DDP_TOKEN_LEN)));
}

static int pack_step(msgpack_packer *pk, const ddp_step_t *m)
{
    return put_head(pk, DDP_STEP, 6 + auth_keys(&m->auth)) || put_auth(pk, &m->auth) ||
           mp_put_int(pk, "rank", m->rank) || mp_put_uint(pk, "gen", m->gen) ||
           mp_put_uint(pk, "epoch", m->epoch) || mp_put_uint(pk, "step", m->step) ||
           mp_put_uint(pk, "status", m->status) || mp_put_int(pk, "suspect", m->suspect);
}

static int pack_commit(msgpack_packer *pk, const ddp_commit_t *m)
{
    return put_head(pk, DDP_COMMIT, 3 + (m->snapshot ? 1 : 0)) ||
           mp_put_uint(pk, "gen", m->gen) || mp_put_uint(pk, "epoch", m->epoch) ||
           mp_put_uint(pk, "step", m->step) ||
           (m->snapshot && mp_put_uint(pk, "snapshot", m->snapshot));
}

static int pack_state(msgpack_packer *pk, const ddp_state_t *m)
{
    return put_head(pk, DDP_STATE, 3 + auth_keys(&m->auth)) || put_auth(pk, &m->auth) ||
           mp_put_uint(pk, "gen", m->gen) || mp_put_uint(pk, "epoch", m->epoch) ||
           mp_put_uint(pk, "step", m->step);
}

static int pack_ncclid(msgpack_packer *pk, const ddp_ncclid_t *m)
{
    return put_head(pk, DDP_NCCLID, 3 + auth_keys(&m->auth)) || put_auth(pk, &m->auth) ||
           mp_put_uint(pk, "gen", m->gen) || mp_put_int(pk, "world", m->world) ||
           mp_put_bin(pk, "id", m->id, DDP_NCCL_ID_LEN);
}

static int pack_code_reason(msgpack_packer *pk, ddp_type_t type, int32_t code,
                            const char *reason)
{
    return put_head(pk, type, 2) || mp_put_int(pk, "code", code) ||
           mp_put_str(pk, "reason", reason);
}

static int pack_msg(msgpack_packer *pk, const ddp_msg_t *msg)
{
    switch (msg->type) {
    case DDP_JOIN: return pack_join(pk, &msg->u.join);
    case DDP_WELCOME: return pack_welcome(pk, &msg->u.welcome);
    case DDP_PLAN: return pack_plan(pk, &msg->u.plan);
    case DDP_CREDIT: return pack_credit(pk, &msg->u.credit);
    case DDP_HEARTBEAT: return pack_heartbeat(pk, &msg->u.heartbeat);
    case DDP_BATCH: return pack_batch(pk, &msg->u.batch);
    case DDP_END: return pack_end(pk, &msg->u.end);
    case DDP_RESULT: return pack_result(pk, &msg->u.result);
    case DDP_FAILED: return pack_failed(pk, &msg->u.failed);
    case DDP_STOP: return pack_code_reason(pk, DDP_STOP, msg->u.stop.code, msg->u.stop.reason);
    case DDP_DONE: return pack_code_reason(pk, DDP_DONE, msg->u.done.code, msg->u.done.reason);
    case DDP_EPOCH: return pack_epoch(pk, &msg->u.epoch);
    case DDP_ISSUED: return pack_issued(pk, &msg->u.issued);
    case DDP_REISSUE: return pack_reissue(pk, &msg->u.reissue);
    case DDP_MEMBERS: return pack_members(pk, &msg->u.members);
    case DDP_STEP: return pack_step(pk, &msg->u.step);
    case DDP_COMMIT: return pack_commit(pk, &msg->u.commit);
    case DDP_STATE: return pack_state(pk, &msg->u.state);
    case DDP_NCCLID: return pack_ncclid(pk, &msg->u.ncclid);
    }
    return -1;
}

/* The header frame of msg in a new zmsg, or NULL (logged). */
static zmsg_t *encode_header(const ddp_msg_t *msg)
{
    char err[256];
    if (proto_validate(msg, err, sizeof err) != 0) {
        log_error("proto_encode: refusing to send a bad %s (%s); fix the sender",
                  proto_type_name(msg->type), err);
        return NULL;
    }
    msgpack_sbuffer sbuf;
    msgpack_packer pk;
    msgpack_sbuffer_init(&sbuf);
    msgpack_packer_init(&pk, &sbuf, msgpack_sbuffer_write);
    zmsg_t *zmsg = NULL;
    if (pack_msg(&pk, msg) != 0)
        log_error("proto_encode: msgpack packing of %s failed (out of memory?)",
                  proto_type_name(msg->type));
    else if (!(zmsg = zmsg_new()) || zmsg_addmem(zmsg, sbuf.data, sbuf.size) != 0) {
        log_error("proto_encode: cannot build the zmsg of %s (out of memory?)",
                  proto_type_name(msg->type));
        zmsg_destroy(&zmsg);
    }
    msgpack_sbuffer_destroy(&sbuf);
    return zmsg;
}

zmsg_t *proto_encode(const ddp_msg_t *msg)
{
    if (!msg)
        return NULL;
    zmsg_t *zmsg = encode_header(msg);
    zframe_t *data = msg->type == DDP_BATCH ? msg->u.batch.pixels
                     : msg->type == DDP_STATE ? msg->u.state.image : NULL;
    if (zmsg && data) {
        /* msg is const: the frame is copied. proto_encode_batch moves pixels. */
        zframe_t *copy = zframe_dup(data);
        if (!copy || zmsg_append(zmsg, &copy) != 0) {
            log_error("proto_encode: cannot copy the %s data frame (out of memory?)",
                      proto_type_name(msg->type));
            zframe_destroy(&copy);
            zmsg_destroy(&zmsg);
        }
    }
    return zmsg;
}

zmsg_t *proto_encode_batch(ddp_batch_t *batch)
{
    if (!batch)
        return NULL;
    ddp_msg_t view = {.type = DDP_BATCH, .u.batch = *batch}; /* shallow: validation only */
    zmsg_t *zmsg = encode_header(&view);
    if (zmsg && zmsg_append(zmsg, &batch->pixels) != 0) {
        log_error("proto_encode_batch: cannot append the pixel frame (out of memory?)");
        zmsg_destroy(&zmsg);
    }
    return zmsg;
}
