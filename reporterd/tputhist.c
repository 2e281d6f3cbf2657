#include "reporterd/tputhist.h"

#include "proto/messages.h"
#include "reporterd/tput.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

struct tputhist {
    tputhist_point_t pts[TPUTHIST_MAX];
    size_t n;
    bool tail;            /* pts[n-1] is only the newest sample: the next replaces it */
    bool plans_fit;       /* each plan's first and last samples are kept */
    bool started;
    uint64_t seq;         /* progress events seen */
    uint64_t last_seq;    /* seq of the newest sample kept for good */
    uint64_t stride;      /* keep one event in stride (doubles at each merge) */
    double t0, plan_origin, last_elapsed;
};

tputhist_t *tputhist_new(void)
{
    tputhist_t *self = calloc(1, sizeof *self);
    if (self) {
        self->stride = 1;
        self->plans_fit = true;
    }
    return self;
}

void tputhist_destroy(tputhist_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    free(*self_p);
    *self_p = NULL;
}

size_t tputhist_size(const tputhist_t *self) { return self->n; }
const tputhist_point_t *tputhist_points(const tputhist_t *self) { return self->pts; }

static bool s_same_plan(const tputhist_point_t *a, const tputhist_point_t *b)
{
    return a->epoch == b->epoch && a->phase == b->phase;
}

/* Whether sample i survives a merge: every other one, always the first and
 * the last (the newest); plan_aware: also each plan's first and last. */
static bool s_keeps(const tputhist_point_t *pts, size_t n, size_t i, size_t plan_start,
                    bool plan_aware)
{
    if (i == 0 || i + 1 == n)
        return true;
    if (!plan_aware)
        return i % 2 == 0;
    bool last_of_plan = !s_same_plan(&pts[i], &pts[i + 1]);
    return i == plan_start || last_of_plan || (i - plan_start) % 2 == 0;
}

/* Keeps the samples s_keeps picks; how many are left. In place: sample i
 * moves to k <= i, and s_keeps only looks at i and i + 1. */
static size_t s_thin(tputhist_t *self, bool plan_aware, bool apply)
{
    size_t k = 0, start = 0;
    for (size_t i = 0; i < self->n; i++) {
        if (i > 0 && !s_same_plan(&self->pts[i - 1], &self->pts[i]))
            start = i;
        if (!s_keeps(self->pts, self->n, i, start, plan_aware))
            continue;
        if (apply)
            self->pts[k] = self->pts[i];
        k++;
    }
    if (apply)
        self->n = k;
    return k;
}

/* Full: halve, keeping plans' ends when that still frees a quarter. */
static void s_merge(tputhist_t *self)
{
    /* the plan-aware pass must see the original neighbours: count first */
    self->plans_fit = self->plans_fit && s_thin(self, true, false) <= TPUTHIST_MAX * 3 / 4;
    s_thin(self, self->plans_fit, true);
    self->stride *= 2;
    size_t perm = self->tail ? self->n - 1 : self->n;
    if (perm > 0)
        self->last_seq = self->pts[perm - 1].seq;
}

double tputhist_add(tputhist_t *self, const ev_progress_t *p, double now_s)
{
    tputhist_point_t pt = {.epoch = p->epoch, .phase = p->phase, .done = p->done, .seq = self->seq++};
    bool new_plan = self->n == 0 || !s_same_plan(&self->pts[self->n - 1], &pt);
    double elapsed = isfinite(p->elapsed_s) ? p->elapsed_s : -1; /* the JSON must stay numbers */
    /* a plan's clock that went back was restarted (reducerd restarts the
     * first epoch's when its ranks have all joined): a new origin, so time
     * still runs forward */
    if (new_plan || (elapsed >= 0 && elapsed < self->last_elapsed))
        self->plan_origin = elapsed >= 0 ? now_s - elapsed : now_s;
    self->last_elapsed = elapsed;
    /* reducerd's clock: the samples are as far apart as it sent them */
    double at = elapsed >= 0 ? self->plan_origin + elapsed : now_s;
    if (!self->started) {
        self->t0 = self->plan_origin; /* the job's t = 0: its first plan's arrival */
        self->started = true;
    }
    pt.t = at - self->t0;
    bool plan_end = new_plan && self->plans_fit; /* the tail is its plan's last sample */
    if (self->tail && !plan_end)
        self->n--; /* the newest replaces the newest: the running count loses nothing */
    bool keep = self->n == 0 || plan_end || pt.seq - self->last_seq >= self->stride;
    self->tail = false;
    if (self->n == TPUTHIST_MAX)
        s_merge(self);
    self->pts[self->n++] = pt;
    if (keep)
        self->last_seq = pt.seq;
    self->tail = !keep;
    return pt.t;
}

char *tputhist_json(const tputhist_t *self)
{
    /* a sample is at most ~70 bytes: [t (%.3f of a double), u32, "train", u64] */
    size_t cap = 128 + self->n * 96, len = 0;
    char *out = malloc(cap);
    if (!out)
        return NULL;
    len += (size_t)snprintf(out, cap, "{\"topic\":\"tput_history\",\"window_s\":%g,\"stride\":%llu,\"points\":[",
                            TPUT_WINDOW_S, (unsigned long long)self->stride);
    for (size_t i = 0; i < self->n && len < cap; i++) {
        const tputhist_point_t *q = &self->pts[i];
        len += (size_t)snprintf(out + len, cap - len, "%s[%.3f,%u,\"%s\",%llu]", i ? "," : "", q->t,
                                q->epoch, q->phase == DDP_PHASE_TRAIN ? "train" : "eval", (unsigned long long)q->done);
    }
    if (len + 3 > cap) { /* cannot happen with finite t; never send a cut document */
        free(out);
        return NULL;
    }
    snprintf(out + len, cap - len, "]}");
    return out;
}
