/* members — the rank's side of elastic training (see members.h). */
#include "gpud/members.h"

#include "common/clock.h"
#include "common/log.h"
#include "common/zsockopt.h"
#include "gpud/collective.h"
#include "proto/wire.h"

#include <stdio.h>
#include <string.h>

/* A MEMBERS newer than what this rank is in (or has pending) replaces the
 * pending one: a change that supersedes another mid re-form wins. The
 * names move out of m. */
static bool keep_members(gpud_t *self, ddp_members_t *m)
{
    train_state_t *ts = self->train;
    uint32_t have = ts->pending.members ? ts->members.gen : self->gen;
    if (m->gen <= have) {
        log_debug("MEMBERS of generation %u ignored: this rank is at generation %u", m->gen,
                  have);
        return false;
    }
    ddp_msg_t old = {.type = DDP_MEMBERS, .u.members = ts->members};
    ddp_msg_clear(&old);
    ts->members = *m;
    m->names = NULL;
    ts->pending.members = true;
    return true;
}

members_event_t members_on_message(gpud_t *self, ddp_msg_t *m, uint64_t step)
{
    train_state_t *ts = self->train;
    switch (m->type) {
    case DDP_COMMIT:
        if (m->u.commit.gen == self->gen && m->u.commit.step == step) {
            ts->pending.snapshot = m->u.commit.snapshot && self->rank == 0;
            return MEMBERS_COMMIT;
        }
        log_debug("COMMIT of generation %u step %llu ignored (generation %u, step %llu awaited)",
                  m->u.commit.gen, (unsigned long long)m->u.commit.step, self->gen,
                  (unsigned long long)step);
        return MEMBERS_WAIT;
    case DDP_MEMBERS:
        keep_members(self, &m->u.members);
        return ts->pending.members ? MEMBERS_CHANGED : MEMBERS_WAIT;
    case DDP_STOP:   /* a STOP(0) may wait for the last END (gpud_stop) */
        gpud_stop(self, &m->u.stop);
        return rank_state_ended(&self->state) ? MEMBERS_STOPPED : MEMBERS_WAIT;
    case DDP_EPOCH:   /* train.c handles it in its place (after END(TRAIN)) */
        ts->pending_epoch = m->u.epoch;
        ts->pending.epoch = true;
        return MEMBERS_WAIT;
    case DDP_WELCOME:
        return MEMBERS_WAIT;   /* a JOIN answered twice */
    case DDP_NCCLID: {   /* rank 0's communicator id, relayed by reducerd */
        char why[256];
        if (m->u.ncclid.gen > self->gen) {   /* relayed before our MEMBERS was applied */
            ts->early_id = m->u.ncclid;
            ts->have_early_id = true;
        } else if (!ts->coll ||
                   collective_take_id(ts->coll, &m->u.ncclid, why, sizeof why) < 0) {
            self->stats.rejected++;
            log_warn("NCCLID from reducerd ignored: %s", ts->coll ? why : "not training");
        }
        return MEMBERS_WAIT;
    }
    case DDP_STATE:   /* a paused job's joiner wants rank 0's state: sent when idle */
        ts->pending.snapshot = self->rank == 0 && !m->u.state.image;
        return MEMBERS_WAIT;
    default:
        self->stats.rejected++;
        log_warn("unexpected %s from reducerd during a training step: ignored",
                 proto_type_name(m->type));
        return MEMBERS_WAIT;
    }
}

/* Reads what reducerd sent, without waiting (a bounded number). */
static members_event_t read_reducer(gpud_t *self, uint64_t step)
{
    members_event_t ev = MEMBERS_WAIT;
    for (int i = 0; i < 64 && ev == MEMBERS_WAIT; i++) {
        if (!(zsock_events(self->reducer) & ZMQ_POLLIN))
            break;
        ddp_msg_t m;
        if (proto_recv(zsock_resolve(self->reducer), NULL, &m, &self->stats) != 0)
            continue;
        ev = members_on_message(self, &m, step);
        ddp_msg_clear(&m);
    }
    return ev;
}

/* A STOP the heartbeat actor passes on (reducerd answers a fenced rank's
 * beats with it), without waiting. */
static void read_heartbeat(gpud_t *self)
{
    if (self->heartbeat && (zsock_events(self->heartbeat) & ZMQ_POLLIN))
        gpud_on_heartbeat(self);
}

const char *members_ring_cancel(void *ctx)
{
    gpud_t *self = ctx;
    train_state_t *ts = self->train;
    if (zs_interrupted())
        return "interrupted";
    if (!ts->pending.members && !rank_state_ended(&self->state))
        read_reducer(self, UINT64_MAX);
    if (!ts->pending.members && !rank_state_ended(&self->state))
        read_heartbeat(self);
    if (ts->pending.members)
        return "membership changed";
    return rank_state_ended(&self->state) ? "stopped by reducerd" : NULL;
}

int members_send_step(gpud_t *self, uint32_t epoch, uint64_t step, ddp_step_status_t status,
                      int32_t suspect)
{
    ddp_msg_t m = {.type = DDP_STEP};
    m.u.step = (ddp_step_t){.rank = self->rank, .gen = self->gen, .epoch = epoch, .step = step,
                            .status = (uint8_t)status, .suspect = suspect, .auth = self->auth};
    if (proto_send(zsock_resolve(self->reducer), NULL, &m) < 0) {
        log_error("cannot send STEP %llu to reducerd: %s", (unsigned long long)step,
                  zmq_strerror(zmq_errno()));
        return -1;
    }
    return 0;
}

members_event_t members_wait(gpud_t *self, uint64_t step)
{
    int64_t deadline = clock_mono_ms() + gpud_commit_timeout_ms(self);
    zpoller_t *poller = zpoller_new(self->reducer, NULL);
    if (self->heartbeat)
        zpoller_add(poller, self->heartbeat);
    members_event_t ev = self->train->pending.members ? MEMBERS_CHANGED : MEMBERS_WAIT;
    while (ev == MEMBERS_WAIT && !rank_state_ended(&self->state) && !zs_interrupted() &&
           clock_mono_ms() < deadline) {
        void *which = zpoller_wait(poller, 200);
        if (which == self->reducer)
            ev = read_reducer(self, step);
        else if (which && which == (void *)self->heartbeat)
            read_heartbeat(self);
    }
    zpoller_destroy(&poller);
    if (ev == MEMBERS_WAIT && (rank_state_ended(&self->state) || zs_interrupted()))
        ev = MEMBERS_STOPPED;
    return ev;
}

/* The collective cannot be recovered: the job (or this rank) ends. Rank 0
 * saves the last committed step on the way out, unless it was fenced. */
static int fatal(gpud_t *self, const char *what, const char *err)
{
    int peer = self->world > 0 ? (self->rank + self->world - 1) % self->world : -1;
    if (zs_interrupted())
        log_error("%s interrupted by a signal: stopping (resume with --resume)", what);
    else if (!rank_state_ended(&self->state))
        log_error("all-reduce with rank %d failed (%s): %s; the job cannot continue — resume "
                  "with --resume", peer, what, err);
    if (self->state.now != RANK_FENCED)
        self->train->checkpoint_on_exit = true;
    return -1;
}

int members_ring_failed(gpud_t *self, const char *what, uint32_t epoch, uint64_t step,
                        const char *err)
{
    train_state_t *ts = self->train;
    /* an NCCL sum that failed (aborted: an error, its timeout, a MEMBERS
     * read meanwhile) is a failed collective that names no suspect */
    bool nccl = ts->coll && collective_failed(ts->coll);
    allreduce_failure_t why = allreduce_failure(ts->ring);
    if (nccl)
        why = ts->pending.members ? ALLREDUCE_CANCELLED : ALLREDUCE_TIMEOUT;
    if (why == ALLREDUCE_CANCELLED && ts->pending.members)
        return members_apply(self) < 0 ? -1 : 1;
    if (why != ALLREDUCE_TIMEOUT || rank_state_ended(&self->state) || zs_interrupted())
        return fatal(self, what, err);
    int suspect = nccl ? -1 : allreduce_suspect(ts->ring);
    log_warn("%s: %s; reporting rank %d to reducerd and waiting for its decision", what, err,
             suspect);
    if (members_send_step(self, epoch, step, DDP_STEP_RING_FAILED, suspect) < 0)
        return fatal(self, what, err);
    members_event_t ev = members_wait(self, UINT64_MAX);
    if (ev == MEMBERS_CHANGED)
        return members_apply(self) < 0 ? -1 : 1;
    if (ev == MEMBERS_WAIT)
        log_error("reducerd decided nothing within %llds after the ring failed",
                  (long long)(gpud_commit_timeout_ms(self) / 1000));
    return fatal(self, what, err);
}

/* The new place of this rank, logged. -1 when MEMBERS gives it none or
 * disagrees on the step. */
static int check_members(gpud_t *self, const ddp_members_t *m)
{
    if (m->rank < 0 || m->rank >= m->world) {
        log_error("reducerd's membership of generation %u has no place for this rank (rank %d "
                  "of %d): leaving the job", m->gen, m->rank, m->world);
        rank_state_end(&self->state, RANK_FENCED, "MEMBERS without a place");
        return -1;
    }
    if (m->step != self->train->next_step) {
        log_error("generation %u starts at step %llu but this rank's next step is %llu: the "
                  "ranks disagree on the last committed step", m->gen,
                  (unsigned long long)m->step, (unsigned long long)self->train->next_step);
        return -1;
    }
    return 0;
}

/* A token binds (role, rank, name): everything after MEMBERS is signed
 * with the new rank's, the heartbeats too. */
static void adopt_token(gpud_t *self, const ddp_members_t *m)
{
    if (!m->session) {
        log_warn("reducerd's MEMBERS carries no token for rank %d: loaderd and reducerd may "
                 "refuse this rank's messages", m->rank);
        return;
    }
    self->auth.session = m->session;
    memcpy(self->auth.token, m->token, sizeof self->auth.token);
    if (self->heartbeat && heartbeat_set_auth(self->heartbeat, self->rank, &self->auth) < 0)
        log_warn("cannot hand the new token to the heartbeat thread: its beats may be refused");
}

/* The trainer's gradient sum over NCCL: buckets queued while backward runs
 * (with the overlap), else the whole arena at once; bitwise training's
 * exact limbs and tops. */
static const trainer_dsum_t NCCL_GRAD_SUM = {.sum = collective_trainer_sum,
                                             .enqueue = collective_trainer_enqueue,
                                             .wait = collective_trainer_wait,
                                             .max_u32 = collective_trainer_max_u32,
                                             .sum_i64 = collective_trainer_sum_i64};

int members_collective(gpud_t *self, bool nccl)
{
    train_state_t *ts = self->train;
    ddp_msg_t m = {.type = DDP_NCCLID};
    char err[1024];
    int rc = collective_generation(ts->coll, self->gen, self->rank, self->world, nccl,
                                   &m.u.ncclid, err, sizeof err);
    if (rc < 0) {
        log_error("generation %u cannot sum over NCCL: %s", self->gen, err);
        return -1;
    }
    trainer_set_device_sum(ts->trainer, nccl ? &NCCL_GRAD_SUM : NULL, ts->coll);
    if (ts->have_early_id && ts->early_id.gen <= self->gen) {
        ts->have_early_id = false;
        if (ts->early_id.gen == self->gen &&
            collective_take_id(ts->coll, &ts->early_id, err, sizeof err) < 0) {
            self->stats.rejected++;
            log_warn("NCCLID from reducerd ignored: %s", err);
        }
    }
    if (rc == 1) {   /* rank 0: the id, for reducerd to pass on */
        m.u.ncclid.auth = self->auth;
        if (proto_send(zsock_resolve(self->reducer), NULL, &m) < 0) {
            log_error("cannot send generation %u's NCCL id to reducerd: %s", self->gen,
                      zmq_strerror(zmq_errno()));
            return -1;
        }
    }
    if (nccl)
        log_info("generation %u sums its gradients over NCCL", self->gen);
    return 0;
}

void members_take(gpud_t *self, const ddp_members_t *m)
{
    self->gen = m->gen;
    self->rank = m->rank;
    self->world = m->world;
    snprintf(self->next_ring, sizeof self->next_ring, "%s", m->next_ring);
    log_set_rank(self->rank);
    adopt_token(self, m);
}

int64_t members_bn_epoch(const train_state_t *ts, uint64_t step)
{
    uint64_t spe = ts->steps_per_epoch;
    return spe && step && step % spe == 0 ? (int64_t)(step / spe) - 1 : -1;
}

int members_apply(gpud_t *self)
{
    train_state_t *ts = self->train;
    ddp_members_t *m = &ts->members;
    ts->pending.members = false;
    int rc = check_members(self, m);
    char err[1024];
    if (rc == 0 && allreduce_reform(ts->ring, m->gen, m->rank, m->world, m->next_ring, err,
                                    sizeof err) < 0) {
        log_error("cannot re-form the ring for generation %u: %s", m->gen, err);
        rc = -1;
    }
    if (rc == 0) {
        bool redo = rank_state_open_step(&self->state);
        if (redo)   /* the abandoned step's running statistics */
            trainer_restore(ts->trainer);
        if (redo && !rank_state_ended(&self->state))
            rank_state_to(&self->state, RANK_IDLE, "a new generation drops the open step");
        log_warn("membership generation %u: rank %d of %d is now rank %d of %d; step %llu %s "
                 "(%s)", m->gen, self->rank, self->world, m->rank, m->world,
                 (unsigned long long)m->step, redo ? "is redone" : "is next", m->reason);
        members_take(self, m);
        if (members_collective(self, m->nccl) < 0)
            rc = -1;
        int64_t ended = members_bn_epoch(ts, m->step);
        if (ended >= 0 && ts->train_end_done == ended)   /* END(ended) handled: at once */
            ts->pending.bn_redo = true;
        if (rank_state_started(&self->state) &&
            gpud_send_credit(self, (uint32_t)self->options.window, NULL) < 0)
            rc = -1;
    } else {
        ts->checkpoint_on_exit = self->state.now != RANK_FENCED;
    }
    ddp_msg_t done = {.type = DDP_MEMBERS, .u.members = *m};
    ddp_msg_clear(&done);
    memset(m, 0, sizeof *m);
    return rc;
}