/* tape_bn — training-mode BatchNorm on the tape, and the empty step of a
 * rank without samples (bk_empty_step). */
#include <math.h>
#include <string.h>
#include <stdlib.h>

#include "gpud/bn_math.h"
#include "gpud/tape_priv.h"

/* PyTorch's running-stat update, r = (1 - m) r + m s: running_mean moves
 * towards mean, running_var towards var * var_scale (double arrays of c).
 * The running stats are parameter memory (read and written back through
 * tape_mem on a device arena; o->sync is free for the stage between the
 * forward's all-reduces and its backward). */
int tape_bn_move(bk_graph_t *g, top_t *o, const double *mean, const double *var,
                 double var_scale)
{
    double m = o->bn.momentum;
    size_t c = (size_t)o->bn.c;
    uint64_t *cnt = tape_count_bn(g);
    float *rm = tape_pmem_view(g, o->bn.running_mean, o->sync, c, cnt);
    float *rv = rm ? tape_pmem_view(g, o->bn.running_var, o->sync + c, c, cnt) : NULL;
    if (!rv)
        return -1;
    for (size_t i = 0; i < c; i++) {
        rm[i] = bnm_running(rm[i], mean[i], m, 1.0);
        rv[i] = bnm_running(rv[i], var[i], m, var_scale);
    }
    if (tape_pmem_commit(g, o->bn.running_mean, rm, c, cnt) < 0 ||
        tape_pmem_commit(g, o->bn.running_var, rv, c, cnt) < 0)
        return -1;
    if (o->bn.num_batches)
        *o->bn.num_batches += 1.0f;
    return 0;
}

/* With the batch statistics save_mean / save_var of count samples and the
 * unbiased variance for running_var (staged as doubles in sync_d, free
 * once the statistics are made). */
int tape_bn_running(bk_graph_t *g, top_t *o, size_t count)
{
    double unbias = bnm_unbias((double)count);
    size_t c = (size_t)o->bn.c;
    for (size_t i = 0; i < c; i++) {
        o->sync_d[i] = o->save_mean[i];
        o->sync_d[c + i] = o->save_var[i];
    }
    return tape_bn_move(g, o, o->sync_d, o->sync_d + c, unbias);
}

/* The batch statistics as the kernels take them: parameter memory. */
static float *stat_mean(top_t *o)
{
    return o->stat ? o->stat : o->save_mean;
}

static float *stat_var(top_t *o)
{
    return o->stat ? o->stat + o->bn.c : o->save_var;
}

/* ------------------------------------------- training-mode BatchNorm
 *
 * The batch statistics are computed here, not by the backend's training
 * kernel: two passes with double sums (mean, then sum (x - mean)^2), so that
 * SyncBatchNorm over W ranks and one rank holding the whole batch agree to
 * float rounding, and inputs far from zero mean keep their precision
 * (oneDNN's own training statistics drifted by up to 1e-3 relative on
 * un-normalised activations). Without an all-reduce hook the same code
 * runs with the "all-reduce" of a single rank: nothing. */

/* A BN op's scratch, made on first use. sync_d (double, all-reduced):
 * [0, c] forward sums and the count, or [0, 2c) backward sums (sum dy,
 * sum dy*xhat). sync (float): the eval-mode backward's own sums [0, 2c)
 * and the per-channel a, b and scale the kernels take. */
int tape_bn_scratch(bk_graph_t *g, top_t *o)
{
    if (o->sync)
        return 0;
    size_t c = (size_t)o->bn.c;
    o->sync = malloc(5 * c * sizeof *o->sync);
    o->sync_d = malloc((2 * c + 1) * sizeof *o->sync_d);
    if (o->sync && o->sync_d)
        return 0;
    free(o->sync);
    free(o->sync_d);
    o->sync = NULL;
    o->sync_d = NULL;
    bk_ctx_fail(&g->base, "out of memory");
    return -1;
}

static int sync_call(bk_graph_t *g, double *data, size_t n)
{
    char err[256] = "";
    if (!g->allreduce || g->allreduce(g->allreduce_ctx, data, n, err, sizeof err) == 0)
        return 0;
    bk_ctx_fail(&g->base, "SyncBatchNorm all-reduce of %zu values failed: %s", n,
            err[0] ? err : "no reason given");
    return -1;
}

/* Per-channel sums of x into sync_d (zeros when x is NULL: this rank
 * holds no samples). */
void tape_bn_sums(bk_graph_t *g, top_t *o, const bk_tensor_t *x, const float *center)
{
    int s[4];
    if (x) {
        shape_of(x, s);
        g->k->chan_sums(g->base.be, x->val, s, center, o->sync_d);
    } else {
        memset(o->sync_d, 0, (size_t)o->bn.c * sizeof *o->sync_d);
    }
}

/* The batch statistics (over every rank) into save_mean / save_var:
 * [sum x, count] gives the mean, then sum (x - mean)^2 the biased variance.
 * Returns the global count (0 when no rank had samples: then every rank
 * skips the second all-reduce alike), or -1. */
double tape_bn_stats(bk_graph_t *g, top_t *o, const bk_tensor_t *x)
{
    int c = o->bn.c;
    if (tape_bn_scratch(g, o) < 0)
        return -1;
    tape_bn_sums(g, o, x, NULL);
    o->sync_d[c] = x ? (double)x->n * x->h * x->w : 0.0;
    if (sync_call(g, o->sync_d, (size_t)c + 1) < 0)
        return -1;
    double count = o->sync_d[c];
    o->sync_count = count >= 1.0 ? count : 0.0;
    if (!(count >= 1.0))
        return 0;
    for (int i = 0; i < c; i++)
        o->save_mean[i] = bnm_stat(o->sync_d[i], count);
    tape_bn_sums(g, o, x, o->save_mean);
    if (sync_call(g, o->sync_d, (size_t)c) < 0)
        return -1;
    for (int i = 0; i < c; i++)
        o->save_var[i] = bnm_stat(o->sync_d[i], count);
    return tape_bn_put_stats(g, o) < 0 ? -1 : count;
}

int tape_bn_put_stats(bk_graph_t *g, top_t *o)
{
    size_t c = (size_t)o->bn.c;
    if (o->stat && (tape_pmem_put(g, stat_mean(o), o->save_mean, c, tape_count_bn(g)) < 0 ||
                    tape_pmem_put(g, stat_var(o), o->save_var, c, tape_count_bn(g)) < 0))
        return -1;
    return 0;
}

/* A BatchNorm with the dropout after it fused (tape_fuse.c): normalised
 * with mean/var, its ReLU, the dropout's mask, into y (the dropout's
 * output). */
static int bn_drop_fwd(bk_graph_t *g, top_t *o, const bk_tensor_t *x, const float *mean,
                       const float *var, bk_tensor_t *y)
{
    const top_t *d = o->fwd_drop;
    float p = drop_p(g, d);
    if (p != 0.0f && !tape_dropout_keys(g))   /* made once a step; the kernels read keys_k */
        return -1;
    int s[4];
    shape_of(x, s);
    return g->k->bn_relu_drop(&g->base, o->plan, x->val, s, o->bn.weight, o->bn.bias, mean, var,
                              p, (uint32_t)(d - g->ops), p != 0.0f ? g->keys_k : NULL, y->val);
}

int tape_bn_normalize(bk_graph_t *g, top_t *o, const bk_tensor_t *x, bk_tensor_t *y)
{
    if (o->fwd_res)   /* fused with the residual's add and ReLU (tape_fuse.c) */
        return g->k->bn_add_relu(&g->base, o->plan, x->val, o->bn.weight, o->bn.bias,
                                 stat_mean(o), stat_var(o), o->fwd_res->val, y->val);
    if (o->fwd_drop)
        return bn_drop_fwd(g, o, x, stat_mean(o), stat_var(o), y);
    return g->k->bn_fwd(&g->base, o->plan, 0, x->val, o->bn.weight, o->bn.bias, stat_mean(o),
                        stat_var(o), y->val);
}

/* ------------------------------------------- on the device (bn_on_device) */

/* The output whose value and gradient the backward reads: the op's own,
 * or with a dropout fused after it (tape_fuse.c) the dropout's. */
static const bk_tensor_t *bwd_out(const top_t *o, const bk_tensor_t *y)
{
    return o->fwd_drop ? o->fwd_drop->out : y;
}

/* What the backward kernels get as the op's output y: they read it only
 * for the mask of a ReLU of the op's own (bk_bn_t.relu). Without one any
 * buffer of the shape does, and a BatchNorm fused with the add after it
 * (tape_fuse.c) stores no output at all: its gradient's buffer is given. */
static const void *mask_src(const top_t *o, const bk_tensor_t *y)
{
    return o->bn.relu ? bwd_out(o, y)->val : y->grad;
}

/* The output gradient the backward reads (a fused dropout's) and its
 * factor (bn_grad_sums' gscale: the dropout's 1 / (1 - p), as its
 * backward computes it; else 1). */
static const void *grad_src(const top_t *o, const bk_tensor_t *y)
{
    return bwd_out(o, y)->grad;
}

static float grad_scale(const bk_graph_t *g, const top_t *o)
{
    float p = o->fwd_drop ? drop_p(g, o->fwd_drop) : 0.0f;
    return p != 0.0f ? 1.0f / (1.0f - p) : 1.0f;
}

static bk_bn_train_t dev_args(const top_t *o, const bk_tensor_t *x)
{
    int grads = o->bn.grad_weight != NULL;
    return (bk_bn_train_t){.count = (double)x->n * x->h * x->w,
                           .eps = o->bn.eps,
                           .momentum = o->bn.momentum,
                           .relu = o->bn.relu,
                           .gamma = o->bn.weight,
                           .beta = o->bn.bias,
                           .stat = o->stat,
                           .running_mean = o->bn.running_mean,
                           .running_var = o->bn.running_var,
                           .ggamma = grads ? o->bn.grad_weight : NULL,
                           .gbeta = grads ? o->bn.grad_bias : NULL,
                           .res = o->fwd_res ? o->fwd_res->val : NULL};
}

static int dev_fwd(bk_graph_t *g, top_t *o, const bk_tensor_t *x, bk_tensor_t *y)
{
    int s[4];
    shape_of(x, s);
    bk_bn_train_t t = dev_args(o, x);
    if (g->k->bn_train_fwd(&g->base, o->plan, x->val, s, &t, y->val) < 0)
        return -1;
    o->sync_count = t.count;
    if (o->bn.num_batches)
        *o->bn.num_batches += 1.0f;
    return 0;
}

static int dev_bwd(bk_graph_t *g, top_t *o, const bk_tensor_t *x, const bk_tensor_t *y,
                   void *gx)
{
    int s[4];
    shape_of(x, s);
    bk_bn_train_t t = dev_args(o, x);
    if (o->bwd_relu) {   /* the block end's ReLU backward too (tape_fuse.c) */
        const top_t *r = o->bwd_relu;
        t.relu = 1;
        t.gres = r->in[0]->grad;
        if (r->out->grad_left) {   /* and its output gradient's last term, left in tmp */
            r->out->grad_left = 0;
            if (gx == g->tmp)   /* x's own later term goes there: add it first */
                g->k->acc(g->base.be, r->out->grad, g->tmp, numel(r->out));
            else
                t.gy2 = g->tmp;
        }
        return g->k->bn_train_bwd(&g->base, o->plan, x->val, r->out->val, r->out->grad, s, &t,
                                  gx);
    }
    return g->k->bn_train_bwd(&g->base, o->plan, x->val, mask_src(o, y), y->grad, s, &t, gx);
}

/* Normalising with given statistics is the eval-mode kernel. */
int tape_bn_fwd(bk_graph_t *g, top_t *o, const bk_tensor_t *x, bk_tensor_t *y)
{
    if (bn_on_device(g))
        return dev_fwd(g, o, x, y);
    double count = tape_bn_stats(g, o, x);
    if (count < 0)
        return -1;
    if (tape_bn_normalize(g, o, x, y) < 0)
        return -1;
    return tape_bn_running(g, o, (size_t)count);
}

/* This rank's [sum dy', sum dy' * xhat] into sync_d[0, 2c) (dy' after the
 * fused ReLU's mask); without the backend's bn_grad_sums, the eval-mode
 * backward gives them (as floats) and gx = g * dy'. */
int tape_bn_grad_local(bk_graph_t *g, top_t *o, const bk_tensor_t *x, const bk_tensor_t *y,
                       void *gx)
{
    int c = o->bn.c;
    double *sdy = o->sync_d, *sdyx = o->sync_d + c;
    if (!g->k->bn_grad_sums) {   /* its gamma/beta gradient outputs: parameter memory */
        float *fdy = o->sync, *fdyx = o->sync + c;
        float *pdyx = o->stat ? o->stat + 2 * c : fdyx, *pdy = o->stat ? o->stat + 3 * c : fdy;
        if (g->k->bn_bwd(&g->base, o->plan, 0, x->val, mask_src(o, y), y->grad, o->bn.weight,
                         stat_mean(o), stat_var(o), gx, pdyx, pdy) < 0 ||
            (o->stat && (tape_pmem_get(g, fdyx, pdyx, (size_t)c, tape_count_bn(g)) < 0 ||
                         tape_pmem_get(g, fdy, pdy, (size_t)c, tape_count_bn(g)) < 0)))
            return -1;
        for (int i = 0; i < c; i++) {
            sdy[i] = fdy[i];
            sdyx[i] = fdyx[i];
        }
        return 0;
    }
    int s[4];
    shape_of(x, s);
    g->k->bn_grad_sums(g->base.be, x->val, mask_src(o, y), grad_src(o, y), s, o->bn.relu,
                       grad_scale(g, o), o->save_mean, o->sync_d);
    for (int i = 0; i < c; i++)
        sdyx[i] /= bnm_std(o->save_var[i], o->bn.eps);
    return 0;
}

/* This rank's own gamma/beta gradient sums into the grads arena (through
 * a stage in o->sync[0, 2c) on a device arena). */
int tape_bn_param_grads(bk_graph_t *g, top_t *o)
{
    size_t c = (size_t)o->bn.c;
    const double *sdy = o->sync_d, *sdyx = o->sync_d + c;
    int host = tape_pmem_host(g);
    float *gw = host ? o->bn.grad_weight : o->sync, *gb = host ? o->bn.grad_bias : o->sync + c;
    for (size_t i = 0; i < c; i++) {
        gw[i] = (float)sdyx[i];
        gb[i] = (float)sdy[i];
    }
    return tape_pmem_commit(g, o->bn.grad_weight, gw, c, tape_count_bn(g)) < 0 ||
                   tape_pmem_commit(g, o->bn.grad_bias, gb, c, tape_count_bn(g)) < 0
               ? -1
               : 0;
}

/* Training-mode BN backward over the (global) batch. With k = gamma /
 * sqrt(var + eps) and N the global count,
 *     dx = k * (dy' - sum dy' / N - xhat * sum(dy' * xhat) / N).
 * The sums are all-reduced; gamma/beta get this rank's own sums (the
 * caller all-reduces parameter gradients, as DDP). x NULL: an empty rank. */
int tape_bn_bwd(bk_graph_t *g, top_t *o, const bk_tensor_t *x, const bk_tensor_t *y,
                void *gx)
{
    int c = o->bn.c;
    if (x && bn_on_device(g))
        return dev_bwd(g, o, x, y, gx);
    if (!x)
        memset(o->sync_d, 0, 2 * (size_t)c * sizeof *o->sync_d);
    else if (tape_bn_grad_local(g, o, x, y, gx) < 0)
        return -1;
    if (x && o->bn.grad_weight && tape_bn_param_grads(g, o) < 0)
        return -1;
    if (sync_call(g, o->sync_d, 2 * (size_t)c) < 0)
        return -1;
    return tape_bn_dx(g, o, x, y, gx);
}

int tape_bn_dx(bk_graph_t *g, top_t *o, const bk_tensor_t *x, const bk_tensor_t *y, void *gx)
{
    int c = o->bn.c;
    double *sdy = o->sync_d, *sdyx = o->sync_d + c;
    float *a = o->sync + 2 * c, *b = o->sync + 3 * c, *scale = o->sync + 4 * c;
    if (!x || !gx)
        return 0;
    const float *gamma = tape_pmem_view(g, o->bn.weight, o->sync, (size_t)c, tape_count_bn(g));
    if (!gamma)
        return -1;
    for (int i = 0; i < c; i++)
        bnm_coeffs(gamma[i], o->save_var[i], o->bn.eps, sdy[i], sdyx[i], o->sync_count,
                   &scale[i], &a[i], &b[i]);
    int s[4];
    shape_of(x, s);
    if (g->k->bn_grad_sums && g->k->bn_grad_apply)
        g->k->bn_grad_apply(g->base.be, gx, x->val, mask_src(o, y), grad_src(o, y), s,
                            o->bn.relu, grad_scale(g, o), o->save_mean, scale, a, b);
    else
        g->k->chan_axpb(g->base.be, gx, x->val, s, o->save_mean, a, b);
    return 0;
}

uint64_t tape_bn_copy_plan(const bk_graph_t *g, const top_t *o, int backward)
{
    uint64_t c = (uint64_t)o->bn.c, f4 = sizeof(float);
    if (!bn_training(g, o))
        return 0;   /* the kernels read the arena's running stats in place */
    /* the statistics put (2c), the running stats read and written (4c) */
    uint64_t b = 6 * c * f4;
    if (backward)   /* gamma/beta gradients put (2c), gamma read for dx (c) */
        b += (o->bn.grad_weight ? 2 * c * f4 : 0) + (o->in[0]->needs_grad ? c * f4 : 0);
    return b;
}

int bk_empty_step(bk_graph_t *g, bk_tensor_t *y)
{
    if (!g || g->base.failed || !y || tape_ready(g) < 0)
        return -1;
    if (!g->allreduce)
        return 0;
    if (!y->needs_grad) {
        bk_ctx_fail(&g->base, "backward from a tensor that depends on no parameter");
        return -1;
    }
    for (size_t i = 0; i < g->nops; i++) {   /* as bk_forward */
        top_t *o = &g->ops[i];
        if (o->kind != TO_BN || !bn_training(g, o))
            continue;
        bk_ctx_set_name(&g->base, o->name);
        double count = tape_bn_stats(g, o, NULL);
        if (count < 0)
            return -1;
        if (count >= 1.0 && tape_bn_running(g, o, (size_t)count) < 0)
            return -1;
    }
    for (int i = y->producer; i >= 0; i--) {   /* as bk_backward */
        top_t *o = &g->ops[i];
        if (!o->out->needs_grad || o->kind != TO_BN || !bn_training(g, o))
            continue;
        bk_ctx_set_name(&g->base, o->name);
        if (tape_bn_bwd(g, o, NULL, o->out, NULL) < 0)
            return -1;
    }
    return 0;
}
