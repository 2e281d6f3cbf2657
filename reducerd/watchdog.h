/* watchdog — no wait is unbounded: a gpud silent for --worker-timeout is
 * declared dead, a job without progress for --stall-timeout fails naming
 * what is missing, and a job whose every worker's answers are refused
 * (a model/dataset mismatch) fails instead of hanging. */
#ifndef DDP_REDUCERD_WATCHDOG_H
#define DDP_REDUCERD_WATCHDOG_H

#include "reducerd/reducer.h"

/* Declares silent gpuds dead (an eval job goes on without them: loaderd
 * re-sends their batches; a training job loses the rank: membership.c). */
void watchdog_check_liveness(reducer_t *self);
/* Several loaderds (docs/SCALE.md): one of them silent for --worker-timeout
 * (it died, or cannot reach reducerd) fails the job at once, naming it:
 * its shard's samples would never come. */
void watchdog_check_loaders(reducer_t *self, int64_t now_ms);
void watchdog_check_refused_workers(reducer_t *self, int64_t now_ms);
/* Heartbeats and rejected messages are not progress: only what moves the
 * count (accepted results and failures, plans, new workers) resets the
 * stall clock (last_activity_ms), so nothing keeps a stuck job alive. */
void watchdog_check_stall(reducer_t *self, int64_t now_ms);

#endif
