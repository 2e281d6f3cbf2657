/* gpud — the state of one compute worker: one instance per process, made
 * by main.c (gpud_new) and handed as `self` to the role files above it:
 *
 *   main.c     options, the state, the actors, the poll loop, the exit
 *   link.c     JOIN/WELCOME with reducerd; every message in, to the role
 *              that answers it (loaderd, reducerd, the heartbeat actor)
 *   eval.c     an eval batch: forward, top-k and loss, RESULT, CREDIT
 *   train.c    one data-parallel rank: train steps over the gradient ring,
 *              END and EPOCH in order, checkpoints
 *   train_ahead.c  loaderd's next message read while a step runs, the next
 *              step's batch staged into the model (main.c's loop handles it
 *              before the loaders' next)
 *   members.c  the rank's side of elastic training (docs/ELASTIC.md): STEP,
 *              reducerd's answer (COMMIT, MEMBERS, STOP), the re-form
 *   joining.c  a rank entering a running job: its state, then its place
 *   rank_report.c  what ends the job from a rank: rank 0's DONE (final
 *              writes, a failed write, a non-finite step), the wait for STOP
 *   gpud.c     this state and what only touches it (sockets, CREDIT, STOP)
 *
 * Imports point down that list (main.c at the top), never up. Below the
 * state: rank_state (the worker's life as one enum: its states and
 * moves), train_state (a training rank's counters, trainer and ring),
 * options (the flags), model (-> backend), trainer (optimizer,
 * schedule, checkpoints), ring (the CPU all-reduce), heartbeat (the
 * actor), then common/ and proto/.
 */
#ifndef DDP_GPUD_GPUD_H
#define DDP_GPUD_GPUD_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "gpud/heartbeat.h"
#include "gpud/model.h"
#include "gpud/options.h"
#include "gpud/rank_state.h"
#include "gpud/train_state.h"
#include "proto/messages.h"
#include "proto/wire.h"

typedef struct gpud {
    gpud_options_t options;        /* as given, but threads and decode_threads settled */
    char threads_why[160];         /* "" or why threads is this rank's share (for the log) */
    char start_error[DDP_MAX_FAILED]; /* why the model could not be set up (JOIN `failed`) */
    model_opts_t model_options;    /* what the options ask of model_new */
    bool normalize;                /* false: plain ToTensor (mean/std unused) */
    float mean[4], std[4];         /* per channel: the flags' or the architecture's */
    char name[DDP_MAX_NAME];       /* as in JOIN and CREDIT */
    model_t *model;
    zsock_t *loader;               /* DEALER: CREDIT out, BATCH and END in (= loaders[0]) */
    /* eval with several loaderds (--loader EP1,EP2,...; docs/SCALE.md):
     * one DEALER each; acks go back to the one a batch came from */
    zsock_t *loaders[DDP_MAX_LOADERS];
    int n_loaders;
    int from_loader;               /* the loaderd of the message being handled */
    zsock_t *reducer;              /* DEALER: JOIN, RESULT out; WELCOME, EPOCH, STOP in */
    zactor_t *heartbeat;
    heartbeat_args_t heartbeat_args;   /* read by the actor: lives as long as it */
    proto_stats_t stats;
    /* from WELCOME */
    int32_t rank;                  /* -1 until joined */
    int32_t world;
    bool welcome_train;            /* reducerd runs a training job */
    ddp_auth_t auth;               /* job, session, token: in every message */
    char next_ring[DDP_MAX_EP];    /* the next rank's ring endpoint */
    /* written by the main thread only; the heartbeat actor reads it (C11
     * atomic: a plain or volatile counter read across threads is a race) */
    _Atomic uint64_t batches;
    uint64_t samples;
    double compute_s;
    float *logits;                 /* a batch's logits, grown as needed */
    size_t logits_cap;
    /* eval.c: the batch whose forward is queued and whose result is not
     * sent yet (the pipelined eval; NULL: none) */
    struct eval_pending *pending;
    double answered_at;            /* when the last eval RESULT left (its compute_s's end) */
    uint64_t staged_ahead;         /* eval batches, train steps' batches, staged while
                                    * the one before ran */
    uint8_t *wire_px;              /* a --wire jpeg batch decoded (eval.c), grown as needed */
    size_t wire_px_cap;
    int exit_code;
    /* where the worker is in its life (rank_state.h: the states and every
     * move); ended (FENCED, STOPPED) ends the loop */
    rank_state_t state;
    ddp_stop_t deferred_stop;      /* RANK_STOP_DEFERRED: the STOP(0) that waits ... */
    int64_t deferred_until_ms;     /* ... at most until then */
    /* membership (docs/ELASTIC.md, members.c) */
    uint32_t gen;                  /* the generation rank and world belong to */
    bool eval_stale;               /* trained since the last model_sync_eval */
    /* --train: the rank's training state (train_state.h), made by
     * train_open; NULL in an eval worker */
    train_state_t *train;
} gpud_t;

/* The state from the options: the worker's name, the model's options and
 * the normalisation settled; nothing opened yet. NULL (logged) when out of
 * memory. Owned by the caller. */
gpud_t *gpud_new(const gpud_options_t *options);
/* Stops the heartbeat actor first (it reads the state), then frees all. */
void gpud_destroy(gpud_t **self_p);

/* model_new from the options; -1 (logged). */
int gpud_load_model(gpud_t *self);
/* The DEALER sockets to reducerd and loaderd; -1 (logged). */
int gpud_connect(gpud_t *self);
/* The heartbeat actor, beating with the WELCOME's rank and token; -1 (logged). */
int gpud_start_heartbeat(gpud_t *self);

/* CREDIT to loaderd: credits more batches, ack (may be NULL) the one answered. */
int gpud_send_credit(gpud_t *self, uint32_t credits, const uint64_t *ack);
/* reducerd stops the job: logged; a non-zero code fails this worker (and
 * asks for the exit checkpoint of a training rank). A training job that
 * ends (code 0) right after an EPOCH that came before its END(TRAIN) (no
 * validation: reducerd decides once the last step is committed, loaderd's
 * END follows that COMMIT) stops only once that END is handled (its
 * BatchNorm broadcast, the final checkpoint and weights: gpud_end_handled),
 * or when --commit-timeout runs out (gpud_tick). */
void gpud_stop(gpud_t *self, const ddp_stop_t *stop);
/* The END(TRAIN) a deferred stop waited for is handled: stop now. */
void gpud_end_handled(gpud_t *self);
/* Called every turn of the loop: a deferred stop whose time ran out. */
void gpud_tick(gpud_t *self);
/* How long a rank waits for reducerd's answer (--commit-timeout, ms). */
int64_t gpud_commit_timeout_ms(const gpud_t *self);
/* What the heartbeat actor says (a STOP reducerd sent to the beat socket:
 * a lost job, or this rank fenced out), applied. */
void gpud_on_heartbeat(gpud_t *self);
/* A poller on the reducer socket and the heartbeat's STOPs (caller
 * destroys); NULL when out of memory. */
zpoller_t *gpud_reducer_poller(gpud_t *self);
/* One wait of at most timeout_ms on such a poller: a STOP from the
 * heartbeat is handled here. 1 with *m decoded from reducerd (the caller
 * clears it), else 0 (nothing, the heartbeat, or a rejected message). */
int gpud_poll_reducer(gpud_t *self, zpoller_t *poller, int timeout_ms, ddp_msg_t *m);
/* The batch's images are what the model takes; -1 (logged with the fix). */
int gpud_check_batch_shape(gpud_t *self, const ddp_batch_t *batch);
/* The normalisation every model call of this worker is given: the flags'
 * or the architecture's mean and std, or none (plain ToTensor): the same in
 * a batch's forward, a train step and what is staged for either. */
void gpud_norm(const gpud_t *self, const float **mean, const float **std);
/* Room for n samples' logits in self->logits; -1 when out of memory. */
int gpud_fit_logits(gpud_t *self, uint32_t n);
/* The inference network takes the trained weights (before validation); -1 (logged). */
int gpud_sync_eval(gpud_t *self);

#endif
