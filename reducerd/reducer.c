#include "reducerd/reducer.h"

#include "common/clock.h"
#include "common/jobid.h"
#include "common/log.h"
#include "common/zsockopt.h"
#include "proto/wire.h"

#include <stdio.h>
#include <stdlib.h>

/* --job, else $DDPIPE_JOB, else a fresh random id: two jobs never share
 * one by default (docs/SECURITY.md "Job identity"). */
static int settle_job_id(reducer_t *self)
{
    char err[256];
    if (self->options.job)
        snprintf(self->job_id, sizeof self->job_id, "%s", self->options.job);
    else if (jobid_from_env(self->job_id, sizeof self->job_id, err, sizeof err) < 0) {
        log_error("%s", err);
        return -1;
    }
    if (!self->job_id[0] && jobid_random(self->job_id, sizeof self->job_id) < 0) {
        log_error("cannot draw a job id: no kernel randomness (getrandom)?");
        return -1;
    }
    self->options.job = self->job_id;
    log_info("job %s", self->job_id);
    if (self->options.model_config && !self->options.train) {  /* eval: fixed, not first-come */
        snprintf(self->job_config, sizeof self->job_config, "%s", self->options.model_config);
        self->have_job_config = true;
    }
    return 0;
}

reducer_t *reducer_new(const reducer_options_t *options)
{
    reducer_t *self = calloc(1, sizeof *self);
    if (!self) {
        log_error("out of memory");
        return NULL;
    }
    self->options = *options;
    self->router = zs_bind(ZMQ_ROUTER, options->bind, "reducer");
    self->xpub = zs_bind(ZMQ_XPUB, options->pub, "event");
    if (self->router) /* the loop drains bursts without blocking (main.c) */
        zsock_set_rcvtimeo(self->router, 0);
    self->peers = peers_new((int)options->workers);
    self->issued = issued_new();
    self->pending = pending_new();
    self->admit.peer = -1;
    if (token_random(self->secret, sizeof self->secret) < 0 ||
        token_new_session(&self->session) < 0) {
        log_error("cannot draw the job secret: no kernel randomness (getrandom)?");
        reducer_destroy(&self);
        return NULL;
    }
    if (settle_job_id(self) < 0 || !self->router || !self->xpub || !self->peers ||
        !self->issued || !self->pending) {
        reducer_destroy(&self);
        return NULL;
    }
    zsock_set_xpub_verbose(self->xpub, 1);
    self->epoch = (uint32_t)options->start_epoch;
    self->streak = (uint32_t)options->streak;
    return self;
}

void reducer_destroy(reducer_t **self_p)
{
    reducer_t *self = self_p ? *self_p : NULL;
    if (!self)
        return;
    slot_destroy(&self->slot[0]);
    slot_destroy(&self->slot[1]);
    peers_destroy(&self->peers);
    issued_destroy(&self->issued);
    pending_destroy(&self->pending);
    elastic_destroy(&self->elastic);
    for (int i = 0; i < DDP_MAX_LOADERS; i++)
        zframe_destroy(&self->loaders[i].identity);
    zsock_destroy(&self->router);
    zsock_destroy(&self->xpub);
    free(self);
    *self_p = NULL;
}

void reducer_send(reducer_t *self, zframe_t *identity, const ddp_msg_t *m)
{
    zframe_t *id = zframe_dup(identity);
    if (proto_send(zsock_resolve(self->router), id, m) < 0)
        log_warn("sending %s failed: %s", proto_type_name(m->type), zmq_strerror(zmq_errno()));
    zframe_destroy(&id);
}

slot_t *reducer_active_slot(reducer_t *self)
{
    slot_t *eval = self->slot[DDP_PHASE_EVAL], *train = self->slot[DDP_PHASE_TRAIN];
    if (eval && train)
        return slot_complete(train) ? eval : train;
    return eval ? eval : train;
}

slot_t *reducer_open_slot(reducer_t *self, ddp_plan_t *plan, bool keep_predictions)
{
    double now = clock_mono_s();
    slot_t *slot = slot_new(plan, keep_predictions, (uint32_t)self->options.workers, now);
    if (!slot)
        return NULL;
    const ddp_plan_t *opened = slot_plan(slot);
    self->slot[opened->phase] = slot;
    self->last_activity_ms = clock_mono_ms();
    if (self->job_started_s == 0)
        self->job_started_s = now;
    const char *phase = opened->phase == DDP_PHASE_TRAIN ? "train"
                         : self->options.train          ? "validation"
                                                        : "eval";
    log_info("plan: epoch %u %s, %llu samples%s%.0llu, %u classes, dataset %s", opened->epoch,
             phase, (unsigned long long)opened->n, opened->skip ? ", resumed after " : "",
             (unsigned long long)opened->skip, opened->num_classes, opened->dataset);
    return slot;
}

void reducer_send_loaders(reducer_t *self, const ddp_msg_t *m)
{
    for (int i = 0; i < DDP_MAX_LOADERS; i++)
        if (self->loaders[i].identity)
            reducer_send(self, self->loaders[i].identity, m);
}

uint64_t reducer_loader_rejected(const reducer_t *self)
{
    uint64_t sum = 0;
    for (int i = 0; i < DDP_MAX_LOADERS; i++)
        sum += self->loaders[i].rejected;
    return sum;
}

uint64_t reducer_rejected_total(const reducer_t *self)
{
    return self->stats.rejected + reducer_loader_rejected(self);
}

bool reducer_stale_gen(reducer_t *self, uint32_t gen, const char *who, const char *kind)
{
    if (!self->elastic || gen >= self->elastic->gen)
        return false;
    self->stale_messages++;
    log_debug("%s from %s of generation %u (now %u): stale, dropped", kind, who, gen,
              self->elastic->gen);
    return true;
}
