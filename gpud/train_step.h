/* train_step — one data-parallel step at a rank (docs/TRAINING.md step 5,
 * docs/ELASTIC.md): the shard checked against the rank's counters and
 * the model, (--wire jpeg) decoded with the ranks agreeing on its failed
 * samples, forward and backward (RANK_STEP_OPEN), the gradients summed
 * over the ring and checked, RESULT to reducerd, STEP and reducerd's
 * answer (RANK_AWAITING_COMMIT), and on COMMIT every rank's same
 * optimizer step, the acks to loaderd (RANK_IDLE). A role over gpud_t,
 * below train.c. */
#ifndef DDP_GPUD_TRAIN_STEP_H
#define DDP_GPUD_TRAIN_STEP_H

#include "gpud/gpud.h"

/* The step of train batch B (its parts: self->train->step_parts). 0 done,
 * dropped (another generation's, a new generation formed) or stopped;
 * -1 failed (logged: the worker stops). */
int train_step_run(gpud_t *self, ddp_batch_t *b);

#endif
