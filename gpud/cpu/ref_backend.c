/* ref_backend — backend.h on top of ref_ops: NCHW float tensors, one step
 * per op, no fusion beyond what the op descriptions ask for. The unit tests
 * run whole models on it to check the oneDNN backend against plain C. */
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpud/backend_impl.h"
#include "common/errbuf.h"
#include "gpud/cpu/host_kernels.h"
#include "gpud/cpu/ref_ops.h"

typedef struct {
    bk_ptensor_t base;
    float *data;        /* n*c*h*w, NCHW; aliases for consumed residuals */
    int owns;
} ref_tensor_t;

typedef enum { RS_CONV, RS_POOL, RS_LINEAR, RS_RELU, RS_ADD } ref_kind_t;

typedef struct {
    ref_kind_t kind;
    ref_tensor_t *x, *x2, *y;   /* x2: residual of conv, second operand of add */
    bk_pconv_t conv;             /* weight/bias point at owned copies below */
    bk_pool_t pool;
    int relu;
    float *w, *b;
} ref_step_t;

typedef struct {
    bk_prog_t base;
    ref_tensor_t **t;
    size_t nt, capt;
    ref_step_t *s;
    size_t ns, caps;
} ref_graph_t;

static size_t numel(const bk_ptensor_t *t)
{
    return (size_t)t->n * t->c * t->h * t->w;
}

static void ref_destroy(backend_t *be)
{
    free(be);
}

static bk_prog_t *ref_graph_new(backend_t *be)
{
    ref_graph_t *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->base.be = be;
    return &g->base;
}

static void ref_graph_destroy(bk_prog_t *bg)
{
    ref_graph_t *g = (ref_graph_t *)bg;
    for (size_t i = 0; i < g->nt; i++) {
        if (g->t[i]->owns)
            free(g->t[i]->data);
        free(g->t[i]);
    }
    for (size_t i = 0; i < g->ns; i++) {
        free(g->s[i].w);
        free(g->s[i].b);
    }
    free(g->t);
    free(g->s);
    free(g);
}

/* New tensor of shape out; alias (if not NULL) shares its storage. */
static ref_tensor_t *tensor_new(ref_graph_t *g, const int out[4], ref_tensor_t *alias)
{
    if (g->nt == g->capt) {
        size_t cap = g->capt ? 2 * g->capt : 32;
        ref_tensor_t **t = realloc(g->t, cap * sizeof *t);
        if (!t)
            return bk_prog_fail(&g->base, "out of memory");
        g->t = t;
        g->capt = cap;
    }
    ref_tensor_t *t = calloc(1, sizeof *t);
    if (!t)
        return bk_prog_fail(&g->base, "out of memory");
    t->base.n = out[0];
    t->base.c = out[1];
    t->base.h = out[2];
    t->base.w = out[3];
    if (alias) {
        t->data = alias->data;
    } else {
        t->data = calloc(numel(&t->base), sizeof(float));
        t->owns = 1;
        if (!t->data) {
            free(t);
            return bk_prog_fail(&g->base, "out of memory for a [%d,%d,%d,%d] tensor", out[0],
                           out[1], out[2], out[3]);
        }
    }
    g->t[g->nt++] = t;
    return t;
}

static ref_step_t *step_new(ref_graph_t *g, ref_kind_t kind)
{
    if (g->ns == g->caps) {
        size_t cap = g->caps ? 2 * g->caps : 32;
        ref_step_t *s = realloc(g->s, cap * sizeof *s);
        if (!s)
            return bk_prog_fail(&g->base, "out of memory");
        g->s = s;
        g->caps = cap;
    }
    ref_step_t *s = &g->s[g->ns++];
    memset(s, 0, sizeof *s);
    s->kind = kind;
    return s;
}

static float *copy_floats(const float *src, size_t n)
{
    float *d = malloc(n * sizeof *d);
    if (d)
        memcpy(d, src, n * sizeof *d);
    return d;
}

static bk_ptensor_t *ref_input(bk_prog_t *bg, const int *out)
{
    ref_tensor_t *t = tensor_new((ref_graph_t *)bg, out, NULL);
    return t ? &t->base : NULL;
}

static bk_ptensor_t *rb_conv2d(bk_prog_t *bg, bk_ptensor_t *x, const bk_pconv_t *p,
                               bk_ptensor_t *res, const int *out)
{
    ref_graph_t *g = (ref_graph_t *)bg;
    ref_tensor_t *y = tensor_new(g, out, (ref_tensor_t *)res);
    ref_step_t *s = y ? step_new(g, RS_CONV) : NULL;
    if (!s)
        return NULL;
    s->x = (ref_tensor_t *)x;
    s->x2 = (ref_tensor_t *)res;
    s->y = y;
    s->conv = *p;
    s->w = copy_floats(p->weight, (size_t)p->oc * p->ic * p->kh * p->kw);
    s->b = p->bias ? copy_floats(p->bias, (size_t)p->oc) : NULL;
    if (!s->w || (p->bias && !s->b))
        return bk_prog_fail(bg, "out of memory copying weights");
    s->conv.weight = s->w;
    s->conv.bias = s->b;
    return &y->base;
}

static bk_ptensor_t *ref_pool2d(bk_prog_t *bg, bk_ptensor_t *x, const bk_pool_t *p,
                               const int *out)
{
    ref_graph_t *g = (ref_graph_t *)bg;
    ref_tensor_t *y = tensor_new(g, out, NULL);
    ref_step_t *s = y ? step_new(g, RS_POOL) : NULL;
    if (!s)
        return NULL;
    s->x = (ref_tensor_t *)x;
    s->y = y;
    s->pool = *p;
    return &y->base;
}

static bk_ptensor_t *rb_linear(bk_prog_t *bg, bk_ptensor_t *x, const float *weight,
                               const float *bias, const int *out)
{
    ref_graph_t *g = (ref_graph_t *)bg;
    ref_tensor_t *y = tensor_new(g, out, NULL);
    ref_step_t *s = y ? step_new(g, RS_LINEAR) : NULL;
    if (!s)
        return NULL;
    size_t in = (size_t)x->c * x->h * x->w;
    s->x = (ref_tensor_t *)x;
    s->y = y;
    s->w = copy_floats(weight, (size_t)out[1] * in);
    s->b = bias ? copy_floats(bias, (size_t)out[1]) : NULL;
    if (!s->w || (bias && !s->b))
        return bk_prog_fail(bg, "out of memory copying weights");
    return &y->base;
}

static bk_ptensor_t *ref_relu_op(bk_prog_t *bg, bk_ptensor_t *x, const int *out)
{
    ref_graph_t *g = (ref_graph_t *)bg;
    ref_tensor_t *y = tensor_new(g, out, NULL);
    ref_step_t *s = y ? step_new(g, RS_RELU) : NULL;
    if (!s)
        return NULL;
    s->x = (ref_tensor_t *)x;
    s->y = y;
    return &y->base;
}

static bk_ptensor_t *ref_add_op(bk_prog_t *bg, bk_ptensor_t *a, bk_ptensor_t *b, int relu,
                               const int *out)
{
    ref_graph_t *g = (ref_graph_t *)bg;
    ref_tensor_t *y = tensor_new(g, out, NULL);
    ref_step_t *s = y ? step_new(g, RS_ADD) : NULL;
    if (!s)
        return NULL;
    s->x = (ref_tensor_t *)a;
    s->x2 = (ref_tensor_t *)b;
    s->y = y;
    s->relu = relu;
    return &y->base;
}

/* conv + bias, then post-ops in order; the residual lives in y's storage
 * already (aliased), so it is saved before the conv overwrites it. */
static int run_conv(ref_graph_t *g, ref_step_t *s)
{
    const bk_pconv_t *p = &s->conv;
    const bk_ptensor_t *x = &s->x->base, *y = &s->y->base;
    size_t n = numel(y);
    float *res = NULL;
    if (s->x2) {
        res = copy_floats(s->y->data, n);
        if (!res) {
            bk_prog_fail(&g->base, "out of memory");
            return -1;
        }
    }
    ref_conv2d(s->x->data, x->n, x->c, x->h, x->w, p->weight, p->bias, p->oc, p->kh, p->kw,
               p->stride_h, p->stride_w, p->pad_h, p->pad_w, s->y->data, y->h, y->w);
    for (int i = 0; i < p->n_post; i++) {
        if (p->post[i] == BK_PO_RELU)
            ref_relu(s->y->data, n);
        else
            ref_add(s->y->data, res, s->y->data, n);
    }
    free(res);
    return 0;
}

static void run_pool(ref_step_t *s)
{
    const bk_pool_t *p = &s->pool;
    const bk_ptensor_t *x = &s->x->base, *y = &s->y->base;
    if (p->alg == BK_POOL_MAX)
        ref_maxpool2d(s->x->data, x->n, x->c, x->h, x->w, p->kh, p->kw, p->stride_h,
                      p->stride_w, p->pad_h, p->pad_w, s->y->data, y->h, y->w);
    else
        ref_avgpool2d(s->x->data, x->n, x->c, x->h, x->w, p->kh, p->kw, p->stride_h,
                      p->stride_w, p->pad_h, p->pad_w, p->alg == BK_POOL_AVG, s->y->data,
                      y->h, y->w);
}

static int ref_run(bk_prog_t *bg)
{
    ref_graph_t *g = (ref_graph_t *)bg;
    omp_set_num_threads(bg->be->threads);
    for (size_t i = 0; i < g->ns; i++) {
        ref_step_t *s = &g->s[i];
        const bk_ptensor_t *x = &s->x->base, *y = &s->y->base;
        switch (s->kind) {
        case RS_CONV:
            if (run_conv(g, s) < 0)
                return -1;
            break;
        case RS_POOL:
            run_pool(s);
            break;
        case RS_LINEAR:
            ref_linear(s->x->data, x->n, x->c * x->h * x->w, s->w, s->b, y->c, s->y->data);
            break;
        case RS_RELU:
            memcpy(s->y->data, s->x->data, numel(y) * sizeof(float));
            ref_relu(s->y->data, numel(y));
            break;
        case RS_ADD:
            ref_add(s->x->data, s->x2->data, s->y->data, numel(y));
            if (s->relu)
                ref_relu(s->y->data, numel(y));
            break;
        }
    }
    return 0;
}

static int ref_write(bk_prog_t *bg, bk_ptensor_t *t, const float *src)
{
    (void)bg;
    memcpy(((ref_tensor_t *)t)->data, src, numel(t) * sizeof(float));
    return 0;
}

static int ref_read(bk_prog_t *bg, bk_ptensor_t *t, float *dst)
{
    (void)bg;
    memcpy(dst, ((ref_tensor_t *)t)->data, numel(t) * sizeof(float));
    return 0;
}

static const bk_ops_t REF_OPS = {
    .name = "ref",
    .destroy = ref_destroy,
    .graph_new = ref_graph_new,
    .graph_destroy = ref_graph_destroy,
    .input = ref_input,
    .conv2d = rb_conv2d,
    .pool2d = ref_pool2d,
    .linear = rb_linear,
    .relu = ref_relu_op,
    .add = ref_add_op,
    .write = ref_write,
    .run = ref_run,
    .read = ref_read,
    .train = &REF_TKERNELS,
};

backend_t *ref_backend_new(int threads, char *err, size_t errlen)
{
    backend_t *be = calloc(1, sizeof *be);
    if (!be) {
        err_set(err, errlen, "ref backend: out of memory");
        return NULL;
    }
    be->ops = &REF_OPS;
    be->arena = &bk_arena_host;
    be->threads = threads;
    return be;
}
