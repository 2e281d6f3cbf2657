/* event — encode/decode/clear of the events reducerd publishes.
 *
 * Two frames: the topic string and a msgpack map {"v": 1, <struct fields>}.
 * Keys are the struct field names; numeric arrays are little-endian bin as
 * in proto/messages.h. The topic frame is the single source of the event kind (it
 * is what SUB sockets filter on), so the map does not repeat it.
 */
#include "common/errbuf.h"
#include "common/log.h"
#include "proto/codec.h"
#include "proto/event.h"

#include "proto/mp.h"
#include "proto/messages.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const topic_names[] = {
    [EV_METRIC] = "metric", [EV_PREDICTIONS] = "predictions", [EV_PROGRESS] = "progress",
    [EV_LOG] = "log",       [EV_WORKER] = "worker",           [EV_END] = "end", [EV_FAILED] = "failed",
    [EV_MEMBERSHIP] = "membership",
};

const char *event_topic_name(ev_topic_t topic)
{
    if (topic < EV_METRIC || topic > EV_TOPIC_LAST)
        return "unknown";
    return topic_names[topic];
}

static int topic_from_frame(zframe_t *f)
{
    for (int t = EV_METRIC; t <= EV_TOPIC_LAST; t++)
        if (zframe_streq(f, topic_names[t]))
            return t;
    return 0;
}

/* ---- validation shared by encode and decode ---- */

static int ev_bad(char *err, size_t errlen, const char *what, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int ev_bad(char *err, size_t errlen, const char *what, const char *fmt, ...)
{
    int n = snprintf(err, errlen, "%s: ", what);
    if (n < 0 || (size_t)n >= errlen)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}
#define EBAD(...) ev_bad(err, errlen, what, __VA_ARGS__)
#define TERMINATED(a) (strnlen((a), sizeof(a)) < sizeof(a))

static bool one_of(const char *s, const char *const *set)
{
    for (; *set; set++)
        if (strcmp(s, *set) == 0)
            return true;
    return false;
}

static int v_metric(const ev_metric_t *m, char *err, size_t errlen, const char *what)
{
    if (m->phase > DDP_PHASE_TRAIN)
        return EBAD("'phase' is %u, want 0 or 1", m->phase);
    if (m->num_classes < 1 || m->num_classes > DDP_MAX_CLASSES)
        return EBAD("%" PRIu32 " classes, want 1..%d", m->num_classes, DDP_MAX_CLASSES);
    if (!m->class_names)
        return EBAD("'class_names' is NULL");
    for (uint32_t i = 0; i < m->num_classes; i++)
        if (!m->class_names[i] || strnlen(m->class_names[i], DDP_MAX_STR) >= DDP_MAX_STR)
            return EBAD("'class_names[%" PRIu32 "]' is NULL or too long", i);
    if (m->correct_top1 > m->samples || m->correct_top5 > m->samples ||
        m->correct_top1 > m->correct_top5)
        return EBAD("want correct_top1 <= correct_top5 <= samples, got %" PRIu64 ", %" PRIu64
                    ", %" PRIu64, m->correct_top1, m->correct_top5, m->samples);
    if (m->loss_scale < 0 || !isfinite(m->loss_scale))
        return EBAD("'loss_scale' %g, want a finite value >= 0", m->loss_scale);
    if (!(m->first_result_s >= 0) || !isfinite(m->first_result_s) ||
        !(m->steady_images_per_sec >= 0) || !isfinite(m->steady_images_per_sec))
        return EBAD("'first_result_s' %g, 'steady_images_per_sec' %g: want finite values >= 0",
                    m->first_result_s, m->steady_images_per_sec);
    if (m->nonfinite_loss > m->samples)
        return EBAD("'nonfinite_loss' %" PRIu64 " > samples %" PRIu64, m->nonfinite_loss,
                    m->samples);
    if (m->nranks > EVENT_MAX_RANKS || (m->nranks && !m->rank_images_per_sec))
        return EBAD("'rank_images_per_sec' has %" PRIu32 " entries (at most %d, non-NULL)",
                    m->nranks, EVENT_MAX_RANKS);
    if (ddp_check_present(m->present, m->npresent, m->num_classes, err, errlen, what) < 0)
        return -1;
    if (m->ncells && !m->cells)
        return EBAD("'confusion_cells' is NULL");
    if (m->ncells > m->samples)  /* a cell counts at least one sample */
        return EBAD("%" PRIu64 " confusion cells for %" PRIu64 " samples", m->ncells, m->samples);
    if (m->cells && confusion_check(m->cells, m->ncells, m->num_classes, err, errlen) < 0)
        return -1;
    if (m->has_decision && m->decision > 1)
        return EBAD("'decision' is %u, want 0 (continue) or 1 (stop)", m->decision);
    if (!TERMINATED(m->decision_reason))
        return EBAD("'decision_reason' is not NUL-terminated");
    if (m->has_probs && (!m->calib || !m->auc || !m->ap))
        return EBAD("'calib', 'auc' or 'ap' is NULL");
    if (m->ncurves > EVENT_MAX_CURVES ||
        (m->ncurves && (!m->curve_class || !m->curve_pos || !m->curve_neg)))
        return EBAD("%" PRIu32 " curves (at most %u, non-NULL)", m->ncurves, EVENT_MAX_CURVES);
    for (uint32_t i = 0; i < m->ncurves; i++)
        if (m->curve_class[i] < 0 || (uint32_t)m->curve_class[i] >= m->num_classes)
            return EBAD("'curve_class[%" PRIu32 "]' is %" PRId32 ", want 0..%" PRIu32, i,
                        m->curve_class[i], m->num_classes - 1);
    return 0;
}

static int v_predictions(const ev_predictions_t *m, char *err, size_t errlen, const char *what)
{
    if (m->phase > DDP_PHASE_TRAIN)
        return EBAD("'phase' is %u, want 0 or 1", m->phase);
    if (m->k < 1 || m->k > DDP_MAX_K)
        return EBAD("'k' is %" PRIu32 ", want 1..%d", m->k, DDP_MAX_K);
    if (m->n > DDP_MAX_SAMPLES || m->first > DDP_MAX_SAMPLES - m->n || m->first + m->n > m->total)
        return EBAD("chunk first=%" PRIu64 " n=%" PRIu64 " does not fit in total=%" PRIu64,
                    m->first, m->n, m->total);
    if (m->n && (!m->status || !m->labels || !m->topk || !m->loss))
        return EBAD("'status', 'labels', 'topk' or 'loss' is NULL");
    for (uint64_t i = 0; i < m->n; i++) {
        if (m->status[i] != 1 && m->status[i] != 2)
            return EBAD("'status[%" PRIu64 "]' is %u, want 1 (result) or 2 (failed)", i,
                        m->status[i]);
        if (m->labels[i] < -1)
            return EBAD("'labels[%" PRIu64 "]' is %" PRId32 ", want >= -1", i, m->labels[i]);
        for (uint32_t j = 0; j < m->k; j++)
            if (m->topk[i * m->k + j] < -1)
                return EBAD("'topk[%" PRIu64 "]' is %" PRId32 ", want >= -1 (-1: none)",
                            i * m->k + j, m->topk[i * m->k + j]);
        if (m->paths && (!m->paths[i] || strnlen(m->paths[i], DDP_MAX_STR) >= DDP_MAX_STR))
            return EBAD("'paths[%" PRIu64 "]' is NULL or too long", i);
    }
    if (m->nprob > DDP_MAX_CLASSES || (m->nprob && m->n && !m->probs))
        return EBAD("'nprob' is %" PRIu32 " (at most %d) or 'probs' is NULL", m->nprob,
                    DDP_MAX_CLASSES);
    for (uint64_t i = 0; i < m->n * m->nprob; i++)
        if (m->probs[i] > EVENT_PROB_BINS - 1)
            return EBAD("'probs[%" PRIu64 "]' is %u, want 0..%u", i, m->probs[i],
                        EVENT_PROB_BINS - 1);
    return 0;
}

static int v_membership(const ev_membership_t *m, char *err, size_t errlen, const char *what)
{
    static const char *const changes[] = {"formed", "lost", "joined", NULL};
    if (!TERMINATED(m->change) || !one_of(m->change, changes))
        return EBAD("'change' is not one of formed, lost, joined");
    if (m->world < 1 || m->world > EVENT_MAX_RANKS)
        return EBAD("'world' is %" PRId32 ", want 1..%d", m->world, EVENT_MAX_RANKS);
    if (m->n > EVENT_MAX_RANKS || (m->n && (!m->ranks || !m->names)))
        return EBAD("%" PRIu32 " ranks (at most %d, non-NULL)", m->n, EVENT_MAX_RANKS);
    for (uint32_t i = 0; i < m->n; i++) {
        if (m->ranks[i] < 0 || m->ranks[i] >= EVENT_MAX_RANKS)
            return EBAD("'ranks[%" PRIu32 "]' is %" PRId32 ", want 0..%d", i, m->ranks[i],
                        EVENT_MAX_RANKS - 1);
        if (!m->names[i] || strnlen(m->names[i], DDP_MAX_NAME) >= DDP_MAX_NAME)
            return EBAD("'names[%" PRIu32 "]' is NULL or longer than %d bytes", i,
                        DDP_MAX_NAME - 1);
    }
    return TERMINATED(m->reason) ? 0 : EBAD("'reason' is not NUL-terminated");
}

int event_validate(const ddp_event_t *ev, char *err, size_t errlen)
{
    static const char *const levels[] = {"error", "warn", "info", NULL};
    static const char *const states[] = {"joined", "dead", "left", NULL};
    const char *what = event_topic_name(ev->topic);
    switch (ev->topic) {
    case EV_METRIC: return v_metric(&ev->u.metric, err, errlen, what);
    case EV_PREDICTIONS: return v_predictions(&ev->u.predictions, err, errlen, what);
    case EV_PROGRESS:
        if (ev->u.progress.phase > DDP_PHASE_TRAIN)
            return EBAD("'phase' is %u, want 0 or 1", ev->u.progress.phase);
        if (ev->u.progress.nranks > EVENT_MAX_RANKS ||
            (ev->u.progress.nranks && !ev->u.progress.rank_done))
            return EBAD("'rank_done' has %u entries (at most %d, non-NULL)",
                        ev->u.progress.nranks, EVENT_MAX_RANKS);
        return 0;
    case EV_LOG:
        if (!TERMINATED(ev->u.log.level) || !one_of(ev->u.log.level, levels))
            return EBAD("'level' is not one of error, warn, info");
        if (!TERMINATED(ev->u.log.daemon) || !TERMINATED(ev->u.log.msg))
            return EBAD("'daemon' or 'msg' is not NUL-terminated");
        return 0;
    case EV_WORKER:
        if (!TERMINATED(ev->u.worker.state) || !one_of(ev->u.worker.state, states))
            return EBAD("'state' is not one of joined, dead, left");
        if (!TERMINATED(ev->u.worker.name) || !TERMINATED(ev->u.worker.host))
            return EBAD("'name' or 'host' is not NUL-terminated");
        return 0;
    case EV_END:
        return TERMINATED(ev->u.end.reason) ? 0 : EBAD("'reason' is not NUL-terminated");
    case EV_FAILED:
        if (ev->u.failed.phase > DDP_PHASE_TRAIN)
            return EBAD("'phase' is %u, want 0 or 1", ev->u.failed.phase);
        if (ev->u.failed.id >= DDP_MAX_SAMPLES)
            return EBAD("'id' is %" PRIu64 ", want < 2^40", ev->u.failed.id);
        return TERMINATED(ev->u.failed.path) && TERMINATED(ev->u.failed.reason)
                   ? 0 : EBAD("'path' or 'reason' is not NUL-terminated");
    case EV_MEMBERSHIP: return v_membership(&ev->u.membership, err, errlen, what);
    }
    return ev_bad(err, errlen, "event", "unknown topic %d", (int)ev->topic);
}

/* ---- encode ---- */

/* The optional keys: absent (not nil) when unset, so an eval metric keeps
 * the map it always had. */
static int pack_metric_optional(msgpack_packer *pk, const ev_metric_t *m)
{
    if (m->nranks &&
        mp_put_bin(pk, "rank_images_per_sec", m->rank_images_per_sec, (size_t)m->nranks * 8))
        return -1;
    if (m->rejected && mp_put_uint(pk, "rejected", m->rejected))
        return -1;
    if (m->nonfinite_loss && mp_put_uint(pk, "nonfinite_loss", m->nonfinite_loss))
        return -1;
    if (m->first_result_s > 0 && mp_put_double(pk, "first_result_s", m->first_result_s))
        return -1;
    if (m->steady_images_per_sec > 0 &&
        mp_put_double(pk, "steady_images_per_sec", m->steady_images_per_sec))
        return -1;
    if (m->loss_scale > 0 && (mp_put_double(pk, "loss_scale", m->loss_scale) ||
                              mp_put_uint(pk, "skipped_steps", m->skipped_steps)))
        return -1;
    if (m->present && mp_put_bin(pk, "present", m->present, (size_t)m->npresent * 4))
        return -1;
    size_t nc = m->num_classes, nk = m->ncurves;
    if (m->has_probs &&
        (mp_put_double(pk, "ece", m->ece) ||
         mp_put_bin(pk, "calib", m->calib, 3 * EVENT_CALIB_SLOTS * 8) ||
         mp_put_bin(pk, "auc", m->auc, nc * 8) || mp_put_bin(pk, "ap", m->ap, nc * 8)))
        return -1;
    if (nk && (mp_put_bin(pk, "curve_class", m->curve_class, nk * 4) ||
               mp_put_bin(pk, "curve_pos", m->curve_pos, nk * EVENT_PROB_BINS * 4) ||
               mp_put_bin(pk, "curve_neg", m->curve_neg, nk * EVENT_PROB_BINS * 4)))
        return -1;
    return m->has_decision &&
           (mp_put_uint(pk, "decision", m->decision) || mp_put_uint(pk, "streak", m->streak) ||
            mp_put_uint(pk, "epochs", m->epochs) ||
            mp_put_str(pk, "decision_reason", m->decision_reason));
}

static int pack_metric(msgpack_packer *pk, const ev_metric_t *m)
{
    size_t nc = m->num_classes;
    size_t keys = 16 + (m->cells ? 1 : 0) + (m->nranks ? 1 : 0) + (m->has_decision ? 4 : 0) +
                  (m->rejected ? 1 : 0) + (m->nonfinite_loss ? 1 : 0) + (m->present ? 1 : 0) +
                  (m->loss_scale > 0 ? 2 : 0) + (m->first_result_s > 0 ? 1 : 0) +
                  (m->steady_images_per_sec > 0 ? 1 : 0) +
                  (m->has_probs ? 4 : 0) + (m->ncurves ? 3 : 0);
    return msgpack_pack_map(pk, keys) ||
           mp_put_uint(pk, "v", DDP_PROTO_VERSION) || mp_put_uint(pk, "epoch", m->epoch) ||
           mp_put_uint(pk, "phase", m->phase) || mp_put_bool(pk, "final", m->final) ||
           mp_put_uint(pk, "planned", m->planned) || mp_put_uint(pk, "samples", m->samples) ||
           mp_put_uint(pk, "failed", m->failed) ||
           mp_put_uint(pk, "correct_top1", m->correct_top1) ||
           mp_put_uint(pk, "correct_top5", m->correct_top5) ||
           mp_put_uint(pk, "duplicates", m->duplicates) ||
           mp_put_double(pk, "loss_sum", m->loss_sum) ||
           mp_put_strv(pk, "class_names", m->class_names, nc) ||
           mp_put_int(pk, "workers", m->workers) || mp_put_double(pk, "wall_s", m->wall_s) ||
           mp_put_double(pk, "images_per_sec", m->images_per_sec) ||
           mp_put_double(pk, "lr", m->lr) ||
           (m->cells && mp_put_bin(pk, "confusion_cells", m->cells,
                                   (size_t)m->ncells * sizeof *m->cells)) ||
           pack_metric_optional(pk, m);
}

static int pack_predictions(msgpack_packer *pk, const ev_predictions_t *m)
{
    size_t n = (size_t)m->n;
    return msgpack_pack_map(pk, 1 + 10 + (m->paths ? 1 : 0) + (m->nprob ? 2 : 0)) ||
           mp_put_uint(pk, "v", DDP_PROTO_VERSION) || mp_put_uint(pk, "epoch", m->epoch) ||
           mp_put_uint(pk, "phase", m->phase) || mp_put_uint(pk, "first", m->first) ||
           mp_put_uint(pk, "n", m->n) || mp_put_uint(pk, "total", m->total) ||
           mp_put_uint(pk, "k", m->k) || mp_put_bin(pk, "status", m->status, n) ||
           mp_put_bin(pk, "labels", m->labels, n * 4) ||
           mp_put_bin(pk, "topk", m->topk, n * m->k * 4) ||
           mp_put_bin(pk, "loss", m->loss, n * 4) ||
           (m->paths && mp_put_strv(pk, "paths", m->paths, n)) ||
           (m->nprob && (mp_put_uint(pk, "nprob", m->nprob) ||
                         mp_put_bin(pk, "probs", m->probs, n * m->nprob * 2)));
}

static int pack_progress(msgpack_packer *pk, const ev_progress_t *m)
{
    bool ranks = m->nranks && m->rank_done;
    return msgpack_pack_map(pk, 11 + (ranks ? 1 : 0)) ||
           mp_put_uint(pk, "v", DDP_PROTO_VERSION) ||
           mp_put_uint(pk, "epoch", m->epoch) || mp_put_uint(pk, "phase", m->phase) ||
           mp_put_uint(pk, "done", m->done) || mp_put_uint(pk, "total", m->total) ||
           mp_put_double(pk, "images_per_sec", m->images_per_sec) ||
           mp_put_double(pk, "eta_s", m->eta_s) || mp_put_int(pk, "workers", m->workers) ||
           mp_put_double(pk, "elapsed_s", m->elapsed_s) ||
           mp_put_uint(pk, "failed", m->failed) || mp_put_uint(pk, "rejected", m->rejected) ||
           (ranks && mp_put_bin(pk, "rank_done", m->rank_done, (size_t)m->nranks * 8));
}

static int pack_log(msgpack_packer *pk, const ev_log_t *m)
{
    return msgpack_pack_map(pk, 5) || mp_put_uint(pk, "v", DDP_PROTO_VERSION) ||
           mp_put_str(pk, "level", m->level) || mp_put_str(pk, "daemon", m->daemon) ||
           mp_put_int(pk, "rank", m->rank) || mp_put_str(pk, "msg", m->msg);
}

static int pack_worker(msgpack_packer *pk, const ev_worker_t *m)
{
    return msgpack_pack_map(pk, 6) || mp_put_uint(pk, "v", DDP_PROTO_VERSION) ||
           mp_put_int(pk, "rank", m->rank) || mp_put_str(pk, "name", m->name) ||
           mp_put_str(pk, "host", m->host) || mp_put_str(pk, "state", m->state) ||
           mp_put_double(pk, "images_per_sec", m->images_per_sec);
}

static int pack_end(msgpack_packer *pk, const ev_end_t *m)
{
    return msgpack_pack_map(pk, 3) || mp_put_uint(pk, "v", DDP_PROTO_VERSION) ||
           mp_put_int(pk, "code", m->code) || mp_put_str(pk, "reason", m->reason);
}

static int pack_failed(msgpack_packer *pk, const ev_failed_t *m)
{
    return msgpack_pack_map(pk, 6) || mp_put_uint(pk, "v", DDP_PROTO_VERSION) ||
           mp_put_uint(pk, "epoch", m->epoch) || mp_put_uint(pk, "phase", m->phase) ||
           mp_put_uint(pk, "id", m->id) || mp_put_str(pk, "path", m->path) ||
           mp_put_str(pk, "reason", m->reason);
}

static int pack_membership(msgpack_packer *pk, const ev_membership_t *m)
{
    return msgpack_pack_map(pk, 10) || mp_put_uint(pk, "v", DDP_PROTO_VERSION) ||
           mp_put_uint(pk, "gen", m->gen) || mp_put_int(pk, "world", m->world) ||
           mp_put_str(pk, "change", m->change) ||
           mp_put_bin(pk, "ranks", m->ranks, (size_t)m->n * 4) ||
           mp_put_strv(pk, "names", m->names, m->n) || mp_put_uint(pk, "step", m->step) ||
           mp_put_uint(pk, "epoch", m->epoch) || mp_put_bool(pk, "redone", m->redone) ||
           mp_put_str(pk, "reason", m->reason);
}

static int pack_event(msgpack_packer *pk, const ddp_event_t *ev)
{
    switch (ev->topic) {
    case EV_METRIC: return pack_metric(pk, &ev->u.metric);
    case EV_PREDICTIONS: return pack_predictions(pk, &ev->u.predictions);
    case EV_PROGRESS: return pack_progress(pk, &ev->u.progress);
    case EV_LOG: return pack_log(pk, &ev->u.log);
    case EV_WORKER: return pack_worker(pk, &ev->u.worker);
    case EV_END: return pack_end(pk, &ev->u.end);
    case EV_FAILED: return pack_failed(pk, &ev->u.failed);
    case EV_MEMBERSHIP: return pack_membership(pk, &ev->u.membership);
    }
    return -1;
}

zmsg_t *event_encode(const ddp_event_t *ev)
{
    char err[256];
    if (!ev)
        return NULL;
    if (event_validate(ev, err, sizeof err) != 0) {
        log_error("event_encode: refusing to publish a bad event (%s); fix the publisher", err);
        return NULL;
    }
    msgpack_sbuffer sbuf;
    msgpack_packer pk;
    msgpack_sbuffer_init(&sbuf);
    msgpack_packer_init(&pk, &sbuf, msgpack_sbuffer_write);
    zmsg_t *zmsg = NULL;
    if (pack_event(&pk, ev) != 0 || !(zmsg = zmsg_new()) ||
        zmsg_addstr(zmsg, event_topic_name(ev->topic)) != 0 ||
        zmsg_addmem(zmsg, sbuf.data, sbuf.size) != 0) {
        log_error("event_encode: cannot build the %s event (out of memory?)",
                  event_topic_name(ev->topic));
        zmsg_destroy(&zmsg);
    }
    msgpack_sbuffer_destroy(&sbuf);
    return zmsg;
}

/* ---- decode ---- */

/* An optional per-rank array: a bin of n 8-byte elements, n <= EVENT_MAX_RANKS
 * (its length is *nranks); absent leaves *nranks 0 and *out NULL. */
static int d_rank_array(const mp_reader_t *r, const char *key, uint32_t *nranks, void **out)
{
    bool bad = false;
    const msgpack_object *o = mp_find(r, key, &bad);
    if (bad)
        return -1;
    if (!o)
        return 0;
    if (o->type != MSGPACK_OBJECT_BIN || o->via.bin.size % 8 != 0 ||
        o->via.bin.size / 8 > EVENT_MAX_RANKS)
        return mp_fail(r, "'%s' must be a bin of n*8 bytes, n <= %d", key, EVENT_MAX_RANKS);
    *nranks = o->via.bin.size / 8;
    return *nranks ? mp_dup_bin(r, key, (size_t)*nranks * 8, "nranks*8", out) : 0;
}

/* The probability metrics: "ece" present means calib, auc and ap are too;
 * curves only with their three keys. */
static int d_metric_probs(const mp_reader_t *r, ev_metric_t *m)
{
    bool bad = false;
    size_t nc = m->num_classes;
    if (mp_find(r, "ece", &bad)) {
        m->has_probs = true;
        if (mp_get_double(r, "ece", &m->ece) ||
            mp_dup_bin(r, "calib", 3 * EVENT_CALIB_SLOTS * 8, "3*16*8", (void **)&m->calib) ||
            mp_dup_bin(r, "auc", nc * 8, "num_classes*8", (void **)&m->auc) ||
            mp_dup_bin(r, "ap", nc * 8, "num_classes*8", (void **)&m->ap))
            return -1;
    } else if (bad) {
        return -1;
    }
    const msgpack_object *o = mp_find(r, "curve_class", &bad);
    if (bad)
        return -1;
    if (!o)
        return 0;
    if (o->type != MSGPACK_OBJECT_BIN || o->via.bin.size % 4 != 0 || o->via.bin.size == 0 ||
        o->via.bin.size / 4 > EVENT_MAX_CURVES)
        return mp_fail(r, "'curve_class' must be a bin of n*4 bytes, n 1..%u", EVENT_MAX_CURVES);
    m->ncurves = o->via.bin.size / 4;
    size_t h = (size_t)m->ncurves * EVENT_PROB_BINS * 4;
    return mp_dup_bin(r, "curve_class", (size_t)m->ncurves * 4, "ncurves*4",
                      (void **)&m->curve_class) ||
           mp_dup_bin(r, "curve_pos", h, "ncurves*10001*4", (void **)&m->curve_pos) ||
           mp_dup_bin(r, "curve_neg", h, "ncurves*10001*4", (void **)&m->curve_neg)
               ? -1 : 0;
}

/* Keys added within version 1 are optional: an eval metric or an older
 * reducerd omits them. */
static int d_metric_optional(const mp_reader_t *r, ev_metric_t *m)
{
    bool bad = false;
    if (d_rank_array(r, "rank_images_per_sec", &m->nranks, (void **)&m->rank_images_per_sec) ||
        mp_opt_uint(r, "rejected", UINT64_MAX, &m->rejected) ||
        mp_opt_uint(r, "nonfinite_loss", UINT64_MAX, &m->nonfinite_loss) ||
        mp_opt_double(r, "loss_scale", &m->loss_scale) ||
        mp_opt_double(r, "first_result_s", &m->first_result_s) ||
        mp_opt_double(r, "steady_images_per_sec", &m->steady_images_per_sec) ||
        mp_opt_uint(r, "skipped_steps", UINT64_MAX, &m->skipped_steps) ||
        mp_opt_u32v(r, "present", m->num_classes, &m->present, &m->npresent) ||
        d_metric_probs(r, m))
        return -1;
    if (!mp_find(r, "decision", &bad))
        return bad ? -1 : 0;
    m->has_decision = true;
    return mp_get_u8(r, "decision", 0, 1, &m->decision) ||
           mp_get_u32(r, "streak", 0, UINT32_MAX, &m->streak) ||
           mp_get_u32(r, "epochs", 0, UINT32_MAX, &m->epochs) ||
           mp_get_str(r, "decision_reason", m->decision_reason, sizeof m->decision_reason)
               ? -1 : 0;
}

/* Optional "confusion_cells": a bin of n x 16 bytes (common/confusion.h),
 * n <= samples (event_validate checks order and range). Present, even
 * empty, it decodes to a non-NULL array: the publisher sent a matrix. */
static int d_cells(const mp_reader_t *r, ev_metric_t *m)
{
    bool bad = false;
    const msgpack_object *o = mp_find(r, "confusion_cells", &bad);
    if (bad)
        return -1;
    if (!o)
        return 0;
    size_t each = sizeof *m->cells;
    if (o->type != MSGPACK_OBJECT_BIN || o->via.bin.size % each != 0 ||
        o->via.bin.size / each > m->samples)
        return mp_fail(r, "'confusion_cells' must be a bin of n*16 bytes, n <= samples");
    m->ncells = o->via.bin.size / each;
    if (m->ncells)
        return mp_dup_bin(r, "confusion_cells", (size_t)m->ncells * each, "ncells*16",
                          (void **)&m->cells);
    return (m->cells = malloc(each)) ? 0 : mp_fail(r, "out of memory");
}

static int d_metric(const mp_reader_t *r, ev_metric_t *m)
{
    size_t nc = 0;
    if (mp_get_u32(r, "epoch", 0, UINT32_MAX, &m->epoch) ||
        mp_get_u8(r, "phase", 0, UINT8_MAX, &m->phase) || mp_get_bool(r, "final", &m->final) ||
        mp_get_uint(r, "planned", 0, UINT64_MAX, &m->planned) ||
        mp_get_uint(r, "samples", 0, UINT64_MAX, &m->samples) ||
        mp_get_uint(r, "failed", 0, UINT64_MAX, &m->failed) ||
        mp_get_uint(r, "correct_top1", 0, UINT64_MAX, &m->correct_top1) ||
        mp_get_uint(r, "correct_top5", 0, UINT64_MAX, &m->correct_top5) ||
        mp_get_uint(r, "duplicates", 0, UINT64_MAX, &m->duplicates) ||
        mp_get_double(r, "loss_sum", &m->loss_sum) ||
        mp_get_i32(r, "workers", INT32_MIN, INT32_MAX, &m->workers) ||
        mp_get_double(r, "wall_s", &m->wall_s) ||
        mp_get_double(r, "images_per_sec", &m->images_per_sec) ||
        mp_get_double(r, "lr", &m->lr) ||
        mp_get_strv(r, "class_names", SIZE_MAX, DDP_MAX_CLASSES, DDP_MAX_STR, false,
                    &m->class_names, &nc))
        return -1;
    m->num_classes = (uint32_t)nc;
    return d_cells(r, m) || d_metric_optional(r, m) ? -1 : 0;
}

/* Optional "nprob" + "probs" (--predictions probs|all). */
static int d_predictions_probs(const mp_reader_t *r, ev_predictions_t *m)
{
    bool bad = false;
    if (!mp_find(r, "nprob", &bad))
        return bad ? -1 : 0;
    if (mp_get_u32(r, "nprob", 1, DDP_MAX_CLASSES, &m->nprob))
        return -1;
    return mp_dup_bin(r, "probs", (size_t)m->n * m->nprob * 2, "n*nprob*2",
                      (void **)&m->probs);
}

static int d_predictions(const mp_reader_t *r, ev_predictions_t *m)
{
    size_t np = 0;
    if (mp_get_u32(r, "epoch", 0, UINT32_MAX, &m->epoch) ||
        mp_get_u8(r, "phase", 0, UINT8_MAX, &m->phase) ||
        mp_get_uint(r, "first", 0, DDP_MAX_SAMPLES, &m->first) ||
        mp_get_uint(r, "n", 0, DDP_MAX_SAMPLES, &m->n) ||
        mp_get_uint(r, "total", 0, DDP_MAX_SAMPLES, &m->total) ||
        mp_get_u32(r, "k", 1, DDP_MAX_K, &m->k))
        return -1;
    /* mp_dup_bin checks each bin's size before allocating: a bogus n never
     * allocates more than the frame holds. */
    size_t n = (size_t)m->n;
    return mp_dup_bin(r, "status", n, "n", (void **)&m->status) ||
           mp_dup_bin(r, "labels", n * 4, "n*4", (void **)&m->labels) ||
           mp_dup_bin(r, "topk", n * m->k * 4, "n*k*4", (void **)&m->topk) ||
           mp_dup_bin(r, "loss", n * 4, "n*4", (void **)&m->loss) ||
           mp_get_strv(r, "paths", n, SIZE_MAX, DDP_MAX_STR, true, &m->paths, &np) ||
           d_predictions_probs(r, m)
               ? -1 : 0;
}

/* Keys added within version 1 are optional: an older reducerd omits them. */
static int d_progress_optional(const mp_reader_t *r, ev_progress_t *m)
{
    m->elapsed_s = -1;
    return mp_opt_double(r, "elapsed_s", &m->elapsed_s) ||
           mp_opt_uint(r, "failed", UINT64_MAX, &m->failed) ||
           mp_opt_uint(r, "rejected", UINT64_MAX, &m->rejected) ||
           d_rank_array(r, "rank_done", &m->nranks, (void **)&m->rank_done)
               ? -1 : 0;
}

static int d_progress(const mp_reader_t *r, ev_progress_t *m)
{
    return mp_get_u32(r, "epoch", 0, UINT32_MAX, &m->epoch) ||
           mp_get_u8(r, "phase", 0, UINT8_MAX, &m->phase) ||
           mp_get_uint(r, "done", 0, UINT64_MAX, &m->done) ||
           mp_get_uint(r, "total", 0, UINT64_MAX, &m->total) ||
           mp_get_double(r, "images_per_sec", &m->images_per_sec) ||
           mp_get_double(r, "eta_s", &m->eta_s) ||
           mp_get_i32(r, "workers", INT32_MIN, INT32_MAX, &m->workers) ||
           d_progress_optional(r, m)
               ? -1 : 0;
}

static int d_membership(const mp_reader_t *r, ev_membership_t *m)
{
    size_t nnames = 0;
    bool bad = false;
    const msgpack_object *o = mp_find(r, "ranks", &bad);
    if (bad)
        return -1;
    /* the ranks bin gives n (bounded before anything is copied); names must match it */
    if (o && o->type == MSGPACK_OBJECT_BIN) {
        if (o->via.bin.size % 4 || o->via.bin.size / 4 > EVENT_MAX_RANKS)
            return mp_fail(r, "'ranks' must be a bin of n*4 bytes, n <= %d", EVENT_MAX_RANKS);
        m->n = o->via.bin.size / 4;
    }
    if (mp_get_u32(r, "gen", 0, UINT32_MAX, &m->gen) ||
        mp_get_i32(r, "world", INT32_MIN, INT32_MAX, &m->world) ||
        mp_get_str(r, "change", m->change, sizeof m->change) ||
        mp_get_uint(r, "step", 0, UINT64_MAX, &m->step) ||
        mp_get_u32(r, "epoch", 0, UINT32_MAX, &m->epoch) ||
        mp_get_bool(r, "redone", &m->redone) ||
        mp_get_str(r, "reason", m->reason, sizeof m->reason) ||
        mp_dup_bin(r, "ranks", (size_t)m->n * 4, "n*4", (void **)&m->ranks))
        return -1;
    if (mp_get_strv(r, "names", m->n, SIZE_MAX, DDP_MAX_NAME, false, &m->names, &nnames)) {
        free(m->ranks); /* event_clear frees names by n: keep them paired */
        m->ranks = NULL;
        m->n = 0;
        return -1;
    }
    return 0;
}

static int d_body(const mp_reader_t *r, ddp_event_t *ev)
{
    switch (ev->topic) {
    case EV_METRIC: return d_metric(r, &ev->u.metric);
    case EV_PREDICTIONS: return d_predictions(r, &ev->u.predictions);
    case EV_PROGRESS: return d_progress(r, &ev->u.progress);
    case EV_LOG: {
        ev_log_t *m = &ev->u.log;
        return mp_get_str(r, "level", m->level, sizeof m->level) ||
               mp_get_str(r, "daemon", m->daemon, sizeof m->daemon) ||
               mp_get_i32(r, "rank", INT32_MIN, INT32_MAX, &m->rank) ||
               mp_get_str(r, "msg", m->msg, sizeof m->msg)
                   ? -1 : 0;
    }
    case EV_WORKER: {
        ev_worker_t *m = &ev->u.worker;
        return mp_get_i32(r, "rank", INT32_MIN, INT32_MAX, &m->rank) ||
               mp_get_str(r, "name", m->name, sizeof m->name) ||
               mp_get_str(r, "host", m->host, sizeof m->host) ||
               mp_get_str(r, "state", m->state, sizeof m->state) ||
               mp_get_double(r, "images_per_sec", &m->images_per_sec)
                   ? -1 : 0;
    }
    case EV_END:
        return mp_get_i32(r, "code", INT32_MIN, INT32_MAX, &ev->u.end.code) ||
               mp_get_str(r, "reason", ev->u.end.reason, sizeof ev->u.end.reason)
                   ? -1 : 0;
    case EV_FAILED: {
        ev_failed_t *m = &ev->u.failed;
        return mp_get_u32(r, "epoch", 0, UINT32_MAX, &m->epoch) ||
               mp_get_u8(r, "phase", 0, UINT8_MAX, &m->phase) ||
               mp_get_uint(r, "id", 0, UINT64_MAX, &m->id) ||
               mp_get_str(r, "path", m->path, sizeof m->path) ||
               mp_get_str(r, "reason", m->reason, sizeof m->reason)
                   ? -1 : 0;
    }
    case EV_MEMBERSHIP: return d_membership(r, &ev->u.membership);
    }
    return mp_fail(r, "unknown topic");
}

int event_decode_bytes(ev_topic_t topic, const void *data, size_t size, ddp_event_t *out,
                       char *err, size_t errlen)
{
    char scratch[8];
    if (!err || !errlen) {
        err = scratch;
        errlen = sizeof scratch;
    }
    memset(out, 0, sizeof *out);
    if (topic < EV_METRIC || topic > EV_TOPIC_LAST)
        return ev_bad(err, errlen, "event", "unknown topic %d", (int)topic);
    out->topic = topic;
    msgpack_unpacked u;
    mp_reader_t r = {.what = event_topic_name(topic), .err = err, .errlen = errlen};
    int rc = mp_parse(&u, data, size, err, errlen);
    uint64_t v;
    if (rc == 0) {
        r.map = &u.data;
        rc = mp_get_uint(&r, "v", 0, UINT64_MAX, &v);
    }
    if (rc == 0 && v != DDP_PROTO_VERSION)
        rc = mp_fail(&r, "protocol version %" PRIu64 ", want %d", v, DDP_PROTO_VERSION);
    if (rc == 0)
        rc = d_body(&r, out);
    msgpack_unpacked_destroy(&u);
    if (rc == 0)
        rc = event_validate(out, err, errlen);
    if (rc != 0)
        event_clear(out);
    return rc;
}

int event_decode(zmsg_t *zmsg, ddp_event_t *out, char *err, size_t errlen)
{
    char scratch[8];
    if (!err || !errlen) {
        err = scratch;
        errlen = sizeof scratch;
    }
    memset(out, 0, sizeof *out);
    size_t frames = zmsg ? zmsg_size(zmsg) : 0;
    if (frames != 2) {
        err_set(err, errlen, "event has %zu frames, want 2 (topic, msgpack map)", frames);
        return -1;
    }
    zframe_t *topic = zmsg_first(zmsg);
    zframe_t *body = zmsg_next(zmsg);
    int t = topic_from_frame(topic);
    if (!t) {
        err_set(err, errlen, "unknown event topic frame of %zu bytes", zframe_size(topic));
        return -1;
    }
    return event_decode_bytes((ev_topic_t)t, zframe_data(body), zframe_size(body), out, err,
                              errlen);
}

void event_clear(ddp_event_t *ev)
{
    if (!ev)
        return;
    if (ev->topic == EV_METRIC) {
        mp_strv_free(ev->u.metric.class_names, ev->u.metric.num_classes);
        free(ev->u.metric.cells);
        free(ev->u.metric.rank_images_per_sec);
        free(ev->u.metric.calib);
        free(ev->u.metric.auc);
        free(ev->u.metric.ap);
        free(ev->u.metric.curve_class);
        free(ev->u.metric.curve_pos);
        free(ev->u.metric.curve_neg);
        free(ev->u.metric.present);
    } else if (ev->topic == EV_PROGRESS) {
        free(ev->u.progress.rank_done);
    } else if (ev->topic == EV_PREDICTIONS) {
        ev_predictions_t *p = &ev->u.predictions;
        free(p->status);
        free(p->labels);
        free(p->topk);
        free(p->loss);
        free(p->probs);
        mp_strv_free(p->paths, p->n);
    } else if (ev->topic == EV_MEMBERSHIP) {
        free(ev->u.membership.ranks);
        mp_strv_free(ev->u.membership.names, ev->u.membership.names ? ev->u.membership.n : 0);
    }
    memset(ev, 0, sizeof *ev);
}
