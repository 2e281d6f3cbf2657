/* loader — loaderd's state, shared by main.c (flags, setup, the event
 * loop, plans, the eval / validation phase) and daemon_train.c (the train
 * phase of docs/TRAINING.md).
 *
 * The loop is a small state machine; eval mode runs
 *   PLAN(0, EVAL) -> EVAL -> IDLE (until STOP)
 * and training (--train), for each epoch e from --start-epoch,
 *   PLAN(e, TRAIN) -> RANKS -> TRAIN -> [PLAN(e, EVAL) -> EVAL] -> EPOCH
 * where EPOCH waits for reducerd's decision: continue with e+1, or IDLE. */
#ifndef DDP_LOADERD_LOADER_H
#define DDP_LOADERD_LOADER_H

#include "common/dataset.h"
#include "common/token.h"
#include "loaderd/augment.h"
#include "loaderd/daemon_dispatch.h"
#include "loaderd/pool.h"
#include "loaderd/sampler.h"
#include "loaderd/transform.h"
#include "proto/wire.h"

#include <czmq.h>
#include <stdbool.h>
#include <stdint.h>

#define LOADER_MAX_READY 64

typedef enum { AUG_DEFAULT = -1, AUG_NONE = 0, AUG_FLIP = 1, AUG_CROP_FLIP = 2 } loader_aug_t;

typedef struct {
    const char *data;
    const char *bind;
    const char *reducer;
    long threads;
    long batch_size;
    long prefetch;
    long worker_timeout_s;
    long limit;
    transform_t t;
    int predictions;
    int verbose;
    /* training */
    int train;
    const char *val;
    long workers;
    long global_batch;         /* 0: batch_size * workers */
    long epochs;
    long seed;
    int augment;               /* loader_aug_t */
    double rotate;             /* degrees; 0: no RandomRotation */
    long start_epoch;
    long start_step;
} loader_opts_t;

typedef struct {
    batch_range_t range;
    ddp_batch_t batch;         /* ids/labels malloc'd, pixels a frame */
} ready_t;

typedef enum { ST_PLAN, ST_RANKS, ST_TRAIN, ST_EVAL, ST_EPOCH, ST_IDLE } loader_state_t;

typedef struct train_window train_window_t;

typedef struct {
    loader_opts_t o;
    pool_t *pool;
    zsock_t *router;
    zsock_t *reducer;
    dispatch_t *dispatch;
    proto_stats_t stats;
    loader_state_t state;
    uint32_t epoch;            /* the current epoch */
    uint8_t phase;             /* the phase of the current plan */
    bool stopped;
    int exit_code;
    uint64_t failed, sent_samples;

    /* plans: reducerd acks each PLAN with a WELCOME. Plan P counts as
     * acked once the WELCOMEs received reach the sends before P plus one;
     * acks of re-sent earlier plans are thereby skipped, and if one was
     * lost, P's own re-sends make up for it. */
    uint64_t plans_sent, acks_got, ack_target;
    int64_t next_plan_ms;

    /* trust (PROTOCOL.md "Trust"): from reducerd's plan ack */
    char name[DDP_MAX_NAME];   /* our JOIN name */
    bool trusted;              /* session, token and secret known */
    ddp_auth_t auth;           /* ours: job, session, token */
    uint8_t secret[TOKEN_SECRET_LEN];
    ddp_credit_t *held;        /* CREDITs that came before the secret (moved) */
    zframe_t **held_route;
    int n_held;
    int64_t next_beat_ms;      /* our HEARTBEAT to reducerd */

    /* eval phase: the dataset in eval mode, the --val set in training */
    const dataset_t *eval_ds;
    uint64_t eval_n;
    int eval_h, eval_w;
    ready_t ready[LOADER_MAX_READY];
    int n_ready;

    /* the dataset (training: the train set) */
    dataset_t *ds;
    dataset_t *val_ds;         /* training with --val */
    uint64_t n;
    int out_h, out_w;          /* eval mode: batch size of ds; training: train samples */

    /* training */
    augment_t aug;
    sampler_t *sampler;
    uint64_t global_batch;
    uint64_t spe;              /* global steps per epoch */
    train_window_t *window;
    bool have_decision;        /* EPOCH(epoch) arrived */
    uint8_t decision;
} loader_t;

/* main.c */
/* ISSUED to reducerd for a batch about to go to worker NAME. */
void loader_send_issued(loader_t *L, const ddp_batch_t *b, const char *name);
void loader_report_failed(loader_t *L, const dataset_t *ds, uint32_t epoch, uint8_t phase,
                          uint64_t id, const char *why);
void loader_broadcast_end(loader_t *L, uint32_t epoch, uint8_t phase);

/* daemon_train.c: the train steps of one epoch, at most DEPTH prepared
 * ahead (memory: DEPTH global steps of pixels, never N). */
train_window_t *train_window_new(int world, int depth);
void train_window_destroy(train_window_t **self);
/* Starts epoch L->epoch's train part at global step FIRST_STEP. */
void train_begin_epoch(loader_t *L, uint64_t first_step);
/* Sends what the ranks have credit for and prepares the next step.
 * 1: every step of the epoch is sent; 0: not yet; -1: fatal. */
int train_pump(loader_t *L);
/* Work that needs no message: a step to prepare. */
bool train_busy(const loader_t *L);
/* Every rank 0..W-1 has sent a CREDIT carrying its rank. */
bool train_ranks_known(loader_t *L);
/* The train sample ID of epoch EPOCH, augmented, into OUT (channels x
 * out_h x out_w). 0, or -1 with a reason. Thread-safe. */
int train_load(const loader_t *L, uint32_t epoch, uint64_t id, uint8_t *out, char *why,
               size_t whylen);

#endif
