/* daemon_reducer — reducerd's state and the functions its files share:
 * main.c (flags, socket loop, eval flow), daemon_events.c (publishing),
 * daemon_train.c (the training coordinator). */
#ifndef DDP_REDUCERD_DAEMON_H
#define DDP_REDUCERD_DAEMON_H

#include <stdbool.h>
#include <stdint.h>

#include "proto/event.h"
#include "proto/proto.h"
#include "common/token.h"
#include "reducerd/daemon_peers.h"
#include "reducerd/issued.h"
#include "reducerd/slot.h"

typedef struct {
    const char *bind;
    const char *pub;
    const char *job;
    long workers;
    long reporters;
    long worker_timeout_s;
    long stall_timeout_s;
    long done_timeout_s;
    int predictions;
    int verbose;
    /* training (--train) */
    int train;
    int no_val;             /* no validation plan comes: decide on train alone */
    long epochs;
    double target;          /* --target-accuracy, fraction; 0 off */
    long patience;
    long start_epoch;
    long streak;            /* the streak a resumed run continues */
    const char *resume_dir; /* named in a failure's "resume with" hint */
} opts_t;

typedef struct {
    opts_t o;
    zsock_t *router;
    zsock_t *xpub;
    peers_t *peers;
    proto_stats_t stats;
    /* trust (PROTOCOL.md "Trust"): the job's secret and session nonce,
     * the identity bound to the loader role, what it issued */
    uint8_t secret[TOKEN_SECRET_LEN];
    uint64_t session;
    zframe_t *loader_id;
    char loader_name[DDP_MAX_NAME];
    int64_t loader_seen_ms;
    uint64_t loader_rejected;  /* loaderd's own count, from its ISSUED/HEARTBEAT */
    issued_t *issued;
    uint64_t rejected_results; /* RESULTs refused (of stats.rejected) */
    char first_reject[320];    /* the first and the latest refused RESULT of a joined */
    char last_reject[320];     /* rank, for the stall message */
    char class_hint[512];      /* the latest out-of-range class refusal */
    /* by phase: an eval job uses the one its plan names; training keeps
     * the current epoch's [DDP_PHASE_TRAIN] and [DDP_PHASE_EVAL] */
    slot_t *slot[2];
    int subscribers;          /* reporterd subscriptions seen on the XPUB */
    double t_job;             /* the first plan (worker images/s) */
    int64_t last_progress_ms;
    int64_t last_activity_ms;  /* last progress: accepted samples, failures, plans, joins */
    bool finished;            /* end published */
    bool job_lost;            /* finished: peers of an earlier reducerd of this job spoke */
    char end_reason[1024];    /* the end event's reason (re-sent to a late reporterd) */
    int exit_code;
    int reporters_done;
    /* training */
    bool gang;                /* all --workers ranks joined and were welcomed */
    uint32_t epoch;           /* the epoch being trained */
    uint32_t streak;
    uint64_t last_step;       /* highest RESULT step of the run */
    bool have_step;
} reducer_t;

/* daemon_events.c */
void publish_log(reducer_t *r, const char *level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void publish_worker(reducer_t *r, const peer_t *p, const char *state);
void publish_progress(reducer_t *r);
void publish_failed_files(reducer_t *r, const slot_t *s);
void publish_predictions(reducer_t *r, const slot_t *s);
/* The slot's metric; decision NULL outside training. */
void publish_metric(reducer_t *r, const slot_t *s, bool final, const ev_metric_t *decision);
void publish_end(reducer_t *r, int code, const char *reason);

/* main.c */
/* Counts a rejected message and logs why, at most once per (peer, kind)
 * per RATELOG_WINDOW_S. */
void reject(reducer_t *r, const char *peer, const char *kind, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* WELCOME fields of a trusted joiner: session and its token. */
void welcome_auth(reducer_t *r, ddp_welcome_t *w, uint8_t role, int32_t rank, const char *name);
/* Messages rejected so far by reducerd and loaderd (summary.json's rejected_messages). */
uint64_t rejected_total(const reducer_t *r);
/* (epoch, phase) is over: its issued batches are forgotten and RESULTs
 * still held for them (never issued) are rejected. */
void end_issued(reducer_t *r, uint32_t epoch, uint8_t phase);
/* A JOIN as loader: false (rejected) while another loader identity is alive. */
bool loader_join_ok(reducer_t *r, zframe_t *route, const ddp_join_t *j);
void send_to(reducer_t *r, zframe_t *identity, const ddp_msg_t *m);
void stop_everyone(reducer_t *r, int code, const char *reason);
/* Ends the job: code 0 of an eval job publishes its results first; then
 * "end" and STOP to every peer. Idempotent. */
void finish(reducer_t *r, int code, const char *reason);
/* The slot progress events describe: the one still counting. */
slot_t *active_slot(reducer_t *r);
/* WELCOME to the loader: the plan is registered, batches may flow. */
void ack_plan(reducer_t *r, zframe_t *route);
/* A slot for the plan (takes its arrays) in r->slot[phase]; NULL (logged)
 * on a bad plan or out of memory. */
slot_t *open_slot(reducer_t *r, ddp_plan_t *plan, bool keep_predictions);
/* True when events can go out: reporterd subscribed, or none is expected. */
bool reporter_listening(reducer_t *r);

/* daemon_train.c */
void train_on_join(reducer_t *r, zframe_t *route, const ddp_join_t *j);
void train_on_plan(reducer_t *r, zframe_t *route, ddp_plan_t *plan);
/* Called from the loop: decides the epoch once its tallies are complete. */
void train_tick(reducer_t *r);
/* A gpud was declared dead: the training job fails. */
void train_rank_died(reducer_t *r, const peer_t *p);
/* Keeps the run's highest step (RESULT step) for the failure message. */
void train_note_step(reducer_t *r, const ddp_result_t *res);

#endif
