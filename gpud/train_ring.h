/* train_ring — a training rank's collectives beside the gradients' (the
 * trainer's): rank 0's values on every rank, retried over the re-formed
 * ring of a new generation, and SyncBatchNorm's sum. A role over gpud_t,
 * below train.c, train_step.c and train_epoch.c. */
#ifndef DDP_GPUD_TRAIN_RING_H
#define DDP_GPUD_TRAIN_RING_H

#include "gpud/gpud.h"

/* --ring-timeout in ms: the bound of every collective. */
int train_ring_timeout_ms(const gpud_t *self);
/* model_set_sync_bn's sum (ctx: the gpud_t) over the rank's ring: after a
 * re-form, over the new world. */
int train_ring_sync_bn_sum(void *ctx, double *data, size_t n, char *err, size_t errlen);
/* model_set_exact's sum (bitwise training, ctx: the gpud_t): an xsum
 * summed exactly over the rank's ring (gpud/xsum_ring.h). */
struct xsum;
int train_ring_exact_sum(void *ctx, struct xsum *x, char *err, size_t errlen);
/* Rank 0's values of `which` on every rank; after a membership change
 * (the ring re-formed) again, from the new rank 0. what and epoch name the
 * collective for members_ring_failed. 0, or -1 (logged). */
int train_ring_broadcast(gpud_t *self, trainer_set_t which, const char *what, uint32_t epoch);

#endif
