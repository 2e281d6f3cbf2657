/* train_step — see train_step.h. */
#include "gpud/train_step.h"

#include "common/clock.h"
#include "common/log.h"
#include "gpud/chunk_sizes.h"
#include "gpud/train_epoch.h"
#include "gpud/members.h"
#include "gpud/rank_report.h"
#include "gpud/train_ahead.h"
#include "gpud/train_ring.h"
#include "gpud/train_save.h"
#include "gpud/wire_input.h"
#include "proto/wire.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

/* Room for n samples' loss and top-k (the step ranks them: no logits). */
static int grow_sample_bufs(gpud_t *self, uint32_t n)
{
    train_state_t *ts = self->train;
    if (n > ts->per_sample_cap) {
        float *l = realloc(ts->loss, n * sizeof *l);
        if (l)
            ts->loss = l;
        int32_t *t = realloc(ts->topk, (size_t)n * DDP_MAX_K * sizeof *t);
        if (t)
            ts->topk = t;
        if (!l || !t)
            return -1;
        ts->per_sample_cap = n;
    }
    return 0;
}

/* fp16 training: the loss scale the step ran with and the job's skipped
 * steps, this one included (reducerd -> summary.json). */
static void result_scale(const gpud_t *self, ddp_result_t *r)
{
    const trainer_t *t = self->train->trainer;
    const loss_scale_t *ls = trainer_loss_scale(t);
    if (!ls)
        return;
    r->loss_scale = ls->scale;
    r->skipped_steps = (uint64_t)ls->skipped + (uint64_t)trainer_step_skipped(t);
}

/* Several loaderds: one RESULT per part (its seq, its samples), the
 * merged step's loss and top-k gathered back by the part's at[]. */
static int send_part_results(gpud_t *self, const ddp_batch_t *b, int k, double lr,
                             double compute_s)
{
    train_state_t *ts = self->train;
    float *loss = malloc(((size_t)b->n ? b->n : 1) * sizeof *loss);
    int32_t *topk = malloc(((size_t)b->n ? b->n : 1) * (size_t)k * sizeof *topk);
    int rc = loss && topk ? 0 : -1;
    for (int p = 0; rc == 0 && p < ts->n_step_parts; p++) {
        const part_t *part = &ts->step_parts[p];
        if (part->b.n == 0)
            continue;   /* an empty part: nothing was ISSUED */
        for (uint32_t i = 0; i < part->b.n; i++) {
            loss[i] = ts->loss[part->at[i]];
            memcpy(topk + (size_t)i * k, ts->topk + (size_t)part->at[i] * k, k * sizeof *topk);
        }
        ddp_msg_t r = {.type = DDP_RESULT};
        r.u.result = (ddp_result_t){.rank = self->rank, .epoch = b->epoch,
                                    .phase = DDP_PHASE_TRAIN, .seq = part->b.seq,
                                    .n = part->b.n, .k = (uint32_t)k, .ids = part->b.ids,
                                    .labels = part->b.labels, .topk = topk, .loss = loss,
                                    .compute_s = b->n ? compute_s * part->b.n / b->n : 0,
                                    .lr = lr, .step = b->step, .gen = self->gen,
                                    .auth = self->auth};
        result_scale(self, &r.u.result);
        rc = proto_send(zsock_resolve(self->reducer), NULL, &r);
    }
    free(loss);
    free(topk);
    if (rc < 0)
        log_error("cannot send results to reducerd: %s", zmq_strerror(zmq_errno()));
    return rc;
}

/* The top-k a train RESULT carries: DDP_MAX_K, or every class of a model
 * with fewer. */
static int step_k(const gpud_t *self)
{
    int nc = model_num_classes(self->model);
    return nc < DDP_MAX_K ? nc : DDP_MAX_K;
}

/* RESULT of this rank's shard: the train step's per-sample loss and top-k
 * (ranked by the step, on the device where the backend can: only those
 * ids left it), of the samples trained, V; a --wire jpeg batch's rows that
 * did not decode are sent flagged failed, with their reasons. */
static int send_result(gpud_t *self, const ddp_batch_t *b, const wire_input_t *in, double lr,
                       double compute_s)
{
    train_state_t *ts = self->train;
    int k = step_k(self);   /* the step ranked them (forward_backward) */
    if (ts->step_parts) /* never --wire jpeg (refused with several loaderds) */
        return send_part_results(self, b, k, lr, compute_s);
    wire_input_spread(in, b->n, ts->loss, ts->topk, k);
    ddp_msg_t r = {.type = DDP_RESULT};
    r.u.result = (ddp_result_t){.rank = self->rank, .epoch = b->epoch, .phase = DDP_PHASE_TRAIN,
                                .seq = b->seq, .n = b->n, .k = (uint32_t)k, .ids = b->ids,
                                .labels = b->labels, .topk = ts->topk, .loss = ts->loss,
                                .compute_s = compute_s, .lr = lr, .step = b->step,
                                .gen = self->gen, .auth = self->auth};
    result_scale(self, &r.u.result);
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
    train_state_t *ts = self->train;
    uint64_t spe = b->steps_per_epoch;
    if (!spe || spe == ts->steps_per_epoch)
        return 0;
    if (!ts->steps_per_epoch) {
        ts->steps_per_epoch = spe;
        log_info("loaderd plans %llu steps per epoch", (unsigned long long)spe);
        return 0;
    }
    self->stats.rejected++;
    log_error("train batch %llu (step %llu) plans %llu steps per epoch, this rank holds %llu "
              "(its checkpoint or state): dropped; resume from a checkpoint of this dataset and "
              "global batch", (unsigned long long)b->seq, (unsigned long long)b->step,
              (unsigned long long)spe, (unsigned long long)ts->steps_per_epoch);
    return 1;
}

/* A rank's list of a step holds at most the global batch (the CLI's cap
 * when gpud was not told it): the bound of a train batch's 'pos'. */
static uint64_t pos_limit(const gpud_t *self)
{
    return self->options.global_batch > 0 ? (uint64_t)self->options.global_batch
                                          : (uint64_t)1 << 24;
}

/* Bitwise training: every sample's place in the step ('pos', strictly
 * increasing: proto checked that) below the bound, checked before the
 * step's collectives. 0, or -1 logged. */
static int check_pos(gpud_t *self, const ddp_batch_t *b)
{
    if (self->options.chunk <= 0 || b->n == 0)
        return 0;
    if (!b->pos) {
        log_error("train batch %llu (step %llu): no 'pos' in bitwise training (--chunk): "
                  "loaderd must send each sample's place in the step (the same version of "
                  "every daemon?)", (unsigned long long)b->seq, (unsigned long long)b->step);
        return -1;
    }
    if (b->pos[b->n - 1] >= pos_limit(self)) {
        log_error("train batch %llu (step %llu): 'pos' %u is past the rank's list (at most "
                  "%llu samples): malformed", (unsigned long long)b->seq,
                  (unsigned long long)b->step, b->pos[b->n - 1],
                  (unsigned long long)pos_limit(self));
        return -1;
    }
    return 0;
}

static int check_batch(gpud_t *self, const ddp_batch_t *b)
{
    uint64_t next = self->train->next_step;
    if (b->step != next) {
        log_error("loaderd sends step %llu, checkpoint/state says %llu: restart loaderd with the "
                  "checkpoint's --start-epoch/--start-step (or resume every gpud from the same "
                  "checkpoint)", (unsigned long long)b->step, (unsigned long long)next);
        return -1;
    }
    if (b->n > b->global_count || (b->n > 0 && !b->pixels)) {
        log_error("train batch %llu: %u samples, global_count %u: malformed",
                  (unsigned long long)b->seq, b->n, b->global_count);
        return -1;
    }
    if (check_pos(self, b) < 0)
        return -1;
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
    allreduce_destroy(&self->train->ring);
    for (int i = 0; i < self->n_loaders; i++)
        zsock_destroy(&self->loaders[i]);
    self->loader = NULL;
    zsock_destroy(&self->reducer);
    zsys_shutdown();
    raise(SIGKILL);
}

/* DDPIPE_BITWISE_BREAK=by-count (tests, the negative control of
 * it_train_bitwise_fail): the chunks cut by the count of the samples kept,
 * the old way, which makes the weights depend on W when samples fail. */
static bool by_count(void)
{
    static int on = -1;
    if (on < 0) {
        const char *brk = getenv("DDPIPE_BITWISE_BREAK");
        on = brk && strcmp(brk, "by-count") == 0;
        if (on)
            log_warn("DDPIPE_BITWISE_BREAK=by-count: the chunks are cut by the count of the "
                     "samples kept: with failed samples the weights depend on W (test hook)");
    }
    return on;
}

/* Bitwise training: the chunks of shard V (B as loaderd sent it, IN its
 * --wire jpeg decode failures) by the samples' places in the step
 * (chunk_sizes.h), so that a sample that failed, at loaderd or here, leaves
 * a hole in its own chunk whatever W is. *sizes malloc'd (NULL: none). The
 * count, or -1 (logged) for a batch without valid 'pos'. */
static int step_chunks(gpud_t *self, const ddp_batch_t *b, const wire_input_t *in,
                       int **sizes)
{
    *sizes = NULL;
    if (b->n == 0)
        return 0;
    *sizes = malloc(b->n * sizeof **sizes);
    if (!*sizes) {
        log_error("out of memory for the chunks of a %u-sample train batch", b->n);
        return -1;
    }
    char err[256];
    int k = chunk_sizes_from_pos(b->pos, in->failed, b->n, (int)self->options.chunk,
                                 pos_limit(self), *sizes, err, sizeof err);
    if (k < 0) {
        log_error("train batch %llu (step %llu): %s: malformed", (unsigned long long)b->seq,
                  (unsigned long long)b->step, err);
        free(*sizes);
        *sizes = NULL;
    }
    return k;
}

/* This rank's share of the step: forward and backward on its shard V (B
 * as loaderd sent it). 0, 1 the step was dropped (a new generation), -1
 * failed. */
static int forward_backward(gpud_t *self, const ddp_batch_t *b, const ddp_batch_t *v,
                            const wire_input_t *in)
{
    train_state_t *ts = self->train;
    trainer_batch_t tb = {.pixels = v->n ? in->pixels : NULL, .n = (int)v->n,
                          .c = v->c, .h = v->h, .w = v->w, .labels = v->labels,
                          .ids = v->ids, .global_count = v->global_count, .step = v->step,
                          .topk = ts->topk, .k = step_k(self)};
    gpud_norm(self, &tb.mean, &tb.std);
    /* the next step's batch may be read and staged while this one runs */
    train_ahead_ctx_t ahead = {self, v};
    if (in->pixels) {
        tb.ahead = train_ahead_peek;
        tb.ahead_ctx = &ahead;
    }
    int *sizes = NULL;
    if (self->options.chunk > 0 && !by_count() &&
        (tb.n_chunks = step_chunks(self, b, in, &sizes)) < 0)
        return -1;
    tb.chunk_sizes = sizes;
    char err[1024];
    if (rank_state_to(&self->state, RANK_STEP_OPEN, "forward") < 0) {
        free(sizes);
        return -1;
    }
    int rc = trainer_forward_backward(ts->trainer, &tb, ts->loss, NULL, err, sizeof err);
    free(sizes);
    if (rc == 0)
        return 0;
    /* SyncBatchNorm's and bitwise BatchNorm's all-reduces run in the step */
    if ((self->options.sync_bn || self->options.chunk > 0) &&
        (allreduce_failure(ts->ring) != ALLREDUCE_OK || collective_failed(ts->coll)))
        return members_ring_failed(self, self->options.chunk > 0 ? "bitwise BatchNorm"
                                                                 : "sync-bn",
                                   b->epoch, b->step, err);
    log_error("train step %llu failed: %s", (unsigned long long)b->step, err);
    ts->checkpoint_on_exit = true;
    return -1;
}

/* The step is committed: every rank applies the same optimizer step. */
static int apply_step(gpud_t *self, const ddp_batch_t *b, double lr, double compute_s)
{
    train_state_t *ts = self->train;
    trainer_apply(ts->trainer, (int)b->epoch, b->global_count);
    rank_state_to(&self->state, RANK_IDLE, "COMMIT applied");
    char err[1024];
    if (trainer_check_params(ts->trainer, err, sizeof err) < 0) {
        /* the update is applied and cannot be undone: no checkpoint of it */
        rank_report_nonfinite(self, b->step, err, false);
        return 1;
    }
    self->eval_stale = true;
    ts->next_step++;
    if (!self->options.global_batch && b->global_count > ts->global_batch)
        ts->global_batch = b->global_count;
    atomic_fetch_add(&self->batches, 1);
    self->samples += b->n;
    if (ts->pending.snapshot)
        train_save_state(self);
    log_debug("step %llu (epoch %u, generation %u): %u of %u samples, lr %g, %.3fs",
              (unsigned long long)b->step, b->epoch, self->gen, b->n, b->global_count, lr,
              compute_s);
    for (int p = 0; p < ts->n_step_parts; p++) {   /* each part to its loaderd */
        self->from_loader = ts->step_parts[p].loader;
        if (gpud_send_credit(self, 1, &ts->step_parts[p].b.seq) < 0)
            return -1;
    }
    return ts->step_parts ? 0 : gpud_send_credit(self, 1, &b->seq);
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
    self->train->checkpoint_on_exit = true;
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
    if (wire_input_agree(in, self->train->ring, train_ring_timeout_ms(self), &failed, err,
                         sizeof err) < 0)
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
    train_state_t *ts = self->train;
    int rc = forward_backward(self, b, v, in);
    if (rc != 0)
        return rc;
    double compute_s = clock_mono_s() - t0, lr = trainer_lr(ts->trainer, (int)b->epoch);
    char err[1024];
    if (trainer_reduce(ts->trainer, ts->ring, train_ring_timeout_ms(self), err, sizeof err) < 0)
        return members_ring_failed(self, "gradients", b->epoch, b->step, err);
    int skip = trainer_unscale(ts->trainer, err, sizeof err);   /* fp16: 1 skips the step */
    if (skip < 0) {
        log_error("train step %llu: %s", (unsigned long long)b->step, err);
        ts->checkpoint_on_exit = true;
        return -1;
    }
    /* with loss scaling, trainer_unscale's scan found them finite, and a
     * finite float times 2^-k stays finite: no second scan */
    if (!skip && !trainer_loss_scale(ts->trainer) &&
        trainer_check_grads(ts->trainer, err, sizeof err) < 0) {
        /* the same sums on every rank: every rank stops at this step,
         * before the optimizer step (rank 0 checkpoints the one before) */
        rank_report_nonfinite(self, b->step, err, true);
        return 1;
    }
    if (self->compute_s == 0)   /* where a job's start-up goes */
        log_info("first step %llu: %u samples in %.2fs (the backend's first pass: its plans and "
                 "algorithm choices)", (unsigned long long)b->step, b->n, compute_s);
    self->compute_s += compute_s;
    if (b->n > 0 && send_result(self, b, in, lr, compute_s) < 0)
        return -1;
    return commit_step(self, v, lr, compute_s);
}

int train_step_run(gpud_t *self, ddp_batch_t *b)
{
    if (b->gen != self->gen) {   /* the shard of an abandoned generation */
        log_debug("train batch %llu of generation %u dropped: this rank is at generation %u",
                  (unsigned long long)b->seq, b->gen, self->gen);
        return 0;
    }
    if (self->options.fault_at_step >= 0 && b->step == (uint64_t)self->options.fault_at_step)
        die_at_fault(self);
    /* a new generation's BatchNorm broadcast comes before its first step
     * on every member (members_bn_epoch), also where MEMBERS came during
     * the gradient sum of the step now redone */
    if (self->train->pending.bn_redo &&
        train_epoch_sync_bn(self, (uint32_t)self->train->train_end_done) < 0)
        return -1;
    if (check_plan(self, b))
        return 0;
    if (check_batch(self, b) < 0)
        return -1;
    self->train->epoch = b->epoch;
    double t0 = clock_mono_s(); /* compute_s includes a --wire jpeg shard's decode */
    wire_input_t in;
    ddp_batch_t v;
    int rc = train_input(self, b, &in, &v);
    if (rc == 0)
        rc = train_step(self, b, &v, &in, t0);
    wire_input_clear(&in);
    return rc < 0 ? -1 : 0;
}
