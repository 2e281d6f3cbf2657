/* eval — an eval job: one epoch plan; gpuds get their rank as they join;
 * when every id of the plan has a result or a failure, the predictions,
 * the final metric and "end" go out and every peer is told to stop. */
#ifndef DDP_REDUCERD_EVAL_H
#define DDP_REDUCERD_EVAL_H

#include "reducerd/reducer.h"

void eval_on_join(reducer_t *self, zframe_t *route, const ddp_join_t *join);
/* A gpud that could not start (JOIN `failed`, already logged): the held
 * gpuds wait for --start-workers less the ones that failed (at least one
 * joined), not for --start-timeout. */
void eval_on_failed_start(reducer_t *self);
/* A PLAN from the trusted loader. */
void eval_on_plan(reducer_t *self, zframe_t *route, ddp_plan_t *plan);
/* Called from the loop: ends the job once the plan is accounted for and
 * reporterd listens. */
void eval_tick(reducer_t *self);

#endif
