/* train_state — what a training rank holds beyond the worker (gpud_t):
 * the trainer and its ring, the step and epoch counters a checkpoint
 * keeps, loaderd's parts of the steps to run, a MEMBERS not applied yet,
 * and the work owed between messages (the pending bits below). train.c
 * makes it (train_open; gpud_t's `train`, NULL in an eval worker) and
 * drives it with members.c, joining.c and rank_report.c; gpud_destroy
 * frees it. Where the rank is in its life is not here: gpud_t's state
 * (rank_state.h). */
#ifndef DDP_GPUD_TRAIN_STATE_H
#define DDP_GPUD_TRAIN_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpud/collective.h"
#include "gpud/parts.h"
#include "gpud/ring.h"
#include "gpud/trainer.h"
#include "proto/messages.h"

typedef struct train_state {
    trainer_t *trainer;
    allreduce_t *ring;
    collective_t *coll;            /* the sums' path per generation: ring or NCCL */
    bool welcome_nccl;             /* WELCOME (a joiner: its MEMBERS) said the first
                                    * generation sums over NCCL */
    /* an NCCLID of a generation this rank has not entered yet (relayed
     * before its MEMBERS was applied): taken when it is (members.c) */
    ddp_ncclid_t early_id;
    bool have_early_id;
    char ring_endpoint[DDP_MAX_EP];  /* our resolved PULL endpoint (JOIN.ring) */
    /* training with several loaderds: the parts of steps not complete yet,
     * and those of the step being run (its RESULTs and acks go per part) */
    parts_t *parts;
    part_t *step_parts;
    int n_step_parts;
    uint64_t next_step;            /* S of the next train step */
    int64_t epoch;                 /* the epoch a resume would continue with */
    int64_t epoch_done;            /* last EPOCH(e) handled; start epoch - 1 */
    int64_t train_end_done;        /* last END(e, TRAIN) handled */
    uint32_t streak;
    uint64_t steps_per_epoch;      /* checkpoint metadata: loaderd's plan (BATCH), 0 unknown */
    uint64_t global_batch;         /* checkpoint metadata */
    int64_t good_epoch, good_step; /* rank 0: the checkpoint file's state; -1: none whole */
    bool checkpoint_on_exit;       /* rank 0 saves the last completed step on exit */
    /* Work owed, done when its moment comes. Not states of the rank's life
     * (rank_state.h): each can arrive in any living state, several at once,
     * and is done in whatever state the rank is then. */
    struct {
        bool members;   /* a MEMBERS newer than gpud_t's gen: applied at the next
                           step boundary or collective (members.c) */
        bool epoch;     /* pending_epoch came before its END(TRAIN): handled after it */
        bool snapshot;  /* rank 0: a joiner waits for this rank's state (COMMIT or STATE
                           asked): sent once no step is open */
        bool bn_redo;   /* a new generation: the END(TRAIN) BatchNorm broadcast of an
                           undecided epoch is done again, from the new rank 0 */
    } pending;
    ddp_members_t members;         /* pending.members: that MEMBERS (names owned) */
    ddp_epoch_t pending_epoch;     /* pending.epoch: that EPOCH */
    /* loaderd's next message, read while a step ran (train_ahead.c), and
     * the pixels of the batch staged from it (NULL: none) */
    ddp_msg_t ahead;
    bool have_ahead;
    const uint8_t *staged_px;
    float *loss;                   /* a train batch's per-sample loss and top-k */
    int32_t *topk;
    size_t per_sample_cap;
} train_state_t;

/* Counters at "nothing done": no epoch or END handled, no checkpoint
 * whole; the rest zero. NULL (logged) when out of memory. */
train_state_t *train_state_new(void);
/* The parts, the trainer, the ring, a MEMBERS never applied, the buffers. */
void train_state_destroy(train_state_t **self_p);

#endif
