/* wire — ddpipe messages on ZeroMQ sockets: send (with an optional ROUTER
 * identity), receive with every message decoded and validated, and the
 * per-daemon counters of rejected messages (logged rate-limited per peer,
 * proto/ratelog.h). */
#ifndef DDP_PROTO_WIRE_H
#define DDP_PROTO_WIRE_H

#include "proto/messages.h"
#include "proto/ratelog.h"

/* Send helpers: send msg on sock, with an optional ROUTER identity frame
 * first. Return 0 or -1 (errno from zmq). */
int proto_send(void *sock, zframe_t *identity, const ddp_msg_t *msg);
int proto_send_batch(void *sock, zframe_t *identity, ddp_batch_t *batch);

/* Counters of rejected messages, per daemon (reported in logs and /metrics),
 * and the rate limit of their log lines: one per receiving loop, kept
 * across receives (all zero to start), used by one thread. */
typedef struct {
    uint64_t received;
    uint64_t rejected;
    ratelog_t log;
} proto_stats_t;

/* Receive one message from sock (blocking per the socket's RCVTIMEO).
 * If route is non-NULL the first frame is popped into *route (ROUTER).
 * Returns 0 ok; 1 rejected (logged with the reason, rate-limited by
 * stats->log, counted in stats; stats NULL: nothing counted, every reject
 * logged); -1 on interrupt/timeout/no message. */
int proto_recv(void *sock, zframe_t **route, ddp_msg_t *out, proto_stats_t *stats);

#endif
