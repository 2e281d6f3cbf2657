/* phases — loaderd's state machine (loader.h draws it): which (epoch,
 * phase) is planned, when its plan is acked, handed out and done, and what
 * follows it. A role over loader_t; it drives eval.c and training.c. */
#ifndef DDP_LOADERD_PHASES_H
#define DDP_LOADERD_PHASES_H

#include "loaderd/loader.h"

/* JOIN, then the first plan: epoch 0's eval, or --start-epoch's train.
 * 0, or -1 (logged). */
int phases_start(loader_t *self);
/* Every move of the state machine that can be made now, one after the
 * other; -1 on a fatal error. */
int phases_advance(loader_t *self);
/* Work that needs no message (the loop must not wait in poll). */
bool phases_busy(const loader_t *self);

#endif
