#include "reporterd/tput.h"

#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    thin_sample_t s;                 /* t: s since the first point */
    uint32_t nranks;                 /* <= TPUT_MAX_RANKS kept */
    uint64_t rank_done[TPUT_MAX_RANKS];
} tpoint_t;

struct tput {
    tpoint_t *pts;
    size_t cap;
    thinning_t th;      /* which points stay, and how many (th.n) */
    double t0;
    double plan_origin;  /* the current plan's arrival: first event's arrival - elapsed_s */
    uint32_t max_ranks; /* most ranks any point had */
};

tput_t *tput_new(void)
{
    tput_t *self = calloc(1, sizeof(tput_t));
    if (self)
        thinning_init(&self->th, TPUT_MAX_POINTS);
    return self;
}

void tput_destroy(tput_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    free((*self_p)->pts);
    free(*self_p);
    *self_p = NULL;
}

size_t tput_points(const tput_t *self) { return self->th.n; }

/* Room for one more point (thinning keeps at most TPUT_MAX_POINTS). 0 or -1. */
static int s_grow(tput_t *self)
{
    if (self->th.n == self->cap) {
        size_t cap = self->cap ? self->cap * 2 : 256;
        tpoint_t *bigger = realloc(self->pts, cap * sizeof *bigger);
        if (!bigger)
            return -1;
        self->pts = bigger;
        self->cap = cap;
    }
    return 0;
}

/* The next point's place (zeroed but for its plan); *new_plan as thinning_next says. */
static tpoint_t *s_next(tput_t *self, const ev_progress_t *p, bool *new_plan)
{
    if (s_grow(self) != 0)
        return NULL;
    return &self->pts[thinning_next(&self->th, self->pts, sizeof *self->pts, p->epoch, p->phase,
                                    new_plan)];
}

int tput_add(tput_t *self, const ev_progress_t *p, double now_s)
{
    bool first = self->th.n == 0, new_plan;
    bool origin = first && p->elapsed_s > 0 && p->elapsed_s <= now_s;
    double arrival = p->elapsed_s >= 0 ? now_s - p->elapsed_s : now_s;
    if (origin) {
        /* The plan's arrival is the curve's origin (nothing done by any
         * rank yet): a job shorter than one progress tick still has a rate,
         * however fast the machine. Only for the first plan: per-rank
         * counts run on over a job's later plans. */
        if (!s_next(self, p, &new_plan))
            return -1;
        self->t0 = arrival;
    }
    tpoint_t *pt = s_next(self, p, &new_plan);
    if (!pt)
        return -1;
    if (first || new_plan)
        self->plan_origin = arrival;
    /* reducerd's clock: the points are as far apart as it sent them */
    double at = p->elapsed_s >= 0 ? self->plan_origin + p->elapsed_s : now_s;
    if (first && !origin)
        self->t0 = at;
    pt->s.t = at - self->t0;
    pt->s.done = p->done;
    pt->nranks = p->nranks < TPUT_MAX_RANKS ? p->nranks : TPUT_MAX_RANKS;
    if (p->rank_done)
        memcpy(pt->rank_done, p->rank_done, pt->nranks * sizeof(uint64_t));
    if (pt->nranks > self->max_ranks)
        self->max_ranks = pt->nranks;
    return 0;
}

static bool s_same_plan(const tpoint_t *a, const tpoint_t *b)
{
    return a->s.epoch == b->s.epoch && a->s.phase == b->s.phase;
}

/* The window's start for point i: TPUT_WINDOW_S earlier, same plan. */
static size_t s_window_start(const tput_t *self, size_t i)
{
    size_t j = i;
    while (j > 0 && s_same_plan(&self->pts[j - 1], &self->pts[i]) &&
           self->pts[i].s.t - self->pts[j].s.t < TPUT_WINDOW_S)
        j--;
    return j;
}

size_t tput_series(const tput_t *self, int rank, double *x, double *y)
{
    size_t k = 0;
    for (size_t i = 1; i < self->th.n; i++) {
        size_t j = s_window_start(self, i);
        const tpoint_t *a = &self->pts[j], *b = &self->pts[i];
        double dt = b->s.t - a->s.t;
        if (j == i || dt <= 0)
            continue;
        uint64_t c0 = rank < 0 ? a->s.done : a->rank_done[rank];
        uint64_t c1 = rank < 0 ? b->s.done : b->rank_done[rank];
        double rate = c1 >= c0 ? (double)(c1 - c0) / dt : 0;
        if (k == 0) {
            /* the first window's rate from its start, so that even two
             * points (origin and end) draw a line */
            x[k] = a->s.t;
            y[k++] = rate;
        }
        x[k] = b->s.t;
        y[k++] = rate;
    }
    return k;
}

/* rank < 0: the whole job. */
static int s_series(const tput_t *self, plot_t *p, int rank, const char *name)
{
    double *x = malloc(self->th.n * sizeof(double)), *y = malloc(self->th.n * sizeof(double));
    int rc = -1;
    if (x && y) {
        size_t k = tput_series(self, rank, x, y);
        rc = k ? plot_add_series(p, name, x, y, k) : 0;
    }
    free(x);
    free(y);
    return rc;
}

int tput_plot(const tput_t *self, plot_t *p)
{
    if (self->th.n < 2)
        return 0;
    if (s_series(self, p, -1, "all workers") != 0)
        return -1;
    /* one rank is the same line as "all": only draw ranks when there are several */
    for (uint32_t r = 0; self->max_ranks > 1 && r < self->max_ranks; r++) {
        char name[32];
        snprintf(name, sizeof name, "rank %u", r);
        if (s_series(self, p, (int)r, name) != 0)
            return -1;
    }
    return 0;
}
