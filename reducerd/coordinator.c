#include "reducerd/coordinator.h"

#include "common/clock.h"
#include "common/jobid.h"
#include "common/log.h"
#include "reducerd/admission.h"
#include "reducerd/eval.h"
#include "reducerd/job.h"
#include "reducerd/membership.h"
#include "reducerd/nccl_relay.h"
#include "reducerd/publish.h"
#include "reducerd/results.h"
#include "reducerd/training.h"
#include "reducerd/trust.h"
#include "reducerd/watchdog.h"
#include "proto/wire.h"

#include <stdio.h>
#include <string.h>

/* A gpud that could not start says why (JOIN `failed`): logged and
 * published once per name, never welcomed; an eval's hold stops waiting
 * for it. A training gang still waits for --workers ranks (a supervisor
 * may restart it); the launcher ends a job whose rank failed to start. */
static void on_failed_start(reducer_t *self, zframe_t *route, const ddp_join_t *join)
{
    for (int i = 0; i < self->n_start_failed; i++)
        if (strcmp(self->start_failed[i], join->name) == 0)
            return;   /* said already */
    if (self->n_start_failed == REDUCER_MAX_START_FAILED) {
        char who[64];
        trust_peer_label(self, route, who, sizeof who);
        trust_reject(self, who, "JOIN", "a failed start of '%s', past %d distinct names",
                     join->name, REDUCER_MAX_START_FAILED);
        return;
    }
    snprintf(self->start_failed[self->n_start_failed++], DDP_MAX_NAME, "%s", join->name);
    log_warn("gpud %s on %s (pid %u) could not start: %s", join->name, join->host, join->pid,
             join->failed);
    publish_log(self, "warn", "gpud %s could not start: %s", join->name, join->failed);
    if (!self->options.train)
        eval_on_failed_start(self);
}

static void on_join(reducer_t *self, zframe_t *route, const ddp_join_t *join)
{
    if (join->role == DDP_ROLE_GPUD && join->failed[0]) {
        on_failed_start(self, route, join);
        return;
    }
    if (self->options.train)
        training_on_join(self, route, join);
    else
        eval_on_join(self, route, join);
}

static void on_plan(reducer_t *self, zframe_t *route, ddp_plan_t *plan)
{
    if (trust_from_loader(self, route, &plan->auth, false, "PLAN") < 0)
        return;
    if (self->options.train)
        training_on_plan(self, route, plan);
    else
        eval_on_plan(self, route, plan);
}

static void on_heartbeat(reducer_t *self, zframe_t *route, const ddp_heartbeat_t *hb)
{
    char who[64];
    trust_peer_label(self, route, who, sizeof who);
    loader_role_t *l = hb->rank == -1 ? trust_loader_named(self, hb->worker) : NULL;
    if (l) {
        if (!trust_auth_ok(self, &hb->auth, DDP_ROLE_LOADER, -1, l->name)) {
            trust_reject(self, who, "HEARTBEAT", "loader heartbeat without its session token");
            return;
        }
        l->last_seen_ms = clock_mono_ms();
        if (hb->rejected > l->rejected)
            l->rejected = hb->rejected;
        return;
    }
    peer_t *p = peers_by_name(self->peers, hb->worker);
    /* a heartbeat sent before its MEMBERS arrived still names the old rank */
    bool rank_ok = p && (p->rank == hb->rank || (p->prev_rank >= 0 && p->prev_rank == hb->rank));
    if (!p || p->role != DDP_ROLE_GPUD || !rank_ok ||
        !trust_auth_ok(self, &hb->auth, DDP_ROLE_GPUD, hb->rank, p->name)) {
        trust_reject(self, who, "HEARTBEAT", "from '%s' rank %d: not a joined worker with its "
                     "session token", hb->worker, hb->rank);
        return;
    }
    if (p->dead) {
        if (self->options.train)
            return; /* the job already failed on its death */
        p->dead = false;
        log_info("%s is alive again", p->name);
        publish_worker(self, p, "joined");
    }
    p->last_seen_ms = clock_mono_ms();
}

static void on_done(reducer_t *self, zframe_t *route, const ddp_done_t *done)
{
    peer_t *p = peers_by_identity(self->peers, route);
    if (p && p->role == DDP_ROLE_GPUD && self->options.train &&
        training_on_rank_done(self, p, done))
        return;   /* rank 0: final writes, a failed write, a non-finite step */
    if (!p || p->role != DDP_ROLE_REPORTER) {
        char who[64];
        trust_peer_label(self, route, who, sizeof who);
        trust_reject(self, who, "DONE", "only a joined reporterd (or training rank 0 ending "
                     "the job, docs/TRAINING.md) sends DONE");
        return;
    }
    self->reporters_done++;
    if (done->code != 0) {
        log_error("reporterd could not write the run directory: %s", done->reason);
        self->exit_code = 1;
    } else {
        log_info("reporterd wrote the run directory");
    }
}

/* The trust keys a message carries, or NULL. */
static const ddp_auth_t *msg_auth(const ddp_msg_t *m)
{
    switch (m->type) {
    case DDP_PLAN: return &m->u.plan.auth;
    case DDP_RESULT: return &m->u.result.auth;
    case DDP_FAILED: return &m->u.failed.auth;
    case DDP_ISSUED: return &m->u.issued.auth;
    case DDP_HEARTBEAT: return &m->u.heartbeat.auth;
    case DDP_STEP: return &m->u.step.auth;
    case DDP_STATE: return &m->u.state.auth;
    case DDP_NCCLID: return &m->u.ncclid.auth;
    default: return NULL;
    }
}

/* A JOIN or message that names another job (docs/SECURITY.md "Job
 * identity"): two jobs may share CURVE keys, a leftover daemon may reach a
 * reused port. Refused and counted, never fatal; a joiner is told why
 * (STOP), so it exits saying so instead of waiting. */
static bool other_job(reducer_t *self, zframe_t *route, const ddp_msg_t *m)
{
    const ddp_auth_t *auth = msg_auth(m);
    const char *job = auth ? auth->job : m->type == DDP_JOIN ? m->u.join.job : "";
    if (!job[0] || strcmp(job, self->options.job) == 0)
        return false;
    char who[64];
    if (m->type == DDP_JOIN)
        snprintf(who, sizeof who, "%s", m->u.join.name);
    else
        trust_peer_label(self, route, who, sizeof who);
    trust_reject(self, who, proto_type_name(m->type), "of job %s, but this is job %s",
                 job, self->options.job);
    if (m->type == DDP_JOIN) {
        char err[DDP_MAX_STR];
        snprintf(err, sizeof err, "this reducerd runs job %s, not job %s: check the endpoints "
                 "(and %s)", self->options.job, job, JOBID_ENV);
        job_stop_peer(self, route, 1, err);
    }
    return true;
}

/* A message of this job (its id is unique per job: other_job came first)
 * under another session comes from a peer that an earlier reducerd
 * welcomed: that reducerd died (kill -9, a crash) and its tallies died
 * with it. The peer is told to stop with DDP_STOP_JOB_LOST, and a reducerd
 * that has no job of its own yet (no plan, no rank: the restarted one)
 * ends too, so nothing waits for state that is gone. A reducerd with a job
 * only rejects it (a stranger must not end a job). */
static bool stale_session(reducer_t *self, zframe_t *route, const ddp_msg_t *m)
{
    const ddp_auth_t *auth = msg_auth(m);
    if (!auth || auth->session == 0 || auth->session == self->session ||
        strcmp(auth->job, self->options.job) != 0)
        return false;
    static const char err[] =
        "reducerd restarted and this job's tallies were lost with the previous one: every "
        "daemon stops (exit 3); run the job again";
    job_stop_peer(self, route, DDP_STOP_JOB_LOST, err);
    char who[64];
    trust_peer_label(self, route, who, sizeof who);
    trust_reject(self, who, proto_type_name(m->type),
                 "session of an earlier reducerd: told to stop");
    bool fresh = !self->slot[0] && !self->slot[1] && peers_alive(self->peers, DDP_ROLE_GPUD) == 0;
    if (fresh && !self->finished) {
        self->job_lost = true;
        job_finish(self, DDP_STOP_JOB_LOST, err);
    }
    return true;
}

/* A message from a rank removed from the training job (docs/ELASTIC.md):
 * answered once with STOP(fenced), never counted. Its heartbeats come from
 * another socket (<name>.hb) and name it, with its token. */
static bool from_removed_rank(reducer_t *self, zframe_t *route, const ddp_msg_t *m)
{
    peer_t *p = NULL;
    if (m->type == DDP_RESULT || m->type == DDP_STEP || m->type == DDP_NCCLID)
        p = peers_by_identity(self->peers, route);
    else if (m->type == DDP_HEARTBEAT && m->u.heartbeat.rank >= 0)
        p = peers_by_name(self->peers, m->u.heartbeat.worker);
    if (!p || !p->removed || p->role != DDP_ROLE_GPUD)
        return false;
    if (m->type == DDP_HEARTBEAT &&
        !trust_auth_ok(self, &m->u.heartbeat.auth, DDP_ROLE_GPUD, m->u.heartbeat.rank, p->name))
        return false; /* not its own: judged (rejected) as any heartbeat */
    membership_fence(self, route, p, proto_type_name(m->type));
    return true;
}

static void on_message(reducer_t *self, zframe_t *route, ddp_msg_t *m)
{
    if (other_job(self, route, m) || stale_session(self, route, m) ||
        from_removed_rank(self, route, m))
        return;
    switch (m->type) {
    case DDP_JOIN: on_join(self, route, &m->u.join); break;
    case DDP_PLAN: on_plan(self, route, &m->u.plan); break;
    case DDP_RESULT: results_on_result(self, route, &m->u.result); break;
    case DDP_FAILED: results_on_failed(self, route, &m->u.failed); break;
    case DDP_ISSUED: results_on_issued(self, route, &m->u.issued); break;
    case DDP_HEARTBEAT: on_heartbeat(self, route, &m->u.heartbeat); break;
    case DDP_DONE: on_done(self, route, &m->u.done); break;
    case DDP_STEP: membership_on_step(self, route, &m->u.step); break;
    case DDP_STATE: admission_on_state(self, route, &m->u.state); break;
    case DDP_NCCLID: nccl_relay_on_id(self, route, &m->u.ncclid); break;
    default: {
        char who[64];
        trust_peer_label(self, route, who, sizeof who);
        trust_reject(self, who, proto_type_name(m->type), "unexpected on the reducer socket");
    }
    }
}

bool coordinator_receive(reducer_t *self)
{
    zframe_t *route = NULL;
    ddp_msg_t m;
    int rc = proto_recv(zsock_resolve(self->router), &route, &m, &self->stats);
    if (rc == 0) {
        on_message(self, route, &m);
        ddp_msg_clear(&m);
    }
    zframe_destroy(&route);
    return rc >= 0;
}

void coordinator_tick(reducer_t *self, int64_t now_ms)
{
    /* progress twice a second: the throughput plot's and the dashboard's sampling */
    if (now_ms - self->last_progress_event_ms >= PROGRESS_EVENT_MS) {
        /* on the 0.5 s grid (a late tick does not shift the next one),
         * unless the loop fell a whole period behind */
        bool behind = now_ms - self->last_progress_event_ms >= 2 * PROGRESS_EVENT_MS;
        self->last_progress_event_ms = behind ? now_ms : self->last_progress_event_ms + PROGRESS_EVENT_MS;
        if (!self->finished)
            publish_progress(self);
    }
    if (now_ms - self->last_liveness_ms >= 1000) {
        self->last_liveness_ms = now_ms;
        watchdog_check_liveness(self);
        watchdog_check_loaders(self, now_ms);
    }
    if (!self->finished && self->options.train) {
        if (admission_tick(self, now_ms))
            membership_decide(self);
        training_tick(self);
    }
    else if (!self->finished)
        eval_tick(self);
    if (!self->finished)
        watchdog_check_refused_workers(self, now_ms);
    if (!self->finished)
        watchdog_check_stall(self, now_ms);
}
