/* training — reducerd --train, the training coordinator (docs/TRAINING.md, steps 1
 * and 6, "Failure").
 *
 * Ranks: gpud JOINs (each with its ring endpoint and the job-wide
 * settings, which must be the same on every rank) are held until all
 * --workers ranks have joined; then every rank gets WELCOME(train=1,
 * next_ring = the ring of rank (r+1) % W). A JOIN beyond W before that gets
 * STOP(1); after it, the gpud joins the running job (admission.c).
 *
 * Epochs: the current epoch's train and validation tallies run side by
 * side (loaderd sends PLAN(e, EVAL) after END(e, TRAIN), often before the
 * last train result is in). When both are complete (the train one alone
 * with --no-val), reducerd publishes the train and val metrics, decides
 * early stopping once (decide.h) and sends EPOCH to loaderd and every
 * gpud; a stop then ends the job like an eval (end, STOP(0), DONE).
 *
 * Failure: a lost rank costs its step, not the job (membership.c,
 * docs/ELASTIC.md), while --min-workers ranks are left; fewer fail the job
 * with STOP(1, "rank R (NAME) died at epoch e step S; resume with ..."),
 * the same reason in the end event.
 */
#include "reducerd/training.h"

#include "common/clock.h"
#include "common/errbuf.h"
#include "common/log.h"
#include "reducerd/admission.h"
#include "reducerd/decide.h"
#include "reducerd/job.h"
#include "reducerd/membership.h"
#include "reducerd/nccl_relay.h"
#include "reducerd/publish.h"
#include "reducerd/results.h"
#include "reducerd/trust.h"

#include <stdio.h>
#include <string.h>

static void welcome(reducer_t *self, const peer_t *p)
{
    int32_t world = (int32_t)self->options.workers;
    const peer_t *next = peers_by_rank(self->peers, (p->rank + 1) % world);
    ddp_msg_t w = {.type = DDP_WELCOME};
    w.u.welcome.rank = p->rank;
    w.u.welcome.world = world;
    w.u.welcome.train = 1;
    /* gen 0's flag (gang_start); a WELCOME asked again later is gen 0's too */
    w.u.welcome.nccl = (!self->elastic || self->elastic->gen == 0) && self->nccl.on;
    snprintf(w.u.welcome.job, sizeof w.u.welcome.job, "%s", self->options.job);
    trust_welcome_auth(self, &w.u.welcome, DDP_ROLE_GPUD, p->rank, p->name);
    snprintf(w.u.welcome.next_ring, sizeof w.u.welcome.next_ring, "%s", next ? next->ring : "");
    reducer_send(self, p->identity, &w);
}

/* All W ranks are in: welcome them together, so no rank starts its ring
 * before its neighbour exists. */
static void gang_start(reducer_t *self)
{
    self->gang_formed = true;
    int64_t now_ms = clock_mono_ms();
    peer_t *members[DDP_MAX_WORLD];
    for (int32_t rank = 0; rank < self->options.workers; rank++) {
        if (rank >= DDP_MAX_WORLD || !(members[rank] = peers_by_rank(self->peers, rank))) {
            /* ranks are handed out lowest-free-first below W: cannot happen */
            job_finish(self, 1, "internal error: a rank of the gang is missing; please report");
            return;
        }
    }
    nccl_relay_start(self, members, (int32_t)self->options.workers);
    for (int32_t rank = 0; rank < self->options.workers; rank++) {
        peer_t *p = peers_by_rank(self->peers, rank);
        p->last_seen_ms = now_ms; /* they waited without heartbeats */
        welcome(self, p);
    }
    membership_start(self);
    char who[48];
    if (self->options.workers == 1)
        snprintf(who, sizeof who, "the only rank");
    else
        snprintf(who, sizeof who, "all %ld ranks", self->options.workers);
    log_info("%s joined: training starts", who);
    publish_log(self, "info", "%s joined: training starts", who);
    /* the epoch's clock starts when its ranks can work */
    if (self->slot[DDP_PHASE_TRAIN])
        slot_restart_clock(self->slot[DDP_PHASE_TRAIN], clock_mono_s());
}

static void join_other(reducer_t *self, zframe_t *route, const ddp_join_t *join)
{
    char refused[DDP_MAX_STR];
    if (join->role == DDP_ROLE_LOADER &&
        !trust_loader_join(self, route, join, refused, sizeof refused)) {
        if (refused[0]) /* told, so it exits naming why instead of waiting for an ack */
            job_stop_peer(self, route, 1, refused);
        return;
    }
    peer_t *p = peers_join(self->peers, route, join);
    if (!p)
        return;
    log_info("%s %s joined from %s (pid %u)", proto_role_name(join->role), join->name, join->host,
             join->pid);
    if (self->finished && p->role != DDP_ROLE_REPORTER)
        job_stop_peer(self, route, 0, "job already finished");
}

/* A gpud JOIN the job has no room for, or one from a restarted rank. */
static bool join_refused(reducer_t *self, zframe_t *route, const ddp_join_t *join, peer_t *known)
{
    char err[512];
    if (known && known->removed) { /* joining a running job: not yet (ELASTIC.md) */
        membership_fence(self, route, known, "JOIN");
        return true;
    }
    if (self->gang_formed && (!known || known->joining)) {
        admission_on_join(self, route, join);   /* a rank for the running job */
        return true;
    }
    if (known && self->gang_formed) {
        if (zframe_eq(known->identity, route)) {
            welcome(self, known); /* the same socket asking again */
            return true;
        }
        err_set(err, sizeof err, "rank %d (%s) restarted during training: a training ring cannot "
                 "take a new process; resume with ddpipe train --resume %s", known->rank,
                 known->name, job_resume_dir(self));
        job_finish(self, 1, err);
        job_stop_peer(self, route, 1, err);
        return true;
    }
    if (known)
        return false;
    if (join->ring[0] && !admission_config_ok(self, route, join))
        return true;
    if (peers_alive(self->peers, DDP_ROLE_GPUD) >= self->options.workers ||
        join->want_rank >= self->options.workers) {
        char asked[48] = "";
        if (join->want_rank >= 0)
            snprintf(asked, sizeof asked, " (asking for rank %d)", join->want_rank);
        err_set(err, sizeof err, "the job has %ld rank%s: gpud %s%s is one too many; start exactly "
                 "--workers gpuds", self->options.workers, self->options.workers == 1 ? "" : "s",
                 join->name, asked);
        log_warn("%s", err);
        publish_log(self, "warn", "%s", err);
        job_stop_peer(self, route, 1, err);
        return true;
    }
    return false;
}

void training_on_join(reducer_t *self, zframe_t *route, const ddp_join_t *join)
{
    if (join->role != DDP_ROLE_GPUD) {
        join_other(self, route, join);
        return;
    }
    if (self->finished) {
        job_stop_peer(self, route, self->exit_code, "job already finished");
        return;
    }
    if (join_refused(self, route, join, peers_by_name(self->peers, join->name)))
        return;
    peer_t *p = peers_join(self->peers, route, join);
    if (!p)
        return;
    log_info("gpud %s joined from %s (pid %u) as rank %d of %ld, ring %s", join->name, join->host,
             join->pid, p->rank, self->options.workers, join->ring[0] ? join->ring : "(none)");
    publish_worker(self, p, "joined");
    if (!join->ring[0]) {
        char err[512];
        err_set(err, sizeof err, "gpud %s joined without a ring endpoint: a training job needs "
                 "every gpud started with --train", join->name);
        job_finish(self, 1, err);
        return;
    }
    int joined = peers_alive(self->peers, DDP_ROLE_GPUD);
    if (joined == self->options.workers)
        gang_start(self);
    else
        log_info("%d of %ld rank%s joined; waiting for the others", joined, self->options.workers,
                 self->options.workers == 1 ? "" : "s");
}

/* A plan the coordinator cannot place fails the job: loaderd and reducerd
 * disagree on the run's shape (--start-epoch, --val), and waiting would
 * only hang both. */
static bool plan_refused(reducer_t *self, zframe_t *route, const ddp_plan_t *plan)
{
    char err[512] = "";
    const char *ph = plan->phase == DDP_PHASE_TRAIN ? "train" : "validation";
    slot_t *have = plan->phase <= DDP_PHASE_TRAIN ? self->slot[plan->phase] : NULL;
    if (plan->epoch != self->epoch)
        err_set(err, sizeof err, "loaderd plans epoch %u (%s) while reducerd is at epoch %u: "
                 "start both with the same --start-epoch", plan->epoch, ph, self->epoch);
    else if (plan->phase == DDP_PHASE_EVAL && self->options.no_val)
        err_set(err, sizeof err, "loaderd sends a validation plan but reducerd runs with "
                 "--no-val: give loaderd --val and reducerd no --no-val, or neither");
    else if (plan->phase == DDP_PHASE_EVAL && !self->slot[DDP_PHASE_TRAIN])
        err_set(err, sizeof err, "validation plan of epoch %u before its train plan",
                 self->epoch);
    else if (have && slot_plan(have)->n == plan->n) {
        job_ack_plan(self, route); /* a restarted loader: same plan, carry on */
        return true;
    } else if (have)
        err_set(err, sizeof err, "a second, different %s plan for epoch %u (n=%llu, was %llu)",
                 ph, self->epoch, (unsigned long long)plan->n,
                 (unsigned long long)slot_plan(have)->n);
    if (!err[0])
        return false;
    job_finish(self, 1, err);
    return true;
}

void training_on_plan(reducer_t *self, zframe_t *route, ddp_plan_t *plan)
{
    if (self->finished || plan_refused(self, route, plan))
        return;
    if (plan->phase == DDP_PHASE_EVAL && plan->skip) {
        log_warn("validation plan of epoch %u skips %llu samples: ignored, validation counts all",
                 plan->epoch, (unsigned long long)plan->skip);
        plan->skip = 0;
    }
    bool val = plan->phase == DDP_PHASE_EVAL;
    if (!reducer_open_slot(self, plan, val && self->options.predictions)) {
        job_finish(self, 1, "cannot count the epoch's plan (see reducerd's log)");
        return;
    }
    job_ack_plan(self, route);
}

static void send_epoch(reducer_t *self, const decide_t *decision, double val_top1)
{
    ddp_msg_t m = {.type = DDP_EPOCH};
    m.u.epoch.epoch = self->epoch;
    m.u.epoch.decision = decision->decision;
    m.u.epoch.streak = decision->streak;
    m.u.epoch.val_top1 = val_top1;
    snprintf(m.u.epoch.reason, sizeof m.u.epoch.reason, "%s", decision->reason);
    for (int i = 0; i < peers_count(self->peers); i++) {
        peer_t *p = peers_at(self->peers, i);
        if (!p->dead && (p->role == DDP_ROLE_LOADER || p->role == DDP_ROLE_GPUD))
            reducer_send(self, p->identity, &m);
    }
}

static double val_top1_of(const slot_t *validation)
{
    if (!validation)
        return -1;
    ev_metric_t m;
    slot_fill_metric(validation, clock_mono_s(), false, &m);
    return m.samples ? (double)m.correct_top1 / (double)m.samples : 0;
}

/* The epoch's tallies are complete: metrics, the decision, EPOCH. */
static void decide_now(reducer_t *self, slot_t *train, slot_t *validation)
{
    double val_top1 = val_top1_of(validation);
    decide_cfg_t cfg = {(uint32_t)self->options.epochs, self->options.target_accuracy,
                        (uint32_t)self->options.patience};
    decide_t decision;
    decide_epoch(&cfg, self->epoch, self->streak, val_top1, &decision);
    self->streak = decision.streak;
    bool stop = decision.decision == DDP_DECISION_STOP;
    ev_metric_t decision_metric = {.decision = decision.decision, .streak = decision.streak,
                                   .epochs = cfg.epochs};
    snprintf(decision_metric.decision_reason, sizeof decision_metric.decision_reason, "%s",
             decision.reason);
    publish_progress(self); /* done == total of the epoch's last phase */
    publish_failed_files(self, train);
    publish_metric(self, train, stop && !validation, &decision_metric);
    if (validation) {
        publish_failed_files(self, validation);
        if (stop && self->options.predictions)
            publish_predictions(self, validation);
        publish_metric(self, validation, stop, &decision_metric);
    }
    send_epoch(self, &decision, val_top1);
    log_info("%s", decision.reason);
    publish_log(self, "info", "%s", decision.reason);
    if (stop) {   /* the job ends once rank 0 has written the final state */
        self->final_deadline_ms = clock_mono_ms() + self->options.done_timeout_s * 1000;
        snprintf(self->final_reason, sizeof self->final_reason, "%s", decision.reason);
        return;
    }
    results_end_phase(self, self->epoch, DDP_PHASE_TRAIN);
    results_end_phase(self, self->epoch, DDP_PHASE_EVAL);
    slot_destroy(&self->slot[DDP_PHASE_TRAIN]);
    slot_destroy(&self->slot[DDP_PHASE_EVAL]);
    self->epoch++;
}

/* After the stop decision: rank 0 gone, or silent past the deadline, ends
 * the job failed (its final checkpoint or weights may be missing). */
static void final_tick(reducer_t *self)
{
    const peer_t *r0 = peers_by_rank(self->peers, 0);
    bool gone = !r0 || r0->dead || r0->removed;
    if (!gone && clock_mono_ms() <= self->final_deadline_ms)
        return;
    char err[1024];
    err_set(err, sizeof err, "rank 0 %s before it confirmed the final checkpoint and weights "
            "(see its log); the last checkpoint written is the one to resume from",
            gone ? "was lost" : "did not answer within --done-timeout");
    publish_log(self, "error", "%s", err);
    job_finish(self, 1, err);
}

bool training_on_rank_done(reducer_t *self, const peer_t *p, const ddp_done_t *done)
{
    bool waiting = self->final_deadline_ms != 0;
    if (p->rank != 0 || p->removed || p->dead || self->finished ||
        !(done->code == DDP_STOP_CHECKPOINT_FAILED || done->code == DDP_STOP_NONFINITE ||
          (done->code == 0 && waiting)))
        return false;
    if (done->code == 0) {
        log_info("rank 0: %s", done->reason);
        job_finish(self, 0, self->final_reason);
        return true;
    }
    publish_log(self, "error", "%s", done->reason);
    slot_t *train = self->slot[DDP_PHASE_TRAIN];
    /* the epoch's committed steps so far: the run directory's last row (an
     * empty one only when no epoch of this run was decided: summary.json
     * needs a metric) */
    if (done->code == DDP_STOP_NONFINITE && train &&
        (slot_accounted(train) > 0 || self->epoch == (uint32_t)self->options.start_epoch)) {
        ev_metric_t d = {.decision = DDP_DECISION_STOP, .streak = self->streak,
                         .epochs = (uint32_t)self->options.epochs};
        snprintf(d.decision_reason, sizeof d.decision_reason, "%.1000s", done->reason);
        publish_metric(self, train, true, &d);
    }
    job_finish(self, done->code, done->reason);
    return true;
}

void training_tick(reducer_t *self)
{
    if (self->final_deadline_ms) {
        final_tick(self);
        return;
    }
    slot_t *train = self->slot[DDP_PHASE_TRAIN], *validation = self->slot[DDP_PHASE_EVAL];
    if (!train || !slot_complete(train))
        return;
    if (!self->options.no_val && (!validation || !slot_complete(validation)))
        return;
    if (job_reporter_listening(self))
        decide_now(self, train, validation);
}
