#include "reporterd/thinning.h"

#include <string.h>

static thin_sample_t *s_at(void *pts, size_t size, size_t i)
{
    return (thin_sample_t *)((char *)pts + i * size);
}

static bool s_same_plan(const thin_sample_t *a, const thin_sample_t *b)
{
    return a->epoch == b->epoch && a->phase == b->phase;
}

void thinning_init(thinning_t *th, size_t max)
{
    *th = (thinning_t){.max = max, .plans_fit = true, .stride = 1};
}

/* Whether sample i survives a halving: every other one, always the first
 * and the last (the newest); plan_aware: also each plan's first and last. */
static bool s_keeps(void *pts, size_t size, size_t n, size_t i, size_t plan_start,
                    bool plan_aware)
{
    if (i == 0 || i + 1 == n)
        return true;
    if (!plan_aware)
        return i % 2 == 0;
    bool last_of_plan = !s_same_plan(s_at(pts, size, i), s_at(pts, size, i + 1));
    return i == plan_start || last_of_plan || (i - plan_start) % 2 == 0;
}

/* Keeps the samples s_keeps picks; how many are left. In place: sample i
 * moves to k <= i, and s_keeps only looks at i and i + 1. */
static size_t s_thin(thinning_t *th, void *pts, size_t size, bool plan_aware, bool apply)
{
    size_t k = 0, start = 0;
    for (size_t i = 0; i < th->n; i++) {
        if (i > 0 && !s_same_plan(s_at(pts, size, i - 1), s_at(pts, size, i)))
            start = i;
        if (!s_keeps(pts, size, th->n, i, start, plan_aware))
            continue;
        if (apply && k != i)
            memcpy(s_at(pts, size, k), s_at(pts, size, i), size);
        k++;
    }
    if (apply)
        th->n = k;
    return k;
}

/* Full: halve, keeping plans' ends when that still frees a quarter. */
static void s_halve(thinning_t *th, void *pts, size_t size)
{
    /* the plan-aware pass must see the original neighbours: count first */
    th->plans_fit = th->plans_fit && s_thin(th, pts, size, true, false) <= th->max * 3 / 4;
    s_thin(th, pts, size, th->plans_fit, true);
    th->stride *= 2;
    size_t perm = th->tail ? th->n - 1 : th->n;
    if (perm > 0)
        th->last_seq = s_at(pts, size, perm - 1)->seq;
}

size_t thinning_next(thinning_t *th, void *pts, size_t size, uint32_t epoch, uint8_t phase,
                     bool *new_plan)
{
    thin_sample_t key = {.epoch = epoch, .phase = phase, .seq = th->seq++};
    *new_plan = th->n == 0 || !s_same_plan(s_at(pts, size, th->n - 1), &key);
    bool plan_end = *new_plan && th->plans_fit; /* the tail is its plan's last sample */
    if (th->tail && !plan_end)
        th->n--; /* the newest replaces the newest: the running count loses nothing */
    bool keep = th->n == 0 || plan_end || key.seq - th->last_seq >= th->stride;
    th->tail = false;
    if (th->n == th->max)
        s_halve(th, pts, size);
    size_t i = th->n++;
    memset(s_at(pts, size, i), 0, size);
    *s_at(pts, size, i) = key;
    if (keep)
        th->last_seq = key.seq;
    th->tail = !keep;
    return i;
}
