/* Exact ROC-AUC / AP / ECE from quantized-score histograms (common/scorehist.c,
 * reducerd/curves.c, the tally's probability metrics). Expected values are
 * sklearn 1.2's on the same scores (in the comments) and hand sums. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/scorehist.h"
#include "reducerd/curves.h"
#include "reducerd/tally.h"
#include "tests/reporterd/check.h"

static uint32_t pos[PROB_BINS], neg[PROB_BINS];

static void s_hist(const int *y, const uint32_t *q, int n)
{
    memset(pos, 0, sizeof pos);
    memset(neg, 0, sizeof neg);
    for (int i = 0; i < n; i++)
        (y[i] ? pos : neg)[q[i]]++;
}

/* Ties between a positive and negatives count half (the trapezoid). */
static void test_ties(void)
{
    /* roc_auc_score([1,0,1,0,0,1], [.5,.5,.9,.1,.5,0]) = 0.5555555555555556 (5/9),
     * average_precision_score(...) = 0.6666666666666667 */
    int y[] = {1, 0, 1, 0, 0, 1};
    uint32_t q[] = {5000, 5000, 9000, 1000, 5000, 0};
    s_hist(y, q, 6);
    CHECK(fabs(scorehist_roc_auc(pos, neg, PROB_BINS) - 5.0 / 9.0) < 1e-15);
    CHECK(fabs(scorehist_ap(pos, neg, PROB_BINS) - 2.0 / 3.0) < 1e-15);
    CHECK(scorehist_walk(pos, neg, PROB_BINS, NULL, NULL) == 4); /* distinct thresholds */
    /* all scores equal: AUC 0.5, AP = prevalence (sklearn: 0.5, 0.5) */
    int y2[] = {0, 1, 0, 1};
    uint32_t q2[] = {3000, 3000, 3000, 3000};
    s_hist(y2, q2, 4);
    CHECK(scorehist_roc_auc(pos, neg, PROB_BINS) == 0.5);
    CHECK(scorehist_ap(pos, neg, PROB_BINS) == 0.5);
    /* perfect ranking, and one class only: undefined */
    int y3[] = {1, 1, 0};
    uint32_t q3[] = {10000, 7000, 6999};
    s_hist(y3, q3, 3);
    CHECK(scorehist_roc_auc(pos, neg, PROB_BINS) == 1.0 && scorehist_ap(pos, neg, PROB_BINS) == 1.0);
    int y4[] = {0, 0};
    s_hist(y4, q3, 2);
    CHECK(isnan(scorehist_roc_auc(pos, neg, PROB_BINS)) && isnan(scorehist_ap(pos, neg, PROB_BINS)));
}

static void test_calib(void)
{
    /* [j/15, (j+1)/15): 6666 < 10/15 <= 6667; 1.0 alone in the last */
    CHECK(calib_bin(0) == 0 && calib_bin(666) == 0 && calib_bin(667) == 1);
    CHECK(calib_bin(6666) == 9 && calib_bin(6667) == 10);
    CHECK(calib_bin(9999) == 14 && calib_bin(10000) == 15);
    uint64_t count[16] = {0}, correct[16] = {0}, qsum[16] = {0};
    CHECK(isnan(calib_ece(count, correct, qsum)));
    /* (1.0 right, .9999 wrong, .2 right, 0 wrong): (0 + 9999 + 8000) / (4 * 10^4) */
    uint32_t q[] = {10000, 9999, 2000, 0};
    int ok[] = {1, 0, 1, 0};
    for (int i = 0; i < 4; i++) {
        uint32_t b = calib_bin(q[i]);
        count[b]++, correct[b] += ok[i], qsum[b] += q[i];
    }
    CHECK(fabs(calib_ece(count, correct, qsum) - 0.449975) < 1e-15);
    CHECK(prob_quantize(0.99996f) == 10000 && prob_quantize(0.12345678f) == 1235 && prob_quantize(0.5f) == 5000);
    CHECK(prob_quantize(NAN) == 0 && prob_quantize(-0.0f) == 0 && prob_quantize(1.5f) == 10000);
}

/* The same results in another order: the same metric, bit for bit (the
 * W-invariance the eval contract asks for). */
static void test_order(void)
{
    enum { N = 200, NC = 4 };
    static uint16_t q[N][NC];
    static int32_t label[N], top[N][NC];
    srand(7);
    for (int i = 0; i < N; i++) {
        int sum = 0;
        for (int c = 0; c < NC; c++)
            sum += q[i][c] = (uint16_t)(rand() % 2500);
        q[i][0] = (uint16_t)(q[i][0] + 10000 - sum); /* rows sum to 1 */
        label[i] = rand() % NC;
        for (int c = 0; c < NC; c++)
            top[i][c] = (c + i) % NC; /* any valid top-k */
    }
    ev_metric_t m[2];
    tally_t *t[2];
    for (int run = 0; run < 2; run++) {
        t[run] = tally_new(0, 0, N, NC, NC, true);
        CHECK(t[run] && tally_enable_probs(t[run], NC) == 0);
        for (int j = 0; j < N; j++) {
            int i = run ? N - 1 - j : j;
            CHECK(tally_add_result_probs(t[run], (uint64_t)i, label[i], top[i], NC, 0.5f, q[i],
                                         NC) == 0);
        }
        CHECK(tally_add_result(t[run], 0, 0, top[0], NC, 0.5f) == -1); /* probabilities missing */
        tally_fill_metric(t[run], &m[run]);
    }
    CHECK(m[0].has_probs && m[1].has_probs && m[0].ncurves == 3);
    CHECK(memcmp(m[0].auc, m[1].auc, NC * sizeof(double)) == 0);
    CHECK(memcmp(m[0].ap, m[1].ap, NC * sizeof(double)) == 0);
    CHECK(memcmp(&m[0].ece, &m[1].ece, sizeof(double)) == 0);
    CHECK(memcmp(m[0].curve_class, m[1].curve_class, 3 * sizeof(int32_t)) == 0);
    for (uint32_t i = 1; i < m[0].ncurves; i++) /* worst first */
        CHECK(m[0].ap[m[0].curve_class[i - 1]] <= m[0].ap[m[0].curve_class[i]]);
    ev_predictions_t p;
    CHECK(tally_fill_predictions(t[0], 0, N, &p) == 0 && p.nprob == NC &&
          p.probs[0] == q[0][top[0][0]]); /* nc == k: kept in top-k order */
    tally_destroy(&t[0]);
    tally_destroy(&t[1]);
    CHECK(curves_new(CURVES_MAX_CLASSES + 1) == NULL);
}

int main(void)
{
    test_ties();
    test_calib();
    test_order();
    return check_done("test_curves");
}
