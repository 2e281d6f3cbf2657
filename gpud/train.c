/* train — one data-parallel rank (docs/TRAINING.md): train batches run a
 * train step, the gradients are summed over the ranks' ring and every rank
 * takes the same optimizer step once reducerd commits it (docs/ELASTIC.md;
 * members.c); END and EPOCH from the pipeline drive the BatchNorm
 * broadcast, validation, checkpoints and the end of the job. */
#include "gpud/train.h"

#include "gpud/members.h"
#include "gpud/rank_report.h"

#include "common/atomic_file.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/zsecurity.h"
#include "common/zsockopt.h"
#include "gpud/wire_input.h"
#include "proto/wire.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int ring_timeout_ms(const gpud_t *self)
{
    return (int)(self->options.ring_timeout_s * 1000);
}

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
                         .warmup_start_factor = o->warmup_start_factor};
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
    char err[1024];
    ckpt_info_t info;
    if (trainer_load_from(self->trainer, what, image, len, &info, err, sizeof err) < 0) {
        log_error("cannot %s: %s", image ? "take the job's state" : "resume", err);
        return -1;
    }
    uint64_t seed = (uint64_t)self->options.seed;
    if (info.seed != seed)
        log_warn("%s was trained with --seed %llu, this run has --seed %llu: dropout differs "
                 "from an uninterrupted run", what, (unsigned long long)info.seed,
                 (unsigned long long)seed);
    self->next_step = (uint64_t)info.step;
    self->epoch = info.epoch;
    self->epoch_done = self->train_end_done = info.epoch - 1;
    self->streak = (uint32_t)info.streak;
    self->steps_per_epoch = (uint64_t)info.steps_per_epoch;
    if (!self->global_batch)
        self->global_batch = (uint64_t)info.global_batch;
    log_info("%s %s: epoch %lld, step %lld, streak %lld", image ? "state from" : "resuming from",
             what, (long long)info.epoch, (long long)info.step, (long long)info.streak);
    ckpt_info_clear(&info);
    return 0;
}

int train_open(gpud_t *self)
{
    char err[1024];
    trainer_cfg_t cfg;
    trainer_config(&self->options, &cfg);
    self->trainer = trainer_new(self->model, &cfg, err, sizeof err);
    if (!self->trainer) {
        log_error("cannot set up training: %s", err);
        return -1;
    }
    self->epoch_done = self->train_end_done = -1;
    self->global_batch = (uint64_t)self->options.global_batch;
    self->good_epoch = self->good_step = -1;
    if (self->options.resume && train_load_state(self, self->options.resume, NULL, 0) < 0)
        return -1;
    const char *ckpt = self->options.checkpoint;
    if (self->options.resume && ckpt && strcmp(self->options.resume, ckpt) == 0)
        self->good_epoch = self->epoch, self->good_step = (int64_t)self->next_step;
    const char *bind = self->options.ring_bind;
    if (zs_prepare_ipc(bind) < 0)   /* ipc:// rings: the directory, path length */
        return -1;
    self->ring = allreduce_bind(bind, self->ring_endpoint, sizeof self->ring_endpoint, err,
                                sizeof err);
    if (!self->ring) {
        log_error("%s", err);
        return -1;
    }
    return 0;
}

static int sync_bn_sum(void *ctx, double *data, size_t n, char *err, size_t errlen)
{
    gpud_t *self = ctx;
    return allreduce_sum_f64(self->ring, data, n, ring_timeout_ms(self), err, errlen);
}

/* Rank 0's values of `which` on every rank; after a membership change
 * (the ring re-formed) again, from the new rank 0. 0, or -1 (logged). */
static int broadcast(gpud_t *self, trainer_set_t which, const char *what, uint32_t epoch)
{
    char err[1024];
    for (int tries = 0; tries < DDP_MAX_WORLD; tries++) {   /* each try: a smaller world */
        if (trainer_broadcast(self->trainer, self->ring, which, ring_timeout_ms(self), err,
                              sizeof err) == 0)
            return 0;
        if (members_ring_failed(self, what, epoch, self->next_step, err) < 0)
            return -1;
    }
    log_error("%s: the membership kept changing; giving up", what);
    return -1;
}

int train_start(gpud_t *self)
{
    char err[1024];
    if (!self->welcome_train) {
        log_error("gpud --train joined a reducerd that is not training: start reducerd with "
                  "--train");
        return -1;
    }
    /* a joiner's ring is generation gen's (a re-form of a ring of one) */
    bool late = self->state.now == RANK_JOINED;
    if (allreduce_connect(self->ring, late ? 0 : self->rank, late ? 1 : self->world,
                          self->next_ring, err, sizeof err) < 0 ||
        (late && allreduce_reform(self->ring, self->gen, self->rank, self->world,
                                  self->next_ring, err, sizeof err) < 0)) {
        log_error("cannot join the all-reduce ring: %s", err);
        return -1;
    }
    allreduce_set_cancel(self->ring, members_ring_cancel, self);
    /* the callback sums over self->ring: after a re-form, over the new world */
    if (self->options.sync_bn && self->world > 1 &&
        model_set_sync_bn(self->model, sync_bn_sum, self) < 0) {
        log_error("--sync-bn: the model refuses SyncBatchNorm");
        return -1;
    }
    /* gradient buckets all-reduced while backward runs (DDP's overlap);
     * not with SyncBatchNorm, whose all-reduces use the ring in backward.
     * DDPIPE_NO_OVERLAP=1: after backward, as one step (for comparisons) */
    const char *no_overlap = getenv("DDPIPE_NO_OVERLAP");
    if (!self->options.sync_bn && !(no_overlap && strcmp(no_overlap, "1") == 0) &&
        trainer_set_overlap(self->trainer, self->ring, ring_timeout_ms(self)) < 0) {
        log_error("the trainer refuses the all-reduce overlap (model not opened for training?)");
        return -1;
    }
    /* a joiner holds the live ranks' state already */
    if (!late && broadcast(self, TRAINER_ALL, "initial weights", (uint32_t)self->epoch) < 0)
        return -1;
    self->eval_stale = true;
    log_info("rank %d of %d: %zu trainable floats, next step %llu, ring %s -> %s", self->rank,
             self->world, trainer_grad_floats(self->trainer), (unsigned long long)self->next_step,
             self->ring_endpoint, self->world > 1 ? self->next_ring : "(none)");
    return 0;
}

/* The counters a checkpoint (or a joiner's state) holds. */
static ckpt_info_t state_info(const gpud_t *self)
{
    return (ckpt_info_t){.epoch = self->epoch, .step = (int64_t)self->next_step,
                         .streak = self->streak, .global_batch = (int64_t)self->global_batch,
                         .steps_per_epoch = (int64_t)self->steps_per_epoch};
}

/* Rank 0: the checkpoint of the state now; -1 when it could not be
 * written (a full disk), reason saying which file, why and the last good
 * checkpoint (rank_report.h): the caller decides whether that stops the job. */
static int write_checkpoint(gpud_t *self, const char *why, char *reason, size_t cap)
{
    const char *path = self->options.checkpoint;
    if (self->rank != 0 || !path || !self->trainer)
        return 0;
    ckpt_info_t info = state_info(self);
    char err[1024];
    if (self->options.fault_in_checkpoint) {
        log_warn("--fault-in-checkpoint: dying inside this checkpoint write (test hook)");
        atomic_file_fault_before_rename();
    }
    if (trainer_save(self->trainer, path, &info, err, sizeof err) < 0) {
        rank_report_write_failed(self, "checkpoint", why, err, reason, cap);
        return -1;
    }
    self->good_epoch = info.epoch;
    self->good_step = info.step;
    log_info("checkpoint %s: epoch %lld, step %lld (%s)", path, (long long)info.epoch,
             (long long)info.step, why);
    return 0;
}

/* Rank 0, after the COMMIT that asked for it: the state of the committed
 * step as STATE to reducerd, for a joiner (docs/ELASTIC.md "Joining"). A
 * failure is logged: reducerd's admission deadline sends the joiner away. */
static void send_state(gpud_t *self)
{
    self->snapshot_pending = false;
    ckpt_info_t info = state_info(self);
    uint8_t *image = NULL;
    size_t len = 0;
    char err[1024];
    if (trainer_save_to(self->trainer, NULL, &image, &len, &info, err, sizeof err) < 0) {
        log_error("the state a joiner waits for was not sent: %s", err);
        return;
    }
    ddp_msg_t m = {.type = DDP_STATE};
    m.u.state = (ddp_state_t){.gen = self->gen, .epoch = (uint32_t)self->epoch,
                              .step = self->next_step, .image = zframe_new(image, len),
                              .auth = self->auth};
    free(image);
    if (!m.u.state.image || proto_send(zsock_resolve(self->reducer), NULL, &m) < 0)
        log_error("the state a joiner waits for was not sent: %s",
                  m.u.state.image ? zmq_strerror(zmq_errno()) : "out of memory");
    else
        log_info("state of step %llu (%zu bytes) sent for a joiner",
                 (unsigned long long)self->next_step, len);
    zframe_destroy(&m.u.state.image);
}

/* Room for n samples' logits, loss and top-k. */
static int grow_sample_bufs(gpud_t *self, uint32_t n)
{
    if (gpud_fit_logits(self, n) < 0)
        return -1;
    if (n > self->per_sample_cap) {
        float *l = realloc(self->loss, n * sizeof *l);
        if (l)
            self->loss = l;
        int32_t *t = realloc(self->topk, (size_t)n * DDP_MAX_K * sizeof *t);
        if (t)
            self->topk = t;
        if (!l || !t)
            return -1;
        self->per_sample_cap = n;
    }
    return 0;
}

/* Several loaderds: one RESULT per part (its seq, its samples), the
 * merged step's loss and top-k gathered back by the part's at[]. */
static int send_part_results(gpud_t *self, const ddp_batch_t *b, int k, double lr,
                             double compute_s)
{
    float *loss = malloc(((size_t)b->n ? b->n : 1) * sizeof *loss);
    int32_t *topk = malloc(((size_t)b->n ? b->n : 1) * (size_t)k * sizeof *topk);
    int rc = loss && topk ? 0 : -1;
    for (int p = 0; rc == 0 && p < self->n_step_parts; p++) {
        const part_t *part = &self->step_parts[p];
        if (part->b.n == 0)
            continue;   /* an empty part: nothing was ISSUED */
        for (uint32_t i = 0; i < part->b.n; i++) {
            loss[i] = self->loss[part->at[i]];
            memcpy(topk + (size_t)i * k, self->topk + (size_t)part->at[i] * k, k * sizeof *topk);
        }
        ddp_msg_t r = {.type = DDP_RESULT};
        r.u.result = (ddp_result_t){.rank = self->rank, .epoch = b->epoch,
                                    .phase = DDP_PHASE_TRAIN, .seq = part->b.seq,
                                    .n = part->b.n, .k = (uint32_t)k, .ids = part->b.ids,
                                    .labels = part->b.labels, .topk = topk, .loss = loss,
                                    .compute_s = b->n ? compute_s * part->b.n / b->n : 0,
                                    .lr = lr, .step = b->step, .gen = self->gen,
                                    .auth = self->auth};
        rc = proto_send(zsock_resolve(self->reducer), NULL, &r);
    }
    free(loss);
    free(topk);
    if (rc < 0)
        log_error("cannot send results to reducerd: %s", zmq_strerror(zmq_errno()));
    return rc;
}

/* RESULT of this rank's shard: the train step's per-sample loss, top-k
 * from its logits (of the samples trained, V); a --wire jpeg batch's rows
 * that did not decode are sent flagged failed, with their reasons. */
static int send_result(gpud_t *self, const ddp_batch_t *b, const ddp_batch_t *v,
                       const wire_input_t *in, double lr, double compute_s)
{
    int nc = model_num_classes(self->model), k = nc < DDP_MAX_K ? nc : DDP_MAX_K;
    model_topk_ce(self->logits, (int)v->n, nc, v->labels, k, self->topk, NULL);
    if (self->step_parts) /* never --wire jpeg (refused with several loaderds) */
        return send_part_results(self, b, k, lr, compute_s);
    wire_input_spread(in, b->n, self->loss, self->topk, k);
    ddp_msg_t r = {.type = DDP_RESULT};
    r.u.result = (ddp_result_t){.rank = self->rank, .epoch = b->epoch, .phase = DDP_PHASE_TRAIN,
                                .seq = b->seq, .n = b->n, .k = (uint32_t)k, .ids = b->ids,
                                .labels = b->labels, .topk = self->topk, .loss = self->loss,
                                .compute_s = compute_s, .lr = lr, .step = b->step,
                                .gen = self->gen, .auth = self->auth};
    if (wire_input_attach(&r.u.result, in) < 0) {
        log_error("out of memory for the failed rows of train batch %llu",
                  (unsigned long long)b->seq);
        return -1;
    }
    int rc = proto_send(zsock_resolve(self->reducer), NULL, &r);
    free(r.u.result.why);
    if (rc < 0) {
        log_error("cannot send results to reducerd: %s", zmq_strerror(zmq_errno()));
        return -1;
    }
    return 0;
}

/* loaderd's plan (its steps per epoch) from the first train BATCH on, so
 * that a checkpoint of the first epoch carries it. One that contradicts
 * the plan this rank holds (its checkpoint's, its STATE's, an earlier
 * BATCH's) is logged, counted as rejected and dropped. 0, or 1 dropped. */
static int check_plan(gpud_t *self, const ddp_batch_t *b)
{
    uint64_t spe = b->steps_per_epoch;
    if (!spe || spe == self->steps_per_epoch)
        return 0;
    if (!self->steps_per_epoch) {
        self->steps_per_epoch = spe;
        log_info("loaderd plans %llu steps per epoch", (unsigned long long)spe);
        return 0;
    }
    self->stats.rejected++;
    log_error("train batch %llu (step %llu) plans %llu steps per epoch, this rank holds %llu "
              "(its checkpoint or state): dropped; resume from a checkpoint of this dataset and "
              "global batch", (unsigned long long)b->seq, (unsigned long long)b->step,
              (unsigned long long)spe, (unsigned long long)self->steps_per_epoch);
    return 1;
}

static int check_batch(gpud_t *self, const ddp_batch_t *b)
{
    if (b->step != self->next_step) {
        log_error("loaderd sends step %llu, checkpoint/state says %llu: restart loaderd with the "
                  "checkpoint's --start-epoch/--start-step (or resume every gpud from the same "
                  "checkpoint)", (unsigned long long)b->step, (unsigned long long)self->next_step);
        return -1;
    }
    if (b->n > b->global_count || (b->n > 0 && !b->pixels)) {
        log_error("train batch %llu: %u samples, global_count %u: malformed",
                  (unsigned long long)b->seq, b->n, b->global_count);
        return -1;
    }
    if (grow_sample_bufs(self, b->n) < 0) {
        log_error("out of memory for a %u-sample train batch", b->n);
        return -1;
    }
    return gpud_check_batch_shape(self, b);
}

/* The --fault-at-step hook dies as a rank that completed step S-1. The
 * last ring frames of S-1 may still sit in ZeroMQ's queues: they are
 * flushed first (terminating the context waits for them, up to the
 * sockets' linger), else the peers would fail S-1 instead of S — a race a
 * loaded machine loses. */
static void die_at_fault(gpud_t *self)
{
    log_warn("--fault-at-step %ld reached: dying before the step (test hook)",
             self->options.fault_at_step);
    zactor_destroy(&self->heartbeat);
    allreduce_destroy(&self->ring);
    for (int i = 0; i < self->n_loaders; i++)
        zsock_destroy(&self->loaders[i]);
    self->loader = NULL;
    zsock_destroy(&self->reducer);
    zsys_shutdown();
    raise(SIGKILL);
}

/* This rank's share of the step: forward and backward on its shard. 0,
 * 1 the step was dropped (a new generation), -1 failed. */
static int forward_backward(gpud_t *self, const ddp_batch_t *b, const uint8_t *pixels)
{
    trainer_batch_t tb = {.pixels = b->n ? pixels : NULL, .n = (int)b->n,
                          .c = b->c, .h = b->h, .w = b->w,
                          .mean = self->normalize ? self->mean : NULL,
                          .std = self->normalize ? self->std : NULL, .labels = b->labels,
                          .ids = b->ids, .global_count = b->global_count, .step = b->step};
    char err[1024];
    if (rank_state_to(&self->state, RANK_STEP_OPEN, "forward") < 0)
        return -1;
    if (trainer_forward_backward(self->trainer, &tb, self->loss, self->logits, err,
                                 sizeof err) == 0)
        return 0;
    if (self->options.sync_bn && allreduce_failure(self->ring) != ALLREDUCE_OK)
        return members_ring_failed(self, "sync-bn", b->epoch, b->step, err);
    log_error("train step %llu failed: %s", (unsigned long long)b->step, err);
    self->checkpoint_on_exit = true;
    return -1;
}

/* The step is committed: every rank applies the same optimizer step. */
static int apply_step(gpud_t *self, const ddp_batch_t *b, double lr, double compute_s)
{
    trainer_apply(self->trainer, (int)b->epoch, b->global_count);
    rank_state_to(&self->state, RANK_IDLE, "COMMIT applied");
    char err[1024];
    if (trainer_check_params(self->trainer, err, sizeof err) < 0) {
        /* the update is applied and cannot be undone: no checkpoint of it */
        rank_report_nonfinite(self, b->step, err, false);
        return 1;
    }
    self->eval_stale = true;
    self->next_step++;
    if (!self->options.global_batch && b->global_count > self->global_batch)
        self->global_batch = b->global_count;
    atomic_fetch_add(&self->batches, 1);
    self->samples += b->n;
    if (self->snapshot_pending)
        send_state(self);
    log_debug("step %llu (epoch %u, generation %u): %u of %u samples, lr %g, %.3fs",
              (unsigned long long)b->step, b->epoch, self->gen, b->n, b->global_count, lr,
              compute_s);
    for (int p = 0; p < self->n_step_parts; p++) {   /* each part to its loaderd */
        self->from_loader = self->step_parts[p].loader;
        if (gpud_send_credit(self, 1, &self->step_parts[p].b.seq) < 0)
            return -1;
    }
    return self->step_parts ? 0 : gpud_send_credit(self, 1, &b->seq);
}

/* STEP to reducerd, then its answer: COMMIT applies the step, MEMBERS
 * drops it (loaderd sends it again to the new generation). */
static int commit_step(gpud_t *self, const ddp_batch_t *b, double lr, double compute_s)
{
    if (members_send_step(self, b->epoch, b->step, DDP_STEP_SUMMED, -1) < 0 ||
        rank_state_to(&self->state, RANK_AWAITING_COMMIT, "STEP sent") < 0)
        return -1;
    switch (members_wait(self, b->step)) {
    case MEMBERS_COMMIT:
        return apply_step(self, b, lr, compute_s);
    case MEMBERS_CHANGED:
        return members_apply(self);
    case MEMBERS_STOPPED:
        return 0;   /* the loop ends; gpud_stop set the exit code */
    case MEMBERS_WAIT:
        break;
    }
    log_error("reducerd did not answer step %llu within the commit timeout: stopping (resume "
              "with --resume)", (unsigned long long)b->step);
    self->checkpoint_on_exit = true;
    return -1;
}

/* The shard as trained, V: B itself, or (--wire jpeg) its files decoded,
 * those that failed left out and global_count less the step's failures on
 * every rank (wire_input.h). 0, 1 the step was dropped (a new generation),
 * -1 failed. */
static int train_input(gpud_t *self, const ddp_batch_t *b, wire_input_t *in, ddp_batch_t *v)
{
    *v = *b;
    if (wire_input(self, b, in) < 0)
        return -1;
    if (b->wire != DDP_WIRE_ENCODED)
        return 0;
    if (wire_input_keep(in, b) < 0)
        return -1;
    char err[1024];
    uint32_t failed = 0;
    if (wire_input_agree(in, self->ring, ring_timeout_ms(self), &failed, err, sizeof err) < 0)
        return members_ring_failed(self, "failed count", b->epoch, b->step, err) < 0 ? -1 : 1;
    if (failed > b->global_count || in->kept > b->global_count - failed) {
        log_error("step %llu: the ranks report %u failed samples of global_count %u (%u kept "
                  "here): loaderd and the ranks disagree", (unsigned long long)b->step, failed,
                  b->global_count, in->kept);
        return -1;
    }
    if (failed)
        log_warn("step %llu: %u of %u samples did not decode at the ranks; the step trains on %u",
                 (unsigned long long)b->step, failed, b->global_count, b->global_count - failed);
    v->n = in->kept;
    v->ids = in->ids;
    v->labels = in->labels;
    v->global_count = b->global_count - failed;
    return 0;
}

/* Forward, backward, all-reduce, RESULT and commit of shard V (B as
 * loaderd sent it). 0 or 1 done or dropped, -1 failed. */
static int train_step(gpud_t *self, const ddp_batch_t *b, const ddp_batch_t *v,
                      const wire_input_t *in, double t0)
{
    int rc = forward_backward(self, v, in->pixels);
    if (rc != 0)
        return rc;
    double compute_s = clock_mono_s() - t0, lr = trainer_lr(self->trainer, (int)b->epoch);
    char err[1024];
    if (trainer_reduce(self->trainer, self->ring, ring_timeout_ms(self), err, sizeof err) < 0)
        return members_ring_failed(self, "gradients", b->epoch, b->step, err);
    if (trainer_check_grads(self->trainer, err, sizeof err) < 0) {
        /* the same sums on every rank: every rank stops at this step,
         * before the optimizer step (rank 0 checkpoints the one before) */
        rank_report_nonfinite(self, b->step, err, true);
        return 1;
    }
    self->compute_s += compute_s;
    if (b->n > 0 && send_result(self, b, v, in, lr, compute_s) < 0)
        return -1;
    return commit_step(self, v, lr, compute_s);
}

/* One data-parallel step (docs/TRAINING.md step 5, docs/ELASTIC.md). */
static int on_batch(gpud_t *self, ddp_batch_t *b)
{
    if (b->gen != self->gen) {   /* the shard of an abandoned generation */
        log_debug("train batch %llu of generation %u dropped: this rank is at generation %u",
                  (unsigned long long)b->seq, b->gen, self->gen);
        return 0;
    }
    if (self->options.fault_at_step >= 0 && b->step == (uint64_t)self->options.fault_at_step)
        die_at_fault(self);
    if (check_plan(self, b))
        return 0;
    if (check_batch(self, b) < 0)
        return -1;
    self->epoch = b->epoch;
    double t0 = clock_mono_s(); /* compute_s includes a --wire jpeg shard's decode */
    wire_input_t in;
    ddp_batch_t v;
    int rc = train_input(self, b, &in, &v);
    if (rc == 0)
        rc = train_step(self, b, &v, &in, t0);
    wire_input_clear(&in);
    return rc < 0 ? -1 : 0;
}

/* After EPOCH(e) the steps done are (e + 1) * spe: what loaderd planned,
 * or (a plan never received) the count to keep. A mismatch is logged and
 * counted; the plan stays (loaderd numbers the steps by it). */
static void check_epoch_steps(gpud_t *self, uint32_t epoch)
{
    if (self->next_step % (epoch + 1) != 0)
        return;
    uint64_t seen = self->next_step / (epoch + 1);
    if (!self->steps_per_epoch) {
        self->steps_per_epoch = seen;
    } else if (seen != self->steps_per_epoch) {
        self->stats.rejected++;
        log_error("epoch %u ended at step %llu: %llu steps per epoch, but loaderd planned %llu; "
                  "the checkpoints keep the plan", epoch, (unsigned long long)self->next_step,
                  (unsigned long long)seen, (unsigned long long)self->steps_per_epoch);
    }
}

/* The end of training: rank 0 writes the final weights, then tells
 * reducerd the outcome of both writes (DONE 0, or 4 with the first
 * failure, in reason already when the checkpoint failed); reducerd ends
 * the job only then (docs/TRAINING.md "Failure"). */
static void final_writes(gpud_t *self, char *reason, size_t cap)
{
    const char *weights = self->options.save_weights;
    if (self->rank != 0)
        return;
    char err[1024];
    if (weights && trainer_save_weights(self->trainer, weights, err, sizeof err) < 0) {
        char why[DDP_MAX_STR];
        rank_report_write_failed(self, "final weights", "end of training", err, why, sizeof why);
        if (!reason[0])
            snprintf(reason, cap, "%s", why);
    } else if (weights) {
        log_info("weights %s written", weights);
    }
    rank_report_done(self, reason[0] ? DDP_STOP_CHECKPOINT_FAILED : 0,
                     reason[0] ? reason : "the final checkpoint and weights are written");
}

/* EPOCH(e): remember the decision; rank 0 checkpoints (step 7). */
static void handle_epoch(gpud_t *self, const ddp_epoch_t *ep)
{
    if ((int64_t)ep->epoch <= self->epoch_done)
        return;   /* a duplicate */
    self->epoch_done = ep->epoch;
    self->epoch = (int64_t)ep->epoch + 1;
    self->streak = ep->streak;
    check_epoch_steps(self, ep->epoch);
    bool stop = ep->decision == DDP_DECISION_STOP;
    log_info("epoch %u done: %s (streak %u, val top-1 %.4f)%s%s", ep->epoch,
             stop ? "stop" : "continue", ep->streak, ep->val_top1, ep->reason[0] ? ": " : "",
             ep->reason);
    char reason[DDP_MAX_STR] = "";
    if ((stop || (ep->epoch + 1) % (uint64_t)self->options.checkpoint_every == 0) &&
        write_checkpoint(self, stop ? "final" : "end of epoch", reason, sizeof reason) < 0 &&
        !stop)
        rank_report_done(self, DDP_STOP_CHECKPOINT_FAILED, reason);
    if (stop)
        final_writes(self, reason, sizeof reason);
}

void train_on_epoch(gpud_t *self, const ddp_epoch_t *ep)
{
    if ((int64_t)ep->epoch <= self->train_end_done) {
        handle_epoch(self, ep);
    } else {
        self->pending_epoch = *ep;
        self->epoch_pending = true;
    }
}

/* An EPOCH that came before its END(TRAIN), once that END is handled. */
static void flush_epoch(gpud_t *self)
{
    if (self->epoch_pending && (int64_t)self->pending_epoch.epoch <= self->train_end_done) {
        self->epoch_pending = false;
        handle_epoch(self, &self->pending_epoch);
    }
}

/* Rank 0's BatchNorm buffers to every rank (as DDP's broadcast_buffers),
 * the inference network refolded for validation. */
static int sync_bn_buffers(gpud_t *self, uint32_t epoch)
{
    if (broadcast(self, TRAINER_BN_BUFFERS, "BatchNorm buffers", epoch) < 0)
        return -1;
    self->bn_redo = false;
    return gpud_sync_eval(self);
}

/* END(e, TRAIN): the broadcast, then an EPOCH(e) that came first. */
static int on_train_end(gpud_t *self, uint32_t epoch)
{
    if (sync_bn_buffers(self, epoch) < 0)
        return -1;
    self->train_end_done = epoch;
    flush_epoch(self);
    gpud_end_handled(self);   /* a STOP(0) that waited for this END */
    return 0;
}

int train_on_reducer(gpud_t *self, ddp_msg_t *m)
{
    if (m->type == DDP_EPOCH) {
        train_on_epoch(self, &m->u.epoch);
        return 0;
    }
    if (m->type == DDP_STATE) {
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
    return self->bn_redo ? sync_bn_buffers(self, (uint32_t)self->train_end_done) : 0;
}

/* A train batch of epoch e waits until EPOCH(e-1) is handled: only the
 * reducer socket and the heartbeat's STOPs are read meanwhile (the batch
 * stays with us). 0, 1 stopped or interrupted, -1 failed. */
static int wait_epoch(gpud_t *self, int64_t e)
{
    if (self->epoch_pending && (int64_t)self->pending_epoch.epoch <= e) {
        self->epoch_pending = false;   /* a batch of e+1 proves this rank finished e */
        handle_epoch(self, &self->pending_epoch);
    }
    zpoller_t *poller = gpud_reducer_poller(self);
    if (!poller) {
        log_error("rank %d: out of memory waiting for epoch %lld", self->rank, (long long)e);
        return -1;
    }
    int rc = 0;
    while (rc == 0 && self->epoch_done < e && !rank_state_ended(&self->state) &&
           !zs_interrupted()) {
        ddp_msg_t m;
        if (!gpud_poll_reducer(self, poller, 200, &m))
            continue;
        if (m.type == DDP_EPOCH)
            handle_epoch(self, &m.u.epoch);
        else if (m.type == DDP_STOP)
            gpud_stop(self, &m.u.stop);
        else if (train_on_reducer(self, &m) < 0)
            rc = -1;
        ddp_msg_clear(&m);
    }
    zpoller_destroy(&poller);
    return rc < 0 ? -1 : self->epoch_done >= e ? 0 : 1;
}

/* Several loaderds: run every step whose parts are all in, in step order.
 * 0, or -1 failed. */
static int run_ready_parts(gpud_t *self)
{
    char err[512];
    for (;;) {
        parts_prune(self->parts, self->gen, self->next_step);
        ddp_batch_t merged;
        part_t *taken;
        int n, rc = parts_take(self->parts, self->gen, self->next_step, &merged, &taken, &n, err,
                               sizeof err);
        if (rc <= 0) {
            if (rc < 0)
                log_error("%s", err);
            return rc;
        }
        uint64_t step = self->next_step;
        uint32_t gen = self->gen;
        self->step_parts = taken;
        self->n_step_parts = n;
        rc = wait_epoch(self, (int64_t)merged.epoch - 1);
        if (rc == 0)
            rc = on_batch(self, &merged);
        else
            rc = rc < 0 ? -1 : 0;
        self->step_parts = NULL;
        self->n_step_parts = 0;
        parts_free_taken(&merged, taken, n);
        if (rc < 0 || rank_state_ended(&self->state) ||
            (self->next_step == step && self->gen == gen))
            return rc < 0 ? -1 : 0;   /* failed, stopped, or the step was not applied */
    }
}

/* A train part from one of several loaderds: kept until its step is whole. */
static int on_part(gpud_t *self, ddp_batch_t *b)
{
    char err[512];
    if (!self->parts && !(self->parts = parts_new(self->n_loaders))) {
        log_error("out of memory for the train parts of %d loaderds", self->n_loaders);
        return -1;
    }
    if (b->gen < self->gen || (b->gen == self->gen && b->step < self->next_step))
        return 0;   /* of an abandoned generation, or a step already run */
    if (b->wire == DDP_WIRE_ENCODED) { /* parts merge pixels; loaderd and ddpipe refuse it */
        log_error("train part %llu carries files (--wire jpeg): training with several loaderds "
                  "needs --wire uint8", (unsigned long long)b->seq);
        return -1;
    }
    if (parts_add(self->parts, b, self->from_loader, err, sizeof err) < 0) {
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
        return on_batch(self, &m->u.batch);
    }
    if (m->type == DDP_END && m->u.end.phase == DDP_PHASE_TRAIN) {
        if ((int64_t)m->u.end.epoch <= self->train_end_done)
            return 0;   /* several loaderds: each sends END; the first one counts */
        return on_train_end(self, m->u.end.epoch);
    }
    return 1;   /* not a training message */
}

void train_idle(gpud_t *self)
{
    if (self->snapshot_pending && !rank_state_open_step(&self->state))
        send_state(self);
    /* a new generation may have made a step of kept parts runnable */
    if (self->parts && !rank_state_ended(&self->state) && parts_count(self->parts) &&
        run_ready_parts(self) < 0) {
        self->exit_code = 1;
        rank_state_end(&self->state, RANK_STOPPED, "a step of parts failed");
    }
}

void train_interrupted(gpud_t *self)
{
    log_error("interrupted by a signal: stopping (resume with --resume)");
    self->checkpoint_on_exit = true;
    self->exit_code = 1;
    rank_state_end(&self->state, RANK_STOPPED, "a signal");
}

int train_finish(gpud_t *self, int rc)
{
    /* the job went on without this rank: its state is behind */
    if (self->state.now == RANK_FENCED)
        return rc ? rc : 1;
    if (!self->checkpoint_on_exit || !self->trainer)
        return rc;
    if (rank_state_open_step(&self->state))   /* the last completed step, mid-epoch or not */
        trainer_restore(self->trainer);
    char reason[DDP_MAX_STR];   /* the job ends anyway: only logged */
    write_checkpoint(self, "stopped early", reason, sizeof reason);
    return rc ? rc : 1;
}
