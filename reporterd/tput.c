#include "reporterd/tput.h"

#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    double t;                        /* s since the first point */
    uint32_t epoch;
    uint8_t phase;
    uint64_t done;
    uint32_t nranks;                 /* <= TPUT_MAX_RANKS kept */
    uint64_t rank_done[TPUT_MAX_RANKS];
} tpoint_t;

struct tput {
    tpoint_t *pts;
    size_t n, cap;
    uint64_t events;     /* progress events seen */
    uint64_t stride;     /* one event in stride is kept for good (doubles at each thinning) */
    bool last_is_spare;  /* pts[n-1] is only the newest, replaced by the next event of its plan */
    double t0;
    double plan_origin;  /* the current plan's arrival: first event's arrival - elapsed_s */
    uint32_t max_ranks; /* most ranks any point had */
};

tput_t *tput_new(void)
{
    tput_t *self = calloc(1, sizeof(tput_t));
    if (self)
        self->stride = 1;
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

size_t tput_points(const tput_t *self) { return self->n; }

/* Room for one more point. 0 or -1. */
static int s_grow(tput_t *self)
{
    if (self->n == self->cap) {
        size_t cap = self->cap ? self->cap * 2 : 256;
        tpoint_t *bigger = realloc(self->pts, cap * sizeof *bigger);
        if (!bigger)
            return -1;
        self->pts = bigger;
        self->cap = cap;
    }
    return 0;
}

static bool s_same_plan(const tpoint_t *a, const tpoint_t *b);

/* Halves the points when they reach TPUT_MAX_POINTS. The counts are running
 * totals, so the rate between two kept points is the exact average over the
 * ones dropped. The first and the newest point and each plan's first and
 * last are kept while they leave a quarter of the room free (every plan
 * keeps its rate); past that, plain halving. */
static void s_thin(tput_t *self)
{
    if (self->n < TPUT_MAX_POINTS)
        return;
    size_t n = self->n, edges = 0;
    for (size_t i = 1; i + 1 < n; i++)
        edges += !s_same_plan(&self->pts[i - 1], &self->pts[i]) ||
                 !s_same_plan(&self->pts[i], &self->pts[i + 1]);
    bool keep_edges = edges + n / 2 <= TPUT_MAX_POINTS * 3 / 4;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        bool edge = i > 0 && i + 1 < n &&
                    (!s_same_plan(&self->pts[i - 1], &self->pts[i]) ||
                     !s_same_plan(&self->pts[i], &self->pts[i + 1]));
        if (i % 2 == 0 || i + 1 == n || (keep_edges && edge))
            self->pts[k++] = self->pts[i];
    }
    self->n = k;
    self->stride *= 2;
    self->last_is_spare = false;
}

int tput_add(tput_t *self, const ev_progress_t *p, double now_s)
{
    tpoint_t key = {.epoch = p->epoch, .phase = p->phase};
    bool new_plan = self->n == 0 || !s_same_plan(&self->pts[self->n - 1], &key);
    uint64_t seq = self->events++;
    /* after a thinning only one event in stride stays; the newest always
     * shows, in the place of the previous newest of its plan */
    if (!new_plan && self->last_is_spare)
        self->n--;
    self->last_is_spare = !new_plan && seq % self->stride != 0;
    if (s_grow(self) != 0)
        return -1;
    if (new_plan)
        self->plan_origin = p->elapsed_s >= 0 ? now_s - p->elapsed_s : now_s;
    /* reducerd's clock: the points are as far apart as it sent them */
    double at = p->elapsed_s >= 0 ? self->plan_origin + p->elapsed_s : now_s;
    if (self->n == 0 && p->elapsed_s > 0 && p->elapsed_s <= now_s) {
        /* The plan's arrival is the curve's origin (nothing done by any
         * rank yet): a job shorter than one progress tick still has a rate,
         * however fast the machine. Only for the first plan: per-rank
         * counts run on over a job's later plans. */
        self->t0 = self->plan_origin;
        self->pts[self->n++] = (tpoint_t){.epoch = p->epoch, .phase = p->phase};
        if (s_grow(self) != 0)
            return -1;
    }
    if (self->n == 0)
        self->t0 = at;
    tpoint_t *pt = &self->pts[self->n++];
    memset(pt, 0, sizeof *pt);
    pt->t = at - self->t0;
    pt->epoch = p->epoch;
    pt->phase = p->phase;
    pt->done = p->done;
    pt->nranks = p->nranks < TPUT_MAX_RANKS ? p->nranks : TPUT_MAX_RANKS;
    if (p->rank_done)
        memcpy(pt->rank_done, p->rank_done, pt->nranks * sizeof(uint64_t));
    if (pt->nranks > self->max_ranks)
        self->max_ranks = pt->nranks;
    s_thin(self);
    return 0;
}

static bool s_same_plan(const tpoint_t *a, const tpoint_t *b)
{
    return a->epoch == b->epoch && a->phase == b->phase;
}

/* The window's start for point i: TPUT_WINDOW_S earlier, same plan. */
static size_t s_window_start(const tput_t *self, size_t i)
{
    size_t j = i;
    while (j > 0 && s_same_plan(&self->pts[j - 1], &self->pts[i]) &&
           self->pts[i].t - self->pts[j].t < TPUT_WINDOW_S)
        j--;
    return j;
}

size_t tput_series(const tput_t *self, int rank, double *x, double *y)
{
    size_t k = 0;
    for (size_t i = 1; i < self->n; i++) {
        size_t j = s_window_start(self, i);
        const tpoint_t *a = &self->pts[j], *b = &self->pts[i];
        double dt = b->t - a->t;
        if (j == i || dt <= 0)
            continue;
        uint64_t c0 = rank < 0 ? a->done : a->rank_done[rank];
        uint64_t c1 = rank < 0 ? b->done : b->rank_done[rank];
        double rate = c1 >= c0 ? (double)(c1 - c0) / dt : 0;
        if (k == 0) {
            /* the first window's rate from its start, so that even two
             * points (origin and end) draw a line */
            x[k] = a->t;
            y[k++] = rate;
        }
        x[k] = b->t;
        y[k++] = rate;
    }
    return k;
}

/* rank < 0: the whole job. */
static int s_series(const tput_t *self, plot_t *p, int rank, const char *name)
{
    double *x = malloc(self->n * sizeof(double)), *y = malloc(self->n * sizeof(double));
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
    if (self->n < 2)
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
