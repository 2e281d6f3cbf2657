/* link — the worker's link to reducerd and loaderd: JOIN/WELCOME, and
 * every message in, handed to the role that answers it (eval.c, train.c)
 * or to the state (STOP). */
#ifndef DDP_GPUD_LINK_H
#define DDP_GPUD_LINK_H

#include "gpud/gpud.h"

/* JOIN (re-sent every 2 s) until reducerd's WELCOME (rank, world, token,
 * the next ring endpoint: RANK_WELCOMED or RANK_JOINING) or STOP
 * (RANK_STOPPED), within --join-timeout.
 * 0, or -1 (logged). */
int link_join(gpud_t *self);
/* This worker could not start (why: its model, weights or device): one
 * JOIN with `failed` set, so that reducerd's log names the cause and an
 * eval's held gpuds do not wait --start-timeout for it. Best effort (the
 * process exits next): sent with a 2 s linger, no answer awaited. */
void link_report_failed_start(gpud_t *self, const char *why);
/* One message waiting on each socket: BATCH and END from loaderd;
 * EPOCH and STOP from reducerd; a STOP the heartbeat actor relays. */
void link_on_loader(gpud_t *self, int loader);
/* The loaderd message a train step read ahead (train_ahead.h), handled as
 * link_on_loader would have: before the loader sockets are read again,
 * after reducerd's and the heartbeat's messages. */
void link_on_kept(gpud_t *self);
void link_on_reducer(gpud_t *self);
void link_on_heartbeat(gpud_t *self);
/* No message waiting: a kept eval batch answered (eval_finish); a failure
 * fails the worker. */
void link_on_idle(gpud_t *self);

#endif
