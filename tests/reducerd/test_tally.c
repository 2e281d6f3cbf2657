/* tally exactness: the same results in any order, with re-sent duplicates,
 * give byte-identical metrics; invalid results change nothing. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reducerd/tally.h"
#include "tests/reporterd/check.h" /* CHECK and check_done, shared by the C tests */


#define N 20011u
#define NC 10u

/* The metric's sparse cells hold exactly the dense matrix's nonzero ones,
 * sorted (confusion_check), none missing, none extra. */
static bool s_same_cells(const ev_metric_t *m, const uint64_t *dense, uint32_t nc)
{
    char err[256];
    uint64_t nonzero = 0;
    if (!m->cells || confusion_check(m->cells, m->ncells, nc, err, sizeof err) != 0)
        return false;
    for (uint32_t t = 0; t < nc; t++)
        for (uint32_t p = 0; p < nc; p++) {
            uint64_t v = dense[(uint64_t)t * nc + p];
            nonzero += v != 0;
            if (confusion_at(m->cells, m->ncells, t, p) != v)
                return false;
        }
    return nonzero == m->ncells;
}
#define K 5u

/* xorshift64*: reproducible without depending on libc's rand(). */
static uint64_t s_rng = 0x9e3779b97f4a7c15ull;
static uint64_t s_next(void)
{
    s_rng ^= s_rng >> 12;
    s_rng ^= s_rng << 25;
    s_rng ^= s_rng >> 27;
    return s_rng * 0x2545f4914f6cdd1dull;
}
static double s_unit(void) { return (double)(s_next() >> 11) / 9007199254740992.0; }

typedef struct {
    int32_t label;
    int32_t topk[K];
    float loss;
    int failed;
} sample_t;

static sample_t s_truth[N];

static void s_make_truth(void)
{
    for (uint32_t i = 0; i < N; i++) {
        sample_t *s = &s_truth[i];
        s->label = (int32_t)(s_next() % NC);
        int32_t perm[NC];
        for (uint32_t c = 0; c < NC; c++)
            perm[c] = (int32_t)c;
        for (uint32_t c = NC - 1; c > 0; c--) {
            uint32_t j = (uint32_t)(s_next() % (c + 1));
            int32_t t = perm[c];
            perm[c] = perm[j];
            perm[j] = t;
        }
        if (s_next() % 3 == 0)
            perm[0] = s->label; /* make a third correct@1 (may duplicate a class; fine) */
        memcpy(s->topk, perm, sizeof s->topk);
        /* losses over many magnitudes so summation order matters */
        s->loss = (float)exp(s_unit() * 20.0 - 12.0);
        s->failed = (i % 97 == 5);
    }
}

static void s_shuffle(uint32_t *a, uint32_t n)
{
    for (uint32_t i = n - 1; i > 0; i--) {
        uint32_t j = (uint32_t)(s_next() % (i + 1));
        uint32_t t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}

static int s_send(tally_t *t, uint32_t id)
{
    const sample_t *s = &s_truth[id];
    return s->failed ? tally_add_failed(t, id)
                     : tally_add_result(t, id, s->label, s->topk, K, s->loss);
}

/* Feed all ids in a random order, re-sending `dups` random ids; returns the
 * tally, checks return codes as it goes. */
static tally_t *s_run(uint32_t dups)
{
    static uint32_t order[N];
    for (uint32_t i = 0; i < N; i++)
        order[i] = i;
    s_shuffle(order, N);
    tally_t *t = tally_new(3, 0, N, NC, K, true);
    CHECK(t != NULL);
    uint32_t sent_dups = 0;
    for (uint32_t i = 0; i < N; i++) {
        CHECK(s_send(t, order[i]) == 0);
        if (sent_dups < dups && s_next() % 4 == 0) {
            uint32_t again = order[s_next() % (i + 1)];
            CHECK(s_send(t, again) == 1);
            /* a failed report for an id with a result is a duplicate too */
            CHECK(tally_add_failed(t, again) == 1);
            sent_dups += 2;
        }
    }
    CHECK(tally_complete(t));
    CHECK(tally_accounted(t) == N);
    ev_metric_t m;
    tally_fill_metric(t, &m);
    CHECK(m.duplicates == sent_dups);
    return t;
}

/* Counts computed here, independently of the tally. */
static void s_check_against_truth(const ev_metric_t *m)
{
    uint64_t samples = 0, failed = 0, c1 = 0, c5 = 0;
    static uint64_t conf[NC * NC];
    memset(conf, 0, sizeof conf);
    double loss = 0.0;
    for (uint32_t i = 0; i < N; i++) {
        const sample_t *s = &s_truth[i];
        if (s->failed) {
            failed++;
            continue;
        }
        samples++;
        loss += s->loss;
        c1 += s->topk[0] == s->label;
        int in5 = 0;
        for (uint32_t j = 0; j < K; j++)
            in5 |= s->topk[j] == s->label;
        c5 += in5;
        conf[s->label * NC + s->topk[0]]++;
    }
    CHECK(m->planned == N);
    CHECK(m->samples == samples);
    CHECK(m->failed == failed);
    CHECK(m->correct_top1 == c1);
    CHECK(m->correct_top5 == c5);
    CHECK(c1 < c5 && c5 < samples);
    CHECK(m->loss_sum == loss);
    CHECK(m->num_classes == NC);
    CHECK(s_same_cells(m, conf, NC));
    CHECK(m->epoch == 3 && m->phase == 0);
}

static void test_order_independence(void)
{
    tally_t *ref = s_run(0);
    ev_metric_t mref;
    tally_fill_metric(ref, &mref);
    s_check_against_truth(&mref);
    ev_predictions_t pref;
    CHECK(tally_fill_predictions(ref, 0, N, &pref) == 0);
    int arrival_sum_differed = 0;
    for (int trial = 0; trial < 4; trial++) {
        tally_t *t = s_run(500);
        ev_metric_t m;
        tally_fill_metric(t, &m);
        CHECK(m.samples == mref.samples && m.failed == mref.failed);
        CHECK(m.correct_top1 == mref.correct_top1 && m.correct_top5 == mref.correct_top5);
        CHECK(memcmp(&m.loss_sum, &mref.loss_sum, sizeof(double)) == 0);
        CHECK(m.ncells == mref.ncells &&
              memcmp(m.cells, mref.cells, m.ncells * sizeof *m.cells) == 0);
        ev_predictions_t p;
        CHECK(tally_fill_predictions(t, 0, N, &p) == 0);
        CHECK(memcmp(p.status, pref.status, N) == 0);
        CHECK(memcmp(p.labels, pref.labels, N * sizeof(int32_t)) == 0);
        CHECK(memcmp(p.topk, pref.topk, N * K * sizeof(int32_t)) == 0);
        CHECK(memcmp(p.loss, pref.loss, N * sizeof(float)) == 0);
        tally_destroy(&t);
        CHECK(t == NULL);
        /* Show that the property is not free: summing in a random order
         * gives different bits for these losses (what a naive tally does). */
        static uint32_t order[N];
        for (uint32_t i = 0; i < N; i++)
            order[i] = i;
        s_shuffle(order, N);
        double arrival = 0.0;
        for (uint32_t i = 0; i < N; i++)
            if (!s_truth[order[i]].failed)
                arrival += s_truth[order[i]].loss;
        arrival_sum_differed |= arrival != mref.loss_sum;
    }
    CHECK(arrival_sum_differed);
    tally_destroy(&ref);
}

static void s_check_unchanged(tally_t *t, const ev_metric_t *before)
{
    ev_metric_t after;
    tally_fill_metric(t, &after);
    CHECK(after.samples == before->samples && after.failed == before->failed);
    CHECK(after.duplicates == before->duplicates);
    CHECK(after.correct_top1 == before->correct_top1);
    CHECK(after.correct_top5 == before->correct_top5);
    CHECK(after.loss_sum == before->loss_sum);
}

static void test_invalid(void)
{
    tally_t *t = tally_new(0, 1, 10, 4, 2, false);
    CHECK(t != NULL);
    int32_t ok[2] = {1, 2};
    CHECK(tally_add_result(t, 0, 1, ok, 2, 0.5f) == 0);
    ev_metric_t before;
    tally_fill_metric(t, &before);
    ev_cell_t cells_before[16];
    uint64_t ncells_before = before.ncells;
    CHECK(ncells_before == 1);
    memcpy(cells_before, before.cells, ncells_before * sizeof *before.cells);
    int32_t bad_hi[2] = {1, 4}, bad_neg[2] = {-1, 2};
    CHECK(tally_add_result(t, 10, 1, ok, 2, 0.5f) == -1);       /* id >= n */
    CHECK(tally_add_result(t, 1, 4, ok, 2, 0.5f) == -1);        /* label >= nc */
    CHECK(tally_add_result(t, 1, -1, ok, 2, 0.5f) == -1);       /* label < 0 */
    CHECK(tally_add_result(t, 1, 1, bad_hi, 2, 0.5f) == -1);    /* top-k class >= nc */
    CHECK(tally_add_result(t, 1, 1, bad_neg, 2, 0.5f) == -1);   /* top-k class < 0 */
    CHECK(tally_add_result(t, 1, 1, ok, 1, 0.5f) == -1);        /* k mismatch */
    CHECK(tally_add_result(t, 1, 1, ok, 3, 0.5f) == -1);        /* k mismatch */
    CHECK(tally_add_result(t, 1, 1, NULL, 2, 0.5f) == -1);      /* no top-k */
    CHECK(tally_add_result(t, 1, 1, ok, 2, -INFINITY) == -1);
    CHECK(tally_add_result(t, 1, 1, ok, 2, -0.25f) == -1);
    CHECK(tally_add_result(t, 0, 9, ok, 2, 0.5f) == -1);        /* invalid beats duplicate */
    CHECK(tally_add_failed(t, 10) == -1);
    CHECK(tally_add_failed(t, UINT64_MAX) == -1);
    s_check_unchanged(t, &before);
    ev_metric_t after;
    tally_fill_metric(t, &after);
    CHECK(after.ncells == ncells_before &&
          memcmp(after.cells, cells_before, ncells_before * sizeof *after.cells) == 0);
    CHECK(tally_accounted(t) == 1 && !tally_complete(t));
    ev_predictions_t p;
    CHECK(tally_fill_predictions(t, 0, 1, &p) == -1); /* no predictions kept */
    tally_destroy(&t);

    CHECK(tally_new(0, 0, 10, 0, 5, false) == NULL);
    /* ImageNet-21k's classes: the confusion is sparse, a few cells */
    t = tally_new(0, 0, 4, 21841, 2, false);
    CHECK(t != NULL);
    int32_t far[2] = {21840, 3};
    CHECK(tally_add_result(t, 0, 21840, far, 2, 0.5f) == 0);
    CHECK(tally_add_result(t, 1, 7, far, 2, 0.5f) == 0);
    CHECK(tally_add_result(t, 2, 7, far, 2, 0.5f) == 0);
    tally_fill_metric(t, &after);
    CHECK(after.ncells == 2 && after.cells[0].truth == 7 && after.cells[0].pred == 21840 &&
          after.cells[0].count == 2 && after.cells[1].truth == 21840 && after.cells[1].count == 1);
    tally_destroy(&t);
    CHECK(tally_new(0, 0, 10, TALLY_MAX_CLASSES + 1, 5, false) == NULL);
    CHECK(tally_new(0, 0, 10, 10, 0, false) == NULL);
    CHECK(tally_new(0, 0, 10, 10, TALLY_MAX_K + 1, false) == NULL);
    CHECK(tally_new(0, 0, 10, 2, 5, false) == NULL); /* k > classes */
    t = tally_new(0, 0, 10, 2, 2, false);
    CHECK(t != NULL);
    tally_destroy(&t);
    tally_destroy(&t); /* NULL is fine */
}

static void test_small_exact(void)
{
    /* 4 samples, 3 classes, k=2, one failed, one re-sent. */
    tally_t *t = tally_new(1, 0, 4, 3, 2, true);
    int32_t a[2] = {0, 1}, b[2] = {2, 1}, c[2] = {1, 2};
    CHECK(tally_add_result(t, 2, 1, b, 2, 2.0f) == 0); /* top-2 hit */
    CHECK(tally_add_failed(t, 1) == 0);
    CHECK(tally_add_result(t, 1, 0, a, 2, 1.0f) == 1); /* after failed: duplicate */
    CHECK(tally_add_result(t, 0, 0, a, 2, 0.25f) == 0);
    CHECK(!tally_complete(t));
    ev_predictions_t p;
    CHECK(tally_fill_predictions(t, 1, 3, &p) == 0);
    CHECK(p.first == 1 && p.n == 3 && p.total == 4 && p.k == 2);
    CHECK(p.status[0] == TALLY_FAILED && p.status[1] == TALLY_RESULT && p.status[2] == TALLY_MISSING);
    CHECK(p.labels[0] == -1 && p.labels[1] == 1 && p.labels[2] == -1);
    CHECK(p.topk[2] == 2 && p.topk[3] == 1 && p.loss[1] == 2.0f && p.loss[0] == 0.0f);
    CHECK(tally_fill_predictions(t, 2, 3, &p) == -1);
    CHECK(tally_fill_predictions(t, 5, 0, &p) == -1);
    CHECK(tally_fill_predictions(t, 4, 0, &p) == 0);
    CHECK(tally_add_result(t, 3, 2, c, 2, 0.5f) == 0); /* wrong: top1 1, in top-2 */
    CHECK(tally_complete(t));
    ev_metric_t m;
    tally_fill_metric(t, &m);
    CHECK(m.samples == 3 && m.failed == 1 && m.duplicates == 1 && m.planned == 4);
    CHECK(m.correct_top1 == 1 && m.correct_top5 == 3);
    CHECK(m.loss_sum == 2.75);
    const uint64_t conf[9] = {1, 0, 0, /* true 0 */ 0, 0, 1, /* true 1 */ 0, 1, 0};
    CHECK(s_same_cells(&m, conf, 3) && m.ncells == 3);
    CHECK(m.class_names == NULL && m.workers == 0 && !m.final);
    tally_destroy(&t);
}

/* A diverged model's NaN/+inf losses are results: counted (top-1 as sent),
 * the loss sum follows IEEE (NaN wins), nonfinite_loss says how many. */
static void test_nonfinite_loss(void)
{
    tally_t *t = tally_new(0, 0, 4, 3, 2, false);
    int32_t right[2] = {1, 2}, wrong[2] = {0, 2};
    CHECK(tally_add_result(t, 0, 1, right, 2, 0.5f) == 0);
    CHECK(tally_add_result(t, 1, 1, wrong, 2, INFINITY) == 0);
    ev_metric_t m;
    tally_fill_metric(t, &m);
    CHECK(m.samples == 2 && m.nonfinite_loss == 1 && isinf(m.loss_sum));
    CHECK(tally_add_result(t, 2, 1, right, 2, NAN) == 0);
    CHECK(tally_add_result(t, 2, 1, right, 2, NAN) == 1);   /* duplicate, not counted twice */
    CHECK(tally_add_result(t, 3, 0, wrong, 2, 1.0f) == 0);
    tally_fill_metric(t, &m);
    CHECK(m.samples == 4 && tally_complete(t) && m.nonfinite_loss == 2 && isnan(m.loss_sum));
    CHECK(m.correct_top1 == 3 && m.correct_top5 == 3);
    tally_destroy(&t);
}

int main(void)
{
    s_make_truth();
    test_small_exact();
    test_invalid();
    test_nonfinite_loss();
    test_order_independence();
    return check_done("test_tally");
}
