/* eval — the eval role of a worker: BATCH in, RESULT to reducerd, CREDIT
 * to loaderd. */
#ifndef DDP_GPUD_EVAL_H
#define DDP_GPUD_EVAL_H

#include "gpud/gpud.h"

/* Before the first credit: a worker without --train refuses a training
 * job. 0, or -1 (logged). */
int eval_start(gpud_t *self);
/* One eval (or validation) batch taken; -1 (logged) fails the worker.
 * An eval job's batch is answered later (the pipelined eval: its forward
 * queued, its message moved out of *msg, which is left empty): when the
 * next batch has been staged (eval_on_batch again) or when no message
 * waits (eval_finish); a training job's validation batch at once. */
int eval_on_batch(gpud_t *self, ddp_msg_t *msg);
/* Whether a batch waits for its answer. */
bool eval_pending(const gpud_t *self);
/* The waiting batch answered (its logits read, RESULT, CREDIT); nothing
 * waiting: 0. -1 (logged) fails the worker. */
int eval_finish(gpud_t *self);
/* The waiting batch's state freed unanswered (the worker's end). */
void eval_drop(gpud_t *self);

#endif
