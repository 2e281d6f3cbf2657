/* decide: the seed course's early stopping (last `patience` val accuracies
 * all >= target) as a streak, plus --epochs, target 0 and no validation;
 * and slot: n - skip completion, the clock stopping at completion, lr and
 * per-rank images/s. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reducerd/decide.h"
#include "reducerd/slot.h"
#include "tests/reporterd/check.h" /* CHECK and check_done, shared by the C tests */


/* The seed's rule evaluated directly on the whole history. */
static int seed_stops(const double *acc, int n, double target, int patience)
{
    if (n < patience)
        return 0;
    for (int i = n - patience; i < n; i++)
        if (!(acc[i] >= target))
            return 0;
    return 1;
}

static void streak_is_the_seed_rule(void)
{
    const double acc[] = {0.5, 0.86, 0.84, 0.85, 0.9, 0.2, 0.95, 0.95, 0.95, 0.99};
    for (int patience = 1; patience <= 3; patience++) {
        decide_cfg_t cfg = {100, 0.85, (uint32_t)patience};
        uint32_t streak = 0;
        for (int e = 0; e < 10; e++) {
            decide_t d;
            decide_epoch(&cfg, (uint32_t)e, streak, acc[e], &d);
            streak = d.streak;
            CHECK(d.decision == seed_stops(acc, e + 1, 0.85, patience));
            if (d.decision) {
                CHECK(strstr(d.reason, "early stop after epoch") != NULL);
                break;
            }
        }
    }
}

static void epochs_target_off_no_val(void)
{
    decide_t d;
    decide_cfg_t off = {3, 0, 1};
    decide_epoch(&off, 1, 0, 0.99, &d);
    CHECK(d.decision == 0 && d.streak == 0); /* target 0: never by accuracy */
    decide_epoch(&off, 2, 0, 0.99, &d);
    CHECK(d.decision == 1 && strstr(d.reason, "last of --epochs 3"));
    decide_cfg_t on = {10, 0.5, 2};
    decide_epoch(&on, 4, 1, -1, &d);         /* no validation: the streak breaks */
    CHECK(d.decision == 0 && d.streak == 0 && strstr(d.reason, "no validation"));
    decide_epoch(&on, 4, 1, 0.5, &d);        /* >= target, resumed streak 1 */
    CHECK(d.decision == 1 && d.streak == 2);
}

static ddp_result_t s_result(int32_t rank, uint64_t *ids, int32_t *labels, int32_t *topk, float *loss,
                             uint32_t n, double compute_s)
{
    return (ddp_result_t){.rank = rank, .epoch = 3, .phase = DDP_PHASE_TRAIN, .n = n, .k = 2,
                          .ids = ids, .labels = labels, .topk = topk, .loss = loss,
                          .compute_s = compute_s, .lr = 0.25, .step = 40};
}

static void slot_counts(void)
{
    char *names[] = {"a", "b"};
    char **cn = malloc(2 * sizeof *cn);
    cn[0] = strdup(names[0]);
    cn[1] = strdup(names[1]);
    ddp_plan_t plan = {.epoch = 3, .phase = DDP_PHASE_TRAIN, .n = 5, .num_classes = 2,
                       .class_names = cn, .skip = 2};
    slot_t *s = slot_new(&plan, false, 2, 100.0);
    CHECK(s && plan.class_names == NULL && slot_expected(s) == 3);
    uint64_t ids[] = {4, 0};
    int32_t labels[] = {1, 0}, topk[] = {1, 0, 1, 0};
    float loss[] = {0.5f, 0.25f};
    uint64_t invalid, dup;
    ddp_result_t r0 = s_result(0, ids, labels, topk, loss, 2, 0.5);
    slot_add_result(s, &r0, 101.0, &invalid, &dup);
    CHECK(invalid == 0 && dup == 0 && !slot_complete(s));
    ddp_failed_t f = {.epoch = 3, .phase = DDP_PHASE_TRAIN, .id = 2, .path = "p", .reason = "r"};
    CHECK(slot_add_failed(s, &f, 102.0) == 0 && slot_complete(s) && slot_failed(s) == 1);
    CHECK(strcmp(slot_fail_reason(s, 2), "p\tr") == 0 && slot_fail_reason(s, 1) == NULL);
    ddp_result_t r1 = s_result(1, ids, labels, topk, loss, 1, 0.25); /* re-sent id 4 */
    slot_add_result(s, &r1, 150.0, &invalid, &dup);
    CHECK(dup == 1);
    ev_metric_t m;
    slot_fill_metric(s, 200.0, true, &m);
    /* the clock stopped when the last expected sample came (102 - 100) */
    CHECK(m.samples == 2 && m.failed == 1 && m.correct_top1 == 1 && m.duplicates == 1);
    CHECK(m.wall_s == 2.0 && m.images_per_sec == 1.0 && m.lr == 0.25 && m.loss_sum == 0.75);
    CHECK(m.nranks == 2 && m.rank_images_per_sec[0] == 4.0 && m.rank_images_per_sec[1] == 4.0);
    CHECK(strcmp(m.class_names[1], "b") == 0);
    uint64_t step;
    CHECK(slot_last_step(s, &step) && step == 40);
    slot_destroy(&s);
    CHECK(s == NULL);
    ddp_plan_t bad = {.n = 2, .num_classes = 2, .skip = 3};
    CHECK(slot_new(&bad, false, 1, 0) == NULL); /* skip beyond the epoch */
}

/* The start-up apart: the first counted result's time, and the rate of
 * the samples after it over the seconds after it (duplicates not counted). */
static void slot_steady_rate(void)
{
    char **cn = malloc(2 * sizeof *cn);
    cn[0] = strdup("a");
    cn[1] = strdup("b");
    ddp_plan_t plan = {.epoch = 0, .phase = DDP_PHASE_EVAL, .n = 6, .num_classes = 2,
                       .class_names = cn};
    slot_t *s = slot_new(&plan, false, 1, 100.0);
    int32_t labels[] = {1, 0}, topk[] = {1, 0, 1, 0};
    float loss[] = {0.5f, 0.25f};
    uint64_t invalid, dup, a[] = {0, 1}, b[] = {1, 2}, c[] = {3, 4}, d[] = {5};
    ev_metric_t m;
    slot_fill_metric(s, 101.0, false, &m);
    CHECK(m.first_result_s == 0 && m.steady_images_per_sec == 0);   /* nothing yet */
    ddp_result_t r = s_result(0, a, labels, topk, loss, 2, 0.5);
    r.phase = DDP_PHASE_EVAL;
    slot_add_result(s, &r, 102.0, &invalid, &dup);
    slot_restart_clock(s, 102.5);   /* a result before the restart is not the new clock's first */
    r.ids = a;
    slot_add_result(s, &r, 103.0, &invalid, &dup);   /* both duplicates: counts nothing */
    CHECK(dup == 2);
    slot_fill_metric(s, 103.5, false, &m);
    CHECK(m.first_result_s == 0 && m.steady_images_per_sec == 0);
    r.ids = c;
    slot_add_result(s, &r, 104.5, &invalid, &dup);   /* the first: 2 samples at 2 s */
    slot_fill_metric(s, 104.5, false, &m);
    CHECK(m.first_result_s == 2.0 && m.steady_images_per_sec == 0);
    r.ids = b;
    slot_add_result(s, &r, 106.5, &invalid, &dup);   /* 1 new (2), 1 duplicate (1) */
    r.ids = d;
    r.n = 1;
    slot_add_result(s, &r, 108.5, &invalid, &dup);   /* 5: the last */
    CHECK(slot_complete(s));
    slot_fill_metric(s, 200.0, false, &m);
    CHECK(m.samples == 6 && m.wall_s == 6.0 && m.first_result_s == 2.0);
    CHECK(m.steady_images_per_sec == 1.0);   /* 4 samples after it, in 4 s */
    slot_destroy(&s);
}

int main(void)
{
    streak_is_the_seed_rule();
    epochs_target_off_no_val();
    slot_counts();
    slot_steady_rate();
    return check_done("test_decide");
}
