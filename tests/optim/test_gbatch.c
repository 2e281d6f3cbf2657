/* test_gbatch — the global-batch gradient: per-worker sum / G, then a sum
 * all-reduce, equals the mean gradient of the whole global batch for any
 * split — uneven shards, empty shards, one worker — within float rounding
 * (|got - mean| <= 1e-6 * max(1, |mean|), mean computed in double), while
 * DDP's average of per-rank means is measurably wrong for the same split. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpud/optim/gbatch.h"
#include "tests/gpud/tcheck.h"

#define DIM 7
#define G 10

static float per_sample[G][DIM];   /* dl_i/dw */
static double mean[DIM];           /* dL/dw = (1/G) sum_i dl_i/dw, in double */

static void make_samples(void)
{
    unsigned s = 12345;
    for (int i = 0; i < G; i++)
        for (int d = 0; d < DIM; d++) {
            s = s * 1103515245u + 12345u;
            /* samples differ in scale so a wrong weighting shows */
            per_sample[i][d] = ((float)(s >> 9) / (float)(1u << 23) - 0.5f) * (float)(1 + i);
        }
    for (int d = 0; d < DIM; d++) {
        double acc = 0;
        for (int i = 0; i < G; i++)
            acc += per_sample[i][d];
        mean[d] = acc / G;
    }
}

/* Run one data-parallel step with these shard sizes (sum G); out: the
 * all-reduced gradient. Returns DDP's average of per-rank means in ddp. */
static void run_split(const int *sizes, int workers, float *out, double *ddp)
{
    memset(out, 0, DIM * sizeof *out);
    int next = 0, nonempty = 0;
    double ddp_acc[DIM] = {0};
    for (int r = 0; r < workers; r++) {
        float g[DIM];
        char err[256];
        for (int d = 0; d < DIM; d++)
            g[d] = NAN;   /* an empty shard's buffer holds garbage: it must not leak */
        if (sizes[r] > 0)
            memset(g, 0, sizeof g);
        for (int i = next; i < next + sizes[r]; i++)
            gbatch_accumulate(g, per_sample[i], DIM);
        for (int d = 0; d < DIM && sizes[r] > 0; d++)
            ddp_acc[d] += g[d] / sizes[r];
        nonempty += sizes[r] > 0;
        next += sizes[r];
        CHECK(gbatch_scale_grad(g, DIM, sizes[r], G, err, sizeof err) == 0, "%s", err);
        gbatch_accumulate(out, g, DIM);   /* the all-reduce (sum) */
    }
    REQUIRE(next == G, "split does not cover the global batch");
    for (int d = 0; d < DIM; d++)
        ddp[d] = ddp_acc[d] / nonempty;
}

static void test_splits(void)
{
    static const int splits[][5] = {
        {10, 0, 0, 0, 0}, {5, 5, 0, 0, 0}, {4, 3, 3, 0, 0}, {7, 1, 0, 2, 0},
        {0, 0, 10, 0, 0}, {2, 2, 2, 2, 2}, {9, 0, 1, 0, 0}, {1, 1, 1, 1, 6},
    };
    const int workers[] = {1, 2, 3, 4, 5, 5, 3, 5};
    double worst = 0, ddp_worst = 0;
    for (size_t k = 0; k < sizeof workers / sizeof *workers; k++) {
        float got[DIM];
        double ddp[DIM];
        run_split(splits[k], workers[k], got, ddp);
        for (int d = 0; d < DIM; d++) {
            double e = fabs(got[d] - mean[d]) / fmax(1.0, fabs(mean[d]));
            CHECK(e <= 1e-6, "split %zu dim %d: %.9g, global mean %.9g", k, d, got[d], mean[d]);
            worst = fmax(worst, e);
            ddp_worst = fmax(ddp_worst, fabs(ddp[d] - mean[d]) / fmax(1.0, fabs(mean[d])));
        }
    }
    /* the test can tell right from wrong: uneven shards break the average of means */
    CHECK(ddp_worst > 1e-2, "average of per-rank means unexpectedly right (%.3g)", ddp_worst);
    printf("global-batch gradient: worst error %.2e over 8 splits (average of per-rank means: "
           "%.2e)\n", worst, ddp_worst);
}

static void test_loss_scale_and_errors(void)
{
    char err[256];
    CHECK(gbatch_loss_scale(4) == 0.25f && gbatch_loss_scale(0) == 0.0f, "loss scale");
    /* seeding backward with 1/G per sample gives the same share as sum then / G */
    float a[DIM] = {0}, b[DIM] = {0};
    for (int i = 0; i < 3; i++)
        for (int d = 0; d < DIM; d++) {
            a[d] += per_sample[i][d] * gbatch_loss_scale(G);
            b[d] += per_sample[i][d];
        }
    CHECK(gbatch_scale_grad(b, DIM, 3, G, err, sizeof err) == 0, "%s", err);
    for (int d = 0; d < DIM; d++)
        CHECK(fabsf(a[d] - b[d]) <= 1e-6f * fmaxf(1.0f, fabsf(b[d])), "dim %d: %g vs %g", d, a[d],
              b[d]);
    float g[2] = {1, 2};
    CHECK(gbatch_scale_grad(g, 2, 3, 0, err, sizeof err) < 0 && strstr(err, "global"), "G=0");
    CHECK(gbatch_scale_grad(g, 2, 5, 4, err, sizeof err) < 0, "local > global accepted");
    CHECK(gbatch_scale_grad(g, 2, -1, 4, err, sizeof err) < 0, "negative local accepted");
    CHECK(g[0] == 1 && g[1] == 2, "a rejected call changed the gradient");
}

int main(void)
{
    make_samples();
    test_splits();
    test_loss_scale_and_errors();
    return tc_done("test_gbatch");
}
