/* eval — the eval role of a worker: BATCH in, RESULT to reducerd, CREDIT
 * to loaderd. */
#ifndef DDP_GPUD_EVAL_H
#define DDP_GPUD_EVAL_H

#include "gpud/gpud.h"

/* Before the first credit: a worker without --train refuses a training
 * job. 0, or -1 (logged). */
int eval_start(gpud_t *self);
/* One eval (or validation) batch answered; -1 (logged) fails the worker. */
int eval_on_batch(gpud_t *self, ddp_batch_t *batch);

#endif
