/* coordinator — every message on reducerd's ROUTER, to the role that
 * answers it (joins and plans by mode: eval.c or training.c; results.c;
 * heartbeats, DONE, and messages of an earlier reducerd's session here),
 * and the periodic tick: liveness, progress, the mode's decisions, stalls. */
#ifndef DDP_REDUCERD_COORDINATOR_H
#define DDP_REDUCERD_COORDINATOR_H

#include "reducerd/reducer.h"

/* Receives one message from the ROUTER if one is waiting (never blocks:
 * the router's RCVTIMEO is 0) and answers it; a malformed one is counted by
 * proto_recv and dropped. True when a message was taken, valid or not. */
bool coordinator_receive(reducer_t *self);
/* After every poll (at least every 200 ms). */
void coordinator_tick(reducer_t *self, int64_t now_ms);

#endif
