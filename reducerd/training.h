/* training — reducerd --train, the training coordinator: the gang of
 * ranks (WELCOME once all --workers joined, with the ring), each epoch's
 * train and validation plans, the early-stop decision and EPOCH, and a
 * restarted rank failing the job (docs/TRAINING.md); a lost rank is
 * membership.c's. */
#ifndef DDP_REDUCERD_TRAINING_H
#define DDP_REDUCERD_TRAINING_H

#include "reducerd/reducer.h"

void training_on_join(reducer_t *self, zframe_t *route, const ddp_join_t *join);
/* A PLAN from the trusted loader. */
void training_on_plan(reducer_t *self, zframe_t *route, ddp_plan_t *plan);
/* Called from the loop: decides the epoch once its tallies are complete;
 * after a stop, ends the job on rank 0's DONE or its deadline. */
void training_tick(reducer_t *self);
/* DONE from gpud P of a training job: rank 0 reporting the final writes
 * (code 0, awaited after a stop), a failed checkpoint or weights write (4)
 * or a non-finite step (5) ends the job with that code; anything else is
 * false (the caller rejects it). */
bool training_on_rank_done(reducer_t *self, const peer_t *p, const ddp_done_t *done);

#endif
