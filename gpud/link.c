/* link — the worker's link to reducerd and loaderd: JOIN until WELCOME,
 * then every message in, to the role that answers it. */
#include "gpud/link.h"

#include "common/clock.h"
#include "common/env_switch.h"
#include "common/errbuf.h"
#include "common/jobid.h"
#include "common/log.h"
#include "common/zsockopt.h"
#include "gpud/collective.h"
#include "gpud/eval.h"
#include "gpud/train.h"
#include "gpud/train_ahead.h"
#include "proto/wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void on_welcome(gpud_t *self, const ddp_welcome_t *w)
{
    self->rank = w->rank;
    self->world = w->world;
    self->welcome_train = w->train;
    if (self->train)   /* generation 0's sums (docs/CUDA.md "NCCL in gpud") */
        self->train->welcome_nccl = w->nccl;
    rank_state_to(&self->state, w->joining ? RANK_JOINING : RANK_WELCOMED, "WELCOME");
    self->gen = w->gen;
    snprintf(self->next_ring, sizeof self->next_ring, "%s", w->next_ring);
    snprintf(self->auth.job, sizeof self->auth.job, "%s", w->job);
    self->auth.session = w->session;
    memcpy(self->auth.token, w->token, sizeof self->auth.token);
    if (!self->auth.session)
        log_warn("reducerd's WELCOME carries no session token: loaderd and reducerd "
                 "will refuse this worker's messages (mixed versions?)");
    log_set_rank(self->rank);
    if (w->joining)
        log_info("joined the running training job %s (%d rank%s): waiting for the state and a "
                 "place in the ring", w->job, w->world, w->world == 1 ? "" : "s");
    else
        log_info("joined job %s as rank %d of %d%s", w->job, self->rank, w->world,
                 w->train ? " (training)" : "");
}

static ddp_msg_t join_message(const gpud_t *self)
{
    ddp_msg_t j = {.type = DDP_JOIN};
    j.u.join.role = DDP_ROLE_GPUD;
    j.u.join.pid = (uint32_t)getpid();
    j.u.join.want_rank = (int32_t)self->options.rank;
    gethostname(j.u.join.host, sizeof j.u.join.host - 1);
    snprintf(j.u.join.name, sizeof j.u.join.name, "%s", self->name);
    snprintf(j.u.join.backend, sizeof j.u.join.backend, "%s", self->options.backend);
    /* "" unless --train */
    snprintf(j.u.join.ring, sizeof j.u.join.ring, "%s",
             self->train ? self->train->ring_endpoint : "");
    if (self->options.train)   /* every rank of a job must agree on these */
        gpud_options_job_config(&self->options, j.u.join.config, sizeof j.u.join.config);
    /* absent (0) without NCCL: a cpu job's JOIN keeps its bytes; bitwise
     * training (--chunk, job-wide) sums exact int64 limbs, which NCCL takes
     * only where the device makes them (not DDPIPE_CUDA_XSUM=0: the host's
     * go over the ring; docs/CUDA.md "NCCL in gpud") */
    j.u.join.nccl = self->train &&
                    (self->options.chunk <= 0 || env_switch_on("DDPIPE_CUDA_XSUM")) &&
                    collective_offer(self->options.backend);
    return j;
}

void link_report_failed_start(gpud_t *self, const char *why)
{
    zsock_t *own = self->reducer ? NULL
                                 : zs_connect(ZMQ_DEALER, self->options.reducer, "reducer",
                                              self->name);
    zsock_t *to = self->reducer ? self->reducer : own;
    if (!to)
        return;
    ddp_msg_t j = join_message(self);
    char err[256];
    if (jobid_from_env(j.u.join.job, sizeof j.u.join.job, err, sizeof err) < 0)
        j.u.join.job[0] = '\0';   /* reducerd then takes it for any job; logged at start */
    err_set(j.u.join.failed, sizeof j.u.join.failed, "%s", why && why[0] ? why : "no reason given");
    zsock_set_linger(to, 2000);
    if (proto_send(zsock_resolve(to), NULL, &j) != 0)
        log_warn("could not tell reducerd at %s that this worker failed to start: %s",
                 self->options.reducer, zmq_strerror(zmq_errno()));
    zsock_destroy(&own);
}

/* One answer to JOIN: 0 once WELCOME (or a STOP) came. */
static int join_answer(gpud_t *self)
{
    ddp_msg_t m;
    if (proto_recv(zsock_resolve(self->reducer), NULL, &m, &self->stats) != 0)
        return -1;
    int rc = -1;
    if (m.type == DDP_WELCOME) {
        on_welcome(self, &m.u.welcome);
        rc = 0;
    } else if (m.type == DDP_STOP) {
        if (m.u.stop.code)   /* refused: the reason is the operator's answer */
            log_error("reducerd refuses this worker (%d): %s", m.u.stop.code, m.u.stop.reason);
        else
            log_info("reducerd says stop before we started: %s", m.u.stop.reason);
        self->exit_code = m.u.stop.code;
        rank_state_end(&self->state, RANK_STOPPED, "STOP before WELCOME");
        rc = 0;
    }
    ddp_msg_clear(&m);
    return rc;
}

int link_join(gpud_t *self)
{
    ddp_msg_t j = join_message(self);
    char err[256];
    if (jobid_from_env(j.u.join.job, sizeof j.u.join.job, err, sizeof err) < 0) {
        log_error("%s", err);
        return -1;
    }
    /* an eval worker proves its model: reducerd compares (SECURITY.md "Job identity") */
    if (!self->options.train && gpud_options_eval_identity(&self->options, j.u.join.config,
                                                           sizeof j.u.join.config, err,
                                                           sizeof err) < 0) {
        log_error("cannot say which model this worker runs in JOIN: %s", err);
        return -1;
    }
    int64_t deadline = clock_mono_ms() + self->options.join_timeout_s * 1000;
    int64_t next_send = 0;
    zpoller_t *poller = zpoller_new(self->reducer, NULL);
    int rc = -1;
    while (rc < 0 && !zs_interrupted() && clock_mono_ms() < deadline) {
        if (clock_mono_ms() >= next_send) {
            /* re-sending is harmless: reducerd keys peers by name */
            proto_send(zsock_resolve(self->reducer), NULL, &j);
            next_send = clock_mono_ms() + 2000;
        }
        if (zpoller_wait(poller, 200) == self->reducer)
            rc = join_answer(self);
    }
    zpoller_destroy(&poller);
    if (rc < 0 && !zs_interrupted())
        log_error("reducerd at %s did not answer within %lds; is it running and reachable?",
                  self->options.reducer, self->options.join_timeout_s);
    return rc;
}

static void fail(gpud_t *self)
{
    self->exit_code = 1;
    rank_state_end(&self->state, RANK_STOPPED, "failed");
}

/* One message from loaderd number loader, to the role that answers it
 * (an eval batch kept: m left empty). */
static void on_loader_message(gpud_t *self, int loader, ddp_msg_t *m)
{
    self->from_loader = loader;
    int t = self->train ? train_receive(self, m) : 1;
    if (t <= 0) {
        if (t < 0)
            fail(self);
    } else if (m->type == DDP_BATCH && m->u.batch.phase == DDP_PHASE_TRAIN) {
        self->stats.rejected++;
        log_warn("a train batch, but this gpud runs without --train: ignored");
    } else if (m->type == DDP_BATCH) {
        if (eval_on_batch(self, m) < 0)
            fail(self);
    } else if (m->type == DDP_END) {
        log_debug("loaderd: epoch %u handed out", m->u.end.epoch);
    } else {
        self->stats.rejected++;
        log_warn("unexpected %s from loaderd: ignored", proto_type_name(m->type));
    }
}

void link_on_loader(gpud_t *self, int loader)
{
    ddp_msg_t m;
    if (proto_recv(zsock_resolve(self->loaders[loader]), NULL, &m, &self->stats) != 0)
        return;
    on_loader_message(self, loader, &m);
    ddp_msg_clear(&m);
}

void link_on_kept(gpud_t *self)
{
    ddp_msg_t m;
    int loader;
    if (!train_ahead_take(self, &m, &loader))
        return;
    on_loader_message(self, loader, &m);
    train_ahead_done(self, &m);
    ddp_msg_clear(&m);
}

void link_on_idle(gpud_t *self)
{
    if (eval_pending(self) && eval_finish(self) < 0)
        fail(self);
}

/* STOP to an eval worker: only a lost job fails it. */
static void eval_stop(gpud_t *self, const ddp_stop_t *stop)
{
    log_info("reducerd says stop (%d: %s)", stop->code, stop->reason);
    if (stop->code == DDP_STOP_JOB_LOST)
        self->exit_code = DDP_STOP_JOB_LOST;
    rank_state_end(&self->state, RANK_STOPPED, "STOP");
}

void link_on_reducer(gpud_t *self)
{
    ddp_msg_t m;
    if (proto_recv(zsock_resolve(self->reducer), NULL, &m, &self->stats) != 0)
        return;
    if (m.type == DDP_STOP) {
        if (self->train)
            gpud_stop(self, &m.u.stop);
        else
            eval_stop(self, &m.u.stop);
    } else if (self->train && (m.type == DDP_EPOCH || m.type == DDP_MEMBERS ||
                                 m.type == DDP_COMMIT || m.type == DDP_STATE ||
                                 m.type == DDP_NCCLID)) {
        /* NCCLID too: a new generation's id reaches an idle rank here */
        if (train_on_reducer(self, &m) < 0)
            fail(self);
    } else if (m.type != DDP_WELCOME) {
        self->stats.rejected++;
        log_warn("unexpected %s from reducerd: ignored", proto_type_name(m.type));
    }
    ddp_msg_clear(&m);
}

void link_on_heartbeat(gpud_t *self)
{
    gpud_on_heartbeat(self);
}
