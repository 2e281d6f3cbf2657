/* backend_train — the tape, the graph engine (backend.h, bk_*): the graph,
 * its builders (shape checks, parameters bound), the compile step's choice
 * and the host side of execution (writes, reads, labels, the dropout
 * stream). Building only records; bk_graph_compile picks which ops run:
 * the inference plan's fused ops (graph_plan.c) or the recorded ones, both
 * planned by tape_compile.c on the backend's kernels (bk_kernels_t), so a
 * new backend only writes kernels. The forward is tape_forward.c's, the
 * backward tape_backward.c's, training-mode BatchNorm tape_bn.c's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/xsum.h"
#include "gpud/dropout_key.h"
#include "gpud/tape_priv.h"

/* be NULL: a description graph (builders check shapes and bind parameters,
 * nothing is planned or allocated, nothing runs). */
bk_graph_t *bk_graph_new(backend_t *be)
{
    bk_graph_t *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->base.be = be;
    g->k = g->k32 = be ? be->ops->train : NULL;
    g->training = 1;
    g->profile = getenv("DDPIPE_TRAIN_PROFILE") != NULL;
    if (be && !g->k)
        bk_ctx_fail(&g->base, "backend '%s' cannot train", be->ops->name);
    return g;
}

void bk_graph_destroy(bk_graph_t **gp)
{
    if (!gp || !*gp)
        return;
    bk_graph_t *g = *gp;
    for (int k = 0; g->profile && k <= TO_CE; k++)
        if (g->prof[0][k] + g->prof[1][k] > 0)
            log_info("train profile %-8s forward %8.3f s  backward %8.3f s", top_kind_name(k),
                     g->prof[0][k], g->prof[1][k]);
    tape_timer_report(g);
    tape_release(g);
    xsum_destroy(&g->xrun);
    plan_fused_drop(g);
    for (size_t i = 0; i < g->nv; i++)
        free(g->v[i]);
    free(g->v);
    free(g->ops);
    free(g->labels);
    free(g->ids);
    free(g->keys);
    if (g->k) {   /* the step buffers outlive a recompile (tape_release) */
        g->k32->release(g->base.be, g->labels_buf);
        g->k32->release(g->base.be, g->keys_buf);
    }
    free(g);
    *gp = NULL;
}

void bk_graph_set_training(bk_graph_t *g, int training)
{
    if (g)
        g->training = training != 0;
}

void bk_graph_set_forward_only(bk_graph_t *g)
{
    if (g && g->nv == 0)
        g->forward_only = 1;
    else if (g)
        bk_ctx_fail(&g->base, "bk_graph_set_forward_only after the first builder");
}

void bk_graph_set_dropout(bk_graph_t *g, int enabled)
{
    if (g)
        g->no_dropout = !enabled;
}

void bk_graph_set_allreduce(bk_graph_t *g, bk_allreduce_fn fn, void *ctx)
{
    if (!g)
        return;
    g->allreduce = fn;
    g->allreduce_ctx = fn ? ctx : NULL;
}

void bk_graph_set_grad_ready(bk_graph_t *g, bk_grad_ready_fn fn, void *ctx)
{
    if (!g)
        return;
    g->grad_ready = fn;
    g->grad_ready_ctx = fn ? ctx : NULL;
}

void bk_graph_set_grad_queue(bk_graph_t *g, bk_grad_mark_fn mark, bk_grad_flush_fn flush,
                             void *ctx)
{
    if (!g)
        return;
    g->grad_mark = mark && flush ? mark : NULL;
    g->grad_flush = g->grad_mark ? flush : NULL;
    g->grad_queue_ctx = g->grad_mark ? ctx : NULL;
}

void bk_graph_set_traffic(bk_graph_t *g, bk_traffic_t *t)
{
    if (g)
        g->traffic = t;
}

void bk_tensor_dims(const bk_tensor_t *t, int *n, int *c, int *h, int *w)
{
    *n = t->n;
    *c = t->c;
    *h = t->h;
    *w = t->w;
}

/* ------------------------------------------------------------- building */

/* Records a var of shape s; its buffers come with the compile step. */
static bk_tensor_t *var_new(bk_graph_t *g, const int s[4], int needs_grad)
{
    if (g->forward_only)
        needs_grad = 0;
    if (g->nv == g->capv) {
        size_t cap = g->capv ? 2 * g->capv : 64;
        bk_tensor_t **v = realloc(g->v, cap * sizeof *v);
        if (!v)
            return bk_ctx_fail(&g->base, "out of memory");
        g->v = v;
        g->capv = cap;
    }
    bk_tensor_t *t = calloc(1, sizeof *t);
    if (!t)
        return bk_ctx_fail(&g->base, "out of memory");
    *t = (bk_tensor_t){.n = s[0], .c = s[1], .h = s[2], .w = s[3], .id = (int)g->nv,
                     .needs_grad = needs_grad, .producer = -1};
    g->v[g->nv++] = t;
    return t;
}

/* A new op with inputs in[0..nin); its output is made by the caller. */
static top_t *op_new(bk_graph_t *g, top_kind_t kind, bk_tensor_t *const *in, int nin)
{
    if (g->nops == g->capops) {
        size_t cap = g->capops ? 2 * g->capops : 64;
        top_t *o = realloc(g->ops, cap * sizeof *o);
        if (!o)
            return bk_ctx_fail(&g->base, "out of memory");
        g->ops = o;
        g->capops = cap;
    }
    top_t *o = &g->ops[g->nops];
    memset(o, 0, sizeof *o);
    o->kind = kind;
    o->nin = nin;
    memcpy(o->in, in, (size_t)nin * sizeof *in);
    snprintf(o->name, sizeof o->name, "%s", g->base.name);
    return o;
}

/* Make op's output of shape s and commit the op. */
static bk_tensor_t *op_out(bk_graph_t *g, top_t *o, const int s[4], int param_grads)
{
    int ng = param_grads;
    for (int i = 0; i < o->nin; i++)
        ng |= o->in[i]->needs_grad;
    bk_tensor_t *y = var_new(g, s, ng);
    if (!y)
        return NULL;
    y->producer = (int)g->nops;
    o->out = y;
    g->nops++;
    return y;
}

/* Builders run on a healthy graph that has not run yet: the compile step
 * planned (or fused) exactly the ops recorded before it. */
static int building(bk_graph_t *g)
{
    if (!g || g->base.failed)
        return 0;
    if (g->compiled) {
        bk_ctx_fail(&g->base, "builder after the graph was compiled (its first write, forward "
                "or read): record every op first");
        return 0;
    }
    return 1;
}

static int usable(bk_graph_t *g, const bk_tensor_t *x)
{
    if (!building(g))
        return 0;
    if (!x) {
        bk_ctx_fail(&g->base, "missing input tensor (an earlier step failed?)");
        return 0;
    }
    return 1;
}

bk_tensor_t *bk_input(bk_graph_t *g, int n, int c, int h, int w, int requires_grad)
{
    if (!building(g))
        return NULL;
    if (n < 1 || c < 1 || h < 1 || w < 1 || (long long)n * c * h * w > (1ll << 31))
        return bk_ctx_fail(&g->base, "bad input shape [%d,%d,%d,%d]", n, c, h, w);
    int s[4] = {n, c, h, w};
    bk_tensor_t *t = var_new(g, s, requires_grad != 0);
    if (t)
        t->is_input = 1;
    if (t && !g->batch)
        g->batch = n;
    return t;
}

static int out_size(int in, int k, int stride, int pad)
{
    int span = in + 2 * pad - k;
    return span < 0 ? 0 : span / stride + 1;
}

bk_tensor_t *bk_conv2d(bk_graph_t *g, bk_tensor_t *x, const bk_conv_t *p)
{
    if (!usable(g, x))
        return NULL;
    if (!p || !p->weight || p->ic != x->c || p->oc < 1 || p->kh < 1 || p->kw < 1 ||
        p->stride_h < 1 || p->stride_w < 1 || p->pad_h < 0 || p->pad_w < 0 ||
        p->pad_h >= p->kh || p->pad_w >= p->kw || (p->grad_bias && !p->bias))
        return bk_ctx_fail(&g->base, "bad conv: ic %d (input has %d), oc %d, kernel %dx%d, "
                       "stride %dx%d, pad %dx%d", p ? p->ic : 0, x->c, p ? p->oc : 0,
                       p ? p->kh : 0, p ? p->kw : 0, p ? p->stride_h : 0,
                       p ? p->stride_w : 0, p ? p->pad_h : 0, p ? p->pad_w : 0);
    int out[4] = {x->n, p->oc, out_size(x->h, p->kh, p->stride_h, p->pad_h),
                  out_size(x->w, p->kw, p->stride_w, p->pad_w)};
    if (out[2] < 1 || out[3] < 1)
        return bk_ctx_fail(&g->base, "input %dx%d too small for a %dx%d kernel", x->h, x->w,
                       p->kh, p->kw);
    top_t *o = op_new(g, TO_CONV, &x, 1);
    if (!o)
        return NULL;
    o->conv = *p;
    return op_out(g, o, out, p->grad_weight || p->grad_bias);
}

bk_tensor_t *bk_batchnorm(bk_graph_t *g, bk_tensor_t *x, const bk_bn_t *p)
{
    if (!usable(g, x))
        return NULL;
    if (!p || p->c != x->c || !p->weight || !p->bias || !p->running_mean ||
        !p->running_var || !(p->eps > 0.0f) || !(p->momentum >= 0.0f && p->momentum <= 1.0f) ||
        (p->grad_weight == NULL) != (p->grad_bias == NULL))
        return bk_ctx_fail(&g->base, "bad batchnorm: %d channels (input has %d), eps %g, "
                       "momentum %g, all four arrays needed, gradients both or neither",
                       p ? p->c : 0, x->c, p ? (double)p->eps : 0.0,
                       p ? (double)p->momentum : 0.0);
    int s[4];
    shape_of(x, s);
    top_t *o = op_new(g, TO_BN, &x, 1);
    if (!o)
        return NULL;
    o->bn = *p;
    return op_out(g, o, s, p->grad_weight != NULL);
}

bk_tensor_t *bk_relu(bk_graph_t *g, bk_tensor_t *x)
{
    if (!usable(g, x))
        return NULL;
    int s[4];
    shape_of(x, s);
    top_t *o = op_new(g, TO_RELU, &x, 1);
    return o ? op_out(g, o, s, 0) : NULL;
}

bk_tensor_t *bk_pool2d(bk_graph_t *g, bk_tensor_t *x, const bk_pool_t *p)
{
    if (!usable(g, x))
        return NULL;
    if (!p || p->kh < 1 || p->kw < 1 || p->stride_h < 1 || p->stride_w < 1 || p->pad_h < 0 ||
        p->pad_w < 0 || 2 * p->pad_h > p->kh || 2 * p->pad_w > p->kw ||
        (unsigned)p->alg > BK_POOL_AVG_EXCLUDE_PAD)
        return bk_ctx_fail(&g->base, "bad pooling parameters (pad must be at most half the kernel)");
    int out[4] = {x->n, x->c, out_size(x->h, p->kh, p->stride_h, p->pad_h),
                  out_size(x->w, p->kw, p->stride_w, p->pad_w)};
    if (out[2] < 1 || out[3] < 1)
        return bk_ctx_fail(&g->base, "input %dx%d too small for a %dx%d pooling window", x->h,
                       x->w, p->kh, p->kw);
    top_t *o = op_new(g, TO_POOL, &x, 1);
    if (!o)
        return NULL;
    o->pool = *p;
    return op_out(g, o, out, 0);
}

bk_tensor_t *bk_global_avg_pool(bk_graph_t *g, bk_tensor_t *x)
{
    if (!usable(g, x))
        return NULL;
    bk_pool_t p = {BK_POOL_AVG, x->h, x->w, x->h, x->w, 0, 0};
    return bk_pool2d(g, x, &p);
}

bk_tensor_t *bk_flatten(bk_graph_t *g, bk_tensor_t *x)
{
    if (!usable(g, x))
        return NULL;
    int s[4] = {x->n, x->c * x->h * x->w, 1, 1};
    top_t *o = op_new(g, TO_FLATTEN, &x, 1);
    return o ? op_out(g, o, s, 0) : NULL;
}

bk_tensor_t *bk_linear(bk_graph_t *g, bk_tensor_t *x, int out_features, float *weight,
                       float *grad_weight, float *bias, float *grad_bias)
{
    if (!usable(g, x))
        return NULL;
    if (out_features < 1 || !weight || (grad_bias && !bias))
        return bk_ctx_fail(&g->base, "bad linear layer: %d outputs, weight %s", out_features,
                       weight ? "given" : "missing");
    int out[4] = {x->n, out_features, 1, 1};
    top_t *o = op_new(g, TO_LINEAR, &x, 1);
    if (!o)
        return NULL;
    o->lin_out = out_features;
    o->w = weight;
    o->gw = grad_weight;
    o->b = bias;
    o->gb = grad_bias;
    return op_out(g, o, out, grad_weight || grad_bias);
}

bk_tensor_t *bk_add(bk_graph_t *g, bk_tensor_t *a, bk_tensor_t *b)
{
    if (!usable(g, a) || !usable(g, b))
        return NULL;
    if (a->n != b->n || a->c != b->c || a->h != b->h || a->w != b->w)
        return bk_ctx_fail(&g->base, "add of different shapes [%d,%d,%d,%d] and [%d,%d,%d,%d]",
                       a->n, a->c, a->h, a->w, b->n, b->c, b->h, b->w);
    int s[4];
    shape_of(a, s);
    bk_tensor_t *in[2] = {a, b};
    top_t *o = op_new(g, TO_ADD, in, 2);
    return o ? op_out(g, o, s, 0) : NULL;
}

bk_tensor_t *bk_concat(bk_graph_t *g, int k, bk_tensor_t *const *xs)
{
    if (!building(g))
        return NULL;
    if (k < 1 || k > MAX_IN || !xs)
        return bk_ctx_fail(&g->base, "concat of %d tensors (1..%d)", k, MAX_IN);
    int s[4];
    for (int i = 0; i < k; i++) {
        if (!usable(g, xs[i]))
            return NULL;
        if (xs[i]->n != xs[0]->n || xs[i]->h != xs[0]->h || xs[i]->w != xs[0]->w)
            return bk_ctx_fail(&g->base, "concat: tensor %d is [%d,%d,%d,%d], tensor 0 is "
                           "[%d,%d,%d,%d] (all but channels must agree)", i, xs[i]->n,
                           xs[i]->c, xs[i]->h, xs[i]->w, xs[0]->n, xs[0]->c, xs[0]->h,
                           xs[0]->w);
    }
    shape_of(xs[0], s);
    s[1] = 0;
    for (int i = 0; i < k; i++)
        s[1] += xs[i]->c;
    top_t *o = op_new(g, TO_CONCAT, xs, k);
    return o ? op_out(g, o, s, 0) : NULL;
}

bk_tensor_t *bk_dropout(bk_graph_t *g, bk_tensor_t *x, float p)
{
    if (!usable(g, x))
        return NULL;
    if (!(p >= 0.0f && p < 1.0f))
        return bk_ctx_fail(&g->base, "dropout probability %g outside [0, 1)", (double)p);
    int s[4];
    shape_of(x, s);
    top_t *o = op_new(g, TO_DROPOUT, &x, 1);
    if (!o)
        return NULL;
    o->p = p;
    return op_out(g, o, s, 0);
}

bk_tensor_t *bk_softmax_ce(bk_graph_t *g, bk_tensor_t *x, float label_smoothing)
{
    if (!usable(g, x))
        return NULL;
    if (x->h != 1 || x->w != 1)
        return bk_ctx_fail(&g->base, "cross-entropy wants (n, classes, 1, 1) logits, got "
                       "[%d,%d,%d,%d]", x->n, x->c, x->h, x->w);
    if (!(label_smoothing >= 0.0f && label_smoothing <= 1.0f))
        return bk_ctx_fail(&g->base, "label smoothing %g outside [0, 1]", (double)label_smoothing);
    if (g->label_n && g->label_n != x->n)
        return bk_ctx_fail(&g->base, "a second cross-entropy with another batch size");
    int s[4] = {x->n, 1, 1, 1};
    top_t *o = op_new(g, TO_CE, &x, 1);
    if (!o)
        return NULL;
    o->p = label_smoothing;
    if (!g->labels && !(g->labels = calloc((size_t)x->n, sizeof *g->labels)))
        return bk_ctx_fail(&g->base, "out of memory");
    g->label_n = x->n;
    bk_tensor_t *y = op_out(g, o, s, 0);
    if (y)
        y->needs_grad = x->needs_grad;
    return y;
}

/* ------------------------------------------------------------- execution */

/* bf16 and fp16 inference run on the fused plan where the backend says so
 * (BatchNorm folded, 16-bit activations: docs/BF16.md "bf16 inference
 * plan", docs/FP16.md "The inference plan"); DDPIPE_BF16_EVAL=tape and
 * DDPIPE_FP16_EVAL=tape (read when the graph compiles: its first forward)
 * keep autocast's exact rounding points (conv, round, BatchNorm, round) on
 * the recorded ops, as does a backend without. */
static int plan_wanted(const bk_graph_t *g)
{
    if (!g->half)
        return 1;
    int fp16 = g->half_fmt == BK_HALF_FP16;
    const char *e = getenv(fp16 ? "DDPIPE_FP16_EVAL" : "DDPIPE_BF16_EVAL");
    return (g->base.be->ops->caps & (fp16 ? BK_CAP_FUSED_FP16 : BK_CAP_FUSED_BF16)) &&
           !(e && strcmp(e, "tape") == 0);
}

/* A forward-only eval-mode graph runs as its inference graph (fused ops)
 * when every op has a fused form (graph_plan.c), else, as any other, its
 * recorded ops. The choice is made once, here. */
int bk_graph_compile(bk_graph_t *g)
{
    if (!g || g->base.failed)
        return -1;
    if (g->compiled)
        return 0;
    if (!g->k) {
        bk_ctx_set_name(&g->base, NULL);
        bk_ctx_fail(&g->base, "a description graph (bk_graph_new(NULL)) has no backend: it "
                "cannot run");
        return -1;
    }
    g->half = g->base.be->precision != BK_FP32;
    g->half_fmt = g->base.be->precision == BK_FP16 ? BK_HALF_FP16 : BK_HALF_BF16;
    if (g->forward_only && !g->training && plan_wanted(g)) {
        char why[256] = "";
        int rc = plan_fused_build(g, why, sizeof why);
        if (rc < 0)
            return -1;
        log_debug("graph: inference %s (%s): %s", rc ? "plan" : "on the tape",
                  backend_precision_name(g->base.be), why);
    } else if (g->half) {
        log_debug("graph: %s on the tape: %s", g->forward_only ? "inference" : "training",
                  backend_precision_name(g->base.be));
    }
    return tape_compile(g);
}

int tape_ready(bk_graph_t *g)
{
    if (bk_graph_compile(g) < 0)
        return -1;
    if (g->fops && g->training)
        return plan_fused_leave(g);
    if (g->fops && g->fused_stale)
        return plan_refold(g);
    return 0;
}

int bk_graph_fused(const bk_graph_t *g)
{
    return g && g->fops && !g->training;
}

void bk_graph_reload(bk_graph_t *g)
{
    if (g && g->fops)
        g->fused_stale = 1;
}

int bk_write(bk_graph_t *g, bk_tensor_t *x, const float *src)
{
    if (!g || g->base.failed || !x || !src || bk_graph_compile(g) < 0)
        return -1;
    if (!x->is_input) {
        bk_ctx_fail(&g->base, "only input tensors can be written");
        return -1;
    }
    int s[4];
    shape_of(x, s);
    return tape_kv(g, x)->write(&g->base, x->val, src, s, x->layout);
}

int bk_write_u8(bk_graph_t *g, bk_tensor_t *x, const uint8_t *px, const float *lut)
{
    if (!g || g->base.failed || !x || !px || !lut || bk_graph_compile(g) < 0)
        return -1;
    if (!x->is_input) {
        bk_ctx_fail(&g->base, "only input tensors can be written");
        return -1;
    }
    if (!tape_kv(g, x)->write_u8)
        return 1;
    int s[4];
    shape_of(x, s);
    return tape_kv(g, x)->write_u8(&g->base, x->val, px, lut, s, x->layout);
}

int bk_u8_on_host(bk_graph_t *g, const uint8_t *px, size_t bytes)
{
    if (!g || g->base.failed)
        return -1;
    char err[512];
    if (backend_decode_host(g->base.be, px, bytes, err, sizeof err) == 0)
        return 0;
    bk_ctx_fail(&g->base, "%s", err);
    return -1;
}

int bk_read(bk_graph_t *g, bk_tensor_t *x, float *dst)
{
    if (!g || g->base.failed || !x || !dst || bk_graph_compile(g) < 0)
        return -1;
    const bk_tensor_t *v = x->alias ? x->alias : x;   /* a fused dropout's, flatten's */
    if (g->fops && (!v->val || v->consumed)) {
        bk_ctx_fail(&g->base, "tensor [%d,%d,%d,%d] was fused away by the inference plan (a "
                "fused graph keeps only what its fused ops compute)", x->n, x->c, x->h, x->w);
        return -1;
    }
    if (v->no_val) {
        bk_ctx_fail(&g->base, "tensor [%d,%d,%d,%d] was fused away: its reader's forward "
                "computes it in the same pass (bk_keep it before compiling, or "
                "DDPIPE_TRAIN_FUSE=0)", x->n, x->c, x->h, x->w);
        return -1;
    }
    if (x->pooled) {
        bk_ctx_fail(&g->base, "tensor [%d,%d,%d,%d] was not kept: the tape reuses the buffers "
                "of activations nothing reads after the forward (bk_keep it before compiling)",
                x->n, x->c, x->h, x->w);
        return -1;
    }
    int s[4];
    shape_of(v, s);
    return tape_kv(g, v)->read(&g->base, v->val, dst, s, v->layout);
}

int bk_read_topk(bk_graph_t *g, bk_tensor_t *x, int k, int32_t *topk)
{
    if (!g || g->base.failed || !x || !topk || k < 1 || k > x->c || x->h != 1 || x->w != 1 ||
        bk_graph_compile(g) < 0)
        return -1;
    const bk_tensor_t *v = x->alias ? x->alias : x;
    if (!tape_kv(g, v)->topk || v->layout || (g->fops && (!v->val || v->consumed)) || x->pooled ||
        v->no_val)
        return 1;   /* bk_read says why it cannot read x, where it cannot */
    return tape_kv(g, v)->topk(&g->base, v->val, x->n, x->c, k, topk);
}

int bk_keep(bk_graph_t *g, bk_tensor_t *t)
{
    if (!g || !t || t->id < 0 || (size_t)t->id >= g->nv || g->v[t->id] != t) {
        if (g)
            bk_ctx_fail(&g->base, "bk_keep: not a tensor of this graph");
        return -1;
    }
    if (g->compiled) {
        bk_ctx_fail(&g->base, "bk_keep after the graph was compiled");
        return -1;
    }
    t->keep = 1;
    t->user_keep = 1;
    return 0;
}

size_t bk_graph_bytes(const bk_graph_t *g)
{
    return g && g->compiled && !g->fops ? g->bytes : 0;
}

int bk_read_grad(bk_graph_t *g, bk_tensor_t *x, float *dst)
{
    if (!g || g->base.failed || !x || !dst || bk_graph_compile(g) < 0)
        return -1;
    if (!x->grad || !x->grad_set) {
        bk_ctx_fail(&g->base, "no gradient for this tensor (requires_grad unset, or no "
                "backward through it yet)");
        return -1;
    }
    int s[4];
    shape_of(x, s);
    return tape_kv(g, x)->read(&g->base, x->grad, dst, s, 0);
}

int bk_set_labels(bk_graph_t *g, const int32_t *labels)
{
    if (!g || g->base.failed || !labels)
        return -1;
    if (!g->labels) {
        bk_ctx_fail(&g->base, "labels given but the graph has no cross-entropy");
        return -1;
    }
    int k = 0;
    for (size_t i = 0; i < g->nops; i++)
        if (g->ops[i].kind == TO_CE)
            k = g->ops[i].in[0]->c;
    for (int i = 0; i < g->label_n; i++)
        if (labels[i] < 0 || labels[i] >= k) {
            bk_ctx_fail(&g->base, "label %d of sample %d is outside 0..%d", (int)labels[i], i,
                    k - 1);
            return -1;
        }
    memcpy(g->labels, labels, (size_t)g->label_n * sizeof *labels);
    g->labels_k = g->labels;
    if (g->k32 && g->k32->put) {   /* int32: one float's bytes each */
        if (!g->labels_buf && !(g->labels_buf = g->k32->alloc(&g->base, (size_t)g->label_n)))
            return -1;
        if (g->k32->put(&g->base, g->labels_buf, g->labels,
                      (size_t)g->label_n * sizeof *labels) < 0)
            return -1;
        g->labels_k = g->labels_buf;
    }
    g->have_labels = 1;
    return 0;
}

int bk_set_step(bk_graph_t *g, uint64_t seed, uint64_t step, const int64_t *ids)
{
    if (!g || g->base.failed)
        return -1;
    int n = g->batch;
    if (ids && n > g->ids_n) {
        int64_t *p = realloc(g->ids, (size_t)n * sizeof *p);
        if (!p) {
            bk_ctx_fail(&g->base, "out of memory");
            return -1;
        }
        g->ids = p;
        g->ids_n = n;
    }
    if (ids)
        memcpy(g->ids, ids, (size_t)n * sizeof *ids);
    else {
        free(g->ids);
        g->ids = NULL;
        g->ids_n = 0;
    }
    g->seed = seed;
    g->step = step;
    g->keys_stale = 1;
    return 0;
}

/* The step's dropout sample keys (made once per bk_set_step, for the
 * graph's batch; never set: seed 0, step 0, ids 0..n-1), where the dropout
 * kernels read them. NULL after bk_ctx_fail. */
const uint64_t *tape_dropout_keys(bk_graph_t *g)
{
    if (g->keys_k && !g->keys_stale)
        return g->keys_k;
    int n = g->batch > 0 ? g->batch : 1;
    if (n > g->keys_n) {   /* the graph's batch: once */
        uint64_t *p = realloc(g->keys, (size_t)n * sizeof *p);
        if (!p) {
            bk_ctx_fail(&g->base, "out of memory");
            return NULL;
        }
        g->keys = p;
        g->keys_n = n;
        if (g->k32 && g->k32->put) {
            g->k32->release(g->base.be, g->keys_buf);
            if (!(g->keys_buf = g->k32->alloc(&g->base, 2 * (size_t)n)))   /* 8 bytes a key */
                return NULL;
        }
    }
    for (int b = 0; b < n; b++)
        g->keys[b] = dropout_sample_key(g->seed, g->step, g->ids ? g->ids[b] : b);
    g->keys_k = g->keys;
    if (g->k32 && g->k32->put) {
        if (g->k32->put(&g->base, g->keys_buf, g->keys, (size_t)n * sizeof *g->keys) < 0)
            return NULL;
        g->keys_k = g->keys_buf;
    }
    g->keys_stale = 0;
    return g->keys_k;
}

int bk_graph_drops(const bk_graph_t *g)
{
    for (size_t i = 0; g && i < g->nops; i++)
        if (g->ops[i].kind == TO_DROPOUT && drop_p(g, &g->ops[i]) != 0.0f)
            return 1;
    return 0;
}

int tape_dropout_keys_ready(bk_graph_t *g)
{
    return bk_graph_drops(g) && !tape_dropout_keys(g) ? -1 : 0;
}
