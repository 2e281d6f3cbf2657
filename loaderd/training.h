/* training — the train phase of loaderd (docs/TRAINING.md, step 3): each
 * global step is loaded whole — every rank's shard, augmented per (seed,
 * epoch, id) — so that global_count (the gradient's divisor) is known
 * before any shard leaves; then rank r gets its shard when it has credit.
 * The steps wait in self->window (step_window.h). A role over loader_t
 * (loader.h). */
#ifndef DDP_LOADERD_TRAINING_H
#define DDP_LOADERD_TRAINING_H

#include "loaderd/loader.h"

/* Starts epoch self->epoch's train part at global step FIRST_STEP. */
void training_begin_epoch(loader_t *self, uint64_t first_step);
/* Sends what the ranks have credit for and loads the next step.
 * 1: every step of the epoch is sent; 0: not yet; -1: fatal. */
int training_pump(loader_t *self);
/* Work that needs no message: a step to load. */
bool training_busy(const loader_t *self);
/* Every rank 0..W-1 has sent a CREDIT carrying its rank (of this
 * generation). */
bool training_ranks_known(loader_t *self);
/* The epoch's last step is committed: END(e, TRAIN) may go out. */
bool training_committed(const loader_t *self);
/* The pending MEMBERS (self->members): world W', generation g'; a train
 * part in progress restarts at the MEMBERS step, re-split over W' (STAGE_RANKS
 * until every rank sent a CREDIT of g'). 0, or -1 (logged): fatal. */
int training_on_members(loader_t *self);

#endif
