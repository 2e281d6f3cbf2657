/* eval — the eval phase (and training's validation): ranges of the eval
 * set decoded ahead on the threads (at most --prefetch batches), each sent
 * to the worker with the most credit; a dead worker's batches come back
 * through dispatch.c. A role over loader_t (loader.h). */
#ifndef DDP_LOADERD_EVAL_H
#define DDP_LOADERD_EVAL_H

#include "loaderd/loader.h"

/* Sends what has credit, decodes the next batch, sends again. 1 when every
 * batch is handed out and answered; 0 not yet (a fatal error sets
 * self->stopped and exit_code). */
int eval_pump(loader_t *self);
/* Work that needs no message: a batch to decode. */
bool eval_busy(const loader_t *self);

#endif
