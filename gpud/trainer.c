/* trainer — one gpud rank's optimizer, schedule, collectives and
 * checkpoints (see trainer.h). */
#include "gpud/trainer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/errbuf.h"
#include "common/log.h"
#include "common/safetensors.h"
#include "gpud/arena_mirror.h"
#include "gpud/backend_arena.h"
#include "gpud/bucket_issue.h"
#include "gpud/buckets.h"
#include "gpud/finite.h"
#include "gpud/grad_exact.h"
#include "gpud/xsum_ring.h"

/* DDP's first bucket (torch.distributed's _DEFAULT_FIRST_BUCKET_BYTES):
 * small enough that this ~3 MB WideResNet's gradient goes in 3 buckets. */
#define TRAINER_BUCKET_FLOATS (1u << 18)

struct trainer {
    model_t *m;
    trainer_cfg_t cfg;
    optim_t *opt;
    lr_sched_t *sched;
    const bk_arena_t *params, *grads;   /* the model's arenas (model.h) */
    arena_mirror_t hp, hg;  /* their host side (the arenas themselves on the host) */
    size_t buf_off;         /* params[buf_off, floats): the BatchNorm buffers */
    float *stage;           /* a broadcast's receive buffer on ranks != 0 */
    size_t grad_floats;
    bk_arena_t buf_saved;   /* BN buffers before the current step (trainer_restore),
                             * an arena of the params' kind: a copy, no round trip */
    size_t buf_floats;
    int64_t *cnt_saved;     /* num_batches_tracked before the current step */
    int n_cnt;
    /* the gradient all-reduce in buckets: ranges of the grads arena */
    buckets_t *bk;
    int ng;                 /* optimized parameters */
    const float **gptr;     /* ng: its gradient (a view into the grads arena) */
    allreduce_t *ar;        /* trainer_set_overlap: overlap on this ring */
    int timeout_ms;
    int mirror_failed;      /* a gradient's copy to the host mirror failed this step */
    const trainer_dsum_t *dsum;   /* trainer_set_device_sum: summed where it lives */
    void *dsum_ctx;
    bucket_issue_t *bi;     /* dsum->enqueue: the buckets queued while backward runs */
    int q_failed, dev_logged;
    char q_err[512];        /* the first queueing failure of the step (NCCL or ring) */
    bk_traffic_t logged;    /* model_traffic at the last --verbose step line */
    grad_exact_t *exact;    /* cfg.chunk: the step's exact gradient sums */
    int break_exact;        /* DDPIPE_BITWISE_BREAK=float-ring (tests): floats over the ring */
    loss_scale_t ls;        /* cfg.loss_scale > 0: fp16 training's scaler */
    int found_inf;          /* trainer_unscale: this step's sums are not finite (skipped) */
};

static int apply_freezes(trainer_t *t, char *err, size_t errlen)
{
    for (int i = 0; i < t->cfg.n_freeze; i++)
        if (model_freeze(t->m, t->cfg.freeze[i], 1) <= 0) {
            err_set(err, errlen, "--freeze %s: no trainable parameter has that prefix",
                    t->cfg.freeze[i]);
            return -1;
        }
    for (int i = 0; i < t->cfg.n_freeze_bn; i++)
        if (model_freeze_bn(t->m, t->cfg.freeze_bn[i], 1) <= 0) {
            err_set(err, errlen, "--freeze-bn %s: no BatchNorm layer has that prefix",
                    t->cfg.freeze_bn[i]);
            return -1;
        }
    return 0;
}

/* The buckets over the optimized gradients, which lie one after the other
 * in the grads arena (register_params checked it). */
static int grad_layout(trainer_t *t, char *err, size_t errlen)
{
    t->ng = optim_param_count(t->opt);
    t->gptr = calloc((size_t)t->ng, sizeof *t->gptr);
    size_t *numel = calloc((size_t)t->ng, sizeof *numel);
    int *walk = calloc((size_t)t->ng, sizeof *walk);
    int ok = t->gptr && numel && walk;
    for (int i = 0; ok && i < t->ng; i++) {
        model_param_t p;
        ok = model_param_find(t->m, optim_param_name(t->opt, i), &p) == 0;
        numel[i] = ok ? p.numel : 0;
        walk[i] = ok ? p.walk : -1;
        if (ok)
            t->gptr[i] = p.grad;
    }
    if (ok) {
        t->bk = buckets_new(numel, t->ng, buckets_cap_env(TRAINER_BUCKET_FLOATS), err, errlen);
        /* numbered in backward's order, predicted from the layers' */
        if (t->bk && buckets_order_walk(t->bk, walk) < 0) {
            err_set(err, errlen, "out of memory for the gradient buckets");
            buckets_destroy(&t->bk);
        }
    } else {
        err_set(err, errlen, "out of memory for the gradient buckets");
    }
    free(numel);
    free(walk);
    return t->bk ? 0 : -1;
}

/* The arenas as the trainer uses them, host or device memory: the ring,
 * checkpoints and the broadcast work on their host mirrors (arena_mirror.h:
 * the arenas themselves on the host); BN buffers = the params arena's
 * buffers part. */
static int arenas_check(trainer_t *t, char *err, size_t errlen)
{
    t->params = model_params_arena(t->m);
    t->grads = model_grads_arena(t->m);
    t->buf_off = model_buffers_offset(t->m);
    if (arena_mirror_init(&t->hp, t->params, err, errlen) < 0 ||
        arena_mirror_init(&t->hg, t->grads, err, errlen) < 0)
        return -1;
    if (t->buf_floats > t->params->floats - t->buf_off) {
        err_set(err, errlen, "the params arena's buffers part holds %zu floats, the BatchNorm "
                "buffers %zu (a buffer that is not running_mean/var?)",
                t->params->floats - t->buf_off, t->buf_floats);
        return -1;
    }
    return 0;
}

/* Every parameter with a gradient, in model order (the same on every rank):
 * the grads arena's order, so that buckets are ranges of it. */
static int register_params(trainer_t *t, char *err, size_t errlen)
{
    for (int i = 0; i < model_param_count(t->m); i++) {
        model_param_t p;
        if (model_param_at(t->m, i, &p) < 0)
            continue;
        if (model_param_is_bn_buffer(p.name))
            t->buf_floats += p.numel;
        if (!p.grad)
            continue;
        if (p.grad_offset != t->grad_floats) {
            err_set(err, errlen, "the gradient of %s is at %zu of the grads arena, want %zu "
                    "(the arena is not in model_param_at order)", p.name, p.grad_offset,
                    t->grad_floats);
            return -1;
        }
        int decay = !(t->cfg.no_decay_bn_bias &&
                      (model_param_is_bias(p.name) || model_param_is_bn_weight(t->m, p.name)));
        if (optim_add_param(t->opt, p.name, p.value, p.grad, p.ndim, p.shape, decay, err,
                            errlen) < 0)
            return -1;
        t->grad_floats += p.numel;
    }
    if (t->grad_floats == 0) {
        err_set(err, errlen, "nothing to train: every parameter is frozen");
        return -1;
    }
    if (arenas_check(t, err, errlen) < 0 ||
        optim_set_arena(t->opt, t->params->ops, t->params->traffic, err, errlen) < 0 ||
        grad_layout(t, err, errlen) < 0)
        return -1;
    if (t->grads->floats != t->grad_floats) {
        err_set(err, errlen, "the grads arena holds %zu floats, the optimizer %zu",
                t->grads->floats, t->grad_floats);
        return -1;
    }
    t->buf_floats = t->params->floats - t->buf_off;   /* the buffers and their gaps */
    t->n_cnt = model_i64_count(t->m);
    t->cnt_saved = calloc((size_t)(t->n_cnt > 0 ? t->n_cnt : 1), sizeof *t->cnt_saved);
    if (bk_arena_alloc(&t->buf_saved, t->params->ops, t->buf_floats, NULL) < 0 ||
        !t->cnt_saved) {
        err_set(err, errlen, "out of memory for %zu floats of BatchNorm buffers",
                t->buf_floats);
        return -1;
    }
    t->logged = *model_traffic(t->m);
    return 0;
}

/* Which optimized gradient grad is (its view in the grads arena), or -1
 * (a frozen parameter's: it has no place there). */
static int grad_index(const trainer_t *t, const float *grad)
{
    for (int i = 0; i < t->ng; i++)
        if (t->gptr[i] == grad)
            return i;
    return -1;
}

/* The model's hook in bitwise training: one chunk's gradient, summed. On
 * a device arena whose ops cannot sum there it is read into the host
 * mirror first (the chunk's backward wrote it there; the next chunk's
 * overwrites it), one copy a gradient a chunk. */
static void on_grad_exact(void *ctx, const float *grad)
{
    trainer_t *t = ctx;
    int i = grad_index(t, grad);
    if (i < 0)
        return;
    if (t->hg.copy && !grad_exact_on_device(t->exact)) {
        size_t lo, hi;
        buckets_grad_range(t->bk, i, &lo, &hi);
        if (!arena_mirror_pull(&t->hg, lo, hi - lo)) {
            t->mirror_failed = 1;
            return;
        }
    }
    grad_exact_add(t->exact, i);
}

/* Bitwise training (cfg.chunk): the exact sums of the optimized
 * gradients, fed by the model's grad-ready hook chunk after chunk. The
 * sums are made on the host from the arena in place, or on a device arena
 * (cuda) by its own kernels (else from its host mirror); the rounded sums
 * are written in the mirror and pushed back to the arena (trainer_reduce). */
static int exact_init(trainer_t *t, char *err, size_t errlen)
{
    size_t *numel = malloc((size_t)t->ng * sizeof *numel);
    if (!numel) {
        err_set(err, errlen, "out of memory");
        return -1;
    }
    for (int i = 0; i < t->ng; i++) {
        size_t lo, hi;
        buckets_grad_range(t->bk, i, &lo, &hi);
        numel[i] = hi - lo;
    }
    t->exact = grad_exact_new(arena_mirror_at(&t->hg, 0), numel, t->ng, err, errlen);
    free(numel);
    if (t->exact && t->hg.copy && grad_exact_use_arena(t->exact, t->grads, err, errlen) < 0)
        return -1;
    const char *brk = getenv("DDPIPE_BITWISE_BREAK");
    t->break_exact = brk && strcmp(brk, "float-ring") == 0;
    if (t->break_exact)
        log_warn("DDPIPE_BITWISE_BREAK=float-ring: gradients summed as floats over the ring "
                 "(a test of the bitwise tests; results depend on the number of ranks)");
    return t->exact && model_set_grad_ready(t->m, on_grad_exact, t) == 0 ? 0 : -1;
}

static int build_sched(trainer_t *t, char *err, size_t errlen)
{
    const trainer_cfg_t *c = &t->cfg;
    t->sched = lr_sched_warmup(c->lr, c->warmup_epochs, c->warmup_start_factor,
                               c->has_main ? &c->main : NULL, err, errlen);
    return t->sched ? 0 : -1;
}

trainer_t *trainer_new(model_t *model, const trainer_cfg_t *cfg, char *err, size_t errlen)
{
    if (model_param_count(model) <= 0) {
        err_set(err, errlen, "the model was not opened for training");
        return NULL;
    }
    if (!(cfg->lr >= 0)) {
        err_set(err, errlen, "--lr %g: must be >= 0", cfg->lr);
        return NULL;
    }
    trainer_t *t = calloc(1, sizeof *t);
    if (!t) {
        err_set(err, errlen, "out of memory");
        return NULL;
    }
    t->m = model;
    t->cfg = *cfg;
    if (cfg->loss_scale > 0) {
        if (!loss_scale_valid(cfg->loss_scale)) {
            err_set(err, errlen, "--loss-scale %g: a power of two (2^-126 .. 2^127), so "
                    "that scaling and unscaling are exact", cfg->loss_scale);
            free(t);
            return NULL;
        }
        t->ls = loss_scale_new(cfg->loss_scale, cfg->loss_scale_interval);
    }
    t->opt = optim_new(&cfg->optim, err, errlen);
    if (!t->opt || apply_freezes(t, err, errlen) < 0 || register_params(t, err, errlen) < 0 ||
        build_sched(t, err, errlen) < 0 || (cfg->chunk > 0 && exact_init(t, err, errlen) < 0))
        trainer_destroy(&t);
    return t;
}

void trainer_destroy(trainer_t **tp)
{
    if (!tp || !*tp)
        return;
    trainer_t *t = *tp;
    optim_destroy(&t->opt);
    lr_sched_destroy(&t->sched);
    free(t->stage);
    bk_arena_free(&t->buf_saved);
    arena_mirror_fini(&t->hp);
    arena_mirror_fini(&t->hg);
    free(t->cnt_saved);
    bucket_issue_destroy(&t->bi);
    buckets_destroy(&t->bk);
    grad_exact_destroy(&t->exact);
    free(t->gptr);
    free(t);
    *tp = NULL;
}

double trainer_lr(trainer_t *t, int epoch)
{
    lr_sched_set_epoch(t->sched, epoch);
    return lr_sched_lr(t->sched);
}

const optim_t *trainer_optim(const trainer_t *t)
{
    return t->opt;
}

size_t trainer_grad_floats(const trainer_t *t)
{
    return t->grad_floats;
}

/* Rank 0 sums in place (x + 0 + ... = x: its values stay x, whatever
 * step of the ring fails); the others receive into a stage, so that a
 * broadcast that fails leaves every rank's values as they were for the
 * retry from the new rank 0 (train.c). The params arena, or its buffers
 * part: one range each. */
int trainer_broadcast(trainer_t *t, allreduce_t *ar, trainer_set_t which, int timeout_ms,
                      char *err, size_t errlen)
{
    size_t lo = which == TRAINER_ALL ? 0 : t->buf_off, n = t->params->floats - lo;
    float *data = NULL;
    if (allreduce_world(ar) == 1)   /* a ring of one sums nothing: no mirror copies */
        return allreduce_sum(ar, NULL, 0, timeout_ms, err, errlen);
    if (allreduce_rank(ar) == 0 && !(data = arena_mirror_pull(&t->hp, lo, n))) {
        err_set(err, errlen, "cannot read %zu floats of the %s arena for the broadcast", n,
                t->params->ops->name);
        return -1;
    }
    if (allreduce_rank(ar) != 0) {
        if (!t->stage && !(t->stage = malloc((t->params->floats ? t->params->floats : 1) *
                                             sizeof *t->stage))) {
            err_set(err, errlen, "out of memory for %zu floats of broadcast", t->params->floats);
            return -1;
        }
        memset(t->stage, 0, n * sizeof *t->stage);
        data = t->stage;
    }
    if (allreduce_sum(ar, data, n, timeout_ms, err, errlen) < 0)
        return -1;
    if (data == t->stage)
        memcpy(arena_mirror_at(&t->hp, lo), t->stage, n * sizeof *t->stage);
    if (arena_mirror_push(&t->hp, lo, n) < 0) {
        err_set(err, errlen, "cannot write %zu broadcast floats to the %s arena", n,
                t->params->ops->name);
        return -1;
    }
    return 0;
}

static int save_buffers(trainer_t *t, char *err, size_t errlen)
{
    if (bk_arena_copy(&t->buf_saved, 0, t->params, t->buf_off, t->buf_floats) < 0) {
        err_set(err, errlen, "cannot save the BatchNorm buffers (a copy in the %s arena "
                "failed)", t->params->ops->name);
        return -1;
    }
    for (int i = 0; i < t->n_cnt; i++) {
        model_i64_t c;
        if (model_i64_at(t->m, i, &c) == 0)
            t->cnt_saved[i] = *c.value;
    }
    return 0;
}

void trainer_restore(trainer_t *t)
{
    if (bk_arena_copy(t->params, t->buf_off, &t->buf_saved, 0, t->buf_floats) < 0)
        log_error("cannot restore the BatchNorm buffers (a copy in the %s arena failed): "
                  "the running statistics keep this step's update", t->params->ops->name);
    for (int i = 0; i < t->n_cnt; i++) {
        model_i64_t c;
        if (model_i64_at(t->m, i, &c) == 0)
            *c.value = t->cnt_saved[i];
    }
}

/* The gradients are where the buckets were laid out (a freeze after
 * trainer_new would have moved them). */
static int grad_ptrs(trainer_t *t, char *err, size_t errlen)
{
    const bk_arena_t *g = model_grads_arena(t->m);
    if (g != t->grads || g->floats != t->grad_floats ||
        (t->ng > 0 && t->gptr[0] != g->base)) {
        err_set(err, errlen, "the gradient arena was laid out again (a freeze after the "
                "trainer was made)");
        return -1;
    }
    return 0;
}

/* bucket_issue's queue over the host ring: one complete bucket (base: its
 * place in the grads arena) handed to the ring's thread. On a device arena
 * the ring sums the host mirror: the bucket is copied there first, in one
 * copy (it waits for the gradients' kernels). A failed copy is reported by
 * trainer_reduce; the bucket still goes, so that every rank makes the same
 * ring operations. */
static int ring_enqueue(void *ctx, float *base, size_t n, char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
    trainer_t *t = ctx;
    size_t lo = (size_t)(base - (float *)t->grads->base);
    if (!arena_mirror_pull(&t->hg, lo, n))
        t->mirror_failed = 1;
    buckets_ready_range(t->bk, lo, lo + n);
    return 0;
}

/* bucket_issue's queue: one bucket's device sum, behind the gradients'
 * kernels on the arena's stream */
static int dev_enqueue(void *ctx, float *base, size_t n, char *err, size_t errlen)
{
    trainer_t *t = ctx;
    return t->dsum->enqueue(t->dsum_ctx, base, n, bk_arena_stream(t->grads), t->timeout_ms, err,
                            errlen);
}

/* The model's grad queue during backward, buckets over NCCL (dev_enqueue)
 * or the host ring (ring_enqueue): grad is final (its kernels queued, or
 * recorded to be: bookkeeping only here); 1 when a bucket is complete,
 * which on_grad_flush queues once the kernels are. Host work only, so
 * the pass may be recorded as a CUDA graph (the NCCL calls and the ring's
 * copies stay outside it: a captured collective must be captured alike on
 * every rank, and each rank records its pass when it can). Gradients the
 * optimizer does not have (frozen) have no bucket. */
static int on_grad_mark(void *ctx, const float *grad)
{
    trainer_t *t = ctx;
    int i = grad_index(t, grad);
    return i >= 0 && !t->q_failed ? bucket_issue_mark(t->bi, i) > 0 : 0;
}

static void on_grad_flush(void *ctx)
{
    trainer_t *t = ctx;
    if (!t->q_failed && bucket_issue_flush(t->bi, t->q_err, sizeof t->q_err) < 0)
        t->q_failed = 1;
}

void trainer_set_device_sum(trainer_t *t, const trainer_dsum_t *ops, void *ctx)
{
    if (t->exact && ops && !(ops->max_u32 && grad_exact_device_reduce_ok(t->exact))) {
        log_warn("bitwise training sums its gradients as exact limbs over the ring: the device "
                 "collective is not used (the exact sums are not made on the device)");
        ops = NULL;   /* gpud offers NCCL with --chunk only where they are (link.c) */
    }
    if (t->bi && bucket_issue_active(t->bi))
        bucket_issue_abort(t->bi);
    t->dsum = ops;
    t->dsum_ctx = ctx;
    t->dev_logged = 0;
}

/* Buckets to the device collective this step: its ops can queue and the
 * overlap is on (trainer_set_overlap; a device sum is set only where there
 * are ranks to sum over, an NCCL generation). */
static int dev_overlap(const trainer_t *t)
{
    return t->dsum && t->dsum->enqueue && t->dsum->wait && t->ar && t->bk;
}

int trainer_set_overlap(trainer_t *t, allreduce_t *ar, int timeout_ms)
{
    if (t->exact)   /* the exact sums go after backward, in one operation */
        return 0;
    t->ar = ar;
    t->timeout_ms = timeout_ms;
    /* the hooks themselves are set per step (trainer_forward_backward) */
    return model_set_grad_queue(t->m, NULL, NULL, NULL);
}

int trainer_forward_backward(trainer_t *t, const trainer_batch_t *b, float *loss, float *logits,
                             char *err, size_t errlen)
{
    if (b->n < 0 || (uint32_t)b->n > b->global_count) {
        err_set(err, errlen, "step %llu: %d samples here but global_count %u (loaderd bug?)",
                (unsigned long long)b->step, b->n, b->global_count);
        return -1;
    }
    if (save_buffers(t, err, errlen) < 0)
        return -1;
    t->mirror_failed = 0;
    t->found_inf = 0;
    model_step_t s = {.global_batch = b->global_count ? (int)b->global_count : 1,
                      .label_smoothing = t->cfg.label_smoothing,
                      .loss_scale = t->cfg.loss_scale > 0 ? t->ls.scale : 0, .seed = t->cfg.seed,
                      .step = b->step, .ids = (const int64_t *)b->ids,
                      .chunk = t->cfg.chunk, .chunk_sizes = b->chunk_sizes,
                      .n_chunks = b->n_chunks, .topk = b->topk, .k = b->k};
    if (t->exact)
        grad_exact_begin(t->exact);
    static const uint8_t none = 0;
    /* overlap: buckets go over the host ring while backward runs (an empty
     * shard's zeros are all-reduced by trainer_reduce, in the same bucket
     * operations); dev: to NCCL. Either way through the model's grad queue
     * (mark, then flush once the marked gradients' kernels are queued), so
     * the step may still be recorded and replayed (tape_pass.c: in
     * segments, the flushes between them). */
    int overlap = t->ar && !t->dsum && b->n > 0 && allreduce_world(t->ar) > 1;
    int dev = dev_overlap(t);   /* an empty shard queues its zeros in trainer_reduce */
    int queue = (dev || overlap) && b->n > 0;
    if (t->ar && model_set_grad_queue(t->m, queue ? on_grad_mark : NULL, on_grad_flush,
                                      t) < 0) {
        err_set(err, errlen, "the model refuses the gradient hook (not opened for training?)");
        return -1;
    }
    if (overlap && !buckets_active(t->bk) &&
        (grad_ptrs(t, err, errlen) < 0 ||
         buckets_begin(t->bk, arena_mirror_at(&t->hg, 0), t->ar, t->timeout_ms, 1, err,
                       errlen) < 0))
        return -1;
    if (dev || overlap) {
        if (grad_ptrs(t, err, errlen) < 0 ||
            (!t->bi && !(t->bi = bucket_issue_new(t->bk, err, errlen))))
            return -1;
        if (dev && !t->dev_logged)
            log_info("the gradients go to the device collective in %d bucket%s, each queued "
                     "while backward runs", buckets_count(t->bk),
                     buckets_count(t->bk) == 1 ? "" : "s");
        t->dev_logged |= dev;
        t->q_failed = 0;
        bucket_issue_begin(t->bi, t->grads->base, dev ? dev_enqueue : ring_enqueue, t);
    }
    int rc = model_train_begin_u8(t->m, b->pixels ? b->pixels : &none, b->n, b->c, b->h, b->w,
                                  b->mean, b->std, b->labels, &s, loss, logits, err, errlen);
    /* the step runs: the next one's batch may go meanwhile; not while
     * buckets are summed over the host ring on their thread, whose cancel
     * callback reads the caller's sockets and state (trainer_set_overlap) */
    if (rc == 0 && b->ahead && !overlap)
        b->ahead(b->ahead_ctx);
    if (rc == 0)
        rc = model_train_end(t->m, err, errlen);
    if (rc < 0) {
        buckets_abort(t->bk);
        if (t->bi)
            bucket_issue_abort(t->bi);
    }
    return rc;
}

/* Bitwise training: the exact sums over the ranks, rounded once; over
 * NCCL (dsum) where the device made them, else over the ring ar; then
 * ghost BatchNorm's running statistics, the step's only other collective. */
static int reduce_exact(trainer_t *t, allreduce_t *ar, int timeout_ms, char *err,
                        size_t errlen)
{
    if (t->mirror_failed) {
        err_set(err, errlen, "cannot copy a chunk's gradients to the host for the exact sums "
                "(reading the %s arena failed)", t->grads->ops->name);
        return -1;
    }
    if (t->dsum && !t->break_exact) {
        bk_xsum_coll_t c = {t->dsum->max_u32, t->dsum->sum_i64, t->dsum_ctx, timeout_ms};
        if (grad_exact_reduce_device(t->exact, &c, err, errlen) < 0)
            return -1;
    } else if (grad_exact_reduce(t->exact, t->break_exact ? NULL : ar, timeout_ms, err,
                                 errlen) < 0) {
        return -1;
    } else if (t->hg.copy && arena_mirror_push(&t->hg, 0, t->grad_floats) < 0) {
        err_set(err, errlen, "cannot write the exact gradient sums to the %s arena",
                t->grads->ops->name);
        return -1;
    }
    struct xsum *run = model_running_sums(t->m);
    return (run && xsum_allreduce(run, ar, timeout_ms, err, errlen) < 0) ||
                   model_running_apply(t->m, err, errlen) < 0
               ? -1
               : 0;
}

/* The buckets in flight (overlap) finish; without overlap, every bucket
 * runs here. Either way the same ring operations: one allreduce_sum_range
 * per bucket of the grads arena, in place, summing each float as one
 * allreduce_sum of the arena would. On a device arena they sum its host
 * mirror (each gradient copied there as it became final, or all of it
 * here), written back after; a ring of one rank sums nothing: no copies. */
int trainer_reduce(trainer_t *t, allreduce_t *ar, int timeout_ms, char *err, size_t errlen)
{
    if (t->exact && reduce_exact(t, ar, timeout_ms, err, errlen) < 0)
        return -1;
    if (t->exact && !t->break_exact)
        return 0;   /* the test's break: this rank's sum, then floats over the ring */
    if (t->dsum && t->bi && bucket_issue_active(t->bi)) {   /* NCCL: buckets queued */
        if (t->q_failed) {
            bucket_issue_abort(t->bi);
            err_set(err, errlen, "%s", t->q_err);
            return -1;
        }
        if (bucket_issue_finish(t->bi, err, errlen) < 0)
            return -1;
        return t->dsum->wait(t->dsum_ctx, timeout_ms, err, errlen);
    }
    if (t->dsum && !buckets_active(t->bk))   /* NCCL: the arena on the device, one sum */
        return grad_ptrs(t, err, errlen) < 0 ? -1
               : t->dsum->sum(t->dsum_ctx, t->grads->base, t->grad_floats, timeout_ms, err,
                              errlen);
    int mirror = t->hg.copy && allreduce_world(ar) > 1;
    if (!buckets_active(t->bk)) {
        if (grad_ptrs(t, err, errlen) < 0)
            return -1;
        if (mirror && !arena_mirror_pull(&t->hg, 0, t->grad_floats)) {
            err_set(err, errlen, "cannot copy the gradients to the host for the all-reduce "
                    "(reading the %s arena failed)", t->grads->ops->name);
            return -1;
        }
        if (buckets_begin(t->bk, arena_mirror_at(&t->hg, 0), ar, timeout_ms, 0, err,
                          errlen) < 0)
            return -1;
    }
    /* the ring's buckets not handed over during backward (their copies to
     * the host mirror), then those the hook did not see */
    if (t->bi && bucket_issue_active(t->bi) && bucket_issue_finish(t->bi, err, errlen) < 0) {
        buckets_abort(t->bk);
        return -1;
    }
    if (buckets_end(t->bk, err, errlen) < 0)
        return -1;
    if (t->mirror_failed) {
        err_set(err, errlen, "a gradient's copy to the host for the all-reduce failed "
                "(reading the %s arena)", t->grads->ops->name);
        return -1;
    }
    if (mirror && arena_mirror_push(&t->hg, 0, t->grad_floats) < 0) {
        err_set(err, errlen, "cannot write the summed gradients back to the %s arena",
                t->grads->ops->name);
        return -1;
    }
    return 0;
}

/* The first non-finite float of arena a (one scan, wherever it lives),
 * named by the tensor holding it: *name_at(ctx, i, &lo, &n) gives tensor
 * i's range, for i = 0, 1, ... until it returns NULL. */
typedef const char *(*range_fn)(const trainer_t *t, int i, size_t *lo, size_t *n);

static int arena_finite(const trainer_t *t, const bk_arena_t *a, range_fn range,
                        const char *what, char *err, size_t errlen)
{
    int64_t at = -1;
    if (bk_arena_scan(a, 0, a->floats, &at) < 0) {
        err_set(err, errlen, "%s: scanning the %s arena for non-finite values failed", what,
                a->ops->name);
        return -1;
    }
    if (at < 0)
        return 0;
    const char *name;
    size_t lo = 0, n = 0;
    for (int i = 0; (name = range(t, i, &lo, &n)) != NULL; i++)
        if ((size_t)at >= lo && (size_t)at - lo < n) {
            char bad[256];
            bk_arena_check(a, lo, n, name, bad, sizeof bad);
            err_set(err, errlen, "%s %s", what, bad);
            return -1;
        }
    err_set(err, errlen, "%s: element %lld of the %s arena is not finite (between tensors)",
            what, (long long)at, a->ops->name);
    return -1;
}

static const char *grad_range(const trainer_t *t, int i, size_t *lo, size_t *n)
{
    if (i >= t->ng)
        return NULL;
    size_t hi;
    buckets_grad_range(t->bk, i, lo, &hi);
    *n = hi - *lo;
    return optim_param_name(t->opt, i);
}

static const char *param_range(const trainer_t *t, int i, size_t *lo, size_t *n)
{
    model_param_t p;
    if (i >= model_param_count(t->m) || model_param_at(t->m, i, &p) < 0)
        return NULL;
    *lo = p.offset;
    *n = p.numel;
    return p.name;
}

int trainer_check_grads(const trainer_t *t, char *err, size_t errlen)
{
    return arena_finite(t, t->grads, grad_range, "the summed gradient", err, errlen);
}

int trainer_check_params(const trainer_t *t, char *err, size_t errlen)
{
    return arena_finite(t, t->params, param_range, "the parameter", err, errlen);
}

/* --verbose: what the step moved between host and backend memory. */
static void log_traffic(trainer_t *t)
{
    const bk_traffic_t *now = model_traffic(t->m);
    if (log_verbose())
        log_debug("step bytes host<->backend (%s arenas): batch in %llu, out %llu, "
                  "parameters/gradients %llu, bn %llu", t->params->ops->name,
                  (unsigned long long)(now->batch_in - t->logged.batch_in),
                  (unsigned long long)(now->out - t->logged.out),
                  (unsigned long long)(now->params - t->logged.params),
                  (unsigned long long)(now->bn - t->logged.bn));
    t->logged = *now;
}

int trainer_unscale(trainer_t *t, char *err, size_t errlen)
{
    if (t->cfg.loss_scale <= 0)
        return 0;
    const bk_arena_t *a = t->grads;
    int64_t at = -1;
    if (bk_arena_scan(a, 0, a->floats, &at) < 0) {
        err_set(err, errlen, "fp16 loss scaling: scanning the %s gradient arena failed",
                a->ops->name);
        return -1;
    }
    if (at >= 0) {
        t->found_inf = 1;
        return 1;
    }
    if (bk_arena_scale(a, 0, a->floats, 1.0f / t->ls.scale) < 0) {   /* exact: 2^-k */
        err_set(err, errlen, "fp16 loss scaling: unscaling the %s gradient arena failed",
                a->ops->name);
        return -1;
    }
    return 0;
}

const loss_scale_t *trainer_loss_scale(const trainer_t *t)
{
    return t->cfg.loss_scale > 0 ? &t->ls : NULL;
}

int trainer_step_skipped(const trainer_t *t)
{
    return t->found_inf;
}

double trainer_apply(trainer_t *t, int epoch, uint32_t global_count)
{
    double lr = trainer_lr(t, epoch);
    if (global_count > 0 && !t->found_inf)
        optim_step(t->opt, lr);
    if (global_count > 0 && t->cfg.loss_scale > 0) {
        float was = t->ls.scale;
        loss_scale_update(&t->ls, t->found_inf);
        if (t->found_inf)
            log_info("fp16: non-finite gradients at loss scale %g: step skipped (%lld so "
                     "far), the scale is now %g", (double)was, (long long)t->ls.skipped,
                     (double)t->ls.scale);
        else if (t->ls.scale != was)
            log_info("fp16: %lld finite steps: the loss scale grows to %g",
                     (long long)t->ls.interval, (double)t->ls.scale);
    }
    log_traffic(t);
    return lr;
}

/* ------------------------------------------------------- checkpoints */

/* The model's tensors as checkpoint entries (F32 params/buffers in the
 * params arena's host mirror, pulled first; I64 counters); *n set. NULL
 * with err (out of memory, a device read that failed). */
static ckpt_tensor_t *model_tensors(trainer_t *t, size_t *n, const char *what, char *err,
                                    size_t errlen)
{
    int np = model_param_count(t->m), nc = model_i64_count(t->m);
    if (!arena_mirror_pull(&t->hp, 0, t->params->floats)) {
        err_set(err, errlen, "%s: cannot read the parameters from the %s arena", what,
                t->params->ops->name);
        return NULL;
    }
    ckpt_tensor_t *v = calloc((size_t)(np + nc) + 1, sizeof *v);
    if (!v) {
        err_set(err, errlen, "%s: out of memory", what);
        return NULL;
    }
    size_t k = 0;
    for (int i = 0; i < np; i++) {
        model_param_t p;
        if (model_param_at(t->m, i, &p) < 0)
            continue;
        v[k] = (ckpt_tensor_t){.name = p.name, .dtype = ST_F32, .ndim = p.ndim,
                               .data = arena_mirror_at(&t->hp, p.offset)};
        memcpy(v[k].shape, p.shape, sizeof p.shape);
        k++;
    }
    for (int i = 0; i < nc; i++) {
        model_i64_t c;
        if (model_i64_at(t->m, i, &c) < 0)
            continue;
        v[k++] = (ckpt_tensor_t){.name = c.name, .dtype = ST_I64, .ndim = c.ndim,
                                 .data = c.value};
    }
    *n = k;
    return v;
}

int trainer_save(trainer_t *t, const char *path, const ckpt_info_t *info, char *err,
                 size_t errlen)
{
    return trainer_save_to(t, path, NULL, NULL, info, err, errlen);
}

int trainer_save_to(trainer_t *t, const char *path, uint8_t **image, size_t *len,
                    const ckpt_info_t *info, char *err, size_t errlen)
{
    size_t n = 0;
    ckpt_tensor_t *v = model_tensors(t, &n, path ? path : "training state", err, errlen);
    if (!v)
        return -1;
    ckpt_info_t i = *info;
    snprintf(i.arch, sizeof i.arch, "%s", model_arch(t->m));
    i.seed = t->cfg.seed;
    if (t->cfg.loss_scale > 0) {   /* GradScaler's state travels with the weights */
        i.loss_scale = t->ls.scale;
        i.loss_scale_tracker = t->ls.tracker;
        i.skipped_steps = t->ls.skipped;
    }
    int rc = path ? ckpt_save(path, v, n, t->opt, &i, err, errlen)
                  : ckpt_save_image(image, len, v, n, t->opt, &i, err, errlen);
    free(v);
    return rc;
}

int trainer_load(trainer_t *t, const char *path, ckpt_info_t *info, char *err, size_t errlen)
{
    return trainer_load_from(t, path, NULL, 0, info, err, errlen);
}

int trainer_load_from(trainer_t *t, const char *what, const void *image, size_t len,
                      ckpt_info_t *info, char *err, size_t errlen)
{
    size_t n = 0;
    ckpt_tensor_t *v = model_tensors(t, &n, what, err, errlen);
    if (!v)
        return -1;
    int rc = image ? ckpt_load_image(image, len, what, v, n, t->opt, info, err, errlen)
                   : ckpt_load(what, v, n, t->opt, info, err, errlen);
    free(v);
    if (rc == 0 && info->arch[0] && strcmp(info->arch, model_arch(t->m)) != 0) {
        err_set(err, errlen, "%s: a checkpoint of %s, this gpud runs --model %s", what,
                info->arch, model_arch(t->m));
        ckpt_info_clear(info);
        return -1;
    }
    if (rc == 0 && t->cfg.loss_scale > 0 && info->loss_scale > 0) {
        t->ls.scale = (float)info->loss_scale;
        t->ls.tracker = info->loss_scale_tracker;
        t->ls.skipped = info->skipped_steps;
    }
    if (rc == 0 && arena_mirror_push(&t->hp, 0, t->params->floats) < 0) {
        err_set(err, errlen, "%s: cannot write the parameters to the %s arena", what,
                t->params->ops->name);
        return -1;
    }
    return rc;
}

int trainer_save_weights(trainer_t *t, const char *path, char *err, size_t errlen)
{
    size_t n = 0;
    char sub[512] = "";
    ckpt_tensor_t *v = model_tensors(t, &n, path, sub, sizeof sub);
    st_writer_t *w = v ? st_writer_new() : NULL;
    int rc = v && w ? 0 : -1;
    if (v && !w)
        snprintf(sub, sizeof sub, "out of memory");
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = st_writer_add(w, v[i].name, v[i].dtype, v[i].ndim, v[i].shape, v[i].data, sub,
                           sizeof sub);
    if (rc == 0)
        rc = st_writer_meta(w, "arch", model_arch(t->m), sub, sizeof sub);
    if (rc == 0)
        rc = st_writer_save(w, path, sub, sizeof sub);
    if (rc < 0)
        err_set(err, errlen, "%s: cannot save weights: %s", path, sub);
    st_writer_destroy(&w);
    free(v);
    return rc;
}
