/* tap — reporterd's XPUB for monitors (`ddpipe tap EP`): every event
 * re-published unchanged, and the last state replayed to a late
 * subscriber. */
#ifndef DDP_REPORTERD_TAP_H
#define DDP_REPORTERD_TAP_H

#include "reporterd/reporter.h"

/* Creates the tap socket and its cache, binds --tap. 0, or -1 (logged). */
int tap_open(reporter_t *self);
/* Forwards event message m (already decoded as ev) to the tap and keeps
 * it for late subscribers. */
void tap_forward(reporter_t *self, const ddp_event_t *ev, zmsg_t *m);
/* A monitor (un)subscribed: replay the state it asked for. */
void tap_on_subscription(reporter_t *self);
/* The job is over: keep answering subscriptions (and /metrics, on its own
 * thread) for --linger seconds or until SIGTERM/SIGINT. */
void tap_linger(reporter_t *self);

#endif
