/* event_json — one event as one line of JSON for the tap's --json mirror.
 *
 * {"topic":"metric","v":1, <the msgpack keys>}: the same keys as the
 * msgpack map, bins become arrays of numbers (confusion becomes nested
 * rows), non-finite doubles become null (JSON has no NaN), strings are
 * escaped per RFC 8259 (bytes >= 0x80 pass through: names are UTF-8).
 */
#include "proto/event.h"

#include "proto/proto.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char *buf;
    size_t len, cap;
    bool oom;
} jbuf_t;

static void jb_reserve(jbuf_t *j, size_t more)
{
    if (j->oom || j->len + more + 1 <= j->cap)
        return;
    size_t cap = j->cap ? j->cap : 256;
    while (cap < j->len + more + 1)
        cap *= 2;
    char *p = realloc(j->buf, cap);
    if (!p) {
        j->oom = true;
        return;
    }
    j->buf = p;
    j->cap = cap;
}

static void jb_mem(jbuf_t *j, const char *s, size_t n)
{
    jb_reserve(j, n);
    if (j->oom)
        return;
    memcpy(j->buf + j->len, s, n);
    j->len += n;
    j->buf[j->len] = '\0';
}

static void jb_raw(jbuf_t *j, const char *s) { jb_mem(j, s, strlen(s)); }

static void jb_fmt(jbuf_t *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void jb_fmt(jbuf_t *j, const char *fmt, ...)
{
    char tmp[64];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0)
        jb_mem(j, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

static void jb_str(jbuf_t *j, const char *s)
{
    jb_raw(j, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': jb_raw(j, "\\\""); break;
        case '\\': jb_raw(j, "\\\\"); break;
        case '\n': jb_raw(j, "\\n"); break;
        case '\r': jb_raw(j, "\\r"); break;
        case '\t': jb_raw(j, "\\t"); break;
        case '\b': jb_raw(j, "\\b"); break;
        case '\f': jb_raw(j, "\\f"); break;
        default:
            if (*p < 0x20 || *p == 0x7f)
                jb_fmt(j, "\\u%04x", *p);
            else
                jb_mem(j, (const char *)p, 1);
        }
    }
    jb_raw(j, "\"");
}

/* ,"key": */
static void jb_key(jbuf_t *j, const char *key)
{
    jb_raw(j, ",");
    jb_str(j, key);
    jb_raw(j, ":");
}

static void jb_u64(jbuf_t *j, const char *key, uint64_t v) { jb_key(j, key); jb_fmt(j, "%" PRIu64, v); }
static void jb_i64(jbuf_t *j, const char *key, int64_t v) { jb_key(j, key); jb_fmt(j, "%" PRId64, v); }
static void jb_kstr(jbuf_t *j, const char *key, const char *s) { jb_key(j, key); jb_str(j, s); }

/* Shortest of %.Ng (N = digits-2 .. digits) that reads back to the same
 * value, so 0.1 prints as 0.1 and yet every value round-trips. */
static void jb_num(jbuf_t *j, double v, int digits)
{
    if (!isfinite(v)) {
        jb_raw(j, "null");
        return;
    }
    char tmp[40];
    for (int p = digits - 2; p <= digits; p++) {
        snprintf(tmp, sizeof tmp, "%.*g", p, v);
        double back = strtod(tmp, NULL);
        if (digits > 9 ? back == v : (float)back == (float)v)
            break;
    }
    jb_raw(j, tmp);
}

static void jb_dbl(jbuf_t *j, const char *key, double v)
{
    jb_key(j, key);
    jb_num(j, v, 17);
}

static void jb_strv(jbuf_t *j, const char *key, char *const *v, uint64_t n)
{
    jb_key(j, key);
    if (!v) {
        jb_raw(j, "null");
        return;
    }
    jb_raw(j, "[");
    for (uint64_t i = 0; i < n; i++) {
        if (i)
            jb_raw(j, ",");
        jb_str(j, v[i]);
    }
    jb_raw(j, "]");
}

/* The optional keys, present only when the msgpack map has them. */
static void j_metric_optional(jbuf_t *j, const ev_metric_t *m)
{
    if (m->nranks) {
        jb_key(j, "rank_images_per_sec");
        jb_raw(j, "[");
        for (uint32_t r = 0; r < m->nranks; r++) {
            if (r)
                jb_raw(j, ",");
            jb_num(j, m->rank_images_per_sec[r], 17);
        }
        jb_raw(j, "]");
    }
    if (m->rejected)
        jb_u64(j, "rejected", m->rejected);
    if (m->nonfinite_loss)
        jb_u64(j, "nonfinite_loss", m->nonfinite_loss);
    if (!m->has_decision)
        return;
    jb_u64(j, "decision", m->decision);
    jb_u64(j, "streak", m->streak);
    jb_u64(j, "epochs", m->epochs);
    jb_kstr(j, "decision_reason", m->decision_reason);
}

static void j_metric(jbuf_t *j, const ev_metric_t *m)
{
    jb_u64(j, "epoch", m->epoch);
    jb_u64(j, "phase", m->phase);
    jb_key(j, "final");
    jb_raw(j, m->final ? "true" : "false");
    jb_u64(j, "planned", m->planned);
    jb_u64(j, "samples", m->samples);
    jb_u64(j, "failed", m->failed);
    jb_u64(j, "correct_top1", m->correct_top1);
    jb_u64(j, "correct_top5", m->correct_top5);
    jb_u64(j, "duplicates", m->duplicates);
    jb_dbl(j, "loss_sum", m->loss_sum);
    jb_strv(j, "class_names", m->class_names, m->num_classes);
    jb_i64(j, "workers", m->workers);
    jb_dbl(j, "wall_s", m->wall_s);
    jb_dbl(j, "images_per_sec", m->images_per_sec);
    jb_dbl(j, "lr", m->lr);
    if (m->confusion) {
        jb_key(j, "confusion");
        jb_raw(j, "[");
        for (uint64_t t = 0; t < m->num_classes; t++) {
            jb_raw(j, t ? ",[" : "[");
            for (uint64_t p = 0; p < m->num_classes; p++)
                jb_fmt(j, p ? ",%" PRIu64 : "%" PRIu64, m->confusion[t * m->num_classes + p]);
            jb_raw(j, "]");
        }
        jb_raw(j, "]");
    }
    j_metric_optional(j, m);
}

static void j_i32s(jbuf_t *j, const char *key, const int32_t *v, uint64_t n)
{
    jb_key(j, key);
    jb_raw(j, "[");
    for (uint64_t i = 0; i < n; i++)
        jb_fmt(j, i ? ",%" PRId32 : "%" PRId32, v[i]);
    jb_raw(j, "]");
}

static void j_predictions(jbuf_t *j, const ev_predictions_t *m)
{
    jb_u64(j, "epoch", m->epoch);
    jb_u64(j, "phase", m->phase);
    jb_u64(j, "first", m->first);
    jb_u64(j, "n", m->n);
    jb_u64(j, "total", m->total);
    jb_u64(j, "k", m->k);
    jb_key(j, "status");
    jb_raw(j, "[");
    for (uint64_t i = 0; i < m->n; i++)
        jb_fmt(j, i ? ",%u" : "%u", m->status[i]);
    jb_raw(j, "]");
    j_i32s(j, "labels", m->labels, m->n);
    /* topk as one array of k ids per sample, as a user would index it. */
    jb_key(j, "topk");
    jb_raw(j, "[");
    for (uint64_t i = 0; i < m->n; i++) {
        jb_raw(j, i ? ",[" : "[");
        for (uint32_t c = 0; c < m->k; c++)
            jb_fmt(j, c ? ",%" PRId32 : "%" PRId32, m->topk[i * m->k + c]);
        jb_raw(j, "]");
    }
    jb_raw(j, "]");
    jb_key(j, "loss");
    jb_raw(j, "[");
    for (uint64_t i = 0; i < m->n; i++) {
        if (i)
            jb_raw(j, ",");
        jb_num(j, m->loss[i], 9); /* 9 digits round-trip a float32 */
    }
    jb_raw(j, "]");
    if (m->paths)
        jb_strv(j, "paths", m->paths, m->n);
}

static void j_body(jbuf_t *j, const ddp_event_t *ev)
{
    switch (ev->topic) {
    case EV_METRIC: j_metric(j, &ev->u.metric); break;
    case EV_PREDICTIONS: j_predictions(j, &ev->u.predictions); break;
    case EV_PROGRESS:
        jb_u64(j, "epoch", ev->u.progress.epoch);
        jb_u64(j, "phase", ev->u.progress.phase);
        jb_u64(j, "done", ev->u.progress.done);
        jb_u64(j, "total", ev->u.progress.total);
        jb_dbl(j, "images_per_sec", ev->u.progress.images_per_sec);
        jb_dbl(j, "eta_s", ev->u.progress.eta_s);
        jb_i64(j, "workers", ev->u.progress.workers);
        jb_dbl(j, "elapsed_s", ev->u.progress.elapsed_s);
        jb_u64(j, "failed", ev->u.progress.failed);
        jb_u64(j, "rejected", ev->u.progress.rejected);
        if (ev->u.progress.rank_done) {
            jb_key(j, "rank_done");
            jb_raw(j, "[");
            for (uint32_t r = 0; r < ev->u.progress.nranks; r++) {
                if (r)
                    jb_raw(j, ",");
                jb_fmt(j, "%" PRIu64, ev->u.progress.rank_done[r]);
            }
            jb_raw(j, "]");
        }
        break;
    case EV_LOG:
        jb_kstr(j, "level", ev->u.log.level);
        jb_kstr(j, "daemon", ev->u.log.daemon);
        jb_i64(j, "rank", ev->u.log.rank);
        jb_kstr(j, "msg", ev->u.log.msg);
        break;
    case EV_WORKER:
        jb_i64(j, "rank", ev->u.worker.rank);
        jb_kstr(j, "name", ev->u.worker.name);
        jb_kstr(j, "host", ev->u.worker.host);
        jb_kstr(j, "state", ev->u.worker.state);
        jb_dbl(j, "images_per_sec", ev->u.worker.images_per_sec);
        break;
    case EV_END:
        jb_i64(j, "code", ev->u.end.code);
        jb_kstr(j, "reason", ev->u.end.reason);
        break;
    case EV_FAILED:
        jb_u64(j, "epoch", ev->u.failed.epoch);
        jb_u64(j, "phase", ev->u.failed.phase);
        jb_u64(j, "id", ev->u.failed.id);
        jb_kstr(j, "path", ev->u.failed.path);
        jb_kstr(j, "reason", ev->u.failed.reason);
        break;
    }
}

char *event_to_json(const ddp_event_t *ev)
{
    char why[256];
    if (!ev || event_validate(ev, why, sizeof why) != 0)
        return NULL;
    jbuf_t j = {0};
    jb_raw(&j, "{\"topic\":");
    jb_str(&j, event_topic_name(ev->topic));
    jb_u64(&j, "v", DDP_PROTO_VERSION);
    j_body(&j, ev);
    jb_raw(&j, "}");
    if (j.oom) {
        free(j.buf);
        return NULL;
    }
    return j.buf;
}
