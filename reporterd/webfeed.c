#include "reporterd/webfeed.h"

#include "common/json.h"
#include "reporterd/tputhist.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Metric events kept for a late page (light copies, ~400 bytes each; 2
 * per training epoch): when full, every other epoch is dropped and from
 * then on only every `stride`-th epoch is kept, so the curves span the
 * whole job (webfeed.h). */
#define HISTORY_MAX 2000
/* Ranks whose last worker event is replayed. */
#define WORKERS_MAX 256

struct webfeed_client {
    char *buf;
    size_t off, len, cap; /* pending bytes: buf[off .. off+len) */
    bool dropped;
};

struct webfeed {
    pthread_mutex_t lock;
    pthread_cond_t cond; /* a frame was queued, or closing */
    bool closing;
    webfeed_client_t *clients[WEBFEED_MAX_CLIENTS];
    size_t nclients, dropped;
    /* the replay, as frames ("data: ...\n\n") */
    char *history[HISTORY_MAX]; /* light metrics (s_light), oldest first */
    uint32_t history_epoch[HISTORY_MAX];
    size_t nhistory;
    uint32_t first_epoch, epoch_stride; /* history keeps (epoch - first) % stride == 0 */
    bool newest_in_history;     /* history's last entry is last_metric's light copy */
    char *last_metric;          /* the newest metric, whole */
    tputhist_t *tput;           /* the whole job's progress samples (tputhist.h) */
    char *progress, *membership, *end;
    char *workers[WORKERS_MAX]; /* by rank */
};

webfeed_t *webfeed_new(void)
{
    webfeed_t *self = calloc(1, sizeof *self);
    if (!self)
        return NULL;
    pthread_condattr_t attr;
    bool ok = pthread_condattr_init(&attr) == 0;
    /* waits measured on the monotonic clock: a clock step must not stall keep-alives */
    ok = ok && pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) == 0 &&
         pthread_cond_init(&self->cond, &attr) == 0;
    pthread_condattr_destroy(&attr);
    if (!ok) {
        free(self);
        return NULL;
    }
    if (!(self->tput = tputhist_new()) || pthread_mutex_init(&self->lock, NULL) != 0) {
        tputhist_destroy(&self->tput);
        pthread_cond_destroy(&self->cond);
        free(self);
        return NULL;
    }
    self->epoch_stride = 1;
    return self;
}

static void s_client_free(webfeed_client_t *c)
{
    if (c) {
        free(c->buf);
        free(c);
    }
}

void webfeed_destroy(webfeed_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    webfeed_t *self = *self_p;
    for (size_t i = 0; i < self->nclients; i++)
        s_client_free(self->clients[i]);
    for (size_t i = 0; i < self->nhistory; i++)
        free(self->history[i]);
    for (size_t i = 0; i < WORKERS_MAX; i++)
        free(self->workers[i]);
    free(self->last_metric);
    free(self->progress);
    free(self->membership);
    free(self->end);
    tputhist_destroy(&self->tput);
    pthread_cond_destroy(&self->cond);
    pthread_mutex_destroy(&self->lock);
    free(self);
    *self_p = NULL;
}

/* "data: json\n\n" (json is one line: jansson escapes newlines). */
static char *s_frame(const char *json)
{
    size_t n = strlen(json);
    char *f = malloc(n + 9);
    if (f)
        snprintf(f, n + 9, "data: %s\n\n", json);
    return f;
}

/* Queues frame on c, or drops c when it would fall too far behind. */
static void s_push(webfeed_t *self, webfeed_client_t *c, const char *frame)
{
    size_t n = strlen(frame);
    if (c->dropped)
        return;
    if (c->len + n > WEBFEED_CLIENT_BUF) {
        c->dropped = true;
        self->dropped++;
        return;
    }
    if (c->off + c->len + n > c->cap) {
        if (c->off > 0)
            memmove(c->buf, c->buf + c->off, c->len);
        c->off = 0;
        if (c->len + n > c->cap) {
            size_t cap = c->cap ? c->cap : 65536;
            while (cap < c->len + n)
                cap *= 2;
            char *bigger = realloc(c->buf, cap);
            if (!bigger) {
                c->dropped = true; /* out of memory: the page reconnects later */
                self->dropped++;
                return;
            }
            c->buf = bigger;
            c->cap = cap;
        }
    }
    memcpy(c->buf + c->off + c->len, frame, n);
    c->len += n;
}

static void s_broadcast(webfeed_t *self, const char *frame)
{
    for (size_t i = 0; i < self->nclients; i++)
        s_push(self, self->clients[i], frame);
    pthread_cond_broadcast(&self->cond);
}

/* The metric's JSON without "confusion_cells", "class_names" and
 * "rank_images_per_sec" (the history only draws curves; the newest metric
 * goes whole). NULL when out of memory. */
static char *s_light(const char *json)
{
    json_t *doc = json_loads(json, 0, NULL);
    if (!doc)
        return NULL;
    json_object_del(doc, "confusion_cells");
    json_object_del(doc, "class_names");
    json_object_del(doc, "rank_images_per_sec");
    char *text = json_to_text(doc, JSON_STYLE_COMPACT);
    json_decref(doc);
    return text;
}

/* Replaces *slot with a copy of frame (or with nothing: out of memory). */
static void s_keep(char **slot, const char *frame)
{
    free(*slot);
    *slot = strdup(frame);
}

static bool s_epoch_kept(const webfeed_t *self, uint32_t epoch)
{
    return (uint32_t)(epoch - self->first_epoch) % self->epoch_stride == 0;
}

/* History full: keep every other epoch (the first always); if that frees
 * nothing (one epoch's metrics fill it: not a real job), the oldest goes. */
static void s_thin_history(webfeed_t *self)
{
    while (self->nhistory == HISTORY_MAX && self->epoch_stride <= UINT32_MAX / 2) {
        self->epoch_stride *= 2;
        size_t k = 0;
        for (size_t i = 0; i < self->nhistory; i++) {
            if (s_epoch_kept(self, self->history_epoch[i])) {
                self->history[k] = self->history[i];
                self->history_epoch[k++] = self->history_epoch[i];
            } else {
                free(self->history[i]);
            }
        }
        self->nhistory = k;
    }
    if (self->nhistory == HISTORY_MAX) {
        free(self->history[0]);
        memmove(self->history, self->history + 1, (HISTORY_MAX - 1) * sizeof(char *));
        memmove(self->history_epoch, self->history_epoch + 1, (HISTORY_MAX - 1) * sizeof(uint32_t));
        self->nhistory--;
    }
}

static void s_remember_metric(webfeed_t *self, const ev_metric_t *m, const char *json)
{
    if (!self->last_metric && self->nhistory == 0)
        self->first_epoch = m->epoch;
    self->newest_in_history = false;
    if (!s_epoch_kept(self, m->epoch))
        return;
    char *light = s_light(json), *lframe = light ? s_frame(light) : NULL;
    free(light);
    if (!lframe)
        return;
    if (self->nhistory == HISTORY_MAX)
        s_thin_history(self);
    if (!s_epoch_kept(self, m->epoch)) { /* its epoch was thinned out just now */
        free(lframe);
        return;
    }
    self->history_epoch[self->nhistory] = m->epoch;
    self->history[self->nhistory++] = lframe;
    self->newest_in_history = true;
}

/* Keeps what a late page replays; under the lock. */
static void s_remember(webfeed_t *self, const ddp_event_t *ev, const char *json, const char *frame)
{
    switch (ev->topic) {
    case EV_METRIC:
        s_remember_metric(self, &ev->u.metric, json);
        s_keep(&self->last_metric, frame);
        break;
    case EV_PROGRESS: s_keep(&self->progress, frame); break;
    case EV_MEMBERSHIP: s_keep(&self->membership, frame); break;
    case EV_END: s_keep(&self->end, frame); break;
    case EV_WORKER:
        if (ev->u.worker.rank >= 0 && ev->u.worker.rank < WORKERS_MAX)
            s_keep(&self->workers[ev->u.worker.rank], frame);
        break;
    default: break;
    }
}

/* Class names and a matrix of more than WEBFEED_MAX_CONFUSION classes
 * would make one event megabytes: the page gets it without the matrix. */
static char *s_json(const ddp_event_t *ev)
{
    if (ev->topic != EV_METRIC || ev->u.metric.num_classes <= WEBFEED_MAX_CONFUSION)
        return event_to_json(ev);
    ddp_event_t shallow = *ev;
    shallow.u.metric.cells = NULL;
    return event_to_json(&shallow);
}

/* json with ,"t_s":t before its closing brace (json is an object); NULL
 * when out of memory. Frees json. */
static char *s_with_t(char *json, double t)
{
    size_t n = json ? strlen(json) : 0;
    char *out = n > 1 ? malloc(n + 40) : NULL;
    if (out)
        snprintf(out, n + 40, "%.*s,\"t_s\":%.3f}", (int)(n - 1), json, t);
    free(json);
    return out;
}

int webfeed_on_event(webfeed_t *self, const ddp_event_t *ev, double now_s)
{
    if (ev->topic == EV_PREDICTIONS)
        return 0;
    char *json = s_json(ev), *frame = NULL;
    pthread_mutex_lock(&self->lock);
    /* the sample is kept even when memory runs out for the frame */
    if (ev->topic == EV_PROGRESS)
        json = s_with_t(json, tputhist_add(self->tput, &ev->u.progress, now_s));
    frame = json ? s_frame(json) : NULL;
    if (!frame) {
        pthread_mutex_unlock(&self->lock);
        free(json);
        return -1;
    }
    s_remember(self, ev, json, frame);
    s_broadcast(self, frame);
    pthread_mutex_unlock(&self->lock);
    free(json);
    free(frame);
    return 0;
}

/* The state so far, in the order a live page would have seen it. */
static void s_replay(webfeed_t *self, webfeed_client_t *c)
{
    s_push(self, c, ": ddpipe reporterd events (the same JSON as ddpipe tap --json)\n\n");
    if (self->membership)
        s_push(self, c, self->membership);
    for (size_t i = 0; i < WORKERS_MAX; i++)
        if (self->workers[i])
            s_push(self, c, self->workers[i]);
    /* the newest metric is sent whole instead of its light copy */
    size_t older = self->nhistory - (self->newest_in_history ? 1 : 0);
    for (size_t i = 0; i < older; i++)
        s_push(self, c, self->history[i]);
    if (self->last_metric)
        s_push(self, c, self->last_metric);
    /* the throughput curve from the job's start, then the newest progress */
    if (tputhist_size(self->tput) > 0) {
        char *json = tputhist_json(self->tput), *frame = json ? s_frame(json) : NULL;
        if (frame)
            s_push(self, c, frame);
        free(json);
        free(frame);
    }
    if (self->progress)
        s_push(self, c, self->progress);
    if (self->end)
        s_push(self, c, self->end);
}

webfeed_client_t *webfeed_attach(webfeed_t *self)
{
    webfeed_client_t *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    pthread_mutex_lock(&self->lock);
    if (self->closing || self->nclients == WEBFEED_MAX_CLIENTS) {
        pthread_mutex_unlock(&self->lock);
        free(c);
        return NULL;
    }
    s_replay(self, c);
    self->clients[self->nclients++] = c;
    pthread_mutex_unlock(&self->lock);
    return c;
}

/* now + ms on the monotonic clock (the condition variable's) */
static void s_deadline(struct timespec *until, int ms)
{
    clock_gettime(CLOCK_MONOTONIC, until);
    until->tv_sec += ms / 1000;
    until->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (until->tv_nsec >= 1000000000L) {
        until->tv_sec++;
        until->tv_nsec -= 1000000000L;
    }
}

ssize_t webfeed_read(webfeed_t *self, webfeed_client_t *c, char *buf, size_t max, int wait_ms)
{
    struct timespec until;
    s_deadline(&until, wait_ms);
    pthread_mutex_lock(&self->lock);
    while (!self->closing && !c->dropped && c->len == 0)
        if (pthread_cond_timedwait(&self->cond, &self->lock, &until) == ETIMEDOUT)
            break;
    ssize_t n = -1;
    /* closing: what is queued (the end event) still goes out, then the end */
    if (!c->dropped && (c->len > 0 || !self->closing)) {
        n = (ssize_t)(c->len < max ? c->len : max);
        memcpy(buf, c->buf + c->off, (size_t)n);
        c->off += (size_t)n;
        c->len -= (size_t)n;
        if (c->len == 0)
            c->off = 0;
    }
    pthread_mutex_unlock(&self->lock);
    return n;
}

void webfeed_detach(webfeed_t *self, webfeed_client_t *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&self->lock);
    for (size_t i = 0; i < self->nclients; i++)
        if (self->clients[i] == c) {
            self->clients[i] = self->clients[--self->nclients];
            break;
        }
    pthread_cond_broadcast(&self->cond); /* webfeed_wait_detached */
    pthread_mutex_unlock(&self->lock);
    s_client_free(c);
}

void webfeed_close(webfeed_t *self)
{
    pthread_mutex_lock(&self->lock);
    self->closing = true;
    pthread_cond_broadcast(&self->cond);
    pthread_mutex_unlock(&self->lock);
}

bool webfeed_wait_detached(webfeed_t *self, int wait_ms)
{
    struct timespec until;
    s_deadline(&until, wait_ms);
    pthread_mutex_lock(&self->lock);
    while (self->nclients > 0)
        if (pthread_cond_timedwait(&self->cond, &self->lock, &until) == ETIMEDOUT)
            break;
    bool none = self->nclients == 0;
    pthread_mutex_unlock(&self->lock);
    return none;
}

size_t webfeed_clients(webfeed_t *self)
{
    pthread_mutex_lock(&self->lock);
    size_t n = self->nclients;
    pthread_mutex_unlock(&self->lock);
    return n;
}

size_t webfeed_dropped(webfeed_t *self)
{
    pthread_mutex_lock(&self->lock);
    size_t n = self->dropped;
    pthread_mutex_unlock(&self->lock);
    return n;
}
