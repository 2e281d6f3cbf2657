#include "reporterd/promstate.h"

#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reporterd/textfmt.h"

#define RATE_WINDOW_S 2.0

typedef struct {
    bool have;
    uint32_t epoch;
    double loss, top1, top5; /* NaN when no sample had a result */
} phase_metric_t;

struct promstate {
    pthread_mutex_t lock;
    /* samples: finished plans' totals + the current plan's */
    bool have_plan;
    uint32_t epoch;
    uint8_t phase;
    uint64_t base_done, cur_done, base_failed, cur_failed;
    uint64_t planned;
    double ips, eta_s;
    int32_t workers_alive;
    uint64_t rejected_reducer, rejected_reporter;
    /* per rank: counters and a windowed rate */
    uint32_t nranks;
    uint64_t *rank_done;   /* nranks, monotone */
    uint64_t *rank_snap;   /* counts at snap_t */
    double *rank_ips;
    double snap_t;
    bool have_snap;
    phase_metric_t last[2];
    uint64_t events[EV_TOPIC_LAST + 1];
    bool finished;
    int32_t world_size;    /* training: the last membership generation's; -1 none */
    uint32_t generation;
};

promstate_t *promstate_new(void)
{
    promstate_t *self = calloc(1, sizeof *self);
    if (self && pthread_mutex_init(&self->lock, NULL) != 0) {
        free(self);
        return NULL;
    }
    if (self) {
        self->eta_s = -1;
        self->world_size = -1;
    }
    return self;
}

void promstate_destroy(promstate_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    promstate_t *self = *self_p;
    pthread_mutex_destroy(&self->lock);
    free(self->rank_done);
    free(self->rank_snap);
    free(self->rank_ips);
    free(self);
    *self_p = NULL;
}

/* A new (epoch, phase) moves the current plan's counts into the base. */
static void s_plan(promstate_t *self, uint32_t epoch, uint8_t phase)
{
    if (self->have_plan && self->epoch == epoch && self->phase == phase)
        return;
    self->base_done += self->cur_done;
    self->base_failed += self->cur_failed;
    self->cur_done = self->cur_failed = 0;
    self->have_plan = true;
    self->epoch = epoch;
    self->phase = phase;
}

static int s_grow_ranks(promstate_t *self, uint32_t n)
{
    if (n <= self->nranks)
        return 0;
    uint64_t *d = realloc(self->rank_done, n * sizeof *d);
    if (d)
        self->rank_done = d;
    uint64_t *s = realloc(self->rank_snap, n * sizeof *s);
    if (s)
        self->rank_snap = s;
    double *r = realloc(self->rank_ips, n * sizeof *r);
    if (r)
        self->rank_ips = r;
    if (!d || !s || !r)
        return -1; /* keeps the old size; arrays at least that long */
    for (uint32_t i = self->nranks; i < n; i++) {
        d[i] = s[i] = 0;
        r[i] = 0;
    }
    self->nranks = n;
    return 0;
}

static void s_ranks(promstate_t *self, const ev_progress_t *p, double now_s)
{
    if (!p->rank_done || s_grow_ranks(self, p->nranks) != 0)
        return;
    for (uint32_t r = 0; r < p->nranks; r++)
        if (p->rank_done[r] > self->rank_done[r])
            self->rank_done[r] = p->rank_done[r];
    if (!self->have_snap) {
        memcpy(self->rank_snap, self->rank_done, self->nranks * sizeof(uint64_t));
        self->snap_t = now_s;
        self->have_snap = true;
        return;
    }
    double dt = now_s - self->snap_t;
    if (dt < RATE_WINDOW_S)
        return;
    for (uint32_t r = 0; r < self->nranks; r++) {
        self->rank_ips[r] = (double)(self->rank_done[r] - self->rank_snap[r]) / dt;
        self->rank_snap[r] = self->rank_done[r];
    }
    self->snap_t = now_s;
}

static void s_progress(promstate_t *self, const ev_progress_t *p, double now_s)
{
    s_plan(self, p->epoch, p->phase);
    if (p->done > self->cur_done)
        self->cur_done = p->done;
    if (p->failed > self->cur_failed)
        self->cur_failed = p->failed;
    self->planned = p->total;
    self->ips = p->images_per_sec;
    self->eta_s = p->eta_s;
    self->workers_alive = p->workers;
    if (p->rejected > self->rejected_reducer)
        self->rejected_reducer = p->rejected;
    s_ranks(self, p, now_s);
}

static void s_metric(promstate_t *self, const ev_metric_t *m)
{
    s_plan(self, m->epoch, m->phase);
    uint64_t done = m->samples + m->failed;
    if (done > self->cur_done)
        self->cur_done = done;
    if (m->failed > self->cur_failed)
        self->cur_failed = m->failed;
    self->planned = m->planned;
    if (m->images_per_sec > 0)
        self->ips = m->images_per_sec;
    phase_metric_t *pm = &self->last[m->phase ? 1 : 0];
    double n = (double)m->samples;
    pm->have = true;
    pm->epoch = m->epoch;
    pm->loss = m->samples ? m->loss_sum / n : NAN;
    pm->top1 = m->samples ? (double)m->correct_top1 / n : NAN;
    pm->top5 = m->samples ? (double)m->correct_top5 / n : NAN;
}

void promstate_on_event(promstate_t *self, const ddp_event_t *ev, double now_s)
{
    pthread_mutex_lock(&self->lock);
    if (ev->topic >= EV_METRIC && ev->topic <= EV_TOPIC_LAST)
        self->events[ev->topic]++;
    if (ev->topic == EV_PROGRESS)
        s_progress(self, &ev->u.progress, now_s);
    else if (ev->topic == EV_METRIC)
        s_metric(self, &ev->u.metric);
    else if (ev->topic == EV_END)
        self->finished = true;
    else if (ev->topic == EV_MEMBERSHIP) {
        self->world_size = ev->u.membership.world;
        self->generation = ev->u.membership.gen;
    }
    pthread_mutex_unlock(&self->lock);
}

void promstate_add_rejected(promstate_t *self, uint64_t n)
{
    pthread_mutex_lock(&self->lock);
    self->rejected_reporter += n;
    pthread_mutex_unlock(&self->lock);
}

/* ---- rendering ---- */

typedef struct {
    char *buf;
    size_t len, cap;
    bool oom;
} out_t;

static void s_put(out_t *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void s_put(out_t *o, const char *fmt, ...)
{
    if (o->oom)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(o->buf ? o->buf + o->len : NULL, o->buf ? o->cap - o->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            o->oom = true;
            return;
        }
        if (o->buf && o->len + (size_t)n < o->cap) {
            o->len += (size_t)n;
            return;
        }
        size_t cap = (o->cap ? o->cap * 2 : 4096) + (size_t)n;
        char *bigger = realloc(o->buf, cap);
        if (!bigger) {
            o->oom = true;
            return;
        }
        o->buf = bigger;
        o->cap = cap;
    }
}

static void s_family(out_t *o, const char *name, const char *type, const char *help)
{
    s_put(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* Prometheus numbers: NaN and +-Inf spelled out, others in the shortest
 * text that reads back exactly. */
static const char *s_num(double v, char buf[TEXTFMT_NUM_LEN])
{
    if (isnan(v))
        return "NaN";
    if (isinf(v))
        return v > 0 ? "+Inf" : "-Inf";
    return textfmt_num(v, buf);
}

static void s_render_counts(const promstate_t *s, out_t *o)
{
    s_family(o, "ddpipe_samples_processed_total", "counter",
             "Samples accounted for (a result or a load failure), all epochs and phases.");
    s_put(o, "ddpipe_samples_processed_total %" PRIu64 "\n", s->base_done + s->cur_done);
    s_family(o, "ddpipe_failed_images_total", "counter",
             "Samples that could not be loaded (counted, never silently dropped).");
    s_put(o, "ddpipe_failed_images_total %" PRIu64 "\n", s->base_failed + s->cur_failed);
    s_family(o, "ddpipe_rejected_messages_total", "counter",
             "Malformed protocol messages rejected, by daemon.");
    s_put(o, "ddpipe_rejected_messages_total{daemon=\"reducerd\"} %" PRIu64 "\n",
          s->rejected_reducer);
    s_put(o, "ddpipe_rejected_messages_total{daemon=\"reporterd\"} %" PRIu64 "\n",
          s->rejected_reporter);
    s_family(o, "ddpipe_events_total", "counter", "Events reporterd received, by topic.");
    for (int t = EV_METRIC; t <= EV_TOPIC_LAST; t++)
        s_put(o, "ddpipe_events_total{topic=\"%s\"} %" PRIu64 "\n",
              event_topic_name((ev_topic_t)t), s->events[t]);
}

static void s_render_workers(const promstate_t *s, out_t *o)
{
    char nb[TEXTFMT_NUM_LEN];
    s_family(o, "ddpipe_workers_alive", "gauge", "gpud ranks alive.");
    s_put(o, "ddpipe_workers_alive %" PRId32 "\n", s->workers_alive);
    s_family(o, "ddpipe_worker_samples_total", "counter",
             "Samples with a result computed by each rank.");
    for (uint32_t r = 0; r < s->nranks; r++)
        s_put(o, "ddpipe_worker_samples_total{rank=\"%u\"} %" PRIu64 "\n", r, s->rank_done[r]);
    s_family(o, "ddpipe_worker_images_per_second", "gauge",
             "Each rank's images per second over the last two seconds or more.");
    for (uint32_t r = 0; r < s->nranks; r++)
        s_put(o, "ddpipe_worker_images_per_second{rank=\"%u\"} %s\n", r, s_num(s->rank_ips[r], nb));
}

/* Training only (an eval job has no membership): the live world size. */
static void s_render_membership(const promstate_t *s, out_t *o)
{
    if (s->world_size < 0)
        return;
    s_family(o, "ddpipe_world_size", "gauge",
             "Ranks of the training job's current membership generation (docs/ELASTIC.md).");
    s_put(o, "ddpipe_world_size %" PRId32 "\n", s->world_size);
    s_family(o, "ddpipe_membership_generation", "gauge",
             "The training job's membership generation (0 as formed, +1 per change).");
    s_put(o, "ddpipe_membership_generation %u\n", s->generation);
}

static void s_render_epoch(const promstate_t *s, out_t *o)
{
    char nb[TEXTFMT_NUM_LEN];
    s_family(o, "ddpipe_images_per_second", "gauge",
             "Images per second of the current epoch so far (all workers).");
    s_put(o, "ddpipe_images_per_second %s\n", s_num(s->ips, nb));
    s_family(o, "ddpipe_epoch", "gauge", "Epoch in progress (0-based).");
    s_put(o, "ddpipe_epoch %u\n", s->epoch);
    s_family(o, "ddpipe_phase_info", "gauge", "Phase in progress (label), value 1.");
    s_put(o, "ddpipe_phase_info{phase=\"%s\"} 1\n", s->phase ? "train" : "eval");
    s_family(o, "ddpipe_epoch_samples_planned", "gauge", "Samples in the current epoch's plan.");
    s_put(o, "ddpipe_epoch_samples_planned %" PRIu64 "\n", s->planned);
    s_family(o, "ddpipe_epoch_progress_ratio", "gauge", "Fraction of the current epoch done.");
    s_put(o, "ddpipe_epoch_progress_ratio %s\n",
          s_num(s->planned ? (double)s->cur_done / (double)s->planned : 0, nb));
    s_family(o, "ddpipe_eta_seconds", "gauge", "Estimated seconds left in the epoch (-1: unknown).");
    s_put(o, "ddpipe_eta_seconds %s\n", s_num(s->eta_s, nb));
}

static void s_render_quality(const promstate_t *s, out_t *o)
{
    static const char *const phases[2] = {"eval", "train"};
    char nb[TEXTFMT_NUM_LEN];
    s_family(o, "ddpipe_loss", "gauge", "Mean cross-entropy of the last finished epoch, by phase.");
    for (int p = 0; p < 2; p++)
        if (s->last[p].have)
            s_put(o, "ddpipe_loss{phase=\"%s\"} %s\n", phases[p], s_num(s->last[p].loss, nb));
    s_family(o, "ddpipe_accuracy", "gauge",
             "Top-k accuracy of the last finished epoch, by phase and k.");
    for (int p = 0; p < 2; p++) {
        if (!s->last[p].have)
            continue;
        s_put(o, "ddpipe_accuracy{phase=\"%s\",k=\"1\"} %s\n", phases[p], s_num(s->last[p].top1, nb));
        s_put(o, "ddpipe_accuracy{phase=\"%s\",k=\"5\"} %s\n", phases[p], s_num(s->last[p].top5, nb));
    }
    s_family(o, "ddpipe_job_finished", "gauge", "1 once the job ended (successfully or not).");
    s_put(o, "ddpipe_job_finished %d\n", s->finished ? 1 : 0);
}

char *promstate_render(promstate_t *self)
{
    out_t o = {0};
    pthread_mutex_lock(&self->lock);
    s_render_counts(self, &o);
    s_render_workers(self, &o);
    s_render_membership(self, &o);
    s_render_epoch(self, &o);
    s_render_quality(self, &o);
    pthread_mutex_unlock(&self->lock);
    if (o.oom) {
        free(o.buf);
        return NULL;
    }
    return o.buf;
}
