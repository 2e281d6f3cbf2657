/* calib — calibration bins of top-1 confidence, for the expected
 * calibration error as TorchMetrics' MulticlassCalibrationError(n_bins=15,
 * norm="l1") (common/scorehist.h calib_bin): per bin the samples, those
 * whose top-1 is right, and the sum of their quantized confidences (an
 * integer, so exact and independent of arrival order). 16 bins: the 15 of
 * [0, 1) and confidence 1.0 (bucketize's last). */
#ifndef DDP_REDUCERD_CALIB_H
#define DDP_REDUCERD_CALIB_H

#include <stdbool.h>
#include <stdint.h>

#include "common/scorehist.h"

#define CALIB_SLOTS (CALIB_BINS + 1u)

typedef struct {
    uint64_t count[CALIB_SLOTS];
    uint64_t correct[CALIB_SLOTS];
    uint64_t qsum[CALIB_SLOTS];
} calib_t;

/* q: the top-1 class's quantized probability; correct: top-1 == label. */
static inline void calib_add(calib_t *self, uint32_t q, bool correct)
{
    uint32_t b = calib_bin(q);
    self->count[b]++;
    self->correct[b] += correct;
    self->qsum[b] += q;
}

static inline double calib_value(const calib_t *self)
{
    return calib_ece(self->count, self->correct, self->qsum);
}

#endif
