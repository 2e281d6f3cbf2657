/* train_epoch — the ends of a training epoch at a rank, in their order:
 * END(e, TRAIN) from loaderd (rank 0's BatchNorm buffers to every rank,
 * the inference network refolded for validation), then reducerd's
 * EPOCH(e) (the decision, the checkpoint, at the job's end the final
 * weights and DONE). An EPOCH that comes first waits in pending.epoch.
 * A role over gpud_t, below train.c. */
#ifndef DDP_GPUD_TRAIN_EPOCH_H
#define DDP_GPUD_TRAIN_EPOCH_H

#include "gpud/gpud.h"

/* EPOCH from reducerd: handled now if this rank's END(TRAIN) of it is,
 * else kept as pending. */
void train_epoch_on_message(gpud_t *self, const ddp_epoch_t *ep);
/* EPOCH(e) handled (a duplicate is ignored): the counters, rank 0's
 * checkpoint every --checkpoint-every epochs and at a stop, then the
 * final writes and DONE. */
void train_epoch_handle(gpud_t *self, const ddp_epoch_t *ep);
/* The pending EPOCH, handled when its epoch is upto or earlier (after its
 * END(TRAIN), or when a batch of a later epoch proves this rank finished
 * it); it stays pending while --fault-hold-epoch holds it. */
void train_epoch_flush(gpud_t *self, int64_t upto);
/* END(e, TRAIN): the BatchNorm broadcast, then a pending EPOCH(e), then a
 * STOP(0) that waited for this END. 0, or -1 (logged). */
int train_epoch_end(gpud_t *self, uint32_t epoch);
/* The BatchNorm broadcast alone (pending.bn_redo after a new generation).
 * 0, or -1 (logged). */
int train_epoch_sync_bn(gpud_t *self, uint32_t epoch);

#endif
