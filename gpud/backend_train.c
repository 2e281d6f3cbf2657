/* backend_train — the tape, the graph engine (backend.h, bk_t*): shape
 * checks, gradient bookkeeping and the order of kernel calls. Kernels come
 * from the backend (bk_kernels_t), so a new backend only writes kernels.
 * Building only records; bk_graph_compile picks how the graph runs: the
 * inference plan's fused program (graph_plan.c) or the tape's kernel plans
 * and buffers (tape_compile.c). Execution dispatches to the one chosen.
 *
 * Gradients: backward walks the ops in reverse. A tensor that feeds several
 * ops (a residual's input) gets its gradient from each; the first writer
 * writes it directly, later ones write into a shared temporary that is then
 * added, so no gradient buffer needs zeroing first. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "gpud/bf16.h"
#include "gpud/tape_priv.h"

static const char *const KIND_NAMES[] = {"conv", "bn", "relu", "pool", "flatten",
                                         "linear", "add", "concat", "dropout", "ce"};

/* be NULL: a description graph (builders check shapes and bind parameters,
 * nothing is planned or allocated, nothing runs). */
bk_graph_t *bk_graph_new(backend_t *be)
{
    bk_graph_t *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->base.be = be;
    g->k = be ? be->ops->train : NULL;
    g->training = 1;
    g->profile = getenv("DDPIPE_TRAIN_PROFILE") != NULL;
    if (be && !g->k)
        bk_prog_fail(&g->base, "backend '%s' cannot train", be->ops->name);
    return g;
}

void bk_graph_destroy(bk_graph_t **gp)
{
    if (!gp || !*gp)
        return;
    bk_graph_t *g = *gp;
    for (int k = 0; g->profile && k <= TO_CE; k++)
        if (g->prof[0][k] + g->prof[1][k] > 0)
            log_info("train profile %-8s forward %8.3f s  backward %8.3f s", KIND_NAMES[k],
                     g->prof[0][k], g->prof[1][k]);
    plan_fused_drop(g);
    tape_release(g);
    for (size_t i = 0; i < g->nv; i++)
        free(g->v[i]);
    free(g->v);
    free(g->ops);
    free(g->labels);
    free(g->ids);
    free(g);
    *gp = NULL;
}

const char *bk_graph_error(const bk_graph_t *g)
{
    if (!g)
        return "no training graph (out of memory?)";
    return g->base.failed ? g->base.err : NULL;
}

void bk_graph_set_name(bk_graph_t *g, const char *name)
{
    if (g)
        bk_prog_set_name(&g->base, name);
}

void *bk_fail(bk_graph_t *g, const char *fmt, ...)
{
    if (!g || g->base.failed)
        return NULL;
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return bk_prog_fail(&g->base, "%s", msg);
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
        bk_prog_fail(&g->base, "bk_graph_set_forward_only after the first builder");
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
            return bk_prog_fail(&g->base, "out of memory");
        g->v = v;
        g->capv = cap;
    }
    bk_tensor_t *t = calloc(1, sizeof *t);
    if (!t)
        return bk_prog_fail(&g->base, "out of memory");
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
            return bk_prog_fail(&g->base, "out of memory");
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
    if (g->compiled || g->fused) {
        bk_prog_fail(&g->base, "builder after the graph was compiled (its first write, forward "
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
        bk_prog_fail(&g->base, "missing input tensor (an earlier step failed?)");
        return 0;
    }
    return 1;
}

bk_tensor_t *bk_input(bk_graph_t *g, int n, int c, int h, int w, int requires_grad)
{
    if (!building(g))
        return NULL;
    if (n < 1 || c < 1 || h < 1 || w < 1 || (long long)n * c * h * w > (1ll << 31))
        return bk_prog_fail(&g->base, "bad input shape [%d,%d,%d,%d]", n, c, h, w);
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
        return bk_prog_fail(&g->base, "bad conv: ic %d (input has %d), oc %d, kernel %dx%d, "
                       "stride %dx%d, pad %dx%d", p ? p->ic : 0, x->c, p ? p->oc : 0,
                       p ? p->kh : 0, p ? p->kw : 0, p ? p->stride_h : 0,
                       p ? p->stride_w : 0, p ? p->pad_h : 0, p ? p->pad_w : 0);
    int out[4] = {x->n, p->oc, out_size(x->h, p->kh, p->stride_h, p->pad_h),
                  out_size(x->w, p->kw, p->stride_w, p->pad_w)};
    if (out[2] < 1 || out[3] < 1)
        return bk_prog_fail(&g->base, "input %dx%d too small for a %dx%d kernel", x->h, x->w,
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
        return bk_prog_fail(&g->base, "bad batchnorm: %d channels (input has %d), eps %g, "
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
        return bk_prog_fail(&g->base, "bad pooling parameters (pad must be at most half the kernel)");
    int out[4] = {x->n, x->c, out_size(x->h, p->kh, p->stride_h, p->pad_h),
                  out_size(x->w, p->kw, p->stride_w, p->pad_w)};
    if (out[2] < 1 || out[3] < 1)
        return bk_prog_fail(&g->base, "input %dx%d too small for a %dx%d pooling window", x->h,
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
        return bk_prog_fail(&g->base, "bad linear layer: %d outputs, weight %s", out_features,
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
        return bk_prog_fail(&g->base, "add of different shapes [%d,%d,%d,%d] and [%d,%d,%d,%d]",
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
        return bk_prog_fail(&g->base, "concat of %d tensors (1..%d)", k, MAX_IN);
    int s[4];
    for (int i = 0; i < k; i++) {
        if (!usable(g, xs[i]))
            return NULL;
        if (xs[i]->n != xs[0]->n || xs[i]->h != xs[0]->h || xs[i]->w != xs[0]->w)
            return bk_prog_fail(&g->base, "concat: tensor %d is [%d,%d,%d,%d], tensor 0 is "
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
        return bk_prog_fail(&g->base, "dropout probability %g outside [0, 1)", (double)p);
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
        return bk_prog_fail(&g->base, "cross-entropy wants (n, classes, 1, 1) logits, got "
                       "[%d,%d,%d,%d]", x->n, x->c, x->h, x->w);
    if (!(label_smoothing >= 0.0f && label_smoothing <= 1.0f))
        return bk_prog_fail(&g->base, "label smoothing %g outside [0, 1]", (double)label_smoothing);
    if (g->label_n && g->label_n != x->n)
        return bk_prog_fail(&g->base, "a second cross-entropy with another batch size");
    int s[4] = {x->n, 1, 1, 1};
    top_t *o = op_new(g, TO_CE, &x, 1);
    if (!o)
        return NULL;
    o->p = label_smoothing;
    if (!g->labels && !(g->labels = calloc((size_t)x->n, sizeof *g->labels)))
        return bk_prog_fail(&g->base, "out of memory");
    g->label_n = x->n;
    bk_tensor_t *y = op_out(g, o, s, 0);
    if (y)
        y->needs_grad = x->needs_grad;
    return y;
}

/* ------------------------------------------------------------- execution */

/* bf16 inference runs on the fused plan where the backend's program does
 * bf16 (BatchNorm folded, bf16 activations: docs/BF16.md "bf16 inference
 * plan"); DDPIPE_BF16_EVAL=tape keeps autocast's exact rounding points
 * (conv, round, BatchNorm, round) on the tape, as does a backend without. */
static int plan_wanted(const bk_graph_t *g)
{
    if (!g->bf16)
        return 1;
    const char *e = getenv("DDPIPE_BF16_EVAL");
    return g->base.be->ops->prog_bf16 && !(e && strcmp(e, "tape") == 0);
}

/* A forward-only eval-mode graph runs as the backend's fused program when
 * every op has a fused form (graph_plan.c), else, as any other, on the
 * tape. The choice is made once, here. */
int bk_graph_compile(bk_graph_t *g)
{
    if (!g || g->base.failed)
        return -1;
    if (g->compiled || g->fused)
        return 0;
    if (!g->k) {
        bk_prog_set_name(&g->base, NULL);
        bk_prog_fail(&g->base, "a description graph (bk_graph_new(NULL)) has no backend: it "
                "cannot run");
        return -1;
    }
    g->bf16 = g->base.be->precision != BK_FP32;
    if (g->forward_only && !g->training && plan_wanted(g)) {
        char why[256] = "";
        int rc = plan_fused_build(g, why, sizeof why);
        if (rc < 0)
            return -1;
        log_debug("graph: inference %s (%s): %s", rc ? "plan" : "on the tape",
                  backend_precision_name(g->base.be), why);
        if (rc)
            return 0;
    } else if (g->bf16) {
        log_debug("graph: %s on the tape: %s", g->forward_only ? "inference" : "training",
                  backend_precision_name(g->base.be));
    }
    return tape_compile(g);
}

/* Compiled, and ready for a forward in the current mode: a fused program
 * re-folded after bk_graph_reload, or given up for the tape when the
 * graph was switched to training mode. */
static int ready(bk_graph_t *g)
{
    if (bk_graph_compile(g) < 0)
        return -1;
    if (g->fused && (g->training || g->fused_stale))
        return plan_fused_replace(g, !g->training);
    return 0;
}

int bk_graph_fused(const bk_graph_t *g)
{
    return g && g->fused && !g->training;
}

void bk_graph_reload(bk_graph_t *g)
{
    if (g && g->fused)
        g->fused_stale = 1;
}

/* The fused program's error as the graph's own. */
static int fused_failed(bk_graph_t *g)
{
    const char *err = bk_prog_error(g->fused);
    bk_prog_set_name(&g->base, NULL);
    bk_prog_fail(&g->base, "%s", err ? err : "the fused program failed");
    return -1;
}

int bk_write(bk_graph_t *g, bk_tensor_t *x, const float *src)
{
    if (!g || g->base.failed || !x || !src || bk_graph_compile(g) < 0)
        return -1;
    if (!x->is_input) {
        bk_prog_fail(&g->base, "only input tensors can be written");
        return -1;
    }
    if (g->fused)
        return bk_prog_write(g->fused, x->ft, src) == 0 ? 0 : fused_failed(g);
    int s[4];
    shape_of(x, s);
    return g->k->write(&g->base, x->val, src, s);
}

int bk_write_u8(bk_graph_t *g, bk_tensor_t *x, const uint8_t *px, const float *lut)
{
    if (!g || g->base.failed || !x || !px || !lut || bk_graph_compile(g) < 0)
        return -1;
    if (!x->is_input) {
        bk_prog_fail(&g->base, "only input tensors can be written");
        return -1;
    }
    if (g->fused || !g->k->write_u8)
        return 1;
    int s[4];
    shape_of(x, s);
    return g->k->write_u8(&g->base, x->val, px, lut, s);
}

int bk_read(bk_graph_t *g, bk_tensor_t *x, float *dst)
{
    if (!g || g->base.failed || !x || !dst || bk_graph_compile(g) < 0)
        return -1;
    if (g->fused && (!x->ft || x->ft->consumed)) {
        bk_prog_fail(&g->base, "tensor [%d,%d,%d,%d] was fused away by the inference plan (a "
                "fused graph keeps only what its fused ops compute)", x->n, x->c, x->h, x->w);
        return -1;
    }
    if (g->fused)
        return bk_prog_read(g->fused, x->ft, dst) == 0 ? 0 : fused_failed(g);
    if (x->pooled) {
        bk_prog_fail(&g->base, "tensor [%d,%d,%d,%d] was not kept: the tape reuses the buffers "
                "of activations nothing reads after the forward (bk_keep it before compiling)",
                x->n, x->c, x->h, x->w);
        return -1;
    }
    int s[4];
    shape_of(x, s);
    return g->k->read(&g->base, x->val, dst, s);
}

int bk_keep(bk_graph_t *g, bk_tensor_t *t)
{
    if (!g || !t || t->id < 0 || (size_t)t->id >= g->nv || g->v[t->id] != t) {
        if (g)
            bk_prog_fail(&g->base, "bk_keep: not a tensor of this graph");
        return -1;
    }
    if (g->compiled || g->fused) {
        bk_prog_fail(&g->base, "bk_keep after the graph was compiled");
        return -1;
    }
    t->keep = 1;
    return 0;
}

size_t bk_graph_bytes(const bk_graph_t *g)
{
    return g && g->compiled && !g->fused ? g->bytes : 0;
}

int bk_read_grad(bk_graph_t *g, bk_tensor_t *x, float *dst)
{
    if (!g || g->base.failed || !x || !dst || bk_graph_compile(g) < 0)
        return -1;
    if (!x->grad || !x->grad_set) {
        bk_prog_fail(&g->base, "no gradient for this tensor (requires_grad unset, or no "
                "backward through it yet)");
        return -1;
    }
    int s[4];
    shape_of(x, s);
    return g->k->read(&g->base, x->grad, dst, s);
}

int bk_set_labels(bk_graph_t *g, const int32_t *labels)
{
    if (!g || g->base.failed || !labels)
        return -1;
    if (!g->labels) {
        bk_prog_fail(&g->base, "labels given but the graph has no cross-entropy");
        return -1;
    }
    int k = 0;
    for (size_t i = 0; i < g->nops; i++)
        if (g->ops[i].kind == TO_CE)
            k = g->ops[i].in[0]->c;
    for (int i = 0; i < g->label_n; i++)
        if (labels[i] < 0 || labels[i] >= k) {
            bk_prog_fail(&g->base, "label %d of sample %d is outside 0..%d", (int)labels[i], i,
                    k - 1);
            return -1;
        }
    memcpy(g->labels, labels, (size_t)g->label_n * sizeof *labels);
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
            bk_prog_fail(&g->base, "out of memory");
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
    return 0;
}

/* PyTorch's running-stat update: r = (1 - m) r + m s, with the unbiased
 * batch variance for running_var. */
static void bn_running_update(top_t *o, size_t count)
{
    double m = o->bn.momentum, unbias = count > 1 ? (double)count / (double)(count - 1) : 1.0;
    for (int c = 0; c < o->bn.c; c++) {
        o->bn.running_mean[c] =
            (float)((1.0 - m) * o->bn.running_mean[c] + m * o->save_mean[c]);
        o->bn.running_var[c] =
            (float)((1.0 - m) * o->bn.running_var[c] + m * o->save_var[c] * unbias);
    }
    if (o->bn.num_batches)
        *o->bn.num_batches += 1.0f;
}

/* A BN op normalises with batch statistics only in a training graph and
 * when not frozen in eval mode (bk_bn_t.eval). */
static int bn_training(const bk_graph_t *g, const top_t *o)
{
    return g->training && !o->bn.eval;
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
static int bn_scratch(bk_graph_t *g, top_t *o)
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
    bk_prog_fail(&g->base, "out of memory");
    return -1;
}

static int sync_call(bk_graph_t *g, double *data, size_t n)
{
    char err[256] = "";
    if (!g->allreduce || g->allreduce(g->allreduce_ctx, data, n, err, sizeof err) == 0)
        return 0;
    bk_prog_fail(&g->base, "SyncBatchNorm all-reduce of %zu values failed: %s", n,
            err[0] ? err : "no reason given");
    return -1;
}

/* Per-channel sums of x into sync_d (zeros when x is NULL: this rank
 * holds no samples). */
static void stat_sums(bk_graph_t *g, top_t *o, const bk_tensor_t *x, const float *center)
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
static double bn_stats(bk_graph_t *g, top_t *o, const bk_tensor_t *x)
{
    int c = o->bn.c;
    if (bn_scratch(g, o) < 0)
        return -1;
    stat_sums(g, o, x, NULL);
    o->sync_d[c] = x ? (double)x->n * x->h * x->w : 0.0;
    if (sync_call(g, o->sync_d, (size_t)c + 1) < 0)
        return -1;
    double count = o->sync_d[c];
    o->sync_count = count >= 1.0 ? count : 0.0;
    if (!(count >= 1.0))
        return 0;
    for (int i = 0; i < c; i++)
        o->save_mean[i] = (float)(o->sync_d[i] / count);
    stat_sums(g, o, x, o->save_mean);
    if (sync_call(g, o->sync_d, (size_t)c) < 0)
        return -1;
    for (int i = 0; i < c; i++)
        o->save_var[i] = (float)(o->sync_d[i] / count);
    return count;
}

/* Normalising with given statistics is the eval-mode kernel. */
static int bn_train_fwd(bk_graph_t *g, top_t *o, const bk_tensor_t *x, bk_tensor_t *y)
{
    double count = bn_stats(g, o, x);
    if (count < 0)
        return -1;
    if (g->k->bn_fwd(&g->base, o->plan, 0, x->val, o->bn.weight, o->bn.bias, o->save_mean,
                     o->save_var, y->val) < 0)
        return -1;
    bn_running_update(o, (size_t)count);
    return 0;
}

/* This rank's [sum dy', sum dy' * xhat] into sync_d[0, 2c) (dy' after the
 * fused ReLU's mask); without the backend's bn_grad_sums, the eval-mode
 * backward gives them (as floats) and gx = g * dy'. */
static int bn_grad_local(bk_graph_t *g, top_t *o, const bk_tensor_t *x, const bk_tensor_t *y,
                         void *gx)
{
    int c = o->bn.c;
    double *sdy = o->sync_d, *sdyx = o->sync_d + c;
    if (!g->k->bn_grad_sums) {
        float *fdy = o->sync, *fdyx = o->sync + c;
        if (g->k->bn_bwd(&g->base, o->plan, 0, x->val, y->val, y->grad, o->bn.weight,
                         o->save_mean, o->save_var, gx, fdyx, fdy) < 0)
            return -1;
        for (int i = 0; i < c; i++) {
            sdy[i] = fdy[i];
            sdyx[i] = fdyx[i];
        }
        return 0;
    }
    int s[4];
    shape_of(x, s);
    g->k->bn_grad_sums(g->base.be, x->val, y->val, y->grad, s, o->bn.relu, o->save_mean,
                       o->sync_d);
    for (int i = 0; i < c; i++)
        sdyx[i] /= sqrt((double)o->save_var[i] + o->bn.eps);
    return 0;
}

/* Training-mode BN backward over the (global) batch. With k = gamma /
 * sqrt(var + eps) and N the global count,
 *     dx = k * (dy' - sum dy' / N - xhat * sum(dy' * xhat) / N).
 * The sums are all-reduced; gamma/beta get this rank's own sums (the
 * caller all-reduces parameter gradients, as DDP). x NULL: an empty rank. */
static int bn_train_bwd(bk_graph_t *g, top_t *o, const bk_tensor_t *x, const bk_tensor_t *y,
                        void *gx)
{
    int c = o->bn.c;
    double *sdy = o->sync_d, *sdyx = o->sync_d + c;
    float *a = o->sync + 2 * c, *b = o->sync + 3 * c, *scale = o->sync + 4 * c;
    if (!x)
        memset(o->sync_d, 0, 2 * (size_t)c * sizeof *o->sync_d);
    else if (bn_grad_local(g, o, x, y, gx) < 0)
        return -1;
    for (int i = 0; x && o->bn.grad_weight && i < c; i++) {
        o->bn.grad_weight[i] = (float)sdyx[i];
        o->bn.grad_bias[i] = (float)sdy[i];
    }
    if (sync_call(g, o->sync_d, 2 * (size_t)c) < 0)
        return -1;
    if (!x || !gx)
        return 0;
    for (int i = 0; i < c; i++) {
        double rstd = 1.0 / sqrt((double)o->save_var[i] + o->bn.eps);
        double k = (double)o->bn.weight[i] * rstd;
        scale[i] = (float)k;
        a[i] = (float)(-k * rstd * sdyx[i] / o->sync_count);
        b[i] = (float)(-k * sdy[i] / o->sync_count);
    }
    int s[4];
    shape_of(x, s);
    if (g->k->bn_grad_sums && g->k->bn_grad_apply)
        g->k->bn_grad_apply(g->base.be, gx, x->val, y->val, y->grad, s, o->bn.relu,
                            o->save_mean, scale, a, b);
    else
        g->k->chan_axpb(g->base.be, gx, x->val, s, o->save_mean, a, b);
    return 0;
}

int bk_empty_step(bk_graph_t *g, bk_tensor_t *y)
{
    if (!g || g->base.failed || !y || ready(g) < 0)
        return -1;
    if (!g->allreduce)
        return 0;
    if (!y->needs_grad) {
        bk_prog_fail(&g->base, "backward from a tensor that depends on no parameter");
        return -1;
    }
    for (size_t i = 0; i < g->nops; i++) {   /* as bk_forward */
        top_t *o = &g->ops[i];
        if (o->kind != TO_BN || !bn_training(g, o))
            continue;
        bk_prog_set_name(&g->base, o->name);
        double count = bn_stats(g, o, NULL);
        if (count < 0)
            return -1;
        if (count >= 1.0)
            bn_running_update(o, (size_t)count);
    }
    for (int i = y->producer; i >= 0; i--) {   /* as bk_backward */
        top_t *o = &g->ops[i];
        if (!o->out->needs_grad || o->kind != TO_BN || !bn_training(g, o))
            continue;
        bk_prog_set_name(&g->base, o->name);
        if (bn_train_bwd(g, o, NULL, o->out, NULL) < 0)
            return -1;
    }
    return 0;
}

static float drop_p(const bk_graph_t *g, const top_t *o)
{
    return g->training && !g->no_dropout ? o->p : 0.0f;
}

/* bf16: the weights (and bias) a conv or linear op computes with this step:
 * its master weights rounded to bf16, as autocast casts them. */
static void bf16_weights(top_t *o, const float **w, const float **b)
{
    int conv = o->kind == TO_CONV;
    const float *mw = conv ? o->conv.weight : o->w, *mb = conv ? o->conv.bias : o->b;
    const bk_tensor_t *x = o->in[0];
    size_t nw = conv ? (size_t)o->conv.oc * o->conv.ic * o->conv.kh * o->conv.kw
                     : (size_t)o->lin_out * x->c * x->h * x->w;
    bf16_round(o->w16, mw, nw);
    if (mb)
        bf16_round(o->b16, mb, (size_t)(conv ? o->conv.oc : o->lin_out));
    *w = o->w16;
    *b = mb ? o->b16 : NULL;
}

/* bf16: ops whose output PyTorch's CPU autocast makes bf16 and that can
 * leave bf16 values (relu, flatten and concat of bf16 values are exact;
 * the loss is fp32). */
static int bf16_rounds(top_kind_t kind)
{
    return kind != TO_RELU && kind != TO_FLATTEN && kind != TO_CONCAT && kind != TO_CE;
}

static int op_forward(bk_graph_t *g, top_t *o, uint32_t index)
{
    const bk_kernels_t *k = g->k;
    backend_t *be = g->base.be;
    bk_prog_t *bg = &g->base;
    bk_tensor_t *x = o->in[0], *y = o->out;
    int s[4];
    shape_of(x, s);
    const float *w = o->kind == TO_CONV ? o->conv.weight : o->w;
    const float *b = o->kind == TO_CONV ? o->conv.bias : o->b;
    if (g->bf16 && (o->kind == TO_CONV || o->kind == TO_LINEAR)) {
        bf16_weights(o, &w, &b);
        if (x->is_input)   /* the model's fp32 input, cast at its first conv */
            k->round_bf16(be, x->val, numel(x));
    }
    switch (o->kind) {
    case TO_CONV:
        return k->conv_fwd(bg, o->plan, x->val, w, b, y->val);
    case TO_BN:
        if (bn_training(g, o))
            return bn_train_fwd(g, o, x, y);
        return k->bn_fwd(bg, o->plan, 0, x->val, o->bn.weight, o->bn.bias, o->bn.running_mean,
                         o->bn.running_var, y->val);
    case TO_RELU:
        return k->relu_fwd(bg, o->plan, x->val, y->val);
    case TO_POOL:
        return k->pool_fwd(bg, o->plan, x->val, y->val);
    case TO_FLATTEN:
        k->flatten(be, y->val, x->val, s, 0);
        return 0;
    case TO_LINEAR:
        return k->linear_fwd(bg, o->plan, x->val, w, b, y->val);
    case TO_ADD:
        k->add(be, y->val, x->val, o->in[1]->val, numel(y));
        return 0;
    case TO_CONCAT:
        for (int i = 0, off = 0; i < o->nin; off += o->in[i]->c, i++) {
            int xs[4];
            shape_of(o->in[i], xs);
            k->concat(be, y->val, y->c, o->in[i]->val, xs, off, 1);
        }
        return 0;
    case TO_DROPOUT:
        k->dropout(be, y->val, x->val, s, drop_p(g, o), g->seed, g->step, index,
                   g->ids);
        return 0;
    case TO_CE:
        if (!g->have_labels) {
            bk_prog_fail(bg, "cross-entropy without labels (call bk_set_labels)");
            return -1;
        }
        k->ce_fwd(be, x->val, g->labels, x->n, x->c, o->p, y->val);
        return 0;
    }
    return 0;
}

int bk_forward(bk_graph_t *g)
{
    if (!g || g->base.failed || ready(g) < 0)
        return -1;
    if (g->fused)
        return bk_prog_run(g->fused) == 0 ? 0 : fused_failed(g);
    for (size_t i = 0; i < g->nops; i++) {
        bk_prog_set_name(&g->base, g->ops[i].name);
        double t0 = g->profile ? clock_mono_s() : 0.0;
        if (op_forward(g, &g->ops[i], (uint32_t)i) < 0)
            return -1;
        if (g->bf16 && bf16_rounds(g->ops[i].kind))
            g->k->round_bf16(g->base.be, g->ops[i].out->val, numel(g->ops[i].out));
        if (g->profile)
            g->prof[0][g->ops[i].kind] += clock_mono_s() - t0;
    }
    for (size_t i = 0; i < g->nv; i++)
        g->v[i]->grad_set = 0;
    return 0;
}

/* Where to write x's gradient: its own buffer the first time, else the
 * temporary (then grad_commit adds it). NULL: x needs no gradient. */
static void *grad_dst(bk_graph_t *g, bk_tensor_t *x)
{
    if (!x->needs_grad)
        return NULL;
    return x->grad_set ? g->tmp : x->grad;
}

static void grad_commit(bk_graph_t *g, bk_tensor_t *x)
{
    if (!x->needs_grad)
        return;
    if (x->grad_set)
        g->k->acc(g->base.be, x->grad, g->tmp, numel(x));
    /* bf16: the gradient of a bf16 activation is bf16, sums included */
    if (g->bf16)
        g->k->round_bf16(g->base.be, x->grad, numel(x));
    x->grad_set = 1;
}

/* bf16: a conv's or linear's weight gradient comes out of the bf16
 * backward as bf16 (autocast's cast back to the fp32 weight keeps it). */
static void bf16_param_grads(const top_t *o, float *gw, float *gb)
{
    int conv = o->kind == TO_CONV;
    const bk_tensor_t *x = o->in[0];
    size_t nw = conv ? (size_t)o->conv.oc * o->conv.ic * o->conv.kh * o->conv.kw
                     : (size_t)o->lin_out * x->c * x->h * x->w;
    if (gw)
        bf16_round(gw, gw, nw);
    if (gb)
        bf16_round(gb, gb, (size_t)(conv ? o->conv.oc : o->lin_out));
}

static int op_backward(bk_graph_t *g, top_t *o, uint32_t index)
{
    const bk_kernels_t *k = g->k;
    backend_t *be = g->base.be;
    bk_prog_t *bg = &g->base;
    bk_tensor_t *x = o->in[0], *y = o->out;
    void *gx = grad_dst(g, x);
    int s[4], rc = 0;
    shape_of(x, s);
    switch (o->kind) {
    case TO_CONV:
        rc = k->conv_bwd(bg, o->plan, x->val, g->bf16 ? o->w16 : o->conv.weight, y->grad, gx,
                         o->conv.grad_weight, o->conv.grad_bias);
        if (rc == 0 && g->bf16)
            bf16_param_grads(o, o->conv.grad_weight, o->conv.grad_bias);
        break;
    case TO_BN:
        if (bn_training(g, o)) {
            rc = bn_train_bwd(g, o, x, y, gx);
            break;
        }
        rc = k->bn_bwd(bg, o->plan, 0, x->val, y->val, y->grad, o->bn.weight,
                       o->bn.running_mean, o->bn.running_var, gx, o->bn.grad_weight,
                       o->bn.grad_bias);
        break;
    case TO_RELU:
        if (gx)
            rc = k->relu_bwd(bg, o->plan, y->val, y->grad, gx);
        break;
    case TO_POOL:
        if (gx)
            rc = k->pool_bwd(bg, o->plan, x->val, y->grad, gx);
        break;
    case TO_FLATTEN:
        if (gx)
            k->flatten(be, gx, y->grad, s, 1);
        break;
    case TO_LINEAR:
        rc = k->linear_bwd(bg, o->plan, x->val, g->bf16 ? o->w16 : o->w, y->grad, gx, o->gw,
                           o->gb);
        if (rc == 0 && g->bf16)
            bf16_param_grads(o, o->gw, o->gb);
        break;
    case TO_ADD:
        if (gx)
            k->copy(be, gx, y->grad, numel(y));
        grad_commit(g, x);
        if ((gx = grad_dst(g, o->in[1])) != NULL)
            k->copy(be, gx, y->grad, numel(y));
        grad_commit(g, o->in[1]);
        return 0;
    case TO_CONCAT:
        for (int i = 0, off = 0; i < o->nin; off += o->in[i]->c, i++) {
            int xs[4];
            shape_of(o->in[i], xs);
            if ((gx = grad_dst(g, o->in[i])) != NULL)
                k->concat(be, y->grad, y->c, gx, xs, off, 0);
            grad_commit(g, o->in[i]);
        }
        return 0;
    case TO_DROPOUT:
        if (gx)
            k->dropout(be, gx, y->grad, s, drop_p(g, o), g->seed, g->step, index,
                       g->ids);
        break;
    case TO_CE:
        if (gx)
            k->ce_bwd(be, x->val, g->labels, x->n, x->c, o->p, y->grad, gx);
        break;
    }
    if (rc == 0)
        grad_commit(g, x);
    return rc;
}

/* o's parameter gradients are final (each parameter belongs to one op). */
static void grads_ready(bk_graph_t *g, const top_t *o)
{
    const float *p[2] = {NULL, NULL};
    if (o->kind == TO_CONV) {
        p[0] = o->conv.grad_weight;
        p[1] = o->conv.grad_bias;
    } else if (o->kind == TO_BN) {
        p[0] = o->bn.grad_weight;
        p[1] = o->bn.grad_bias;
    } else if (o->kind == TO_LINEAR) {
        p[0] = o->gw;
        p[1] = o->gb;
    }
    for (int i = 0; i < 2; i++)
        if (p[i])
            g->grad_ready(g->grad_ready_ctx, p[i]);
}

int bk_backward(bk_graph_t *g, bk_tensor_t *y, const float *dy)
{
    if (!g || g->base.failed || !y || ready(g) < 0)
        return -1;
    if (!y->needs_grad) {
        bk_prog_fail(&g->base, "backward from a tensor that depends on no parameter");
        return -1;
    }
    for (size_t i = 0; i < g->nv; i++)
        g->v[i]->grad_set = 0;
    int s[4];
    shape_of(y, s);
    size_t cnt = numel(y);
    if (dy) {
        if (g->k->write(&g->base, y->grad, dy, s) < 0)
            return -1;
    } else {
        float *ones = malloc(cnt * sizeof *ones);
        if (!ones) {
            bk_prog_fail(&g->base, "out of memory");
            return -1;
        }
        for (size_t i = 0; i < cnt; i++)
            ones[i] = 1.0f;
        int rc = g->k->write(&g->base, y->grad, ones, s);
        free(ones);
        if (rc < 0)
            return -1;
    }
    /* bf16: the gradient of a bf16 activation is bf16 (grad_commit); the
     * loss is fp32 */
    if (g->bf16 && y->producer >= 0 && g->ops[y->producer].kind != TO_CE)
        g->k->round_bf16(g->base.be, y->grad, cnt);
    y->grad_set = 1;
    for (int i = y->producer; i >= 0; i--) {
        top_t *o = &g->ops[i];
        if (!o->out->needs_grad)
            continue;
        if (!o->out->grad_set) {   /* a branch that does not reach y */
            g->k->zero(g->base.be, o->out->grad, numel(o->out));
            o->out->grad_set = 1;
        }
        bk_prog_set_name(&g->base, o->name);
        double t0 = g->profile ? clock_mono_s() : 0.0;
        if (op_backward(g, o, (uint32_t)i) < 0)
            return -1;
        if (g->profile)
            g->prof[1][o->kind] += clock_mono_s() - t0;
        if (g->grad_ready)
            grads_ready(g, o);
    }
    return 0;
}
