/* validate — the semantic rules of every message, checked on the C struct.
 *
 * The same rules guard both directions: proto_encode refuses to put a bad
 * struct on the wire, and proto_decode runs them after the msgpack layer
 * has checked key presence, types and bin sizes. Keeping them in one place
 * means a sender can never emit what a receiver rejects.
 */
#include "proto/codec.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int bad(char *err, size_t errlen, const char *what, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int bad(char *err, size_t errlen, const char *what, const char *fmt, ...)
{
    if (!err || !errlen)
        return -1;
    int n = snprintf(err, errlen, "%s: ", what);
    if (n < 0 || (size_t)n >= errlen)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

#define BAD(...) bad(err, errlen, what, __VA_ARGS__)

/* A fixed char array must hold a terminated string (encode side: a struct
 * filled with strncpy may lack the NUL). */
#define CHECK_FIXED(field, key, nonempty)                                                  \
    do {                                                                                  \
        if (strnlen((field), sizeof(field)) >= sizeof(field))                             \
            return BAD("'%s' is not NUL-terminated within %zu bytes", key, sizeof(field)); \
        if ((nonempty) && (field)[0] == '\0')                                             \
            return BAD("'%s' is empty", key);                                             \
    } while (0)

static int check_phase(uint8_t phase, char *err, size_t errlen, const char *what)
{
    if (phase != DDP_PHASE_EVAL && phase != DDP_PHASE_TRAIN)
        return BAD("'phase' is %u, want 0 (eval) or 1 (train)", phase);
    return 0;
}

static int check_strv(char *const *v, uint64_t n, const char *key, char *err, size_t errlen,
                      const char *what)
{
    if (n && !v)
        return BAD("'%s' is NULL with %" PRIu64 " entries", key, n);
    for (uint64_t i = 0; i < n; i++) {
        if (!v[i])
            return BAD("'%s[%" PRIu64 "]' is NULL", key, i);
        if (strnlen(v[i], DDP_MAX_STR) >= DDP_MAX_STR)
            return BAD("'%s[%" PRIu64 "]' is longer than %d bytes", key, i, DDP_MAX_STR - 1);
    }
    return 0;
}

static int check_ids(const uint64_t *ids, uint32_t n, char *err, size_t errlen, const char *what)
{
    for (uint32_t i = 0; i < n; i++)
        if (ids[i] >= DDP_MAX_SAMPLES)
            return BAD("'ids[%" PRIu32 "]' is %" PRIu64 ", want < 2^40", i, ids[i]);
    return 0;
}

static int check_labels(const int32_t *labels, uint32_t n, char *err, size_t errlen,
                        const char *what)
{
    for (uint32_t i = 0; i < n; i++)
        if (labels[i] < -1 || labels[i] >= DDP_MAX_CLASSES)
            return BAD("'labels[%" PRIu32 "]' is %" PRId32 ", want -1..%d", i, labels[i],
                       DDP_MAX_CLASSES - 1);
    return 0;
}

static int v_auth(const ddp_auth_t *a, char *err, size_t errlen, const char *what)
{
    CHECK_FIXED(a->job, "job", 0);
    return 0;
}

static int v_join(const ddp_join_t *m, char *err, size_t errlen, const char *what)
{
    if (m->role < DDP_ROLE_GPUD || m->role > DDP_ROLE_REPORTER)
        return BAD("'role' is %u, want 1 (gpud), 2 (loader) or 3 (reporter)", m->role);
    if (m->want_rank < -1)
        return BAD("'want_rank' is %" PRId32 ", want -1 (any) or >= 0", m->want_rank);
    CHECK_FIXED(m->name, "name", 1);
    CHECK_FIXED(m->host, "host", 0);
    CHECK_FIXED(m->backend, "backend", 0);
    CHECK_FIXED(m->ring, "ring", 0);
    CHECK_FIXED(m->config, "config", 0);
    CHECK_FIXED(m->job, "job", 0);
    CHECK_FIXED(m->failed, "failed", 0);
    if (m->failed[0] && m->role != DDP_ROLE_GPUD)
        return BAD("'failed' on a %s JOIN: only a gpud says it could not start",
                   proto_role_name(m->role));
    uint32_t shards = m->shards ? m->shards : 1; /* absent: the whole dataset */
    if (shards > DDP_MAX_LOADERS || m->shard >= shards)
        return BAD("'shard' %" PRIu32 " of 'shards' %" PRIu32 ": want shard < shards <= %d",
                   m->shard, m->shards, DDP_MAX_LOADERS);
    if (shards > 1 && m->role != DDP_ROLE_LOADER)
        return BAD("'shards' %" PRIu32 " on a %s JOIN: only a loader has a shard", m->shards,
                   proto_role_name(m->role));
    if (m->nccl > 1 || (m->nccl && (m->role != DDP_ROLE_GPUD || !m->ring[0])))
        return BAD("'nccl' is %u on a %s JOIN%s: want 0, or 1 from a training gpud (with a "
                   "ring)", m->nccl, proto_role_name(m->role), m->ring[0] ? "" : " without a ring");
    return 0;
}

static int v_welcome(const ddp_welcome_t *m, char *err, size_t errlen, const char *what)
{
    if (m->world < 1)
        return BAD("'world' is %" PRId32 ", want >= 1", m->world);
    if (m->joining > 1 || (m->joining && !m->train))
        return BAD("'joining' is %u (train %u), want 0, or 1 in a training job", m->joining,
                   m->train);
    if (m->joining ? m->rank != -1 : (m->rank < 0 || m->rank >= m->world))
        return BAD("'rank' is %" PRId32 ", want %s0..world-1 = 0..%" PRId32, m->rank,
                   m->joining ? "-1 for a joiner, not " : "", m->world - 1);
    CHECK_FIXED(m->job, "job", 0);
    if (m->train > 1)
        return BAD("'train' is %u, want 0 or 1", m->train);
    if (m->nccl > 1 || (m->nccl && (!m->train || m->joining)))
        return BAD("'nccl' is %u (train %u, joining %u), want 0, or 1 for a training rank",
                   m->nccl, m->train, m->joining);
    CHECK_FIXED(m->next_ring, "next_ring", 0);
    return 0;
}

int ddp_check_present(const uint32_t *present, uint32_t n, uint32_t num_classes, char *err,
                      size_t errlen, const char *what)
{
    if (!present && n)
        return BAD("'present' is NULL with %" PRIu32 " entries", n);
    if (!present)
        return 0;
    if (n == 0 || n > num_classes)
        return BAD("'present' has %" PRIu32 " entries, want 1..%" PRIu32, n, num_classes);
    for (uint32_t i = 0; i < n; i++)
        if (present[i] >= num_classes || (i && present[i] <= present[i - 1]))
            return BAD("'present[%" PRIu32 "]' is %" PRIu32 ": want strictly increasing class "
                       "ids below %" PRIu32, i, present[i], num_classes);
    return 0;
}

static int v_plan(const ddp_plan_t *m, char *err, size_t errlen, const char *what)
{
    if (check_phase(m->phase, err, errlen, what))
        return -1;
    if (m->n > DDP_MAX_SAMPLES)
        return BAD("'n' is %" PRIu64 ", want at most 2^40", m->n);
    if (m->num_classes < 1 || m->num_classes > DDP_MAX_CLASSES)
        return BAD("%" PRIu32 " class names, want 1..%d", m->num_classes, DDP_MAX_CLASSES);
    if (check_strv(m->class_names, m->num_classes, "class_names", err, errlen, what))
        return -1;
    if (m->paths && check_strv(m->paths, m->n, "paths", err, errlen, what))
        return -1;
    CHECK_FIXED(m->dataset, "dataset", 0);
    if (m->skip > m->n)
        return BAD("'skip' is %" PRIu64 ", more than n = %" PRIu64, m->skip, m->n);
    if (m->skip && m->phase != DDP_PHASE_TRAIN)
        return BAD("'skip' is %" PRIu64 " in an eval plan (train resume only)", m->skip);
    if (ddp_check_present(m->present, m->npresent, m->num_classes, err, errlen, what) < 0)
        return -1;
    return v_auth(&m->auth, err, errlen, what);
}

static int v_credit(const ddp_credit_t *m, char *err, size_t errlen, const char *what)
{
    CHECK_FIXED(m->worker, "worker", 1);
    if (m->n_acks > DDP_MAX_ACKS)
        return BAD("%" PRIu32 " acks, want at most %d", m->n_acks, DDP_MAX_ACKS);
    if (m->n_acks && !m->acks)
        return BAD("'acks' is NULL with n_acks = %" PRIu32, m->n_acks);
    if (m->rank < -1)
        return BAD("'rank' is %" PRId32 ", want -1 (none) or >= 0", m->rank);
    return v_auth(&m->auth, err, errlen, what);
}

static int v_heartbeat(const ddp_heartbeat_t *m, char *err, size_t errlen, const char *what)
{
    CHECK_FIXED(m->worker, "worker", 1);
    if (m->rank < -1)
        return BAD("'rank' is %" PRId32 ", want -1 (none yet) or >= 0", m->rank);
    return v_auth(&m->auth, err, errlen, what);
}

/* wire 1, train: an augmentation gpud can apply (augment_check's rules,
 * which gpud runs again before decoding). */
static int v_batch_augment(const ddp_batch_t *m, char *err, size_t errlen, const char *what)
{
    if (m->aug_flags & ~(DDP_AUG_CROP | DDP_AUG_ROTATE))
        return BAD("'aug' is %u, want bits 1 (crop) and 2 (rotate) only", m->aug_flags);
    const double *s = m->aug_scale, *r = m->aug_ratio, *d = m->aug_degrees;
    if ((m->aug_flags & DDP_AUG_CROP) &&
        !(s[0] > 0 && s[0] <= s[1] && isfinite(s[1]) && r[0] > 0 && r[0] <= r[1] &&
          isfinite(r[1])))
        return BAD("'augment' crop scale (%g, %g) or ratio (%g, %g): want 0 < min <= max", s[0],
                   s[1], r[0], r[1]);
    if (!(m->aug_flip_p >= 0 && m->aug_flip_p <= 1))
        return BAD("'augment' flip probability %g is not in [0, 1]", m->aug_flip_p);
    if ((m->aug_flags & DDP_AUG_ROTATE) &&
        !(isfinite(d[0]) && isfinite(d[1]) && d[0] <= d[1]))
        return BAD("'augment' rotation (%g, %g): want finite, min <= max", d[0], d[1]);
    return 0;
}

/* wire 1: frame 2 is the n files back to back, sizes[i] bytes each; the
 * transform must be one gpud can apply (transform.h's rules). */
static int v_batch_encoded(const ddp_batch_t *m, char *err, size_t errlen, const char *what)
{
    if (m->wire != DDP_WIRE_ENCODED)
        return BAD("'wire' is %u, want 0 (uint8) or 1 (encoded)", m->wire);
    if (m->phase == DDP_PHASE_TRAIN && v_batch_augment(m, err, errlen, what))
        return -1;
    if (m->crop > 1 || m->dct > 1)
        return BAD("'crop' is %u and 'dct' %u, want 0 or 1 each", m->crop, m->dct);
    if (m->c != 1 && m->c != 3)
        return BAD("'c' is %u with encoded samples, want 1 or 3", m->c);
    if (m->n && !m->sizes)   /* an empty train shard has none */
        return BAD("'sizes' is NULL");
    uint64_t sum = 0;
    for (uint32_t i = 0; i < m->n; i++) {
        if (m->sizes[i] < 1 || m->sizes[i] > DDP_MAX_FILE)
            return BAD("'sizes[%" PRIu32 "]' is %" PRIu32 ", want 1..2^28 bytes", i, m->sizes[i]);
        sum += m->sizes[i];
    }
    if (sum > DDP_MAX_PIXELS)
        return BAD("'sizes' sum to %" PRIu64 " bytes, want at most 2^31", sum);
    if (!m->pixels && sum)
        return BAD("missing data frame (want the sum of 'sizes' = %" PRIu64 " bytes)", sum);
    if (m->pixels && zframe_size(m->pixels) != sum)
        return BAD("data frame is %zu bytes, want the sum of 'sizes' = %" PRIu64,
                   zframe_size(m->pixels), sum);
    return 0;
}

static int v_batch(const ddp_batch_t *m, char *err, size_t errlen, const char *what)
{
    if (check_phase(m->phase, err, errlen, what))
        return -1;
    bool train = m->phase == DDP_PHASE_TRAIN;
    /* an empty shard (uneven last step) still takes part in the all-reduce */
    if (m->n < (train ? 0u : 1u) || m->n > DDP_MAX_BATCH)
        return BAD("'n' is %" PRIu32 ", want %d..%d", m->n, train ? 0 : 1, DDP_MAX_BATCH);
    if (train && m->global_count < m->n)
        return BAD("'global_count' is %" PRIu32 ", less than this shard's n = %" PRIu32,
                   m->global_count, m->n);
    if (m->c < 1 || m->c > 4)
        return BAD("'c' is %u, want 1..4", m->c);
    if (m->h < 1 || m->w < 1)
        return BAD("'h' x 'w' is %u x %u, want both >= 1", m->h, m->w);
    if (m->n && (!m->ids || !m->labels))
        return BAD("'ids' or 'labels' is NULL");
    if (check_ids(m->ids, m->n, err, errlen, what) || check_labels(m->labels, m->n, err, errlen, what))
        return -1;
    if (m->pos && !train)
        return BAD("'pos' in an eval batch: only a train batch has it");
    for (uint32_t i = 1; m->pos && i < m->n; i++)
        if (m->pos[i] <= m->pos[i - 1])
            return BAD("'pos' is not strictly increasing at %" PRIu32 " (%" PRIu32 " after %"
                       PRIu32 ")", i, m->pos[i], m->pos[i - 1]);
    /* the plan: step S of epoch e lies in [e * spe, (e + 1) * spe) */
    if (m->steps_per_epoch && (!train || m->step / m->steps_per_epoch != m->epoch))
        return BAD("'steps_per_epoch' %" PRIu64 " with step %" PRIu64 " of epoch %" PRIu32
                   ": %s", m->steps_per_epoch, m->step, m->epoch,
                   train ? "the step is not in its epoch" : "only a train batch has it");
    if (m->wire != DDP_WIRE_UINT8)
        return v_batch_encoded(m, err, errlen, what);
    uint64_t want = (uint64_t)m->n * m->c * m->h * m->w;
    if (want > DDP_MAX_PIXELS)
        return BAD("n*c*h*w = %" PRIu64 " pixel bytes, want at most 2^31", want);
    if (!m->pixels)
        return BAD("missing pixel frame (want n*c*h*w = %" PRIu64 " bytes)", want);
    if (zframe_size(m->pixels) != want)
        return BAD("pixel frame is %zu bytes, want n*c*h*w = %" PRIu64, zframe_size(m->pixels),
                   want);
    return 0;
}

static int v_result(const ddp_result_t *m, char *err, size_t errlen, const char *what)
{
    if (m->rank < 0)
        return BAD("'rank' is %" PRId32 ", want >= 0", m->rank);
    if (check_phase(m->phase, err, errlen, what))
        return -1;
    if (m->n < 1 || m->n > DDP_MAX_BATCH)
        return BAD("'n' is %" PRIu32 ", want 1..%d", m->n, DDP_MAX_BATCH);
    if (m->k < 1 || m->k > DDP_MAX_K)
        return BAD("'k' is %" PRIu32 ", want 1..%d", m->k, DDP_MAX_K);
    if (!m->ids || !m->labels || !m->topk || !m->loss)
        return BAD("'ids', 'labels', 'topk' or 'loss' is NULL");
    if (check_ids(m->ids, m->n, err, errlen, what) || check_labels(m->labels, m->n, err, errlen, what))
        return -1;
    for (uint64_t i = 0; i < (uint64_t)m->n * m->k; i++)
        if (m->topk[i] < 0 || m->topk[i] >= DDP_MAX_CLASSES)
            return BAD("'topk[%" PRIu64 "]' is %" PRId32 ", want 0..%d", i, m->topk[i],
                       DDP_MAX_CLASSES - 1);
    if (m->nprob > DDP_MAX_CLASSES || (m->nprob && !m->probs))
        return BAD("'nprob' is %" PRIu32 " (at most %d) or 'probs' is NULL", m->nprob,
                   DDP_MAX_CLASSES);
    for (uint64_t i = 0; i < (uint64_t)m->n * m->nprob; i++)
        if (m->probs[i] > 10000)
            return BAD("'probs[%" PRIu64 "]' is %u, want 0..10000 (p * 10^4)", i, m->probs[i]);
    uint32_t nfailed = 0;
    for (uint32_t i = 0; m->failed && i < m->n; i++) {
        if (m->failed[i] > 1)
            return BAD("'failed[%" PRIu32 "]' is %u, want 0 or 1", i, m->failed[i]);
        nfailed += m->failed[i];
    }
    if (m->failed && (m->nwhy != nfailed || (nfailed && !m->why)))
        return BAD("'why' has %" PRIu32 " reasons for %" PRIu32 " failed rows", m->nwhy, nfailed);
    for (uint32_t i = 0; i < m->nwhy; i++)
        if (!m->why[i] || strlen(m->why[i]) >= DDP_MAX_WHY)
            return BAD("'why[%" PRIu32 "]' is missing or %d bytes or longer", i, DDP_MAX_WHY);
    /* loss may be NaN/inf (a diverged model is data, not a protocol error). */
    if (!isfinite(m->compute_s) || m->compute_s < 0)
        return BAD("'compute_s' is %g, want a finite value >= 0", m->compute_s);
    if (!isfinite(m->lr) || m->lr < 0)
        return BAD("'lr' is %g, want a finite value >= 0", m->lr);
    int e;
    if (m->loss_scale != 0 && !(isfinite(m->loss_scale) && m->loss_scale > 0 &&
                                frexp(m->loss_scale, &e) == 0.5))
        return BAD("'loss_scale' is %g, want a power of two", m->loss_scale);
    if (m->loss_scale == 0 && m->skipped_steps)
        return BAD("'skipped_steps' %" PRIu64 " without 'loss_scale'", m->skipped_steps);
    return v_auth(&m->auth, err, errlen, what);
}

static int v_failed(const ddp_failed_t *m, char *err, size_t errlen, const char *what)
{
    if (m->label < -1 || m->label >= DDP_MAX_CLASSES)
        return BAD("'label' is %" PRId32 ", want 0..%d (or absent)", m->label,
                   DDP_MAX_CLASSES - 1);
    if (check_phase(m->phase, err, errlen, what))
        return -1;
    if (m->id >= DDP_MAX_SAMPLES)
        return BAD("'id' is %" PRIu64 ", want < 2^40", m->id);
    CHECK_FIXED(m->path, "path", 0);
    CHECK_FIXED(m->reason, "reason", 0);
    return v_auth(&m->auth, err, errlen, what);
}

static int v_epoch(const ddp_epoch_t *m, char *err, size_t errlen, const char *what)
{
    if (m->decision > DDP_DECISION_STOP)
        return BAD("'decision' is %u, want 0 (continue) or 1 (stop)", m->decision);
    if (!(m->val_top1 == -1 || (m->val_top1 >= 0 && m->val_top1 <= 1)))
        return BAD("'val_top1' is %g, want 0..1 or -1 (no validation)", m->val_top1);
    CHECK_FIXED(m->reason, "reason", 0);
    return 0;
}

static int v_issued(const ddp_issued_t *m, char *err, size_t errlen, const char *what)
{
    if (check_phase(m->phase, err, errlen, what))
        return -1;
    if (m->rank < 0)
        return BAD("'rank' is %" PRId32 ", want >= 0", m->rank);
    if (m->n > DDP_MAX_BATCH)
        return BAD("'n' is %" PRIu32 ", want 0..%d", m->n, DDP_MAX_BATCH);
    if (m->n && (!m->ids || !m->labels))
        return BAD("'ids' or 'labels' is NULL");
    if (check_ids(m->ids, m->n, err, errlen, what) || check_labels(m->labels, m->n, err, errlen, what))
        return -1;
    return v_auth(&m->auth, err, errlen, what);
}

static int v_reissue(const ddp_reissue_t *m, char *err, size_t errlen, const char *what)
{
    if (check_phase(m->phase, err, errlen, what))
        return -1;
    if (m->rank < 0)
        return BAD("'rank' is %" PRId32 ", want >= 0", m->rank);
    CHECK_FIXED(m->reason, "reason", 0);
    return 0;
}

static int v_members(const ddp_members_t *m, char *err, size_t errlen, const char *what)
{
    if (m->gen < 1)
        return BAD("'gen' is 0, want >= 1 (generation 0 is announced by WELCOME)");
    if (m->world < 1 || m->world > DDP_MAX_WORLD)
        return BAD("'world' is %" PRId32 ", want 1..%d", m->world, DDP_MAX_WORLD);
    if (m->rank < -1 || m->rank >= m->world)
        return BAD("'rank' is %" PRId32 ", want -1 (loaderd) or 0..world-1 = 0..%" PRId32,
                   m->rank, m->world - 1);
    CHECK_FIXED(m->next_ring, "next_ring", 0);
    CHECK_FIXED(m->reason, "reason", 0);
    if (m->session && m->rank < 0)
        return BAD("a token for loaderd (rank -1): only a gpud's MEMBERS carries one");
    if (m->paused > 1)
        return BAD("'paused' is %u, want 0 or 1", m->paused);
    if (m->nccl > 1)
        return BAD("'nccl' is %u, want 0 or 1", m->nccl);
    if (!m->names)
        return BAD("'names' is NULL with world = %" PRId32, m->world);
    for (int32_t i = 0; i < m->world; i++) {
        if (!m->names[i])
            return BAD("'names[%" PRId32 "]' is NULL", i);
        size_t len = strnlen(m->names[i], DDP_MAX_NAME);
        if (len == 0)
            return BAD("'names[%" PRId32 "]' is empty", i);
        if (len >= DDP_MAX_NAME)
            return BAD("'names[%" PRId32 "]' is longer than %d bytes", i, DDP_MAX_NAME - 1);
    }
    return 0;
}

static int v_step(const ddp_step_t *m, char *err, size_t errlen, const char *what)
{
    if (m->rank < 0)
        return BAD("'rank' is %" PRId32 ", want >= 0", m->rank);
    if (m->status > DDP_STEP_RING_FAILED)
        return BAD("'status' is %u, want 0 (summed) or 1 (ring failed)", m->status);
    /* a summed step suspects nobody; a failed one may not know whom (-1) */
    if (m->status == DDP_STEP_SUMMED && m->suspect != -1)
        return BAD("'suspect' is %" PRId32 " with status 0, want -1", m->suspect);
    if (m->suspect < -1 || m->suspect == m->rank)
        return BAD("'suspect' is %" PRId32 ", want -1 or another rank (>= 0, not %" PRId32 ")",
                   m->suspect, m->rank);
    return v_auth(&m->auth, err, errlen, what);
}

static int v_state(const ddp_state_t *m, char *err, size_t errlen, const char *what)
{
    if (m->image && zframe_size(m->image) == 0)
        return BAD("an empty state image");
    if (m->image && zframe_size(m->image) > DDP_MAX_STATE)
        return BAD("a state image of %zu bytes, want at most 2^34", zframe_size(m->image));
    return v_auth(&m->auth, err, errlen, what);
}

static int v_ncclid(const ddp_ncclid_t *m, char *err, size_t errlen, const char *what)
{
    if (m->world < 1 || m->world > DDP_MAX_WORLD)
        return BAD("'world' is %" PRId32 ", want 1..%d", m->world, DDP_MAX_WORLD);
    /* ncclGetUniqueId never makes zeros (a magic and an address): a blank
     * id is a bug or forged, and would hang every member's init */
    bool blank = true;
    for (size_t i = 0; i < DDP_NCCL_ID_LEN && blank; i++)
        blank = m->id[i] == 0;
    if (blank)
        return BAD("'id' is all zeros, not an id ncclGetUniqueId made");
    return v_auth(&m->auth, err, errlen, what);
}

int proto_validate(const ddp_msg_t *msg, char *err, size_t errlen)
{
    const char *what = proto_type_name(msg->type);
    switch (msg->type) {
    case DDP_JOIN: return v_join(&msg->u.join, err, errlen, what);
    case DDP_WELCOME: return v_welcome(&msg->u.welcome, err, errlen, what);
    case DDP_PLAN: return v_plan(&msg->u.plan, err, errlen, what);
    case DDP_CREDIT: return v_credit(&msg->u.credit, err, errlen, what);
    case DDP_HEARTBEAT: return v_heartbeat(&msg->u.heartbeat, err, errlen, what);
    case DDP_BATCH: return v_batch(&msg->u.batch, err, errlen, what);
    case DDP_END: return check_phase(msg->u.end.phase, err, errlen, what);
    case DDP_RESULT: return v_result(&msg->u.result, err, errlen, what);
    case DDP_FAILED: return v_failed(&msg->u.failed, err, errlen, what);
    case DDP_STOP: CHECK_FIXED(msg->u.stop.reason, "reason", 0); return 0;
    case DDP_DONE: CHECK_FIXED(msg->u.done.reason, "reason", 0); return 0;
    case DDP_EPOCH: return v_epoch(&msg->u.epoch, err, errlen, what);
    case DDP_ISSUED: return v_issued(&msg->u.issued, err, errlen, what);
    case DDP_REISSUE: return v_reissue(&msg->u.reissue, err, errlen, what);
    case DDP_MEMBERS: return v_members(&msg->u.members, err, errlen, what);
    case DDP_STEP: return v_step(&msg->u.step, err, errlen, what);
    case DDP_COMMIT:
        if (msg->u.commit.snapshot > 1)
            return bad(err, errlen, what, "'snapshot' is %u, want 0 or 1",
                       msg->u.commit.snapshot);
        return 0;
    case DDP_STATE: return v_state(&msg->u.state, err, errlen, what);
    case DDP_NCCLID: return v_ncclid(&msg->u.ncclid, err, errlen, what);
    }
    return bad(err, errlen, "message", "unknown type %d, want 1..%d", (int)msg->type,
               DDP_TYPE_MAX);
}
