#include "reducerd/tally.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "reducerd/calib.h"
#include "reducerd/curves.h"

_Static_assert(PROB_BINS == EVENT_PROB_BINS && CALIB_SLOTS == EVENT_CALIB_SLOTS,
               "proto/event.h and common/scorehist.h disagree on the bins");

struct tally {
    uint32_t epoch;
    uint8_t phase;
    uint64_t n;
    uint32_t nc;
    uint32_t k;
    uint64_t *seen;      /* bitmap, one bit per id: result or failed */
    float *loss;         /* n; 0 for ids without a result (adds nothing) */
    confusion_t *confusion; /* (true, top1) -> count, sparse */
    uint64_t samples, failed, correct1, correct5, duplicates;
    uint64_t nonfinite;  /* results whose loss is NaN or inf */
    /* with keep_predictions only: */
    uint8_t *status; /* n */
    int32_t *labels; /* n */
    int32_t *topk;   /* n*k */
    /* with probabilities only (tally_enable_probs): */
    curves_t *curves;
    calib_t calib;
    uint32_t nprob;   /* kept per sample for the predictions: 0, k or nc */
    uint16_t *probs;  /* n*nprob */
    double *auc, *ap; /* nc, filled by tally_fill_metric */
    uint64_t calib_out[3 * CALIB_SLOTS];
    int32_t curve_class[EVENT_MAX_CURVES];
    uint32_t *curve_pos, *curve_neg; /* EVENT_MAX_CURVES * PROB_BINS */
};

static bool s_bit(const uint64_t *bits, uint64_t i) { return (bits[i >> 6] >> (i & 63)) & 1u; }
static void s_set(uint64_t *bits, uint64_t i) { bits[i >> 6] |= (uint64_t)1 << (i & 63); }

/* calloc that refuses element counts whose byte size overflows size_t. */
static void *s_calloc(uint64_t count, size_t size)
{
    if (size && count > SIZE_MAX / size)
        return NULL;
    return calloc(count ? (size_t)count : 1, size);
}

static int s_alloc_predictions(tally_t *self)
{
    self->status = s_calloc(self->n, 1);
    self->labels = s_calloc(self->n, sizeof(int32_t));
    self->topk = (self->n <= UINT64_MAX / self->k) ? s_calloc(self->n * self->k, sizeof(int32_t))
                                                   : NULL;
    if (!self->status || !self->labels || !self->topk)
        return -1;
    /* -1 marks "no class" for ids that never get a result */
    memset(self->labels, 0xff, self->n * sizeof(int32_t));
    memset(self->topk, 0xff, self->n * self->k * sizeof(int32_t));
    return 0;
}

tally_t *tally_new(uint32_t epoch, uint8_t phase, uint64_t n, uint32_t num_classes, uint32_t k,
                   bool keep_predictions)
{
    if (num_classes == 0 || num_classes > TALLY_MAX_CLASSES || k == 0 || k > TALLY_MAX_K) {
        log_error("tally: bad shape: %u classes (1..%u), k=%u (1..%u)", num_classes,
                  TALLY_MAX_CLASSES, k, TALLY_MAX_K);
        return NULL;
    }
    if (k > num_classes) {
        /* a top-k never lists more classes than exist; gpud sends
         * k = min(num_classes, DDP_MAX_K), and the tally must use the same */
        log_error("tally: k=%u is larger than the %u classes: use k = min(classes, %u)", k,
                  num_classes, TALLY_MAX_K);
        return NULL;
    }
    if (n > (uint64_t)1 << 40) {
        log_error("tally: plan of %llu samples is larger than 2^40", (unsigned long long)n);
        return NULL;
    }
    tally_t *self = calloc(1, sizeof *self);
    if (!self)
        goto oom;
    self->epoch = epoch;
    self->phase = phase;
    self->n = n;
    self->nc = num_classes;
    self->k = k;
    self->seen = s_calloc((n + 63) / 64, sizeof(uint64_t));
    self->loss = s_calloc(n, sizeof(float));
    self->confusion = confusion_new();
    if (!self->seen || !self->loss || !self->confusion)
        goto oom;
    if (keep_predictions && s_alloc_predictions(self) != 0)
        goto oom;
    return self;
oom:
    log_error("tally: out of memory for %llu samples x %u classes (k=%u%s)",
              (unsigned long long)n, num_classes, k, keep_predictions ? ", with predictions" : "");
    tally_destroy(&self);
    return NULL;
}

void tally_destroy(tally_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    tally_t *self = *self_p;
    free(self->seen);
    free(self->loss);
    confusion_destroy(&self->confusion);
    free(self->status);
    free(self->labels);
    free(self->topk);
    curves_destroy(&self->curves);
    free(self->probs);
    free(self->auc);
    free(self->ap);
    free(self->curve_pos);
    free(self->curve_neg);
    free(self);
    *self_p = NULL;
}

static bool s_result_valid(const tally_t *self, uint64_t id, int32_t label, const int32_t *topk,
                           uint32_t k, float loss)
{
    if (id >= self->n || k != self->k || !topk)
        return false;
    if (label < 0 || (uint32_t)label >= self->nc)
        return false;
    for (uint32_t j = 0; j < k; j++)
        if (topk[j] < 0 || (uint32_t)topk[j] >= self->nc)
            return false;
    /* NaN and +inf are data (a diverged model: counted, see nonfinite);
     * a negative cross-entropy is not */
    return isnan(loss) || loss >= 0.0f;
}

int tally_enable_probs(tally_t *self, uint32_t keep)
{
    if (keep != 0 && keep != self->k && keep != self->nc) {
        log_error("tally: keep %u probabilities per sample: want 0, k=%u or %u classes", keep,
                  self->k, self->nc);
        return -1;
    }
    if (self->n > UINT32_MAX) {
        log_error("probability metrics count in 32 bits: %llu samples is too many",
                  (unsigned long long)self->n);
        return -1;
    }
    self->curves = curves_new(self->nc);
    if (!self->curves)
        return -1;
    self->auc = calloc(self->nc, sizeof(double));
    self->ap = calloc(self->nc, sizeof(double));
    self->curve_pos = calloc((size_t)EVENT_MAX_CURVES * PROB_BINS, sizeof(uint32_t));
    self->curve_neg = calloc((size_t)EVENT_MAX_CURVES * PROB_BINS, sizeof(uint32_t));
    if (self->status && keep) {
        self->nprob = keep;
        self->probs = s_calloc(self->n * keep, sizeof(uint16_t));
    }
    if (!self->auc || !self->ap || !self->curve_pos || !self->curve_neg ||
        (self->nprob && !self->probs)) {
        log_error("tally: out of memory for the probability metrics of %u classes", self->nc);
        return -1;
    }
    return 0;
}

/* The probability parts of a result already counted. */
static void s_add_probs(tally_t *self, uint64_t id, int32_t label, const int32_t *topk,
                        const uint16_t *q)
{
    curves_add(self->curves, label, q);
    calib_add(&self->calib, q[topk[0]], topk[0] == label);
    if (!self->probs)
        return;
    uint16_t *row = self->probs + id * self->nprob;
    for (uint32_t j = 0; j < self->nprob; j++)
        row[j] = self->nprob == self->k ? q[topk[j]] : q[j]; /* k == nc: top-k order */
}

int tally_add_result(tally_t *self, uint64_t id, int32_t label, const int32_t *topk, uint32_t k,
                     float loss)
{
    return tally_add_result_probs(self, id, label, topk, k, loss, NULL, 0);
}

int tally_add_result_probs(tally_t *self, uint64_t id, int32_t label, const int32_t *topk,
                           uint32_t k, float loss, const uint16_t *q, uint32_t nq)
{
    if (!self || !s_result_valid(self, id, label, topk, k, loss))
        return -1;
    if (self->curves && (!q || nq != self->nc))
        return -1; /* a worker without --probs in a job that asks for them */
    if (q)
        for (uint32_t c = 0; c < nq; c++)
            if (q[c] > PROB_RES)
                return -1;
    if (s_bit(self->seen, id)) {
        self->duplicates++;
        return 1;
    }
    if (confusion_add(self->confusion, (uint32_t)label, (uint32_t)topk[0]) < 0) {
        log_error("tally: out of memory for the confusion matrix's cells at %llu samples",
                  (unsigned long long)self->samples);
        return -1;
    }
    s_set(self->seen, id);
    self->samples++;
    self->loss[id] = loss;
    self->nonfinite += !isfinite(loss);
    if (topk[0] == label)
        self->correct1++;
    for (uint32_t j = 0; j < k; j++)
        if (topk[j] == label) {
            self->correct5++;
            break;
        }
    if (self->status) {
        self->status[id] = TALLY_RESULT;
        self->labels[id] = label;
        memcpy(self->topk + id * k, topk, k * sizeof(int32_t));
    }
    if (self->curves)
        s_add_probs(self, id, label, topk, q);
    return 0;
}

int tally_add_failed(tally_t *self, uint64_t id) { return tally_add_failed_label(self, id, -1); }

int tally_add_failed_label(tally_t *self, uint64_t id, int32_t label)
{
    if (!self || id >= self->n || label < -1 || (label >= 0 && (uint32_t)label >= self->nc))
        return -1;
    if (s_bit(self->seen, id)) {
        self->duplicates++;
        return 1;
    }
    s_set(self->seen, id);
    self->failed++;
    if (self->status) {
        self->status[id] = TALLY_FAILED;
        self->labels[id] = label;
    }
    return 0;
}

uint32_t tally_epoch(const tally_t *self) { return self->epoch; }
uint8_t tally_phase(const tally_t *self) { return self->phase; }
uint64_t tally_planned(const tally_t *self) { return self->n; }
uint64_t tally_accounted(const tally_t *self) { return self->samples + self->failed; }
bool tally_complete(const tally_t *self) { return tally_accounted(self) == self->n; }

/* In id order, never arrival order: see the header. Ids without a result
 * hold 0.0f, and x + 0.0 == x, so they need no test. */
static double s_loss_sum(const tally_t *self)
{
    double sum = 0.0;
    for (uint64_t i = 0; i < self->n; i++)
        sum += (double)self->loss[i];
    return sum;
}

/* Is class a's AP worse than b's? Lower first, ties by id; NaN (no
 * positives) never worst: there is no curve to draw. */
static bool s_worse(const double *ap, uint32_t a, uint32_t b)
{
    return ap[a] < ap[b] || (ap[a] == ap[b] && a < b);
}

static void s_fill_probs(const tally_t *self, ev_metric_t *out)
{
    tally_t *t = (tally_t *)self; /* the output buffers, rewritten on every fill */
    curves_metrics(self->curves, t->auc, t->ap);
    for (uint32_t b = 0; b < CALIB_SLOTS; b++) {
        t->calib_out[b] = self->calib.count[b];
        t->calib_out[CALIB_SLOTS + b] = self->calib.correct[b];
        t->calib_out[2 * CALIB_SLOTS + b] = self->calib.qsum[b];
    }
    uint32_t m = 0;
    for (uint32_t c = 0; c < self->nc; c++) {
        if (isnan(self->ap[c]))
            continue;
        uint32_t at = m < EVENT_MAX_CURVES ? m++ : EVENT_MAX_CURVES;
        while (at > 0 && s_worse(self->ap, c, (uint32_t)t->curve_class[at - 1])) {
            if (at < EVENT_MAX_CURVES)
                t->curve_class[at] = t->curve_class[at - 1];
            at--;
        }
        if (at < EVENT_MAX_CURVES)
            t->curve_class[at] = (int32_t)c;
    }
    for (uint32_t i = 0; i < m; i++) {
        uint32_t c = (uint32_t)self->curve_class[i];
        memcpy(t->curve_pos + (size_t)i * PROB_BINS, curves_pos(self->curves, c),
               PROB_BINS * sizeof(uint32_t));
        memcpy(t->curve_neg + (size_t)i * PROB_BINS, curves_neg(self->curves, c),
               PROB_BINS * sizeof(uint32_t));
    }
    out->has_probs = true;
    out->ece = calib_value(&self->calib);
    out->calib = t->calib_out;
    out->auc = t->auc;
    out->ap = t->ap;
    out->ncurves = m;
    out->curve_class = t->curve_class;
    out->curve_pos = t->curve_pos;
    out->curve_neg = t->curve_neg;
}

void tally_fill_metric(const tally_t *self, ev_metric_t *out)
{
    memset(out, 0, sizeof *out);
    out->epoch = self->epoch;
    out->phase = self->phase;
    out->planned = self->n;
    out->samples = self->samples;
    out->failed = self->failed;
    out->correct_top1 = self->correct1;
    out->correct_top5 = self->correct5;
    out->duplicates = self->duplicates;
    out->nonfinite_loss = self->nonfinite;
    out->loss_sum = s_loss_sum(self);
    out->num_classes = self->nc;
    const ev_cell_t *cells;
    if (confusion_cells(self->confusion, &cells, &out->ncells) < 0)
        log_error("tally: out of memory sorting the confusion matrix's cells: the metric "
                  "goes without them");
    out->cells = (ev_cell_t *)cells;
    if (self->curves)
        s_fill_probs(self, out);
}

int tally_fill_predictions(const tally_t *self, uint64_t first, uint64_t n, ev_predictions_t *out)
{
    if (!self->status || first > self->n || n > self->n - first)
        return -1;
    memset(out, 0, sizeof *out);
    out->epoch = self->epoch;
    out->phase = self->phase;
    out->first = first;
    out->n = n;
    out->total = self->n;
    out->k = self->k;
    out->status = self->status + first;
    out->labels = self->labels + first;
    out->topk = self->topk + first * self->k;
    out->loss = self->loss + first;
    out->paths = NULL;
    out->nprob = self->nprob;
    out->probs = self->probs ? self->probs + first * self->nprob : NULL;
    return 0;
}
