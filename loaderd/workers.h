/* workers — loaderd's side of the gpuds on the ROUTER: CREDIT (acks and
 * ranks) and HEARTBEAT in, trusted only with the session token reducerd
 * gave (PROTOCOL.md "Trust"); END out; workers declared dead. Who gets
 * which batch is dispatch.c's; a role over loader_t (loader.h). */
#ifndef DDP_LOADERD_WORKERS_H
#define DDP_LOADERD_WORKERS_H

#include "loaderd/loader.h"

/* One message from a worker, handled (a CREDIT before the plan ack is held
 * until the secret arrives). */
void workers_receive(loader_t *self);
/* The CREDITs held before the secret arrived, judged now. */
void workers_judge_held_credits(loader_t *self);
/* END of (epoch, phase) to every live worker. */
void workers_broadcast_end(loader_t *self, uint32_t epoch, uint8_t phase);
/* Declares dead the workers silent or overdue at NOW (dispatch_reap); their
 * eval batches go back to the queue. */
void workers_reap(loader_t *self, int64_t now);

#endif
