/* test_lr_sched — gpud/optim/lr_sched against torch.optim.lr_scheduler
 * (goldens: 50 epochs of get_last_lr() per schedule, tests/golden/gen_optim.py).
 *   recursive (lr_sched_lr):     |ours - torch| <= 1e-12 * |torch|  (the same
 *                                double operations: expected bit-exact)
 *   closed form:                 |ours - torch| <= 1e-7 * |torch| + 1e-12 * base_lr
 *                                (the absolute floor covers lr = 0 at the end
 *                                of a cosine, where PyTorch's recursion leaves
 *                                a rounding residue)
 * plus resume (lr_sched_set_epoch), warm-up helper and config errors. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tests/optim/golden.h"

#define EPOCHS 50

static void test_goldens(void)
{
    safetensors_t *st = golden_open();
    char buf[1024], key[256];
    char *names[64];
    int n = golden_list(st, "scheds", buf, sizeof buf, names, 64);
    CHECK(n >= 7, "only %d schedules in the golden file", n);
    double worst_rec = 0, worst_closed = 0;
    int exact = 0, total = 0;
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof key, "sched/%s/base_lr", names[i]);
        double *base = golden_f64(st, key, NULL);
        snprintf(key, sizeof key, "sched/%s/lr", names[i]);
        int64_t ne;
        double *want = golden_f64(st, key, &ne);
        REQUIRE(base && want && ne == EPOCHS, "schedule %s: golden tensors missing", names[i]);
        lr_sched_t *s = golden_sched(st, names[i], *base);
        double wr = 0, wc = 0;
        for (int e = 0; e < EPOCHS; e++) {
            double got = lr_sched_lr(s), closed = lr_sched_closed_form(s, e);
            double er = fabs(got - want[e]), ec = fabs(closed - want[e]);
            CHECK(lr_sched_epoch(s) == e, "%s: epoch %d vs %d", names[i], lr_sched_epoch(s), e);
            CHECK(er <= 1e-12 * fabs(want[e]), "%s epoch %d: recursive %.17g, PyTorch %.17g",
                  names[i], e, got, want[e]);
            CHECK(ec <= 1e-7 * fabs(want[e]) + 1e-12 * *base,
                  "%s epoch %d: closed form %.17g, PyTorch %.17g", names[i], e, closed, want[e]);
            if (want[e] != 0) {
                wr = fmax(wr, er / fabs(want[e]));
                wc = fmax(wc, ec / fabs(want[e]));
            }
            exact += got == want[e];
            total++;
            lr_sched_step(s);
        }
        /* resume: replaying to epoch 17 gives the same lr as stepping there */
        lr_sched_set_epoch(s, 17);
        CHECK(lr_sched_lr(s) == want[17] && lr_sched_epoch(s) == 17,
              "%s: set_epoch(17) gives %.17g, PyTorch %.17g", names[i], lr_sched_lr(s), want[17]);
        printf("  %-15s recursive max rel %.1e, closed form max rel %.1e\n", names[i], wr, wc);
        worst_rec = fmax(worst_rec, wr);
        worst_closed = fmax(worst_closed, wc);
        lr_sched_destroy(&s);
        free(base);
        free(want);
    }
    printf("schedules: %d, %d/%d epochs bit-identical to PyTorch; worst relative: recursive "
           "%.1e, closed form %.1e\n", n, exact, total, worst_rec, worst_closed);
    safetensors_destroy(&st);
}

static void test_warmup_helper(void)
{
    char err[256];
    lr_phase_t cos = {.kind = LR_COSINE, .t_max = 10};
    lr_sched_t *a = lr_sched_warmup(0.2, 3, 0.1, &cos, err, sizeof err);
    lr_phase_t ph[2] = {{.kind = LR_LINEAR, .start_factor = 0.1, .end_factor = 1, .total_iters = 3},
                        cos};
    int ms = 3;
    lr_sched_t *b = lr_sched_new(0.2, ph, 2, &ms, err, sizeof err);
    REQUIRE(a && b, "%s", err);
    CHECK(fabs(lr_sched_lr(a) - 0.02) < 1e-15, "warm-up starts at start_factor * lr: %g",
          lr_sched_lr(a));
    for (int e = 0; e < 20; e++) {
        CHECK(lr_sched_lr(a) == lr_sched_lr(b), "epoch %d: %g vs %g", e, lr_sched_lr(a),
              lr_sched_lr(b));
        if (e == 3)
            CHECK(lr_sched_lr(a) == 0.2, "main phase starts at the base lr: %g", lr_sched_lr(a));
        lr_sched_step(a);
        lr_sched_step(b);
    }
    lr_sched_destroy(&a);
    lr_sched_destroy(&b);
    /* warm-up then constant; no warm-up and no main: constant */
    a = lr_sched_warmup(1.0, 4, 0.5, NULL, err, sizeof err);
    REQUIRE(a, "%s", err);
    double want[6] = {0.5, 0.625, 0.75, 0.875, 1.0, 1.0};
    for (int e = 0; e < 6; e++, lr_sched_step(a))
        CHECK(fabs(lr_sched_lr(a) - want[e]) < 1e-15, "constant after warm-up, epoch %d: %g", e,
              lr_sched_lr(a));
    lr_sched_destroy(&a);
    a = lr_sched_warmup(0.3, 0, 0.1, NULL, err, sizeof err);
    REQUIRE(a, "%s", err);
    for (int e = 0; e < 3; e++, lr_sched_step(a))
        CHECK(lr_sched_lr(a) == 0.3, "constant schedule: %g", lr_sched_lr(a));
    lr_sched_destroy(&a);
}

static void test_errors(void)
{
    char err[256];
    lr_phase_t bad_cos = {.kind = LR_COSINE, .t_max = 0};
    CHECK(!lr_sched_new(0.1, &bad_cos, 1, NULL, err, sizeof err) && strstr(err, "t_max"), "%s",
          err);
    lr_phase_t bad_step = {.kind = LR_STEP};
    CHECK(!lr_sched_new(0.1, &bad_step, 1, NULL, err, sizeof err) && strstr(err, "step_size"),
          "%s", err);
    lr_phase_t bad_lin = {.kind = LR_LINEAR, .start_factor = 1.5};
    CHECK(!lr_sched_new(0.1, &bad_lin, 1, NULL, err, sizeof err) && strstr(err, "start_factor"),
          "%s", err);
    lr_phase_t two[2] = {{.kind = LR_LINEAR}, {.kind = LR_COSINE, .t_max = 5}};
    int ms = 0;
    CHECK(!lr_sched_new(0.1, two, 2, &ms, err, sizeof err) && strstr(err, "milestone"), "%s", err);
    CHECK(!lr_sched_new(NAN, NULL, 0, NULL, err, sizeof err), "NaN lr accepted");
    CHECK(!lr_sched_warmup(0.1, -1, 0.1, NULL, err, sizeof err), "negative warm-up accepted");
}

int main(void)
{
    test_goldens();
    test_warmup_helper();
    test_errors();
    return tc_done("test_lr_sched");
}
