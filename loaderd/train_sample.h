/* train_sample — one training sample of an epoch, augmented: the decode
 * and the eval-style transform (or the whole image before RandomResizedCrop)
 * from --cache when it has them, then the random transforms of augment.h
 * drawn per (seed, epoch, id). A role over loader_t, below training.c. */
#ifndef DDP_TRAIN_SAMPLE_H
#define DDP_TRAIN_SAMPLE_H

#include "loaderd/loader.h"

/* Sample ID of epoch EPOCH into OUT (channels x out_h x out_w). 0, or -1
 * with a reason. Thread-safe. */
int train_sample_load(const loader_t *self, uint32_t epoch, uint64_t id, uint8_t *out, char *err,
                      size_t errlen);

#endif
