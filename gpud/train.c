/* train — one data-parallel rank (docs/TRAINING.md): train batches run a
 * train step, the gradients are summed over the ranks' ring and every rank
 * takes the same optimizer step once reducerd commits it (docs/ELASTIC.md;
 * members.c); END and EPOCH from the pipeline drive the BatchNorm
 * broadcast, validation, checkpoints and the end of the job. */
#include "gpud/train.h"

#include "gpud/members.h"
#include "gpud/train_epoch.h"
#include "gpud/train_ring.h"
#include "gpud/train_save.h"
#include "gpud/train_step.h"

#include "common/log.h"
#include "common/zsecurity.h"
#include "common/zsockopt.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The optimizer and schedule of the flags, PyTorch's defaults for the rest
 * (options.c checked the names). */
static void trainer_config(const gpud_options_t *o, trainer_cfg_t *c)
{
    optim_kind_t kind = OPTIM_SGD;
    optim_kind_parse(o->optimizer, &kind);
    *c = (trainer_cfg_t){.optim = optim_cfg_default(kind), .lr = o->lr,
                         .no_decay_bn_bias = o->no_decay_bn_bias,
                         .label_smoothing = (float)o->label_smoothing, .seed = (uint64_t)o->seed,
                         .warmup_epochs = (int)o->warmup_epochs,
                         .warmup_start_factor = o->warmup_start_factor,
                         .chunk = (int)o->chunk,
                         .loss_scale = strcmp(o->precision, "fp16") == 0 ? o->loss_scale : 0,
                         .loss_scale_interval = o->loss_scale_growth};
    optim_cfg_t *opt = &c->optim;
    if (!isnan(o->momentum)) opt->momentum = o->momentum;
    if (!isnan(o->weight_decay)) opt->weight_decay = o->weight_decay;
    if (!isnan(o->dampening)) opt->dampening = o->dampening;
    if (!isnan(o->eps)) opt->eps = o->eps;
    if (o->betas.n == 2) opt->beta1 = o->betas.v[0], opt->beta2 = o->betas.v[1];
    opt->nesterov = o->nesterov;
    opt->amsgrad = o->amsgrad;
    opt->grad_averaging = o->grad_averaging;
    if (strcmp(o->lr_schedule, "step") == 0)
        c->main = (lr_phase_t){.kind = LR_STEP, .step_size = (int)o->step_size, .gamma = o->gamma};
    else if (strcmp(o->lr_schedule, "cosine") == 0)
        c->main = (lr_phase_t){.kind = LR_COSINE, .t_max = (int)o->t_max, .eta_min = o->eta_min};
    c->has_main = strcmp(o->lr_schedule, "none") != 0;
    for (int i = 0; i < o->freeze.n; i++)
        c->freeze[c->n_freeze++] = o->freeze.v[i];
    for (int i = 0; i < o->freeze_bn.n; i++)
        c->freeze_bn[c->n_freeze_bn++] = o->freeze_bn.v[i];
}

int train_load_state(gpud_t *self, const char *what, const void *image, size_t len)
{
    train_state_t *ts = self->train;
    char err[1024];
    ckpt_info_t info;
    if (trainer_load_from(ts->trainer, what, image, len, &info, err, sizeof err) < 0) {
        log_error("cannot %s: %s", image ? "take the job's state" : "resume", err);
        return -1;
    }
    uint64_t seed = (uint64_t)self->options.seed;
    if (info.seed != seed)
        log_warn("%s was trained with --seed %llu, this run has --seed %llu: dropout differs "
                 "from an uninterrupted run", what, (unsigned long long)info.seed,
                 (unsigned long long)seed);
    ts->next_step = (uint64_t)info.step;
    ts->epoch = info.epoch;
    ts->epoch_done = ts->train_end_done = info.epoch - 1;
    ts->streak = (uint32_t)info.streak;
    ts->steps_per_epoch = (uint64_t)info.steps_per_epoch;
    if (!ts->global_batch)
        ts->global_batch = (uint64_t)info.global_batch;
    log_info("%s %s: epoch %lld, step %lld, streak %lld", image ? "state from" : "resuming from",
             what, (long long)info.epoch, (long long)info.step, (long long)info.streak);
    ckpt_info_clear(&info);
    return 0;
}

int train_open(gpud_t *self)
{
    train_state_t *ts = self->train = train_state_new();
    if (!ts)
        return -1;
    char err[1024];
    trainer_cfg_t cfg;
    trainer_config(&self->options, &cfg);
    ts->trainer = trainer_new(self->model, &cfg, err, sizeof err);
    if (!ts->trainer) {
        log_error("cannot set up training: %s", err);
        return -1;
    }
    ts->global_batch = (uint64_t)self->options.global_batch;
    if (self->options.resume && train_load_state(self, self->options.resume, NULL, 0) < 0)
        return -1;
    const char *ckpt = self->options.checkpoint;
    if (self->options.resume && ckpt && strcmp(self->options.resume, ckpt) == 0)
        ts->good_epoch = ts->epoch, ts->good_step = (int64_t)ts->next_step;
    const char *bind = self->options.ring_bind;
    if (zs_prepare_ipc(bind) < 0)   /* ipc:// rings: the directory, path length */
        return -1;
    ts->ring = allreduce_bind(bind, ts->ring_endpoint, sizeof ts->ring_endpoint, err, sizeof err);
    if (!ts->ring) {
        log_error("%s", err);
        return -1;
    }
    return 0;
}

int train_start(gpud_t *self)
{
    train_state_t *ts = self->train;
    char err[1024];
    if (!self->welcome_train) {
        log_error("gpud --train joined a reducerd that is not training: start reducerd with "
                  "--train");
        return -1;
    }
    /* a joiner's ring is generation gen's (a re-form of a ring of one) */
    bool late = self->state.now == RANK_JOINED;
    if (allreduce_connect(ts->ring, late ? 0 : self->rank, late ? 1 : self->world,
                          self->next_ring, err, sizeof err) < 0 ||
        (late && allreduce_reform(ts->ring, self->gen, self->rank, self->world,
                                  self->next_ring, err, sizeof err) < 0)) {
        log_error("cannot join the all-reduce ring: %s", err);
        return -1;
    }
    allreduce_set_cancel(ts->ring, members_ring_cancel, self);
    if (!(ts->coll = collective_new(ts->ring))) {
        log_error("out of memory for the collective");
        return -1;
    }
    collective_set_cancel(ts->coll, members_ring_cancel, self);
    /* a joiner's generation (with its nccl flag) comes with MEMBERS */
    if (members_collective(self, ts->welcome_nccl) < 0)
        return -1;
    /* the callback sums over ts->ring: after a re-form, over the new world */
    if (self->options.sync_bn && self->world > 1 &&
        model_set_sync_bn(self->model, train_ring_sync_bn_sum, self) < 0) {
        log_error("--sync-bn: the model refuses SyncBatchNorm");
        return -1;
    }
    /* bitwise training: BatchNorm's exact sums over the same ring (the
     * trainer sums the gradients itself, after backward) */
    if (self->options.chunk > 0 &&
        model_set_exact(self->model, train_ring_exact_sum, self, self->options.sync_bn) < 0) {
        log_error("--chunk: the model refuses bitwise training");
        return -1;
    }
    /* gradient buckets all-reduced while backward runs (DDP's overlap);
     * not with SyncBatchNorm, whose all-reduces use the ring in backward.
     * DDPIPE_NO_OVERLAP=1: after backward, as one step (for comparisons) */
    const char *no_overlap = getenv("DDPIPE_NO_OVERLAP");
    if (!self->options.sync_bn && !(no_overlap && strcmp(no_overlap, "1") == 0) &&
        trainer_set_overlap(ts->trainer, ts->ring, train_ring_timeout_ms(self)) < 0) {
        log_error("the trainer refuses the all-reduce overlap (model not opened for training?)");
        return -1;
    }
    /* a joiner holds the live ranks' state already */
    if (!late &&
        train_ring_broadcast(self, TRAINER_ALL, "initial weights", (uint32_t)ts->epoch) < 0)
        return -1;
    self->eval_stale = true;
    log_info("rank %d of %d: %zu trainable floats, next step %llu, ring %s -> %s", self->rank,
             self->world, trainer_grad_floats(ts->trainer), (unsigned long long)ts->next_step,
             ts->ring_endpoint, self->world > 1 ? self->next_ring : "(none)");
    return 0;
}

int train_on_reducer(gpud_t *self, ddp_msg_t *m)
{
    const train_state_t *ts = self->train;
    if (m->type == DDP_EPOCH) {
        train_epoch_on_message(self, &m->u.epoch);
        return 0;
    }
    if (m->type == DDP_STATE || m->type == DDP_NCCLID) {
        members_on_message(self, m, UINT64_MAX);
        train_idle(self);
        return 0;
    }
    if (m->type != DDP_MEMBERS && m->type != DDP_COMMIT)
        return 1;
    /* between steps: a change while idle, or a COMMIT already acted on */
    if (members_on_message(self, m, UINT64_MAX) != MEMBERS_CHANGED)
        return 0;
    if (members_apply(self) < 0)
        return -1;
    return ts->pending.bn_redo ? train_epoch_sync_bn(self, (uint32_t)ts->train_end_done) : 0;
}

/* A train batch of epoch e waits until EPOCH(e-1) is handled: only the
 * reducer socket and the heartbeat's STOPs are read meanwhile (the batch
 * stays with us). 0, 1 stopped or interrupted, -1 failed. */
static int wait_epoch(gpud_t *self, int64_t e)
{
    train_state_t *ts = self->train;
    train_epoch_flush(self, e);   /* a batch of e+1 proves this rank finished e */
    zpoller_t *poller = gpud_reducer_poller(self);
    if (!poller) {
        log_error("rank %d: out of memory waiting for epoch %lld", self->rank, (long long)e);
        return -1;
    }
    int rc = 0;
    while (rc == 0 && ts->epoch_done < e && !rank_state_ended(&self->state) &&
           !zs_interrupted()) {
        ddp_msg_t m;
        if (!gpud_poll_reducer(self, poller, 200, &m))
            continue;
        if (m.type == DDP_EPOCH)
            train_epoch_handle(self, &m.u.epoch);
        else if (m.type == DDP_STOP)
            gpud_stop(self, &m.u.stop);
        else if (train_on_reducer(self, &m) < 0)
            rc = -1;
        ddp_msg_clear(&m);
        if (rc == 0)
            train_epoch_flush(self, e);   /* one held (--fault-hold-epoch) until a MEMBERS */
    }
    zpoller_destroy(&poller);
    return rc < 0 ? -1 : ts->epoch_done >= e ? 0 : 1;
}

/* Several loaderds: run every step whose parts are all in, in step order.
 * 0, or -1 failed. */
static int run_ready_parts(gpud_t *self)
{
    train_state_t *ts = self->train;
    char err[512];
    for (;;) {
        parts_prune(ts->parts, self->gen, ts->next_step);
        ddp_batch_t merged;
        part_t *taken;
        int n, rc = parts_take(ts->parts, self->gen, ts->next_step, &merged, &taken, &n, err,
                               sizeof err);
        if (rc <= 0) {
            if (rc < 0)
                log_error("%s", err);
            return rc;
        }
        uint64_t step = ts->next_step;
        uint32_t gen = self->gen;
        ts->step_parts = taken;
        ts->n_step_parts = n;
        rc = wait_epoch(self, (int64_t)merged.epoch - 1);
        if (rc == 0)
            rc = train_step_run(self, &merged);
        else
            rc = rc < 0 ? -1 : 0;
        ts->step_parts = NULL;
        ts->n_step_parts = 0;
        parts_free_taken(&merged, taken, n);
        if (rc < 0 || rank_state_ended(&self->state) ||
            (ts->next_step == step && self->gen == gen))
            return rc < 0 ? -1 : 0;   /* failed, stopped, or the step was not applied */
    }
}

/* A train part from one of several loaderds: kept until its step is whole. */
static int on_part(gpud_t *self, ddp_batch_t *b)
{
    train_state_t *ts = self->train;
    char err[512];
    if (!ts->parts && !(ts->parts = parts_new(self->n_loaders))) {
        log_error("out of memory for the train parts of %d loaderds", self->n_loaders);
        return -1;
    }
    if (b->gen < self->gen || (b->gen == self->gen && b->step < ts->next_step))
        return 0;   /* of an abandoned generation, or a step already run */
    if (b->wire == DDP_WIRE_ENCODED) { /* parts merge pixels; loaderd and ddpipe refuse it */
        log_error("train part %llu carries files (--wire jpeg): training with several loaderds "
                  "needs --wire uint8", (unsigned long long)b->seq);
        return -1;
    }
    if (parts_add(ts->parts, b, self->from_loader, err, sizeof err) < 0) {
        log_error("%s", err);
        return -1;
    }
    return run_ready_parts(self);
}

int train_receive(gpud_t *self, ddp_msg_t *m)
{
    if (m->type == DDP_BATCH && m->u.batch.phase == DDP_PHASE_TRAIN) {
        if (self->n_loaders > 1)
            return on_part(self, &m->u.batch);
        int rc = wait_epoch(self, (int64_t)m->u.batch.epoch - 1);
        if (rc != 0)
            return rc < 0 ? -1 : 0;   /* 1: stopped or interrupted while waiting */
        return train_step_run(self, &m->u.batch);
    }
    if (m->type == DDP_END && m->u.end.phase == DDP_PHASE_TRAIN) {
        if ((int64_t)m->u.end.epoch <= self->train->train_end_done)
            return 0;   /* several loaderds: each sends END; the first one counts */
        return train_epoch_end(self, m->u.end.epoch);
    }
    return 1;   /* not a training message */
}

void train_idle(gpud_t *self)
{
    train_state_t *ts = self->train;
    if (ts->pending.snapshot && !rank_state_open_step(&self->state))
        train_save_state(self);
    /* a new generation may have made a step of kept parts runnable */
    if (ts->parts && !rank_state_ended(&self->state) && parts_count(ts->parts) &&
        run_ready_parts(self) < 0) {
        self->exit_code = 1;
        rank_state_end(&self->state, RANK_STOPPED, "a step of parts failed");
    }
}

void train_interrupted(gpud_t *self)
{
    log_error("interrupted by a signal: stopping (resume with --resume)");
    self->train->checkpoint_on_exit = true;
    self->exit_code = 1;
    rank_state_end(&self->state, RANK_STOPPED, "a signal");
}

int train_finish(gpud_t *self, int rc)
{
    train_state_t *ts = self->train;
    /* the job went on without this rank: its state is behind */
    if (self->state.now == RANK_FENCED)
        return rc ? rc : 1;
    if (!ts || !ts->checkpoint_on_exit || !ts->trainer)   /* eval: nothing to save */
        return rc;
    if (rank_state_open_step(&self->state))   /* the last completed step, mid-epoch or not */
        trainer_restore(ts->trainer);
    char reason[DDP_MAX_STR];   /* the job ends anyway: only logged */
    train_save_checkpoint(self, "stopped early", reason, sizeof reason);
    return rc ? rc : 1;
}
