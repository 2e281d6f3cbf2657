/* train_ahead — a training rank reads loaderd's next message while a step
 * runs (between the model's begin and end: trainer_batch_t.ahead) and, when
 * it is the next step's train batch of the same shape, stages its pixels
 * into the training graph (model_train_stage_u8): on cuda the host's copy
 * and the upload overlap the step's device work, and the next step's begin
 * does not write them again (docs/CUDA.md "The input path"). The message
 * is kept and handled, in order, before the socket is read again (main.c's
 * loop, reducerd and the heartbeat first, as between any two messages).
 * One loaderd only (several: parts, merged per step), --wire uint8 only (a
 * --wire jpeg shard's decode agrees over the ring: it waits for its step);
 * DDPIPE_TRAIN_OVERLAP=0 reads nothing ahead. */
#ifndef DDP_GPUD_TRAIN_AHEAD_H
#define DDP_GPUD_TRAIN_AHEAD_H

#include <stdbool.h>

#include "gpud/gpud.h"

/* What trainer_batch_t.ahead_ctx points to: the rank and its running step's
 * batch (as trained). */
typedef struct {
    gpud_t *self;
    const ddp_batch_t *cur;
} train_ahead_ctx_t;

/* trainer_batch_t.ahead: at most one message read (without waiting) and
 * kept; staged when it is the next step's batch. */
void train_ahead_peek(void *ctx);
/* Whether a message read ahead waits to be handled. */
bool train_ahead_kept(const gpud_t *self);
/* The kept message moved into *m with the loaderd it came from (false:
 * none kept). */
bool train_ahead_take(gpud_t *self, ddp_msg_t *m, int *loader);
/* After a taken message was handled: a batch staged from it whose step did
 * not run is forgotten by the model before its memory goes. */
void train_ahead_done(gpud_t *self, const ddp_msg_t *m);

#endif
