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
/* Called from the loop: decides the epoch once its tallies are complete. */
void training_tick(reducer_t *self);

#endif
