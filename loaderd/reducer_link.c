#include "loaderd/reducer_link.h"

#include "common/clock.h"
#include "common/jobid.h"
#include "common/log.h"
#include "loaderd/workers.h"
#include "proto/messages.h"
#include "proto/wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int send_to_reducer(loader_t *self, const ddp_msg_t *m)
{
    return proto_send(zsock_resolve(self->reducer), NULL, m);
}

int reducer_link_join(loader_t *self)
{
    ddp_msg_t j = {.type = DDP_JOIN};
    j.u.join.role = DDP_ROLE_LOADER;
    j.u.join.pid = (uint32_t)getpid();
    j.u.join.want_rank = -1;
    char host[DDP_MAX_NAME] = "?";
    gethostname(host, sizeof host - 1);
    snprintf(j.u.join.host, sizeof j.u.join.host, "%s", host);
    snprintf(self->name, sizeof self->name, "loaderd-%.40s-%d", host, (int)getpid());
    snprintf(j.u.join.name, sizeof j.u.join.name, "%s", self->name);
    j.u.join.shard = self->options.shard_index; /* reducerd takes one loaderd per shard */
    j.u.join.shards = self->options.shard_count;
    char err[256];
    if (jobid_from_env(j.u.join.job, sizeof j.u.join.job, err, sizeof err) < 0) {
        log_error("%s", err);
        return -1;
    }
    if (send_to_reducer(self, &j) < 0) {
        log_error("cannot send JOIN to reducerd: %s", zmq_strerror(zmq_errno()));
        return -1;
    }
    return 0;
}

int reducer_link_send_plan(loader_t *self)
{
    bool train = self->phase == DDP_PHASE_TRAIN;
    const dataset_t *set = train ? self->dataset : self->eval_set;
    ddp_msg_t p = {.type = DDP_PLAN};
    ddp_plan_t *plan = &p.u.plan;
    plan->epoch = self->epoch;
    plan->phase = self->phase;
    plan->n = train ? self->samples : self->eval_samples;
    if (train && self->epoch == (uint32_t)self->options.start_epoch) {
        uint64_t skip = (uint64_t)self->options.start_step * self->global_batch;
        plan->skip = skip < plan->n ? skip : plan->n;
    }
    plan->num_classes = dataset_num_classes(set);
    snprintf(plan->dataset, sizeof plan->dataset, "%s",
             set == self->val_set ? self->options.val : self->options.data);
    if (self->trusted)
        plan->auth = self->auth;
    /* borrow the dataset's strings: the encoder only reads them */
    /* --wire jpeg: reducerd names a sample gpud could not decode by its path */
    bool paths = (self->options.predictions && !train) || self->wire_encoded;
    plan->class_names = calloc(plan->num_classes ? plan->num_classes : 1, sizeof(char *));
    if (paths)
        plan->paths = calloc(plan->n ? plan->n : 1, sizeof(char *));
    if (!plan->class_names || (paths && !plan->paths)) {
        free(plan->class_names);
        free(plan->paths);
        log_error("out of memory building the plan");
        return -1;
    }
    for (uint32_t c = 0; c < plan->num_classes; c++)
        plan->class_names[c] = (char *)dataset_class_name(set, c);
    /* --classes: the report covers the folders' classes, top-k all outputs */
    plan->present = (uint32_t *)dataset_present(set, &plan->npresent);
    for (uint64_t i = 0; plan->paths && i < plan->n; i++)
        plan->paths[i] = (char *)dataset_path(set, i);
    int rc = send_to_reducer(self, &p);
    free(plan->class_names);
    free(plan->paths);
    if (rc < 0)
        log_error("cannot send the plan to reducerd: %s", zmq_strerror(zmq_errno()));
    else
        self->plans_sent++;
    return rc;
}

void reducer_link_report_failed(loader_t *self, const dataset_t *set, uint32_t epoch,
                                uint8_t phase, uint64_t id, const char *reason)
{
    const char *path = dataset_path(set, id);
    log_warn("cannot load %s: %s (counted as failed)", path, reason);
    ddp_msg_t f = {.type = DDP_FAILED};
    f.u.failed.epoch = epoch;
    f.u.failed.phase = phase;
    f.u.failed.id = id;
    f.u.failed.label = dataset_label(set, id); /* predictions.csv shows it on the failed row */
    snprintf(f.u.failed.path, sizeof f.u.failed.path, "%s", path);
    snprintf(f.u.failed.reason, sizeof f.u.failed.reason, "%s", reason);
    f.u.failed.auth = self->auth;
    if (send_to_reducer(self, &f) < 0)
        log_error("cannot report a failed sample to reducerd: %s", zmq_strerror(zmq_errno()));
    self->failed++;
}

void reducer_link_send_issued(loader_t *self, const ddp_batch_t *b, const char *name)
{
    if (b->n == 0)
        return; /* an empty train shard has no RESULT to match */
    ddp_msg_t m = {.type = DDP_ISSUED};
    m.u.issued = (ddp_issued_t){.seq = b->seq, .epoch = b->epoch, .phase = b->phase,
                                .rank = dispatch_worker_rank(self->dispatch, name), .n = b->n,
                                .ids = b->ids, .labels = b->labels,
                                .rejected = self->stats.rejected, .auth = self->auth};
    if (m.u.issued.rank < 0)
        m.u.issued.rank = 0; /* cannot happen: only verified workers (with a rank) get batches */
    if (send_to_reducer(self, &m) < 0)
        log_error("cannot tell reducerd batch %llu was issued: %s (its RESULT will be refused)",
                  (unsigned long long)b->seq, zmq_strerror(zmq_errno()));
}

void reducer_link_beat(loader_t *self)
{
    int64_t now = clock_mono_ms();
    if (!self->trusted || now < self->next_beat_ms)
        return;
    self->next_beat_ms = now + 1000;
    ddp_msg_t m = {.type = DDP_HEARTBEAT};
    snprintf(m.u.heartbeat.worker, sizeof m.u.heartbeat.worker, "%s", self->name);
    m.u.heartbeat.rank = -1;
    m.u.heartbeat.rejected = self->stats.rejected;
    m.u.heartbeat.auth = self->auth;
    if (send_to_reducer(self, &m) < 0)
        log_debug("heartbeat to reducerd not sent: %s", zmq_strerror(zmq_errno()));
}

/* The plan ack: reducerd's session, our token and the job secret. */
static void on_welcome(loader_t *self, const ddp_welcome_t *w)
{
    self->acks_received++;
    if (!w->session || !w->has_secret) {
        log_warn("reducerd's plan ack carries no session token: a reducerd of another version? "
                 "gpud CREDITs cannot be checked, no batch goes out");
        return;
    }
    if (self->trusted && w->session == self->auth.session)
        return;
    snprintf(self->auth.job, sizeof self->auth.job, "%s", w->job);
    self->auth.session = w->session;
    memcpy(self->auth.token, w->token, sizeof self->auth.token);
    memcpy(self->secret, w->secret, sizeof self->secret);
    self->trusted = true;
    workers_judge_held_credits(self);
}

static void on_reissue(loader_t *self, const ddp_reissue_t *ri)
{
    log_warn("reducerd refused rank %d's answer to batch %llu (%s): handing it out again",
             ri->rank, (unsigned long long)ri->seq, ri->reason);
    if (dispatch_reissue(self->dispatch, ri->seq, true) < 0) {
        log_info("batch %llu is neither in flight nor answered (re-queued already, with its "
                 "worker?): nothing more to do", (unsigned long long)ri->seq);
        return;
    }
    /* the eval (or validation) phase is not done after all */
    if ((self->stage == STAGE_IDLE && !self->options.train) ||
        (self->stage == STAGE_EPOCH && !self->have_decision && self->val_set &&
         ri->phase == DDP_PHASE_EVAL))
        self->stage = STAGE_EVAL;
}

static void on_epoch(loader_t *self, const ddp_epoch_t *e)
{
    if (!self->options.train || e->epoch != self->epoch || self->have_decision) {
        self->stats.rejected++;
        log_warn("EPOCH %u from reducerd while at epoch %u%s: ignored", e->epoch, self->epoch,
                 self->options.train ? "" : " of an eval job");
        return;
    }
    self->have_decision = true;
    self->decision = e->decision;
    log_info("reducerd: epoch %u %s (streak %u, val top-1 %.4f%s%s)", e->epoch,
             e->decision == DDP_DECISION_STOP ? "is the last" : "done, continue", e->streak,
             e->val_top1, e->reason[0] ? "; " : "", e->reason);
}

/* A new membership generation: acted on by the phases (training.c). */
static void on_members(loader_t *self, const ddp_members_t *m)
{
    uint32_t have = self->members_pending ? self->members.gen : self->gen;
    if (!self->options.train || m->gen <= have) {
        self->stats.rejected += !self->options.train;
        log_warn("MEMBERS of generation %u from reducerd while at generation %u%s: ignored", m->gen,
                 have, self->options.train ? "" : " of an eval job");
        return;
    }
    self->members = *m;
    self->members.names = NULL;   /* loaderd needs the count, not the names */
    self->members_pending = true;
}

/* Every step before commit_next is committed: the train part may end. */
static void on_commit(loader_t *self, const ddp_commit_t *c)
{
    if (c->step + 1 > self->commit_next)
        self->commit_next = c->step + 1;
    log_debug("step %llu of generation %u committed", (unsigned long long)c->step, c->gen);
}

static void on_stop(loader_t *self, const ddp_stop_t *stop)
{
    if (stop->code != 0 && !self->trusted && stop->code != DDP_STOP_JOB_LOST) {
        /* before any plan ack: reducerd refuses this loaderd (e.g. its
         * shard is another's): an error, not the job's end */
        log_error("reducerd refuses this loaderd (%d): %s", stop->code, stop->reason);
        self->stopped = true;
        self->exit_code = 1;
        return;
    }
    if (stop->code != 0)
        log_warn("reducerd stops the job (%d: %s)", stop->code, stop->reason);
    else
        log_info("reducerd says stop (%d: %s)", stop->code, stop->reason);
    self->stopped = true;
    self->exit_code = stop->code == DDP_STOP_JOB_LOST ? DDP_STOP_JOB_LOST : 0;
}

void reducer_link_receive(loader_t *self)
{
    ddp_msg_t m;
    if (proto_recv(zsock_resolve(self->reducer), NULL, &m, &self->stats) != 0)
        return;
    if (m.type == DDP_STOP) {
        on_stop(self, &m.u.stop);
    } else if (m.type == DDP_WELCOME) {
        on_welcome(self, &m.u.welcome);
    } else if (m.type == DDP_REISSUE) {
        on_reissue(self, &m.u.reissue);
    } else if (m.type == DDP_EPOCH) {
        on_epoch(self, &m.u.epoch);
    } else if (m.type == DDP_MEMBERS) {
        on_members(self, &m.u.members);
    } else if (m.type == DDP_COMMIT && self->options.train) {
        on_commit(self, &m.u.commit);
    } else {
        self->stats.rejected++;
        log_warn("unexpected %s from reducerd: ignored", proto_type_name(m.type));
    }
    ddp_msg_clear(&m);
}
