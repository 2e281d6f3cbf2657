/* step_window — the global steps of one training epoch loaded ahead: a
 * ring of at most `depth` steps, each holding every rank's shard, and per
 * rank the step whose shard it gets next (ranks get their shards in step
 * order, independently of each other). Memory: `depth` global steps of
 * pixels, never a whole epoch. training.c fills and drains it. */
#ifndef DDP_LOADERD_STEP_WINDOW_H
#define DDP_LOADERD_STEP_WINDOW_H

#include "proto/messages.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct {
    uint64_t k;                /* step within the epoch */
    uint32_t global_count;     /* samples of the step that loaded, every shard */
    ddp_batch_t *shard;        /* world batches */
    bool *sent;                /* world flags */
} step_t;

typedef struct step_window {
    int world, depth;
    step_t *steps;             /* ring of depth */
    int head, count;           /* steps[head]: the oldest held */
    uint64_t next_k;           /* next step to load */
    uint64_t *next_send;       /* per rank: the step whose shard it gets next */
} step_window_t;

/* NULL when world or depth is below 1, or out of memory. */
step_window_t *step_window_new(int world, int depth);
void step_window_destroy(step_window_t **self_p);

/* Frees every held step; the epoch's train part starts at FIRST_STEP. */
void step_window_reset(step_window_t *self, uint64_t first_step);
/* Where the next step loads (only while count < depth); step_window_push
 * keeps it, step_clear gives it up. */
step_t *step_window_next_slot(step_window_t *self);
void step_window_push(step_window_t *self);
/* Held step K (head's k <= K < head's k + count). */
step_t *step_window_step(step_window_t *self, uint64_t k);
/* Frees the oldest steps every rank has its shard of. */
void step_window_release(step_window_t *self);

/* Frees a step's shards; it holds nothing after. */
void step_clear(step_t *step, int world);

#endif
