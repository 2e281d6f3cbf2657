/* event_json — one event as one line of JSON for the tap's --json mirror.
 *
 * {"topic":"metric","v":1, <the msgpack keys>}: the same keys as the
 * msgpack map, bins become arrays of numbers (confusion_cells becomes
 * [truth, pred, count] triples), `phase` becomes its name ("eval" or "train", ddp_phase_t; as in
 * summary.json), non-finite doubles become null (JSON has no NaN), strings are
 * UTF-8 (bytes that are not become U+FFFD). Built with jansson, written by
 * common/json.h in its compact style.
 */
#include "proto/event.h"

#include "common/json.h"
#include "proto/messages.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

/* An object being filled; one failed insertion (out of memory) spoils it. */
typedef struct {
    json_t *json;
    bool bad;
} obj_t;

static void s_put(obj_t *o, const char *key, json_t *value)
{
    if (json_object_set_new(o->json, key, value) != 0)
        o->bad = true;
}

static void s_uint(obj_t *o, const char *key, uint64_t v) { s_put(o, key, json_integer((json_int_t)v)); }
static void s_int(obj_t *o, const char *key, int64_t v) { s_put(o, key, json_integer(v)); }
static void s_num(obj_t *o, const char *key, double v) { s_put(o, key, json_number_or_null(v)); }
static void s_str(obj_t *o, const char *key, const char *s) { s_put(o, key, json_utf8_or_null(s)); }
/* event_validate let only DDP_PHASE_EVAL and DDP_PHASE_TRAIN through */
static void s_phase(obj_t *o, uint8_t phase)
{
    s_put(o, "phase", json_string(phase == DDP_PHASE_TRAIN ? "train" : "eval"));
}

/* Appends v to array a; NULL (and a freed) when either is missing, so a
 * failure anywhere in a loop ends as a NULL array that s_put reports. */
static json_t *s_append(json_t *a, json_t *v)
{
    if (json_array_append_new(a, v) == 0)
        return a;
    json_decref(a);
    return NULL;
}

static json_t *s_uints(const uint64_t *v, uint64_t n)
{
    json_t *a = json_array();
    for (uint64_t i = 0; i < n; i++)
        a = s_append(a, json_integer((json_int_t)v[i]));
    return a;
}

static json_t *s_ints(const int32_t *v, uint64_t n)
{
    json_t *a = json_array();
    for (uint64_t i = 0; i < n; i++)
        a = s_append(a, json_integer(v[i]));
    return a;
}

/* names or paths; null when the event has none */
static json_t *s_strings(char *const *v, uint64_t n)
{
    if (!v)
        return json_null();
    json_t *a = json_array();
    for (uint64_t i = 0; i < n; i++)
        a = s_append(a, json_utf8_or_null(v[i]));
    return a;
}

/* A float32 loss as the double its shortest float text reads as (7 to 9
 * digits), so that 0.1f prints "0.1", not "0.10000000149011612"; null when
 * it is not finite. */
static json_t *s_float(float f)
{
    if (!isfinite(f))
        return json_null();
    char text[32];
    for (int digits = 7; digits <= 9; digits++) {
        snprintf(text, sizeof text, "%.*g", digits, (double)f);
        if ((float)strtod(text, NULL) == f)
            break;
    }
    return json_real(strtod(text, NULL));
}

/* The optional keys, present only when the msgpack map has them. */
static void s_metric_optional(obj_t *o, const ev_metric_t *m)
{
    if (m->nranks) {
        json_t *a = json_array();
        for (uint32_t r = 0; r < m->nranks; r++)
            a = s_append(a, json_number_or_null(m->rank_images_per_sec[r]));
        s_put(o, "rank_images_per_sec", a);
    }
    if (m->rejected)
        s_uint(o, "rejected", m->rejected);
    if (m->nonfinite_loss)
        s_uint(o, "nonfinite_loss", m->nonfinite_loss);
    if (m->first_result_s > 0)
        s_num(o, "first_result_s", m->first_result_s);
    if (m->steady_images_per_sec > 0)
        s_num(o, "steady_images_per_sec", m->steady_images_per_sec);
    if (m->loss_scale > 0) {
        s_num(o, "loss_scale", m->loss_scale);
        s_uint(o, "skipped_steps", m->skipped_steps);
    }
    if (m->present) {
        json_t *a = json_array();
        for (uint32_t i = 0; i < m->npresent; i++)
            a = s_append(a, json_integer(m->present[i]));
        s_put(o, "present", a);
    }
    if (!m->has_decision)
        return;
    s_uint(o, "decision", m->decision);
    s_uint(o, "streak", m->streak);
    s_uint(o, "epochs", m->epochs);
    s_str(o, "decision_reason", m->decision_reason);
}

static void s_metric(obj_t *o, const ev_metric_t *m)
{
    s_uint(o, "epoch", m->epoch);
    s_phase(o, m->phase);
    s_put(o, "final", json_boolean(m->final));
    s_uint(o, "planned", m->planned);
    s_uint(o, "samples", m->samples);
    s_uint(o, "failed", m->failed);
    s_uint(o, "correct_top1", m->correct_top1);
    s_uint(o, "correct_top5", m->correct_top5);
    s_uint(o, "duplicates", m->duplicates);
    s_num(o, "loss_sum", m->loss_sum);
    s_put(o, "class_names", s_strings(m->class_names, m->num_classes));
    s_int(o, "workers", m->workers);
    s_num(o, "wall_s", m->wall_s);
    s_num(o, "images_per_sec", m->images_per_sec);
    s_num(o, "lr", m->lr);
    if (m->cells) {
        json_t *cells = json_array();
        for (uint64_t i = 0; i < m->ncells; i++) {
            uint64_t cell[3] = {m->cells[i].truth, m->cells[i].pred, m->cells[i].count};
            cells = s_append(cells, s_uints(cell, 3));
        }
        s_put(o, "confusion_cells", cells);
    }
    s_metric_optional(o, m);
}

static void s_predictions(obj_t *o, const ev_predictions_t *m)
{
    s_uint(o, "epoch", m->epoch);
    s_phase(o, m->phase);
    s_uint(o, "first", m->first);
    s_uint(o, "n", m->n);
    s_uint(o, "total", m->total);
    s_uint(o, "k", m->k);
    json_t *status = json_array(), *topk = json_array(), *loss = json_array();
    for (uint64_t i = 0; i < m->n; i++) {
        status = s_append(status, json_integer(m->status[i]));
        /* topk as one array of k ids per sample, as a user would index it */
        topk = s_append(topk, s_ints(m->topk + i * m->k, m->k));
        loss = s_append(loss, s_float(m->loss[i]));
    }
    s_put(o, "status", status);
    s_put(o, "labels", s_ints(m->labels, m->n));
    s_put(o, "topk", topk);
    s_put(o, "loss", loss);
    if (m->paths)
        s_put(o, "paths", s_strings(m->paths, m->n));
}

static void s_progress(obj_t *o, const ev_progress_t *p)
{
    s_uint(o, "epoch", p->epoch);
    s_phase(o, p->phase);
    s_uint(o, "done", p->done);
    s_uint(o, "total", p->total);
    s_num(o, "images_per_sec", p->images_per_sec);
    s_num(o, "eta_s", p->eta_s);
    s_int(o, "workers", p->workers);
    s_num(o, "elapsed_s", p->elapsed_s);
    s_uint(o, "failed", p->failed);
    s_uint(o, "rejected", p->rejected);
    if (p->rank_done)
        s_put(o, "rank_done", s_uints(p->rank_done, p->nranks));
}

static void s_body(obj_t *o, const ddp_event_t *ev)
{
    switch (ev->topic) {
    case EV_METRIC: s_metric(o, &ev->u.metric); break;
    case EV_PREDICTIONS: s_predictions(o, &ev->u.predictions); break;
    case EV_PROGRESS: s_progress(o, &ev->u.progress); break;
    case EV_LOG:
        s_str(o, "level", ev->u.log.level);
        s_str(o, "daemon", ev->u.log.daemon);
        s_int(o, "rank", ev->u.log.rank);
        s_str(o, "msg", ev->u.log.msg);
        break;
    case EV_WORKER:
        s_int(o, "rank", ev->u.worker.rank);
        s_str(o, "name", ev->u.worker.name);
        s_str(o, "host", ev->u.worker.host);
        s_str(o, "state", ev->u.worker.state);
        s_num(o, "images_per_sec", ev->u.worker.images_per_sec);
        break;
    case EV_END:
        s_int(o, "code", ev->u.end.code);
        s_str(o, "reason", ev->u.end.reason);
        break;
    case EV_MEMBERSHIP: {
        const ev_membership_t *m = &ev->u.membership;
        s_uint(o, "gen", m->gen);
        s_int(o, "world", m->world);
        s_str(o, "change", m->change);
        s_put(o, "ranks", s_ints(m->ranks, m->n));
        s_put(o, "names", s_strings(m->names, m->n));
        s_uint(o, "step", m->step);
        s_uint(o, "epoch", m->epoch);
        s_put(o, "redone", json_boolean(m->redone));
        s_str(o, "reason", m->reason);
        break;
    }
    case EV_FAILED:
        s_uint(o, "epoch", ev->u.failed.epoch);
        s_phase(o, ev->u.failed.phase);
        s_uint(o, "id", ev->u.failed.id);
        s_str(o, "path", ev->u.failed.path);
        s_str(o, "reason", ev->u.failed.reason);
        break;
    }
}

char *event_to_json(const ddp_event_t *ev)
{
    char err[256];
    if (!ev || event_validate(ev, err, sizeof err) != 0)
        return NULL;
    obj_t o = {.json = json_object()};
    s_str(&o, "topic", event_topic_name(ev->topic));
    s_uint(&o, "v", DDP_PROTO_VERSION);
    s_body(&o, ev);
    char *text = o.bad ? NULL : json_to_text(o.json, JSON_STYLE_COMPACT);
    json_decref(o.json);
    return text;
}
