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
} heartbeat_args_t;

/* args must outlive the actor. A STOP that reducerd sends to the beat
 * socket arrives on the actor as the frames "STOP", code ("1" or "3"),
 * reason. */
zactor_t *heartbeat_new(heartbeat_args_t *args);
#endif
