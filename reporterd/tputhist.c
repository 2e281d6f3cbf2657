#include "reporterd/tputhist.h"

#include "proto/messages.h"
#include "reporterd/tput.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

struct tputhist {
    tputhist_point_t pts[TPUTHIST_MAX];
    thinning_t th;
    bool started;
    double t0, plan_origin, last_elapsed;
};

tputhist_t *tputhist_new(void)
{
    tputhist_t *self = calloc(1, sizeof *self);
    if (self)
        thinning_init(&self->th, TPUTHIST_MAX);
    return self;
}

void tputhist_destroy(tputhist_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    free(*self_p);
    *self_p = NULL;
}

size_t tputhist_size(const tputhist_t *self) { return self->th.n; }
const tputhist_point_t *tputhist_points(const tputhist_t *self) { return self->pts; }

double tputhist_add(tputhist_t *self, const ev_progress_t *p, double now_s)
{
    bool new_plan;
    tputhist_point_t *pt =
        &self->pts[thinning_next(&self->th, self->pts, sizeof self->pts[0], p->epoch, p->phase, &new_plan)];
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
    pt->t = at - self->t0;
    pt->done = p->done;
    return pt->t;
}

char *tputhist_json(const tputhist_t *self)
{
    /* a sample is at most ~70 bytes: [t (%.3f of a double), u32, "train", u64] */
    size_t n = self->th.n, cap = 128 + n * 96, len = 0;
    char *out = malloc(cap);
    if (!out)
        return NULL;
    len += (size_t)snprintf(out, cap, "{\"topic\":\"tput_history\",\"window_s\":%g,\"stride\":%llu,\"points\":[",
                            TPUT_WINDOW_S, (unsigned long long)self->th.stride);
    for (size_t i = 0; i < n && len < cap; i++) {
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
