/* reducerd --train: the training coordinator (docs/TRAINING.md, steps 1
 * and 6, "Failure").
 *
 * Ranks: gpud JOINs (each with its ring endpoint) are held until all
 * --workers ranks have joined; then every rank gets WELCOME(train=1,
 * next_ring = the ring of rank (r+1) % W). A JOIN beyond W gets STOP(1).
 *
 * Epochs: the current epoch's train and validation tallies run side by
 * side (loaderd sends PLAN(e, EVAL) after END(e, TRAIN), often before the
 * last train result is in). When both are complete (the train one alone
 * with --no-val), reducerd publishes the train and val metrics, decides
 * early stopping once (decide.h) and sends EPOCH to loaderd and every
 * gpud; a stop then ends the job like an eval (end, STOP(0), DONE).
 *
 * Failure: a gpud declared dead (missed heartbeats) fails the job with
 * STOP(1, "rank R (NAME) died at epoch e step S; resume with ..."), the
 * same reason in the end event.
 */
#include "common/clock.h"
#include "common/log.h"
#include "reducerd/daemon_reducer.h"
#include "reducerd/decide.h"

#include <stdio.h>
#include <string.h>

static void stop_one(reducer_t *r, zframe_t *route, int code, const char *reason)
{
    ddp_msg_t s = {.type = DDP_STOP};
    s.u.stop.code = code;
    snprintf(s.u.stop.reason, sizeof s.u.stop.reason, "%s", reason);
    send_to(r, route, &s);
}

static void welcome(reducer_t *r, const peer_t *p)
{
    int32_t world = (int32_t)r->o.workers;
    const peer_t *next = peers_by_rank(r->peers, (p->rank + 1) % world);
    ddp_msg_t w = {.type = DDP_WELCOME};
    w.u.welcome.rank = p->rank;
    w.u.welcome.world = world;
    w.u.welcome.train = 1;
    snprintf(w.u.welcome.job, sizeof w.u.welcome.job, "%s", r->o.job);
    welcome_auth(r, &w.u.welcome, DDP_ROLE_GPUD, p->rank, p->name);
    snprintf(w.u.welcome.next_ring, sizeof w.u.welcome.next_ring, "%s", next ? next->ring : "");
    send_to(r, p->identity, &w);
}

/* All W ranks are in: welcome them together, so no rank starts its ring
 * before its neighbour exists. */
static void gang_start(reducer_t *r)
{
    r->gang = true;
    int64_t now_ms = clock_mono_ms();
    for (int32_t rank = 0; rank < r->o.workers; rank++) {
        if (!peers_by_rank(r->peers, rank)) {
            /* ranks are handed out lowest-free-first below W: cannot happen */
            finish(r, 1, "internal error: a rank of the gang is missing; please report");
            return;
        }
    }
    for (int32_t rank = 0; rank < r->o.workers; rank++) {
        peer_t *p = peers_by_rank(r->peers, rank);
        p->last_seen_ms = now_ms; /* they waited without heartbeats */
        welcome(r, p);
    }
    log_info("all %ld ranks joined: training starts", r->o.workers);
    publish_log(r, "info", "all %ld ranks joined: training starts", r->o.workers);
    /* the epoch's clock starts when its ranks can work */
    if (r->slot[DDP_PHASE_TRAIN])
        slot_restart_clock(r->slot[DDP_PHASE_TRAIN], clock_mono_s());
}

static void join_other(reducer_t *r, zframe_t *route, const ddp_join_t *j)
{
    if (j->role == DDP_ROLE_LOADER && !loader_join_ok(r, route, j))
        return;
    peer_t *p = peers_join(r->peers, route, j);
    if (!p)
        return;
    log_info("%s %s joined from %s (pid %u)", proto_role_name(j->role), j->name, j->host, j->pid);
    if (r->finished && p->role != DDP_ROLE_REPORTER)
        stop_one(r, route, 0, "job already finished");
}

/* A gpud JOIN the job has no room for, or one from a restarted rank. */
static bool join_refused(reducer_t *r, zframe_t *route, const ddp_join_t *j, peer_t *known)
{
    char why[512];
    if (known && r->gang) {
        if (zframe_eq(known->identity, route)) {
            welcome(r, known); /* the same socket asking again */
            return true;
        }
        snprintf(why, sizeof why, "rank %d (%s) restarted during training: a training ring cannot "
                 "take a new process; resume with ddpipe train --resume %s", known->rank,
                 known->name, r->o.resume_dir ? r->o.resume_dir : "<run directory>");
        finish(r, 1, why);
        stop_one(r, route, 1, why);
        return true;
    }
    if (known)
        return false;
    if (r->gang || peers_alive(r->peers, DDP_ROLE_GPUD) >= r->o.workers ||
        j->want_rank >= r->o.workers) {
        char asked[48] = "";
        if (j->want_rank >= 0)
            snprintf(asked, sizeof asked, " (asking for rank %d)", j->want_rank);
        snprintf(why, sizeof why, "the job has %ld ranks: gpud %s%s is one too many; start exactly "
                 "--workers gpuds", r->o.workers, j->name, asked);
        log_warn("%s", why);
        publish_log(r, "warn", "%s", why);
        stop_one(r, route, 1, why);
        return true;
    }
    return false;
}

void train_on_join(reducer_t *r, zframe_t *route, const ddp_join_t *j)
{
    if (j->role != DDP_ROLE_GPUD) {
        join_other(r, route, j);
        return;
    }
    if (r->finished) {
        stop_one(r, route, r->exit_code, "job already finished");
        return;
    }
    if (join_refused(r, route, j, peers_by_name(r->peers, j->name)))
        return;
    peer_t *p = peers_join(r->peers, route, j);
    if (!p)
        return;
    log_info("gpud %s joined from %s (pid %u) as rank %d of %ld, ring %s", j->name, j->host,
             j->pid, p->rank, r->o.workers, j->ring[0] ? j->ring : "(none)");
    publish_worker(r, p, "joined");
    if (!j->ring[0]) {
        char why[512];
        snprintf(why, sizeof why, "gpud %s joined without a ring endpoint: a training job needs "
                 "every gpud started with --train", j->name);
        finish(r, 1, why);
        return;
    }
    int joined = peers_alive(r->peers, DDP_ROLE_GPUD);
    if (joined == r->o.workers)
        gang_start(r);
    else
        log_info("%d of %ld ranks joined; waiting for the others", joined, r->o.workers);
}

/* A plan the coordinator cannot place fails the job: loaderd and reducerd
 * disagree on the run's shape (--start-epoch, --val), and waiting would
 * only hang both. */
static bool plan_refused(reducer_t *r, zframe_t *route, const ddp_plan_t *plan)
{
    char why[512] = "";
    const char *ph = plan->phase == DDP_PHASE_TRAIN ? "train" : "validation";
    slot_t *have = plan->phase <= DDP_PHASE_TRAIN ? r->slot[plan->phase] : NULL;
    if (plan->epoch != r->epoch)
        snprintf(why, sizeof why, "loaderd plans epoch %u (%s) while reducerd is at epoch %u: start "
                 "both with the same --start-epoch", plan->epoch, ph, r->epoch);
    else if (plan->phase == DDP_PHASE_EVAL && r->o.no_val)
        snprintf(why, sizeof why, "loaderd sends a validation plan but reducerd runs with "
                 "--no-val: give loaderd --val and reducerd no --no-val, or neither");
    else if (plan->phase == DDP_PHASE_EVAL && !r->slot[DDP_PHASE_TRAIN])
        snprintf(why, sizeof why, "validation plan of epoch %u before its train plan", r->epoch);
    else if (have && slot_plan(have)->n == plan->n) {
        ack_plan(r, route); /* a restarted loader: same plan, carry on */
        return true;
    } else if (have)
        snprintf(why, sizeof why, "a second, different %s plan for epoch %u (n=%llu, was %llu)",
                 ph, r->epoch, (unsigned long long)plan->n,
                 (unsigned long long)slot_plan(have)->n);
    if (!why[0])
        return false;
    finish(r, 1, why);
    return true;
}

void train_on_plan(reducer_t *r, zframe_t *route, ddp_plan_t *plan)
{
    if (r->finished || plan_refused(r, route, plan))
        return;
    if (plan->phase == DDP_PHASE_EVAL && plan->skip) {
        log_warn("validation plan of epoch %u skips %llu samples: ignored, validation counts all",
                 plan->epoch, (unsigned long long)plan->skip);
        plan->skip = 0;
    }
    bool val = plan->phase == DDP_PHASE_EVAL;
    if (!open_slot(r, plan, val && r->o.predictions)) {
        finish(r, 1, "cannot count the epoch's plan (see reducerd's log)");
        return;
    }
    ack_plan(r, route);
}

void train_note_step(reducer_t *r, const ddp_result_t *res)
{
    if (res->phase != DDP_PHASE_TRAIN)
        return;
    if (!r->have_step || res->step > r->last_step)
        r->last_step = res->step;
    r->have_step = true;
}

void train_rank_died(reducer_t *r, const peer_t *p)
{
    char why[1024];
    snprintf(why, sizeof why, "rank %d (%s) died at epoch %u step %llu; resume with ddpipe train "
             "--resume %s", p->rank, p->name, r->epoch,
             (unsigned long long)(r->have_step ? r->last_step : 0),
             r->o.resume_dir ? r->o.resume_dir : "<run directory>");
    publish_log(r, "error", "%s", why);
    finish(r, 1, why);
}

static void send_epoch(reducer_t *r, const decide_t *d, double val_top1)
{
    ddp_msg_t m = {.type = DDP_EPOCH};
    m.u.epoch.epoch = r->epoch;
    m.u.epoch.decision = d->decision;
    m.u.epoch.streak = d->streak;
    m.u.epoch.val_top1 = val_top1;
    snprintf(m.u.epoch.reason, sizeof m.u.epoch.reason, "%s", d->reason);
    for (int i = 0; i < peers_count(r->peers); i++) {
        peer_t *p = peers_at(r->peers, i);
        if (!p->dead && (p->role == DDP_ROLE_LOADER || p->role == DDP_ROLE_GPUD))
            send_to(r, p->identity, &m);
    }
}

static double val_top1_of(const slot_t *v)
{
    if (!v)
        return -1;
    ev_metric_t m;
    slot_fill_metric(v, clock_mono_s(), false, &m);
    return m.samples ? (double)m.correct_top1 / (double)m.samples : 0;
}

/* The epoch's tallies are complete: metrics, the decision, EPOCH. */
static void decide_now(reducer_t *r, slot_t *t, slot_t *v)
{
    double val_top1 = val_top1_of(v);
    decide_cfg_t cfg = {(uint32_t)r->o.epochs, r->o.target, (uint32_t)r->o.patience};
    decide_t d;
    decide_epoch(&cfg, r->epoch, r->streak, val_top1, &d);
    r->streak = d.streak;
    bool stop = d.decision == DDP_DECISION_STOP;
    ev_metric_t dec = {.decision = d.decision, .streak = d.streak, .epochs = cfg.epochs};
    snprintf(dec.decision_reason, sizeof dec.decision_reason, "%s", d.reason);
    publish_progress(r); /* done == total of the epoch's last phase */
    publish_failed_files(r, t);
    publish_metric(r, t, stop && !v, &dec);
    if (v) {
        publish_failed_files(r, v);
        if (stop && r->o.predictions)
            publish_predictions(r, v);
        publish_metric(r, v, stop, &dec);
    }
    send_epoch(r, &d, val_top1);
    log_info("%s", d.reason);
    publish_log(r, "info", "%s", d.reason);
    if (stop) {
        finish(r, 0, d.reason);
        return;
    }
    end_issued(r, r->epoch, DDP_PHASE_TRAIN);
    end_issued(r, r->epoch, DDP_PHASE_EVAL);
    slot_destroy(&r->slot[DDP_PHASE_TRAIN]);
    slot_destroy(&r->slot[DDP_PHASE_EVAL]);
    r->epoch++;
}

void train_tick(reducer_t *r)
{
    slot_t *t = r->slot[DDP_PHASE_TRAIN], *v = r->slot[DDP_PHASE_EVAL];
    if (!t || !slot_complete(t))
        return;
    if (!r->o.no_val && (!v || !slot_complete(v)))
        return;
    if (reporter_listening(r))
        decide_now(r, t, v);
}
