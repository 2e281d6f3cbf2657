/* reducer — reducerd's state: one instance per process, made by main.c
 * (reducer_new) and handed as `self` to the role files above it:
 *
 *   main.c         the loop: poll, receive, tick, exit
 *   coordinator.c  every message in, by type and mode; the periodic tick
 *   eval.c         an eval job: joins, its one plan, the end when complete
 *   training.c     a training job: the gang of ranks, epochs, early stop
 *   watchdog.c     dead ranks, stalls, workers whose answers never count
 *   membership.c   elastic training: STEP, COMMIT, lost ranks, fencing
 *   admission.c    ranks joining a running job: the queue, STATE, the pause
 *   generation.c   the current generation's peers and its MEMBERS
 *   results.c      RESULT, FAILED and ISSUED: what counts, what is refused
 *   job.c          plan acknowledgement, the end of the job, STOP
 *   trust.c        tokens, the loader role, rejection (PROTOCOL.md "Trust")
 *   publish.c      events on the XPUB
 *   reducer.c      this state and what only touches it
 *
 * Imports point down that list (main.c at the top), never up. Below the
 * state: peers, slot (tally), issued, decide, elastic, options.
 */
#ifndef DDP_REDUCERD_REDUCER_H
#define DDP_REDUCERD_REDUCER_H

#include <stdbool.h>
#include <stdint.h>

#include "common/jobid.h"
#include "common/token.h"
#include "proto/event.h"
#include "proto/wire.h"
#include "reducerd/elastic.h"
#include "reducerd/issued.h"
#include "reducerd/options.h"

/* How often the progress event goes out: the throughput plot and the
 * dashboard sample at this rate (a main-loop tick is at most 200 ms). */
#define PROGRESS_EVENT_MS 500
/* distinct gpud names whose failed starts are logged and counted (more:
 * counted as rejected, unlogged: a JOIN costs nothing to forge) */
#define REDUCER_MAX_START_FAILED 64
#include "reducerd/peers.h"
#include "reducerd/slot.h"

/* One loaderd role: the identity that joined for a shard of the dataset
 * (docs/SCALE.md "Several loaderds"; shard 0 of 1 without --shard). */
typedef struct {
    zframe_t *identity;         /* NULL: no loaderd joined for this shard */
    char name[DDP_MAX_NAME];
    int64_t last_seen_ms;
    uint64_t rejected;          /* its own count, from its ISSUED/HEARTBEAT */
} loader_role_t;

typedef struct reducer {
    reducer_options_t options;
    zsock_t *router;
    zsock_t *xpub;
    peers_t *peers;
    proto_stats_t stats;
    /* trust (PROTOCOL.md "Trust"): the job's secret and session nonce,
     * the identities bound to the loader role (one per shard), what they issued */
    uint8_t secret[TOKEN_SECRET_LEN];
    uint64_t session;
    char job_id[JOBID_MAX];     /* options.job points here: --job, $DDPIPE_JOB or drawn */
    loader_role_t loaders[DDP_MAX_LOADERS];
    uint32_t loader_shards;     /* the shards, from the first loader JOIN (0: none yet) */
    issued_t *issued;
    uint64_t rejected_results;  /* RESULTs refused (of stats.rejected) */
    char first_rejected_result[320]; /* the first and the latest refused RESULT of a */
    char last_rejected_result[320];  /* joined rank, for the stall message */
    char class_mismatch_hint[512];   /* the latest out-of-range class refusal */
    /* by phase: an eval job uses the one its plan names; training keeps
     * the current epoch's [DDP_PHASE_TRAIN] and [DDP_PHASE_EVAL] */
    slot_t *slot[2];
    int reporters_subscribed;   /* reporterd subscriptions seen on the XPUB */
    bool formed_unheard;        /* the gang formed while no reporterd listened */
    double job_started_s;       /* the first plan (worker images/s) */
    int64_t last_progress_event_ms; /* every PROGRESS_EVENT_MS */
    int64_t last_liveness_ms;       /* the workers' heartbeats, checked every second */
    int64_t last_activity_ms;   /* last progress: accepted samples, failures, plans, joins */
    bool finished;              /* end published */
    int64_t finished_at_ms;     /* when the loop first saw it finished */
    bool job_lost;              /* finished: peers of an earlier reducerd of this job spoke */
    char end_reason[1024];      /* the end event's reason (re-sent to a late reporterd) */
    int exit_code;
    int reporters_done;
    bool waiting_for_reporter_logged;
    /* eval (eval.c): gpud JOINs are held, unanswered, until --start-workers
     * joined or --start-timeout passed since the first; then all go at once */
    bool eval_started;
    int64_t eval_first_join_ms; /* the first gpud JOIN held (0: none yet) */
    /* gpuds that said they could not start (JOIN `failed`), by name, each
     * logged once; an eval's hold waits for --start-workers less those */
    char start_failed[REDUCER_MAX_START_FAILED][DDP_MAX_NAME];
    int n_start_failed;
    /* training */
    bool gang_formed;           /* all --workers ranks joined and were welcomed */
    uint32_t epoch;             /* the epoch being trained */
    uint32_t streak;
    uint64_t last_step;         /* highest RESULT step of the run */
    bool have_step;
    /* the stop is decided and sent (EPOCH): the job ends once rank 0 has
     * written the final checkpoint and weights (its DONE), at most
     * --done-timeout after the decision; 0 while not waiting */
    int64_t final_deadline_ms;
    char final_reason[1024];    /* the decision's, for the end event */
    /* elastic training (membership.c, docs/ELASTIC.md) */
    elastic_t *elastic;         /* from the gang's forming: generation, members, commits */
    pending_t *pending;         /* train RESULTs held until their step commits */
    uint64_t stale_messages;    /* of an older generation: dropped, never counted */
    uint64_t fenced_messages;   /* from removed ranks: answered once, never counted */
    uint32_t ranks_lost;
    uint32_t steps_redone;
    /* ranks joining the running job (admission.c) */
    char job_config[DDP_MAX_STR]; /* the first training gpud's settings; every other must match */
    bool have_job_config;
    struct {
        int peer;               /* the joiner being admitted (peer index), -1 none */
        bool state_sent;        /* rank 0's STATE went on to it; its answer is awaited */
        uint64_t step;          /* the step it enters at (C + 1) */
        uint32_t epoch;
        int64_t deadline_ms;
    } admit;
    uint32_t ranks_joined;
    uint32_t joins_refused;
    /* paused (too few ranks, or the --pause-at-step hook): no step runs
     * until joiners bring the world to pause_until_world */
    bool paused;
    int32_t pause_until_world;
    int64_t pause_deadline_ms;
    uint64_t pause_step;
    uint32_t pause_epoch;
    /* NCCL in gpud (nccl_relay.c): the current generation sums over NCCL;
     * its rank 0's id went to the other members */
    struct {
        bool on;
        bool relayed;
    } nccl;
} reducer_t;

/* Binds the sockets, draws the job's secret and session; NULL (logged)
 * when any of it fails. Owned by the caller. */
reducer_t *reducer_new(const reducer_options_t *options);
void reducer_destroy(reducer_t **self_p);

/* A message to one peer by its ROUTER identity (a failure is logged). */
void reducer_send(reducer_t *self, zframe_t *identity, const ddp_msg_t *m);
/* The slot progress events describe: the one still counting. */
slot_t *reducer_active_slot(reducer_t *self);
/* A slot for the plan (takes its arrays) in self->slot[phase]; NULL (logged)
 * on a bad plan or out of memory. */
slot_t *reducer_open_slot(reducer_t *self, ddp_plan_t *plan, bool keep_predictions);
/* A training message of an older membership generation than the current
 * one (docs/ELASTIC.md): stale — counted in stale_messages, logged at
 * --verbose, never counted. False when gen is current (or no gang yet). */
bool reducer_stale_gen(reducer_t *self, uint32_t gen, const char *who, const char *kind);
/* A message to every joined loaderd (MEMBERS, COMMIT). */
void reducer_send_loaders(reducer_t *self, const ddp_msg_t *m);
/* The rejected counts the loaderds reported, summed. */
uint64_t reducer_loader_rejected(const reducer_t *self);
/* Messages rejected so far by reducerd and loaderd (summary.json's rejected_messages). */
uint64_t reducer_rejected_total(const reducer_t *self);

#endif
