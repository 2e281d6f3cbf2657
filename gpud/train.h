/* train — the training role of a worker (--train): one data-parallel rank
 * of docs/TRAINING.md. The order of a run:
 *
 *   train_open       before JOIN: the training state (self->train,
 *                    train_state.h), the trainer, a resumed checkpoint,
 *                    the ring's PULL socket (JOIN carries its endpoint)
 *   (joining.c       a rank joining a running job: the state and its place)
 *   train_start      after WELCOME: the ring to the next rank, SyncBatchNorm,
 *                    rank 0's weights on every rank (not to a joiner)
 *   train_receive    loaderd's train batches and END(TRAIN), in step order
 *   train_on_reducer EPOCH, MEMBERS (a new generation: the ring re-forms)
 *                    and stray COMMITs between steps
 *   train_finish     on the way out: the checkpoint of a stopped run
 *
 * Below it, each a role over gpud_t: train_step.c (one step, from the
 * batch to the optimizer step), train_epoch.c (END(TRAIN) and EPOCH),
 * train_save.c (checkpoint, a joiner's STATE), train_ring.c (broadcast,
 * SyncBatchNorm's sum).
 */
#ifndef DDP_GPUD_TRAIN_H
#define DDP_GPUD_TRAIN_H

#include "gpud/gpud.h"

/* 0, or -1 (logged); self->train (gpud_destroy frees it) unless out of memory. */
int train_open(gpud_t *self);
/* The training state of a checkpoint: the file `what` (image NULL), or a
 * joiner's image of one; 0, or -1 (logged). */
int train_load_state(gpud_t *self, const char *what, const void *image, size_t len);
/* 0, or -1 (logged): the job cannot start. */
int train_start(gpud_t *self);
/* A message from loaderd: 0 handled, -1 failed (logged: the worker stops),
 * 1 not a training message. */
int train_receive(gpud_t *self, ddp_msg_t *m);
/* A message from reducerd between steps: 0 handled, -1 failed (logged: the
 * worker stops), 1 not a training message (STOP: link.c's). */
int train_on_reducer(gpud_t *self, ddp_msg_t *m);
/* Between messages: a state reducerd asked for while this rank was busy
 * goes out once no step is open (rank 0 of a paused job). */
void train_idle(gpud_t *self);
/* The loop ended on a signal: fail, saving the last completed step. */
void train_interrupted(gpud_t *self);
/* Rank 0 saves the last committed step when the run stopped early (a
 * failed collective or step, a failing STOP, a signal), unless reducerd
 * fenced this rank out; rc, or 1 when such a stop found rc 0. */
int train_finish(gpud_t *self, int rc);

#endif
