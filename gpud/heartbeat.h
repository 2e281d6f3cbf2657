/* heartbeat — an actor that tells loaderd and reducerd "still alive" every
 * second while the main thread is busy computing, so a long forward pass is
 * never mistaken for a dead worker, and a dead process falls silent. */
#ifndef DDP_GPUD_HEARTBEAT_H
#define DDP_GPUD_HEARTBEAT_H
#include "proto/messages.h"

#include <czmq.h>
#include <stdatomic.h>
#include <stdint.h>

typedef struct {
    const char *loader;        /* endpoints */
    const char *reducer;
    const char *worker;        /* worker name, as in CREDIT */
    int32_t rank;
    int interval_ms;
    _Atomic uint64_t *batches_done;  /* the main thread's counter, read here atomically */
    ddp_auth_t auth;           /* the WELCOME's session token: beats without it are refused */
    int64_t unreachable_ms;    /* no beat deliverable to reducerd this long: STOP the worker; 0 never */
} heartbeat_args_t;

/* args must outlive the actor; it keeps its own copy of rank and auth. A
 * STOP that reducerd sends to the beat socket arrives on the actor as the
 * frames "STOP", code ("1" or "3"), reason. */
zactor_t *heartbeat_new(heartbeat_args_t *args);
/* The beats' rank and token from now on (a new membership generation
 * renumbers the ranks, docs/ELASTIC.md). 0, or -1 when the actor could
 * not be told. */
int heartbeat_set_auth(zactor_t *self, int32_t rank, const ddp_auth_t *auth);
#endif
