/* tputhist: the dashboard's throughput samples for the whole job. Without
 * merging, every event is a sample at its plan's origin + elapsed_s; a job
 * far longer than TPUTHIST_MAX events stays within TPUTHIST_MAX, starts at
 * the first event, ends at the newest, keeps each plan's first and last
 * sample, and spreads the rest evenly; with more plans than fit, plain
 * halving still bounds it. The JSON is valid and names every sample. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "proto/messages.h"
#include "reporterd/tputhist.h"

static ev_progress_t s_prog(uint32_t epoch, uint8_t phase, uint64_t done, double elapsed)
{
    return (ev_progress_t){.epoch = epoch, .phase = phase, .done = done, .total = 1000000,
                           .elapsed_s = elapsed, .workers = 1};
}

static void s_small(void)
{
    tputhist_t *h = tputhist_new();
    CHECK(h);
    /* plan (0, train) arrives at 100 s, 0.5 s into it; delivery jitter does not move points */
    ev_progress_t a = s_prog(0, DDP_PHASE_TRAIN, 10, 0.5), b = s_prog(0, DDP_PHASE_TRAIN, 30, 1.0),
                  c = s_prog(0, DDP_PHASE_EVAL, 5, 0.25);
    CHECK(fabs(tputhist_add(h, &a, 100.0) - 0.5) < 1e-9);
    CHECK(fabs(tputhist_add(h, &b, 100.9) - 1.0) < 1e-9);
    CHECK(fabs(tputhist_add(h, &c, 102.0) - 2.5) < 1e-9); /* new plan: its own origin */
    CHECK(tputhist_size(h) == 3);
    const tputhist_point_t *p = tputhist_points(h);
    CHECK(p[0].done == 10 && p[1].done == 30 && p[2].done == 5 && p[2].phase == DDP_PHASE_EVAL);
    char *js = tputhist_json(h);
    CHECK_MSG(js && strcmp(js, "{\"topic\":\"tput_history\",\"window_s\":2,\"stride\":1,\"points\":[[0.500,0,\"train\",10],"
                               "[1.000,0,\"train\",30],[2.500,0,\"eval\",5]]}") == 0,
              "%s", js ? js : "(null)");
    free(js);
    /* the plan's clock restarted (elapsed_s went back): time still runs forward */
    ev_progress_t r = s_prog(0, DDP_PHASE_EVAL, 5, 0.1);
    CHECK(fabs(tputhist_add(h, &r, 102.5) - 3.0) < 1e-9);
    /* no elapsed_s (or a non-finite one): the arrival counts */
    ev_progress_t d = s_prog(0, DDP_PHASE_EVAL, 6, NAN);
    CHECK(fabs(tputhist_add(h, &d, 103.0) - 3.5) < 1e-9);
    tputhist_destroy(&h);
    CHECK(h == NULL);
}

/* a week at two events a second over plans of `per_plan` events */
static void s_long(size_t events, size_t per_plan)
{
    tputhist_t *h = tputhist_new();
    uint64_t done = 0;
    for (size_t i = 0; i < events; i++) {
        size_t plan = i / per_plan, k = i % per_plan;
        done = k == 0 ? 0 : done + 7;
        ev_progress_t p = s_prog((uint32_t)(plan / 2), plan % 2 ? DDP_PHASE_EVAL : DDP_PHASE_TRAIN, done,
                                 0.5 * (double)(k + 1));
        tputhist_add(h, &p, 0.5 * (double)i + 1);
        if (tputhist_size(h) > TPUTHIST_MAX)
            break;
    }
    size_t n = tputhist_size(h);
    const tputhist_point_t *p = tputhist_points(h);
    CHECK_MSG(n <= TPUTHIST_MAX && n >= TPUTHIST_MAX / 4, "%zu samples", n);
    CHECK(p[0].seq == 0 && fabs(p[0].t - 0.5) < 1e-9);
    CHECK(p[n - 1].seq == events - 1 && fabs(p[n - 1].t - 0.5 * (double)(events - 1) - 0.5) < 1e-6);
    size_t max_gap = 0, plans_ok = 0;
    for (size_t i = 1; i < n; i++) {
        CHECK(p[i].seq > p[i - 1].seq && p[i].t > p[i - 1].t);
        size_t gap = (size_t)(p[i].seq - p[i - 1].seq);
        max_gap = gap > max_gap ? gap : max_gap;
        bool boundary = p[i].epoch != p[i - 1].epoch || p[i].phase != p[i - 1].phase;
        /* a plan's ends kept: the sample before a boundary is its plan's last event */
        if (boundary && p[i].seq % per_plan == 0 && (p[i - 1].seq + 1) % per_plan == 0)
            plans_ok++;
    }
    size_t plans = (events + per_plan - 1) / per_plan;
    /* evenly spread: no hole wider than a few times the mean spacing */
    CHECK_MSG(max_gap <= 4 * (events / n + 1), "largest gap %zu events for %zu samples of %zu", max_gap,
              n, events);
    if (plans * 2 <= TPUTHIST_MAX / 2)
        CHECK_MSG(plans_ok == plans - 1, "%zu of %zu plan boundaries whole", plans_ok, plans - 1);
    char *js = tputhist_json(h);
    json_t *doc = js ? json_loads(js, 0, NULL) : NULL;
    CHECK(doc && json_array_size(json_object_get(doc, "points")) == n);
    json_decref(doc);
    free(js);
    tputhist_destroy(&h);
}

int main(void)
{
    s_small();
    s_long(1209600, 1200);   /* a week, 10-minute plans */
    s_long(300000, 3);       /* 100000 tiny plans: plain halving */
    s_long(TPUTHIST_MAX, 50); /* exactly full: nothing merged */
    return check_done("test_tputhist");
}
