#include "reducerd/tally.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"

struct tally {
    uint32_t epoch;
    uint8_t phase;
    uint64_t n;
    uint32_t nc;
    uint32_t k;
    uint64_t *seen;      /* bitmap, one bit per id: result or failed */
    float *loss;         /* n; 0 for ids without a result (adds nothing) */
    uint64_t *confusion; /* nc*nc, [true*nc + top1] */
    uint64_t samples, failed, correct1, correct5, duplicates;
    uint64_t nonfinite;  /* results whose loss is NaN or inf */
    /* with keep_predictions only: */
    uint8_t *status; /* n */
    int32_t *labels; /* n */
    int32_t *topk;   /* n*k */
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
    self->confusion = s_calloc((uint64_t)num_classes * num_classes, sizeof(uint64_t));
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
    free(self->confusion);
    free(self->status);
    free(self->labels);
    free(self->topk);
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

int tally_add_result(tally_t *self, uint64_t id, int32_t label, const int32_t *topk, uint32_t k,
                     float loss)
{
    if (!self || !s_result_valid(self, id, label, topk, k, loss))
        return -1;
    if (s_bit(self->seen, id)) {
        self->duplicates++;
        return 1;
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
    self->confusion[(uint64_t)label * self->nc + (uint32_t)topk[0]]++;
    if (self->status) {
        self->status[id] = TALLY_RESULT;
        self->labels[id] = label;
        memcpy(self->topk + id * k, topk, k * sizeof(int32_t));
    }
    return 0;
}

int tally_add_failed(tally_t *self, uint64_t id)
{
    if (!self || id >= self->n)
        return -1;
    if (s_bit(self->seen, id)) {
        self->duplicates++;
        return 1;
    }
    s_set(self->seen, id);
    self->failed++;
    if (self->status)
        self->status[id] = TALLY_FAILED;
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
    out->confusion = self->confusion;
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
    return 0;
}
