/* dnnl_layers — training kernels of the "cpu" backend without weights:
 * batch normalization forward (batch or global statistics) / backward,
 * eltwise ReLU forward / backward (from dst), pooling forward / backward
 * (max with its workspace), on the tape's NHWC activations. Each
 * primitive is created once per plan (fixed shapes). */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <oneapi/dnnl/dnnl.h>

#include "gpud/cpu/dnnl_priv.h"
#include "gpud/cpu/host_kernels.h"

/* ------------------------------------------------------------ batchnorm */

typedef struct {
    bk_plan_t base;
    cpu_prim_t fwd[2], bwd[2];   /* [training] */
    dnnl_memory_t x, y, gy, gx, scale, shift, mean, var, gscale, gshift;
    dnnl_memory_t ws[2];     /* fused ReLU's mask, forward to backward */
    float *tmp_c;            /* 2c: frozen gamma/beta gradients */
    float *tmp_x;            /* gx when the input needs none */
    float *tmp_gy;           /* eval mode with the ReLU: gy through its mask */
    size_t count;
    int c;                   /* channels */
    int relu;                /* the output is relu(bn(x)) */
    float eps;
} bnplan_t;

static void bnplan_destroy(bk_plan_t *bp)
{
    bnplan_t *p = (bnplan_t *)bp;
    for (int i = 0; i < 2; i++) {
        cpu_prim_free(&p->fwd[i]);
        cpu_prim_free(&p->bwd[i]);
    }
    dnnl_memory_t *m[] = {&p->x, &p->y, &p->gy, &p->gx, &p->scale, &p->shift, &p->mean,
                          &p->var, &p->gscale, &p->gshift, &p->ws[0], &p->ws[1]};
    for (size_t i = 0; i < sizeof m / sizeof *m; i++)
        cpu_mem_free(m[i]);
    free(p->tmp_c);
    free(p->tmp_x);
    free(p->tmp_gy);
    free(p);
}

/* Eval mode's backward is made without the ReLU: cpu_bn_bwd takes the
 * mask from y (relu(bn(x)) > 0, the workspace's mask), because an
 * eval-mode forward need not have run this primitive (dnnl_train16.c
 * normalises 16-bit activations itself), and a workspace it did not write
 * would be another step's mask, or never written. */
static int bn_prims(bk_ctx_t *g, bnplan_t *p, const_dnnl_memory_desc_t data, float eps,
                    int training, int relu)
{
    unsigned flags = dnnl_use_scale | dnnl_use_shift | (training ? 0 : dnnl_use_global_stats) |
                     (relu ? dnnl_fuse_norm_relu : 0);
    unsigned bflags = training ? flags : flags & ~(unsigned)dnnl_fuse_norm_relu;
    dnnl_primitive_desc_t fpd = NULL, hpd = NULL, bpd = NULL;
    dnnl_engine_t eng = cpu_be(g)->eng;
    dnnl_primitive_attr_t a = cpu_attr_new(g);
    int rc = -1;
    if (!a ||
        cpu_prim_make(g, &p->fwd[training],
                      dnnl_batch_normalization_forward_primitive_desc_create(
                          &fpd, eng, dnnl_forward_training, data, data, eps, flags, a),
                      &fpd, 1, "bnorm forward") < 0)
        goto out;
    /* the backward's hint: a forward of the backward's own flags */
    if (bflags != flags &&
        cpu_dn(g, dnnl_batch_normalization_forward_primitive_desc_create(
                      &hpd, eng, dnnl_forward_training, data, data, eps, bflags, a),
               "bnorm forward (the eval backward's hint)") < 0)
        goto out;
    if (cpu_prim_make(g, &p->bwd[training],
                      dnnl_batch_normalization_backward_primitive_desc_create(
                          &bpd, eng, dnnl_backward, data, data, data, eps, bflags,
                          hpd ? hpd : fpd, a),
                      &bpd, 0, "bnorm backward") < 0)
        goto out;
    if (relu && !(p->ws[training] = cpu_mem(g, cpu_q_md(fpd, dnnl_query_workspace_md), 1)))
        goto out;
    cpu_prim_t *f = &p->fwd[training], *b = &p->bwd[training];
    cpu_prim_arg(f, DNNL_ARG_SRC, p->x);
    cpu_prim_arg(f, DNNL_ARG_DST, p->y);
    cpu_prim_arg(f, DNNL_ARG_SCALE, p->scale);
    cpu_prim_arg(f, DNNL_ARG_SHIFT, p->shift);
    cpu_prim_arg(f, DNNL_ARG_MEAN, p->mean);
    cpu_prim_arg(f, DNNL_ARG_VARIANCE, p->var);
    cpu_prim_arg(b, DNNL_ARG_SRC, p->x);
    cpu_prim_arg(b, DNNL_ARG_MEAN, p->mean);
    cpu_prim_arg(b, DNNL_ARG_VARIANCE, p->var);
    cpu_prim_arg(b, DNNL_ARG_DIFF_DST, p->gy);
    cpu_prim_arg(b, DNNL_ARG_SCALE, p->scale);
    cpu_prim_arg(b, DNNL_ARG_DIFF_SRC, p->gx);
    cpu_prim_arg(b, DNNL_ARG_DIFF_SCALE, p->gscale);
    cpu_prim_arg(b, DNNL_ARG_DIFF_SHIFT, p->gshift);
    if (relu)
        cpu_prim_arg(f, DNNL_ARG_WORKSPACE, p->ws[training]);
    if (relu && training)
        cpu_prim_arg(b, DNNL_ARG_WORKSPACE, p->ws[training]);
    rc = 0;
out:
    if (fpd)
        dnnl_primitive_desc_destroy(fpd);
    if (hpd)
        dnnl_primitive_desc_destroy(hpd);
    if (a)
        dnnl_primitive_attr_destroy(a);
    return rc;
}

bk_plan_t *cpu_bn_plan(bk_ctx_t *g, const int in[4], float eps, int relu)
{
    bnplan_t *p = calloc(1, sizeof *p);
    if (!p)
        return bk_ctx_fail(g, "out of memory");
    p->base.destroy = bnplan_destroy;
    p->count = (size_t)in[0] * in[1] * in[2] * in[3];
    p->c = in[1];
    p->relu = relu != 0;
    p->eps = eps;
    cpu_mds_t k = {0};
    dnnl_dim_t cd[1] = {in[1]};
    const_dnnl_memory_desc_t data = cpu_md_act(&k, in), ch = cpu_md(&k, 1, cd, dnnl_f32, dnnl_x);
    cpu_threads(g);
    int ok = cpu_mds_check(g, &k) == 0;
    if (ok && !(p->tmp_c = malloc(2 * (size_t)in[1] * sizeof(float)))) {
        bk_ctx_fail(g, "out of memory");
        ok = 0;
    }
    dnnl_memory_t *m4[] = {&p->x, &p->y, &p->gy, &p->gx};
    dnnl_memory_t *m1[] = {&p->scale, &p->shift, &p->mean, &p->var, &p->gscale, &p->gshift};
    for (int i = 0; ok && i < 4; i++)
        ok = (*m4[i] = cpu_mem(g, data, 0)) != NULL;
    for (int i = 0; ok && i < 6; i++)
        ok = (*m1[i] = cpu_mem(g, ch, 0)) != NULL;
    ok = ok && bn_prims(g, p, data, eps, 1, relu) == 0 && bn_prims(g, p, data, eps, 0, relu) == 0;
    cpu_mds_free(&k);
    if (!ok) {
        bnplan_destroy(&p->base);
        return NULL;
    }
    return &p->base;
}

int cpu_bn_fwd(bk_ctx_t *g, bk_plan_t *bp, int training, const void *x,
                    const float *gamma, const float *beta, float *mean, float *var, void *y)
{
    bnplan_t *p = (bnplan_t *)bp;
    if (cpu_handle(g, p->x, x) < 0 || cpu_handle(g, p->y, y) < 0 ||
        cpu_handle(g, p->scale, gamma) < 0 || cpu_handle(g, p->shift, beta) < 0 ||
        cpu_handle(g, p->mean, mean) < 0 || cpu_handle(g, p->var, var) < 0)
        return -1;
    return cpu_prim_run(g, &p->fwd[training != 0], "bnorm forward");
}

/* The residual block's tail fused (the tape's, gpud/tape_fuse.c): oneDNN
 * 3.x's BatchNorm has no add + ReLU on x64 (dnnl_fuse_norm_add_relu finds
 * no implementation), so the host's pass computes its value (host_bn_add.c). */
int cpu_bn_add_relu(bk_ctx_t *g, bk_plan_t *bp, const void *x, const float *gamma,
                    const float *beta, const float *mean, const float *var, const void *res,
                    void *y)
{
    bnplan_t *p = (bnplan_t *)bp;
    return hk_bn_add_relu(g, y, x, res, p->count / (size_t)p->c, p->c, gamma, beta, mean, var,
                          p->eps);
}

/* BatchNorm + ReLU + dropout fused (the tape's, gpud/tape_fuse.c): the
 * host's pass (host_bn_drop.c), whatever ReLU the plan has. */
int cpu_bn_relu_drop(bk_ctx_t *g, bk_plan_t *bp, const void *x, const int s[4],
                     const float *gamma, const float *beta, const float *mean, const float *var,
                     float drop_p, uint32_t op, const uint64_t *keys, void *y)
{
    const bnplan_t *p = (const bnplan_t *)bp;
    return hk_bn_relu_drop(g, y, x, s, gamma, beta, mean, var, p->eps, drop_p, op, keys);
}

/* A fused ReLU's mask: in training mode the workspace of this step's
 * forward; in eval mode y's (bn_prims), gy through it first. */
int cpu_bn_bwd(bk_ctx_t *g, bk_plan_t *bp, int training, const void *x, const void *y,
                    const void *gy, const float *gamma, const float *mean, const float *var,
                    void *gx, float *ggamma, float *gbeta)
{
    bnplan_t *p = (bnplan_t *)bp;
    size_t c = (size_t)cpu_md_dims(cpu_mem_md(p->scale))[0];
    if ((!gx && !p->tmp_x && !(p->tmp_x = malloc(p->count * sizeof(float)))) ||
        (!training && p->relu && !p->tmp_gy &&
         !(p->tmp_gy = malloc(p->count * sizeof(float))))) {
        bk_ctx_fail(g, "out of memory");
        return -1;
    }
    if (!training && p->relu) {
        if (!y) {
            bk_ctx_fail(g, "batch-norm backward: a ReLU's mask without its output");
            return -1;
        }
        const float *fy = y, *fgy = gy;
        ptrdiff_t count = (ptrdiff_t)p->count;
#pragma omp parallel for schedule(static) num_threads(g->be->threads)
        for (ptrdiff_t i = 0; i < count; i++)
            p->tmp_gy[i] = fy[i] > 0.0f ? fgy[i] : 0.0f;
        gy = p->tmp_gy;
    }
    if (cpu_handle(g, p->x, x) < 0 || cpu_handle(g, p->gy, gy) < 0 ||
        cpu_handle(g, p->scale, gamma) < 0 || cpu_handle(g, p->mean, mean) < 0 ||
        cpu_handle(g, p->var, var) < 0 || cpu_handle(g, p->gx, gx ? gx : p->tmp_x) < 0 ||
        cpu_handle(g, p->gscale, ggamma ? ggamma : p->tmp_c) < 0 ||
        cpu_handle(g, p->gshift, gbeta ? gbeta : p->tmp_c + c) < 0)
        return -1;
    return cpu_prim_run(g, &p->bwd[training != 0], "bnorm backward");
}

/* ---------------------------------------------------------- relu, pool */

typedef struct {
    bk_plan_t base;
    cpu_prim_t fwd, bwd;
    dnnl_memory_t x, y, gy, gx, ws;
} uplan_t;

static void uplan_destroy(bk_plan_t *bp)
{
    uplan_t *p = (uplan_t *)bp;
    cpu_prim_free(&p->fwd);
    cpu_prim_free(&p->bwd);
    dnnl_memory_t *m[] = {&p->x, &p->y, &p->gy, &p->gx, &p->ws};
    for (size_t i = 0; i < sizeof m / sizeof *m; i++)
        cpu_mem_free(m[i]);
    free(p);
}

/* The kinds of unary op, for uplan_new's primitive descriptors. */
typedef struct {
    int pool;                   /* 0: ReLU (eltwise, from dst) */
    dnnl_alg_kind_t alg;
    dnnl_dims_t st, k, pl, pr;  /* pooling */
} unary_t;

/* fwd/bwd primitive descriptors of u over xm (in) and ym (out). */
static int unary_pds(bk_ctx_t *g, uplan_t *p, const unary_t *u, const_dnnl_memory_desc_t xm,
                     const_dnnl_memory_desc_t ym, dnnl_primitive_attr_t a,
                     dnnl_primitive_desc_t *fpd)
{
    dnnl_engine_t eng = cpu_be(g)->eng;
    dnnl_primitive_desc_t bpd = NULL;
    const dnnl_dims_t dil = {0, 0};
    /* ReLU from dst: backward needs only y, which the tape keeps anyway */
    const dnnl_alg_kind_t relu = dnnl_eltwise_relu_use_dst_for_bwd;
    dnnl_status_t st =
        u->pool ? dnnl_pooling_forward_primitive_desc_create(fpd, eng, dnnl_forward_training,
                                                             u->alg, xm, ym, u->st, u->k, dil,
                                                             u->pl, u->pr, a)
                : dnnl_eltwise_forward_primitive_desc_create(fpd, eng, dnnl_forward_training, relu,
                                                             xm, ym, 0.f, 0.f, a);
    if (cpu_prim_make(g, &p->fwd, st, fpd, 1, u->pool ? "pooling forward" : "relu forward") < 0)
        return -1;
    st = u->pool ? dnnl_pooling_backward_primitive_desc_create(&bpd, eng, u->alg, xm, ym, u->st,
                                                               u->k, dil, u->pl, u->pr, *fpd, a)
                 : dnnl_eltwise_backward_primitive_desc_create(&bpd, eng, relu, xm, ym, ym, 0.f,
                                                               0.f, *fpd, a);
    return cpu_prim_make(g, &p->bwd, st, &bpd, 0, u->pool ? "pooling backward" : "relu backward");
}

/* fwd/bwd pair over x (in) and y (out) of an NHWC unary op. */
static uplan_t *uplan_new(bk_ctx_t *g, const unary_t *u, const int in[4], const int out[4])
{
    uplan_t *p = calloc(1, sizeof *p);
    if (!p)
        return bk_ctx_fail(g, "out of memory");
    p->base.destroy = uplan_destroy;
    cpu_mds_t k = {0};
    const_dnnl_memory_desc_t xm = cpu_md_act(&k, in), ym = cpu_md_act(&k, out);
    dnnl_primitive_desc_t fpd = NULL;
    dnnl_primitive_attr_t a = NULL;
    cpu_threads(g);
    int ok = cpu_mds_check(g, &k) == 0 && (a = cpu_attr_new(g)) &&
             unary_pds(g, p, u, xm, ym, a, &fpd) == 0 && (p->x = cpu_mem(g, xm, 0)) &&
             (p->gx = cpu_mem(g, xm, 0)) && (p->y = cpu_mem(g, ym, 0)) &&
             (p->gy = cpu_mem(g, ym, 0));
    if (ok && u->pool && u->alg == dnnl_pooling_max)
        ok = (p->ws = cpu_mem(g, cpu_q_md(fpd, dnnl_query_workspace_md), 1)) != NULL;
    if (fpd)
        dnnl_primitive_desc_destroy(fpd);
    if (a)
        dnnl_primitive_attr_destroy(a);
    cpu_mds_free(&k);
    if (!ok) {
        uplan_destroy(&p->base);
        return NULL;
    }
    cpu_prim_arg(&p->fwd, DNNL_ARG_SRC, p->x);
    cpu_prim_arg(&p->fwd, DNNL_ARG_DST, p->y);
    cpu_prim_arg(&p->bwd, DNNL_ARG_DIFF_DST, p->gy);
    cpu_prim_arg(&p->bwd, DNNL_ARG_DIFF_SRC, p->gx);
    if (p->ws) {
        cpu_prim_arg(&p->fwd, DNNL_ARG_WORKSPACE, p->ws);
        cpu_prim_arg(&p->bwd, DNNL_ARG_WORKSPACE, p->ws);
    }
    return p;
}

bk_plan_t *cpu_relu_plan(bk_ctx_t *g, const int in[4])
{
    const unary_t u = {.pool = 0};
    uplan_t *p = uplan_new(g, &u, in, in);
    if (!p)
        return NULL;
    cpu_prim_arg(&p->bwd, DNNL_ARG_DST, p->y);
    return &p->base;
}

int cpu_relu_fwd(bk_ctx_t *g, bk_plan_t *bp, const void *x, void *y)
{
    uplan_t *p = (uplan_t *)bp;
    if (cpu_handle(g, p->x, x) < 0 || cpu_handle(g, p->y, y) < 0)
        return -1;
    return cpu_prim_run(g, &p->fwd, "relu forward");
}

int cpu_relu_bwd(bk_ctx_t *g, bk_plan_t *bp, const void *y, const void *gy, void *gx)
{
    uplan_t *p = (uplan_t *)bp;
    if (cpu_handle(g, p->y, y) < 0 || cpu_handle(g, p->gy, gy) < 0 ||
        cpu_handle(g, p->gx, gx) < 0)
        return -1;
    return cpu_prim_run(g, &p->bwd, "relu backward");
}

bk_plan_t *cpu_pool_plan(bk_ctx_t *g, const bk_pool_t *q, const int in[4],
                              const int out[4])
{
    unary_t u = {
        .pool = 1,
        .alg = cpu_pool_alg(q),
        .st = {q->stride_h, q->stride_w},
        .k = {q->kh, q->kw},
        .pl = {q->pad_h, q->pad_w},
        /* right padding that makes oneDNN's size formula give the floor-mode out */
        .pr = {(out[2] - 1) * q->stride_h + q->kh - in[2] - q->pad_h,
               (out[3] - 1) * q->stride_w + q->kw - in[3] - q->pad_w},
    };
    uplan_t *p = uplan_new(g, &u, in, out);
    return p ? &p->base : NULL;
}

int cpu_pool_fwd(bk_ctx_t *g, bk_plan_t *bp, const void *x, void *y)
{
    uplan_t *p = (uplan_t *)bp;
    if (cpu_handle(g, p->x, x) < 0 || cpu_handle(g, p->y, y) < 0)
        return -1;
    return cpu_prim_run(g, &p->fwd, "pooling forward");
}

/* Max pooling reads its workspace, written by this step's forward. */
int cpu_pool_bwd(bk_ctx_t *g, bk_plan_t *bp, const void *x, const void *gy, void *gx)
{
    uplan_t *p = (uplan_t *)bp;
    (void)x;
    if (cpu_handle(g, p->gy, gy) < 0 || cpu_handle(g, p->gx, gx) < 0)
        return -1;
    return cpu_prim_run(g, &p->bwd, "pooling backward");
}
