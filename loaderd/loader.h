/* loader — loaderd's state: one instance per process, made by main.c
 * (loader_new) and handed as `self` to the role files above it:
 *
 *   main.c          the loop: poll, drain both sockets, heartbeat, reap, advance
 *   phases.c        the state machine below: plans, what follows each phase
 *   eval.c          the eval / validation phase: decode ranges ahead, send them
 *   training.c      the train phase: sharded global steps to their ranks
 *   reducer_link.c  reducerd: JOIN, PLAN, ISSUED, FAILED, HEARTBEAT out;
 *                   WELCOME (trust), REISSUE, EPOCH, MEMBERS, COMMIT, STOP in
 *   workers.c       the gpuds: CREDIT and HEARTBEAT in, END out, dead workers
 *   loader.c        this state: made whole (datasets, sockets, threads) or not at all
 *
 * Imports point down that list (main.c at the top), never up. Below the
 * state: scan (datasets), step_window, dispatch, sampler, augment,
 * transform, pool, options; then common/ and proto/.
 *
 * The loop is a small state machine; eval mode runs
 *   PLAN(0, EVAL) -> EVAL -> IDLE (until STOP)
 * and training (--train), for each epoch e from --start-epoch,
 *   PLAN(e, TRAIN) -> RANKS -> TRAIN -> [PLAN(e, EVAL) -> EVAL] -> EPOCH
 * where EPOCH waits for reducerd's decision: continue with e+1, or IDLE.
 * TRAIN ends (END(e, TRAIN)) once the epoch's last step is committed
 * (reducerd's COMMIT); a new membership generation (MEMBERS,
 * docs/ELASTIC.md) sends the train part back to RANKS at the first step
 * not committed, re-split over the survivors. */
#ifndef DDP_LOADERD_LOADER_H
#define DDP_LOADERD_LOADER_H

#include "common/dataset.h"
#include "common/token.h"
#include "common/image/augment.h"
#include "loaderd/sample_cache.h"
#include "loaderd/dispatch.h"
#include "loaderd/options.h"
#include "loaderd/pool.h"
#include "common/image/sampler.h"
#include "loaderd/step_window.h"
#include "common/image/transform.h"
#include "proto/messages.h"
#include "proto/wire.h"

#include <czmq.h>
#include <stdbool.h>
#include <stdint.h>

/* An eval batch decoded ahead, waiting for a worker's credit. */
typedef struct {
    batch_range_t range;
    ddp_batch_t batch;         /* ids/labels malloc'd, pixels a frame */
} ready_batch_t;

typedef enum {
    STAGE_PLAN,                /* the plan of (epoch, phase) went out: waiting for its ack */
    STAGE_RANKS,               /* training: waiting for every rank's CREDIT */
    STAGE_TRAIN,               /* handing out the epoch's global steps */
    STAGE_EVAL,                /* handing out the eval (validation) batches */
    STAGE_EPOCH,               /* training: waiting for reducerd's EPOCH decision */
    STAGE_IDLE                 /* nothing to hand out: waiting for STOP */
} loader_stage_t;

typedef struct loader {
    loader_options_t options;
    transform_t transform;     /* --resize, --crop, --channels (decided by the dataset) */
    pool_t *pool;
    zsock_t *router;           /* the gpud workers */
    zsock_t *reducer;          /* DEALER to reducerd */
    dispatch_t *dispatch;
    proto_stats_t stats;
    loader_stage_t stage;
    uint32_t epoch;            /* the current epoch */
    uint8_t phase;             /* the phase of the current plan */
    bool stopped;
    int exit_code;
    uint64_t failed, sent_samples;
    uint64_t sent_bytes;       /* BATCH data frames sent (pixels or files): the bench's bytes/sample */
    bool wire_encoded;         /* --wire jpeg on a file dataset: eval batches carry the files */

    /* plans: reducerd acks each PLAN with a WELCOME. Plan P counts as
     * acked once the WELCOMEs received reach the sends before P plus one;
     * acks of re-sent earlier plans are thereby skipped, and if one was
     * lost, P's own re-sends make up for it. */
    uint64_t plans_sent, acks_received, ack_target;
    int64_t next_plan_ms;

    /* trust (PROTOCOL.md "Trust"): from reducerd's plan ack */
    char name[DDP_MAX_NAME];   /* our JOIN name */
    bool trusted;              /* session, token and secret known */
    ddp_auth_t auth;           /* ours: job, session, token */
    uint8_t secret[TOKEN_SECRET_LEN];
    ddp_credit_t *held_credits; /* CREDITs that came before the secret (moved) */
    zframe_t **held_routes;
    int n_held;
    int64_t next_beat_ms;      /* our HEARTBEAT to reducerd */

    /* eval phase: the dataset in eval mode, the --val set in training */
    const dataset_t *eval_set;
    uint64_t eval_samples;     /* of the eval set (the plan's n) */
    uint64_t eval_positions;   /* of them, this loaderd's shard (--shard): dispatch positions */
    int eval_h, eval_w;
    ready_batch_t ready[LOADER_MAX_READY];
    int n_ready;

    /* the dataset (training: the train set) */
    dataset_t *dataset;
    dataset_t *val_set;        /* training with --val */
    uint64_t samples;          /* of the dataset, after --limit */
    int out_h, out_w;          /* eval mode: batch size of dataset; training: train samples */

    /* training */
    augment_t augment;
    sample_cache_t *cache;     /* --cache: decoded train samples (sample_cache.h); NULL none */
    sampler_t *sampler;
    uint64_t global_batch;
    uint64_t steps_per_epoch;
    step_window_t *window;     /* the epoch's steps loaded ahead */
    int window_depth;
    bool have_decision;        /* EPOCH(epoch) arrived */
    uint8_t decision;

    /* membership (docs/ELASTIC.md) */
    uint32_t gen;              /* the generation shards are made for */
    int world;                 /* its ranks (--workers at generation 0) */
    uint64_t commit_next;      /* absolute step after the last committed one */
    bool members_pending;      /* a MEMBERS newer than gen, not acted on yet */
    bool train_paused;         /* the current generation is paused: no train shard goes out */
    ddp_members_t members;     /* that MEMBERS (names not kept) */
} loader_t;

/* Opens the datasets, decides the sample sizes and the train augmentation,
 * starts the threads, binds and connects the sockets; NULL (logged) when
 * any of it fails. Owned by the caller; nothing is sent yet. */
loader_t *loader_new(const loader_options_t *options);
void loader_destroy(loader_t **self_p);

/* --shard I/N: this loaderd's samples of an N-sample set, and the id of
 * its POS-th (ids with id % N == I, in id order; without --shard: all). */
uint64_t loader_shard_size(const loader_t *self, uint64_t n);
uint64_t loader_shard_id(const loader_t *self, uint64_t pos);

/* --wire jpeg: sample ID's file of an ImageFolder, read whole (not decoded)
 * into *buf (malloc'ed, *len bytes). 1, or 0 with the reason in reason (a
 * path too long, a read error, or an empty file: no image, as decoding it
 * would say). */
int loader_read_file(const dataset_t *ds, uint64_t id, uint8_t **buf, size_t *len, char *reason,
                     size_t cap);

/* Frees a ready batch's ids, labels and pixels; zeroes it. */
void ready_batch_clear(ready_batch_t *ready);

#endif
