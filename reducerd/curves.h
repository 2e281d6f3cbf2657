/* curves — per-class one-vs-rest histograms of quantized probabilities,
 * from which ROC-AUC, average precision and the ROC/PR curves follow
 * exactly (common/scorehist.h).
 *
 * Each sample adds its probability of every class c to class c's pos
 * (label == c) or neg histogram at bin q. Integer counts: the result does
 * not depend on arrival order or on the number of workers.
 * Memory: num_classes x PROB_BINS x 2 x 4 bytes (80 KiB per class, 80 MiB
 * for 1000 classes), independent of the number of samples; hence at most
 * CURVES_MAX_CLASSES classes and 2^32 - 1 samples.
 */
#ifndef DDP_REDUCERD_CURVES_H
#define DDP_REDUCERD_CURVES_H

#include <stdint.h>

#include "common/scorehist.h"

#define CURVES_MAX_CLASSES 1024u

typedef struct curves curves_t;

/* NULL (and logged) when nc is 0 or above CURVES_MAX_CLASSES, or out of memory. */
curves_t *curves_new(uint32_t nc);
void curves_destroy(curves_t **self_p);
/* q: nc quantized probabilities (0..PROB_RES) of one sample of class label. */
void curves_add(curves_t *self, int32_t label, const uint16_t *q);
/* Class c's histograms, PROB_BINS each. */
const uint32_t *curves_pos(const curves_t *self, uint32_t c);
const uint32_t *curves_neg(const curves_t *self, uint32_t c);
/* auc, ap: nc each (NaN where undefined). */
void curves_metrics(const curves_t *self, double *auc, double *ap);

#endif
