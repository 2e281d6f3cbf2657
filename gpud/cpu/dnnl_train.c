/* dnnl_train — the weighted training kernels of the "cpu" backend on
 * oneDNN 3: convolution forward_training / backward_data /
 * backward_weights, inner product forward / backward_data /
 * backward_weights (the others: dnnl_layers.c).
 *
 * Activations are NHWC (plain "acdb"): every oneDNN primitive takes it, the
 * AVX-512 convolutions run on it without reorders, and element-wise work,
 * concat and dropout stay simple host loops. Weights are host arrays in
 * PyTorch layout (they change every step): each forward reorders them into
 * the primitive's layout, each backward reorders the weight gradient back.
 * Every primitive is created once per plan (fixed shapes).
 *
 * BK_BF16_NATIVE (docs/BF16.md "Native"): convolutions and inner products
 * take bf16 src, weights and diff_dst and give f32 dst, diff_src and
 * diff_weights (oneDNN accumulates in f32). The engine has already rounded
 * those operands to bf16 in their f32 buffers, so the reorders to bf16
 * are exact and the numbers are the emulated ones up to the order of the
 * f32 sums. src and diff_dst are reordered, in the layouts the primitives
 * choose, into two bf16 buffers of the backend, shared by every plan
 * (dnnl_bf16.c). */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>

#include "common/log.h"
#include "gpud/cpu/dnnl_priv.h"
#include "gpud/cpu/host_kernels.h"
#include "gpud/cpu/wino.h"

/* ------------------------------------------- blocked activations
 * On AVX2, oneDNN 2.6's convolutions were faster on nChw8c than on NHWC;
 * oneDNN 3's brgemm convolutions are not (bench/RESULTS.md, issue 32: the
 * WideResNet step's convolutions 469 ms blocked, 452 ms NHWC), the
 * reorders of the activations in and out cost more, and the results differ
 * from NHWC's in
 * the last bits (another summation order), which one epoch of this model
 * amplifies into other end-of-epoch weights (bench/RESULTS.md, "Training
 * pipeline"). So it is opt-in: DDPIPE_CONV_LAYOUT=blocked lets the
 * primitives of a convolution whose channels are multiples of 8 pick their
 * layout ("any"); the tape's NHWC buffers are then reordered in and out
 * around them, the forward's reordered input kept for backward-weights.
 * By default every argument is the tape's NHWC buffer, as before. */
typedef struct {
    dnnl_memory_t xf, yf, gyd, gxd, xw, gyw;   /* a plain handle, or owned[] */
    cpu_prim_t x_to_f, yf_to_y, gy_to_d, gxd_to_gx, x_to_w, gy_to_w;
    dnnl_memory_t owned[6];
    int nowned;
} act_args_t;

static void act_args_free(act_args_t *a)
{
    cpu_prim_t *r[] = {&a->x_to_f, &a->yf_to_y, &a->gy_to_d, &a->gxd_to_gx, &a->x_to_w, &a->gy_to_w};
    for (size_t i = 0; i < sizeof r / sizeof *r; i++)
        cpu_prim_free(r[i]);
    for (int i = 0; i < a->nowned; i++)
        cpu_mem_free(&a->owned[i]);
    a->nowned = 0;
}

/* The plain layout of an activation described by want: NHWC for 4-D. */
static const_dnnl_memory_desc_t act_plain(cpu_mds_t *k, const_dnnl_memory_desc_t want)
{
    if (cpu_md_ndims(want) == 4)
        return cpu_md(k, 4, cpu_md_dims(want), dnnl_f32, dnnl_acdb);
    return want;
}

/* What a primitive's activation argument of layout want uses: the plain
 * memory itself when want is plain, else a buffer of its own with a reorder
 * from the plain one (to_prim) or back to it. NULL after bk_ctx_fail. */
static dnnl_memory_t act_arg(bk_ctx_t *g, act_args_t *a, dnnl_memory_t plain,
                             const_dnnl_memory_desc_t want, cpu_prim_t *ro, int to_prim)
{
    if (dnnl_memory_desc_equal(cpu_mem_md(plain), want))
        return plain;
    dnnl_memory_t m = cpu_mem(g, want, 1);
    if (!m)
        return NULL;
    a->owned[a->nowned++] = m;
    if (cpu_reorder_make(g, ro, to_prim ? plain : m, to_prim ? m : plain) < 0)
        return NULL;
    return m;
}

/* The six activation arguments of a forward / backward-data /
 * backward-weights triple over the plain x, y, gy, gx. 0 or -1. */
static int act_args_make(bk_ctx_t *g, act_args_t *a, dnnl_memory_t x, dnnl_memory_t y,
                         dnnl_memory_t gy, dnnl_memory_t gx, const_dnnl_primitive_desc_t fpd,
                         const_dnnl_primitive_desc_t dpd, const_dnnl_primitive_desc_t wpd)
{
    const_dnnl_memory_desc_t ws = cpu_q_md(wpd, dnnl_query_src_md);
    const_dnnl_memory_desc_t wgy = cpu_q_md(wpd, dnnl_query_diff_dst_md);
    if (!(a->xf = act_arg(g, a, x, dnnl_primitive_desc_query_md(fpd, dnnl_query_src_md, 0),
                          &a->x_to_f, 1)) ||
        !(a->yf = act_arg(g, a, y, dnnl_primitive_desc_query_md(fpd, dnnl_query_dst_md, 0),
                          &a->yf_to_y, 0)) ||
        !(a->gyd = act_arg(g, a, gy,
                           dnnl_primitive_desc_query_md(dpd, dnnl_query_diff_dst_md, 0),
                           &a->gy_to_d, 1)) ||
        !(a->gxd = act_arg(g, a, gx,
                           dnnl_primitive_desc_query_md(dpd, dnnl_query_diff_src_md, 0),
                           &a->gxd_to_gx, 0)))
        return -1;
    /* the forward's copy serves again */
    a->xw = dnnl_memory_desc_equal(cpu_mem_md(a->xf), ws) ? a->xf
                                                          : act_arg(g, a, x, ws, &a->x_to_w, 1);
    a->gyw = dnnl_memory_desc_equal(cpu_mem_md(a->gyd), wgy)
                 ? a->gyd
                 : act_arg(g, a, gy, wgy, &a->gy_to_w, 1);
    return a->xw && a->gyw ? 0 : -1;
}

static int act_reorder(bk_ctx_t *g, cpu_prim_t *ro)
{
    return ro->p ? cpu_prim_run(g, ro, "activation reorder") : 0;
}

/* -------------------------------------------------- weighted layers
 * Convolution and inner product share the structure: forward, backward
 * data and backward weights, with the weights in whatever layout each
 * primitive chose and the host arrays in PyTorch layout. */
typedef struct {
    bk_plan_t base;
    cpu_prim_t fwd, bwd_d, bwd_w;
    cpu_prim_t w_to_fwd, w_to_bwd, gw_to_user;   /* reorders (p NULL: not needed) */
    cpu_prim_t x_to16, gy_to16;             /* native bf16: x -> x16, gy -> gy16 */
    cpu_prim_t x_to16w, gy_to16w;           /* the same for backward weights, when it
                                         * wants other layouts than the others */
    dnnl_memory_t x, y, gy, gx;         /* activation handles (plain: NHWC or 2-D) */
    dnnl_memory_t x16, gy16;            /* native bf16: the shared buffers' views */
    dnnl_memory_t x16w, gy16w;          /* NULL: backward weights takes x16, gy16 */
    size_t x16_bytes, gy16_bytes, x16w_bytes, gy16w_bytes;
    act_args_t a;                       /* the primitives' activations */
    dnnl_memory_t w_user, w_fwd, w_bwd; /* w_bwd may be w_fwd */
    dnnl_memory_t gw_user, gw_prim;     /* gw_prim may be gw_user */
    dnnl_memory_t b, gb;                /* bias handles */
    float *gb_tmp, *gw_tmp;             /* when only one of gw/gb is wanted */
    size_t w_count;
    int has_bias;
    int native;                         /* BK_BF16_NATIVE */
    int act16;                          /* native on 16-bit buffers (cpu_*_plan16): x and gy
                                         * are bf16 NHWC, y and gx still f32 */
    int x_direct, gy_direct;            /* act16 and the primitives' src / diff_dst layout
                                         * is the buffer's: x16 / gy16 view it, no copy */
    wino_train_t *wino;                 /* forward and backward data by Winograd (wino.h):
                                         * fwd's and bwd_d's primitives then unused */
} wplan_t;

static void wplan_destroy(bk_plan_t *bp)
{
    wplan_t *p = (wplan_t *)bp;
    cpu_prim_t *prims[] = {&p->fwd,      &p->bwd_d,      &p->bwd_w,  &p->w_to_fwd,
                           &p->w_to_bwd, &p->gw_to_user, &p->x_to16, &p->gy_to16,
                           &p->x_to16w,  &p->gy_to16w};
    for (size_t i = 0; i < sizeof prims / sizeof *prims; i++)
        cpu_prim_free(prims[i]);
    act_args_free(&p->a);
    if (p->w_bwd == p->w_fwd)
        p->w_bwd = NULL;
    if (p->gw_prim == p->gw_user)
        p->gw_prim = NULL;
    dnnl_memory_t *mems[] = {&p->x, &p->y, &p->gy, &p->gx, &p->w_user, &p->w_fwd, &p->w_bwd,
                             &p->gw_user, &p->gw_prim, &p->b, &p->gb, &p->x16, &p->gy16,
                             &p->x16w, &p->gy16w};
    for (size_t i = 0; i < sizeof mems / sizeof *mems; i++)
        cpu_mem_free(mems[i]);
    free(p->gb_tmp);
    free(p->gw_tmp);
    wino_train_destroy(&p->wino);
    free(p);
}

/* Backward weights' own bf16 copy of an activation (user: its f32 handle)
 * when it chose another layout than the forward / backward data: *m16 and
 * its reorder; nothing when the layouts agree. */
static int wplan_native_w(bk_ctx_t *g, const_dnnl_memory_desc_t want,
                          const_dnnl_memory_desc_t have, dnnl_memory_t user, cpu_prim_t *ro,
                          dnnl_memory_t *m16, size_t *bytes)
{
    if (dnnl_memory_desc_equal(want, have))
        return 0;
    *bytes = dnnl_memory_desc_get_size(want);
    if (!(*m16 = cpu_mem(g, want, 0)) || cpu_reorder_make(g, ro, user, *m16) < 0)
        return -1;
    return 0;
}

/* Native bf16: x (f32, the engine's buffer) -> x16 (the primitive's bf16
 * src), gy likewise; x16 and gy16 view the backend's shared buffers. A
 * reference implementation would run but far slower than fp32: said. */
static int wplan_native(bk_ctx_t *g, wplan_t *p, const_dnnl_primitive_desc_t fpd,
                        const_dnnl_primitive_desc_t dpd, const_dnnl_primitive_desc_t wpd,
                        const_dnnl_memory_desc_t x_user, const_dnnl_memory_desc_t y_user)
{
    const_dnnl_memory_desc_t x16 = cpu_q_md(fpd, dnnl_query_src_md);
    const_dnnl_memory_desc_t gy16 = cpu_q_md(dpd, dnnl_query_diff_dst_md);
    if (strncmp(cpu_impl(fpd), "ref", 3) == 0)
        log_warn("%s: oneDNN has only its reference bf16 kernel for this layer (slow)",
                 g->name);
    p->x16_bytes = dnnl_memory_desc_get_size(x16);
    p->gy16_bytes = dnnl_memory_desc_get_size(gy16);
    /* src's buffer sized now (the diff_dst one at the first backward: an
     * inference graph never needs it), so steps do not allocate */
    p->x_direct = p->act16 && dnnl_memory_desc_equal(x16, x_user);
    p->gy_direct = p->act16 && dnnl_memory_desc_equal(gy16, y_user);
    if (!cpu_bf16_buf(g, 0, p->x16_bytes) || !(p->x = cpu_mem(g, x_user, 0)) || !(p->gy = cpu_mem(g, y_user, 0)) ||
        !(p->x16 = cpu_mem(g, x16, 0)) || !(p->gy16 = cpu_mem(g, gy16, 0)) ||
        cpu_reorder_make(g, &p->x_to16, p->x, p->x16) < 0 ||
        cpu_reorder_make(g, &p->gy_to16, p->gy, p->gy16) < 0 ||
        wplan_native_w(g, cpu_q_md(wpd, dnnl_query_src_md), x16, p->x, &p->x_to16w, &p->x16w,
                       &p->x16w_bytes) < 0 ||
        wplan_native_w(g, cpu_q_md(wpd, dnnl_query_diff_dst_md), gy16, p->gy, &p->gy_to16w,
                       &p->gy16w, &p->gy16w_bytes) < 0)
        return -1;
    return 0;
}

/* Native bf16: reorder m (its handle set) into the shared buffer `which`;
 * or, direct (an act16 plan's bf16 buffer already in the primitive's
 * layout), m16 views that buffer. */
static int stage16(bk_ctx_t *g, cpu_prim_t *r, dnnl_memory_t m16, size_t bytes, int which,
                   const void *direct)
{
    if (direct)
        return cpu_handle(g, m16, direct);
    void *buf = cpu_bf16_buf(g, which, bytes);
    if (!buf || cpu_handle(g, m16, buf) < 0)
        return -1;
    return cpu_prim_run(g, r, "bf16 reorder");
}

/* fp32: the plain activation handles and, where the primitives chose
 * another layout, their own buffers and reorders (act_args_t). */
static int wplan_acts(bk_ctx_t *g, wplan_t *p, const_dnnl_primitive_desc_t fpd,
                      const_dnnl_primitive_desc_t dpd, const_dnnl_primitive_desc_t wpd)
{
    cpu_mds_t k = {0};
    const_dnnl_memory_desc_t xpl = act_plain(&k, cpu_q_md(fpd, dnnl_query_src_md));
    const_dnnl_memory_desc_t ypl = act_plain(&k, cpu_q_md(fpd, dnnl_query_dst_md));
    int ok = cpu_mds_check(g, &k) == 0 && (p->x = cpu_mem(g, xpl, 0)) &&
             (p->y = cpu_mem(g, ypl, 0)) && (p->gy = cpu_mem(g, ypl, 0)) &&
             (p->gx = cpu_mem(g, xpl, 0));
    cpu_mds_free(&k);
    if (!ok)
        return -1;
    return act_args_make(g, &p->a, p->x, p->y, p->gy, p->gx, fpd, dpd, wpd);
}

/* Primitives are created with the thread count they run with. */
static void wplan_threads(bk_ctx_t *g, const wplan_t *p)
{
    if (p->fwd.one_thread)
        omp_set_num_threads(1);
    else
        cpu_threads(g);
}

/* The descriptors a weighted layer's plan is made of. */
typedef struct {
    const_dnnl_memory_desc_t src, dst;       /* the engine's f32 activations */
    const_dnnl_memory_desc_t xu, yu;         /* the buffers x and gy are read from: src, dst,
                                              * or their bf16 (act16) */
    const_dnnl_memory_desc_t src16, dst16;   /* the bf16 operands' (native), else src, dst */
    const_dnnl_memory_desc_t w16, wany;      /* weights (bf16 when native), diff_weights */
    const_dnnl_memory_desc_t wuser, bias;    /* PyTorch layout (bias: used when has_bias) */
} wmds_t;

/* The memories and reorders around the three primitives (pd: forward,
 * backward data, backward weights) of the layer described by m. */
static int wplan_build(bk_ctx_t *g, wplan_t *p, dnnl_primitive_desc_t pd[3], const wmds_t *m)
{
    const_dnnl_primitive_desc_t fpd = pd[0], dpd = pd[1], wpd = pd[2];
    const_dnnl_memory_desc_t w_user_md = m->wuser, bias_md = m->bias;
    const_dnnl_memory_desc_t wf = cpu_q_md(fpd, dnnl_query_weights_md);
    const_dnnl_memory_desc_t wb = cpu_q_md(dpd, dnnl_query_weights_md);
    const_dnnl_memory_desc_t gwm = cpu_q_md(wpd, dnnl_query_diff_weights_md);
    p->w_count = dnnl_memory_desc_get_size(w_user_md) / sizeof(float);
    if (p->native ? wplan_native(g, p, fpd, dpd, wpd, m->xu, m->yu) < 0 ||
                        !(p->y = cpu_mem(g, cpu_q_md(fpd, dnnl_query_dst_md), 0)) ||
                        !(p->gx = cpu_mem(g, cpu_q_md(dpd, dnnl_query_diff_src_md), 0))
                  : wplan_acts(g, p, fpd, dpd, wpd) < 0)
        return -1;
    if (p->native)   /* the bf16 staging is native's own; no activation reorders */
        p->a = (act_args_t){.xf = p->x16, .yf = p->y, .gyd = p->gy16, .gxd = p->gx,
                            .xw = p->x16w ? p->x16w : p->x16,
                            .gyw = p->gy16w ? p->gy16w : p->gy16};
    if (!(p->w_user = cpu_mem(g, w_user_md, 0)) || !(p->w_fwd = cpu_mem(g, wf, 1)) ||
        !(p->gw_user = cpu_mem(g, w_user_md, 0)))
        return -1;
    if (cpu_reorder_make(g, &p->w_to_fwd, p->w_user, p->w_fwd) < 0)
        return -1;
    if (dnnl_memory_desc_equal(wf, wb)) {
        p->w_bwd = p->w_fwd;
    } else if (!(p->w_bwd = cpu_mem(g, wb, 1)) ||
               cpu_reorder_make(g, &p->w_to_bwd, p->w_user, p->w_bwd) < 0) {
        return -1;
    }
    if (dnnl_memory_desc_equal(gwm, w_user_md)) {
        p->gw_prim = p->gw_user;
    } else if (!(p->gw_prim = cpu_mem(g, gwm, 1)) ||
               cpu_reorder_make(g, &p->gw_to_user, p->gw_prim, p->gw_user) < 0) {
        return -1;
    }
    if (p->has_bias && (!(p->b = cpu_mem(g, bias_md, 0)) || !(p->gb = cpu_mem(g, bias_md, 0))))
        return -1;
    cpu_prim_arg(&p->fwd, DNNL_ARG_SRC, p->a.xf);
    cpu_prim_arg(&p->fwd, DNNL_ARG_WEIGHTS, p->w_fwd);
    if (p->has_bias)
        cpu_prim_arg(&p->fwd, DNNL_ARG_BIAS, p->b);
    cpu_prim_arg(&p->fwd, DNNL_ARG_DST, p->a.yf);
    cpu_prim_arg(&p->bwd_d, DNNL_ARG_DIFF_DST, p->a.gyd);
    cpu_prim_arg(&p->bwd_d, DNNL_ARG_WEIGHTS, p->w_bwd);
    cpu_prim_arg(&p->bwd_d, DNNL_ARG_DIFF_SRC, p->a.gxd);
    cpu_prim_arg(&p->bwd_w, DNNL_ARG_SRC, p->a.xw);
    cpu_prim_arg(&p->bwd_w, DNNL_ARG_DIFF_DST, p->a.gyw);
    cpu_prim_arg(&p->bwd_w, DNNL_ARG_DIFF_WEIGHTS, p->gw_prim);
    if (p->has_bias)
        cpu_prim_arg(&p->bwd_w, DNNL_ARG_DIFF_BIAS, p->gb);
    return 0;
}

/* forward, backward data, backward weights (fwd first: the others' hint);
 * conv NULL: an inner product. */
static int wplan_prims(bk_ctx_t *g, wplan_t *p, const wmds_t *m, const bk_conv_t *c,
                       const int in[4], const int out[4], dnnl_primitive_desc_t pd[3])
{
    dnnl_engine_t eng = cpu_be(g)->eng;
    dnnl_primitive_attr_t a = cpu_attr_new(g);
    if (!a)
        return -1;
    wplan_threads(g, p);
    const_dnnl_memory_desc_t bias = p->has_bias ? m->bias : NULL;
    int rc;
    if (c) {
        const dnnl_dims_t st = {c->stride_h, c->stride_w}, pl = {c->pad_h, c->pad_w},
                          dil = {0, 0};
        /* right padding that makes oneDNN's size formula give the floor-mode out */
        const dnnl_dims_t pr = {(out[2] - 1) * c->stride_h + c->kh - in[2] - c->pad_h,
                                (out[3] - 1) * c->stride_w + c->kw - in[3] - c->pad_w};
        const dnnl_alg_kind_t alg = dnnl_convolution_direct;
        rc = cpu_prim_make(g, &p->fwd,
                           dnnl_convolution_forward_primitive_desc_create(
                               &pd[0], eng, dnnl_forward_training, alg, m->src16, m->w16, bias,
                               m->dst, st, dil, pl, pr, a),
                           &pd[0], 1, "conv forward primitive") < 0 ||
                     cpu_prim_make(g, &p->bwd_d,
                                   dnnl_convolution_backward_data_primitive_desc_create(
                                       &pd[1], eng, alg, m->src, m->w16, m->dst16, st, dil, pl, pr,
                                       pd[0], a),
                                   &pd[1], 1, "conv backward-data primitive") < 0 ||
                     cpu_prim_make(g, &p->bwd_w,
                                   dnnl_convolution_backward_weights_primitive_desc_create(
                                       &pd[2], eng, alg, m->src16, m->wany, bias, m->dst16, st,
                                       dil, pl, pr, pd[0], a),
                                   &pd[2], 1, "conv backward-weights primitive") < 0
                 ? -1
                 : 0;
    } else {
        rc = cpu_prim_make(g, &p->fwd,
                           dnnl_inner_product_forward_primitive_desc_create(
                               &pd[0], eng, dnnl_forward_training, m->src16, m->w16, bias,
                               m->dst, a),
                           &pd[0], 1, "inner product forward primitive") < 0 ||
                     cpu_prim_make(g, &p->bwd_d,
                                   dnnl_inner_product_backward_data_primitive_desc_create(
                                       &pd[1], eng, m->src, m->w16, m->dst16, pd[0], a),
                                   &pd[1], 1, "inner product backward-data primitive") < 0 ||
                     cpu_prim_make(g, &p->bwd_w,
                                   dnnl_inner_product_backward_weights_primitive_desc_create(
                                       &pd[2], eng, m->src16, m->wany, bias, m->dst16, pd[0],
                                       a),
                                   &pd[2], 1, "inner product backward-weights primitive") < 0
                 ? -1
                 : 0;
    }
    dnnl_primitive_attr_destroy(a);
    return rc;
}

/* The plan of a weighted layer: its primitives, then the memories and
 * reorders around them. */
static int wplan_make(bk_ctx_t *g, wplan_t *p, const wmds_t *m, const bk_conv_t *c,
                      const int in[4], const int out[4])
{
    dnnl_primitive_desc_t pd[3] = {NULL, NULL, NULL};
    int rc = wplan_prims(g, p, m, c, in, out, pd) == 0 &&
                     wplan_build(g, p, pd, m) == 0
                 ? 0
                 : -1;
    for (int i = 0; i < 3; i++)
        if (pd[i])
            dnnl_primitive_desc_destroy(pd[i]);
    return rc;
}

static wplan_t *wplan_new(bk_ctx_t *g, int has_bias, int oc)
{
    wplan_t *p = calloc(1, sizeof *p);
    if (!p)
        return bk_ctx_fail(g, "out of memory");
    p->base.destroy = wplan_destroy;
    p->has_bias = has_bias;
    p->native = g->be->precision == BK_BF16_NATIVE;
    if (has_bias && !(p->gb_tmp = malloc((size_t)oc * sizeof(float)))) {
        free(p);
        return bk_ctx_fail(g, "out of memory");
    }
    return p;
}

int cpu_w_fwd(bk_ctx_t *g, bk_plan_t *bp, const void *x, const float *w, const float *b,
              void *y)
{
    wplan_t *p = (wplan_t *)bp;
    if (p->wino)
        return wino_train_fwd(g, p->wino, x, w, b, y, 0);
    if (cpu_handle(g, p->w_user, w) < 0 ||
        cpu_prim_run(g, &p->w_to_fwd, "weights reorder") < 0)
        return -1;
    if (p->w_to_bwd.p && cpu_prim_run(g, &p->w_to_bwd, "weights reorder") < 0)
        return -1;
    if (cpu_handle(g, p->x, x) < 0 || cpu_handle(g, p->y, y) < 0 ||
        (p->has_bias && cpu_handle(g, p->b, b) < 0) ||
        (p->native && stage16(g, &p->x_to16, p->x16, p->x16_bytes, 0, p->x_direct ? x : NULL) < 0) ||
        act_reorder(g, &p->a.x_to_f) < 0 || cpu_prim_run(g, &p->fwd, "forward") < 0)
        return -1;
    return act_reorder(g, &p->a.yf_to_y);
}

int cpu_w_fwd16(bk_ctx_t *g, bk_plan_t *bp, const void *x, const float *w, const float *b,
                void *y)
{
    wplan_t *p = (wplan_t *)bp;
    if (!p->wino || !p->act16)
        return 1;
    return wino_train_fwd(g, p->wino, x, w, b, y, 1);
}

/* The whole backward by Winograd (wino_train_has_wgrad, no bias: no
 * staging for oneDNN), gx fp32 or bf16 (gx16); 1 where it does not apply. */
static int wino_bwd(bk_ctx_t *g, wplan_t *p, const void *x, const void *gy, void *gx,
                    float *gw, float *gb, int gx16)
{
    if (!p->wino || !wino_train_has_wgrad(p->wino) || gb)
        return 1;
    if (gx && wino_train_bwd_data(g, p->wino, gy, gx, gx16) < 0)
        return -1;
    return gw ? wino_train_bwd_weights(g, p->wino, x, gy, gw) : 0;
}

int cpu_w_bwd16(bk_ctx_t *g, bk_plan_t *bp, const void *x, const void *gy, void *gx, float *gw,
                float *gb)
{
    wplan_t *p = (wplan_t *)bp;
    return p->act16 ? wino_bwd(g, p, x, gy, gx, gw, gb, 1) : 1;
}

/* Weights were reordered by the forward of the same step. */
int cpu_w_bwd(bk_ctx_t *g, bk_plan_t *bp, const void *x, const float *w, const void *gy,
              void *gx, float *gw, float *gb)
{
    wplan_t *p = (wplan_t *)bp;
    (void)w;
    int r = wino_bwd(g, p, x, gy, gx, gw, gb, 0);
    if (r <= 0)
        return r;
    if (cpu_handle(g, p->gy, gy) < 0 ||
        (p->native &&
         stage16(g, &p->gy_to16, p->gy16, p->gy16_bytes, 1, p->gy_direct ? gy : NULL) < 0) ||
        act_reorder(g, &p->a.gy_to_d) < 0)
        return -1;
    if (gx && p->wino && wino_train_bwd_data(g, p->wino, gy, gx, 0) < 0)
        return -1;
    if (gx && !p->wino &&
        (cpu_handle(g, p->gx, gx) < 0 || cpu_prim_run(g, &p->bwd_d, "backward data") < 0 ||
         act_reorder(g, &p->a.gxd_to_gx) < 0))
        return -1;
    if (!gw && !gb)
        return 0;
    if (!gw && !p->gw_tmp && !(p->gw_tmp = malloc(p->w_count * sizeof(float)))) {
        bk_ctx_fail(g, "out of memory");
        return -1;
    }
    /* native: x16 again, the shared buffer has held other layers' since
     * (x16w, gy16w: backward weights' own layouts, gy16's buffer reused:
     * backward data is done); x_to_w, gy_to_w: fp32, likewise */
    if (cpu_handle(g, p->x, x) < 0 || cpu_handle(g, p->gw_user, gw ? gw : p->gw_tmp) < 0 ||
        (p->has_bias && cpu_handle(g, p->gb, gb ? gb : p->gb_tmp) < 0) ||
        (p->native &&
         (p->x16w ? stage16(g, &p->x_to16w, p->x16w, p->x16w_bytes, 0, NULL)
                  : stage16(g, &p->x_to16, p->x16, p->x16_bytes, 0, p->x_direct ? x : NULL)) < 0) ||
        (p->gy16w && stage16(g, &p->gy_to16w, p->gy16w, p->gy16w_bytes, 1, NULL) < 0) ||
        act_reorder(g, &p->a.x_to_w) < 0 || act_reorder(g, &p->a.gy_to_w) < 0 ||
        cpu_prim_run(g, &p->bwd_w, "backward weights") < 0)
        return -1;
    return p->gw_to_user.p ? cpu_prim_run(g, &p->gw_to_user, "weight-gradient reorder") : 0;
}

/* Native bf16 on fp32 buffers: the staged bf16 copies of src and diff_dst
 * in the layouts the primitives choose instead of NHWC: they are reordered
 * from the fp32 activations anyway, and AMX's kernels prefer their blocked
 * layouts (a ResNet-18 step 7 % faster on 16 cores, bench/RESULTS.md).
 * On 16-bit buffers (act16) NHWC, the buffers' own layout: no copy at all.
 * DDPIPE_BF16_LAYOUT=nhwc or =any forces one (other fp32 sum orders only). */
static int bf16_layout_any(int act16)
{
    const char *e = getenv("DDPIPE_BF16_LAYOUT");
    if (e && strcmp(e, "nhwc") == 0)
        return 0;
    if (e && strcmp(e, "any") == 0)
        return 1;
    return !act16;
}

/* Blocked activations for a convolution of ic -> oc channels (opt-in,
 * see act_args_t). */
static int conv_blocked(int ic, int oc)
{
    const char *e = getenv("DDPIPE_CONV_LAYOUT");
    return ic % 8 == 0 && oc % 8 == 0 && e && strcmp(e, "blocked") == 0;
}

static bk_plan_t *conv_plan(bk_ctx_t *g, const bk_conv_t *c, const int in[4], const int out[4],
                            int act16)
{
    wplan_t *p = wplan_new(g, c->bias != NULL, c->oc);
    if (!p)
        return NULL;
    p->act16 = act16;
    cpu_mds_t k = {0};
    wmds_t m = {.src = cpu_md_act(&k, in), .dst = cpu_md_act(&k, out)};
    if (!p->native && conv_blocked(in[1], out[1])) {
        m.src = cpu_md(&k, 4, cpu_md_dims(m.src), dnnl_f32, dnnl_format_tag_any);
        m.dst = cpu_md(&k, 4, cpu_md_dims(m.dst), dnnl_f32, dnnl_format_tag_any);
    }
    const dnnl_dim_t wd[4] = {c->oc, c->ic, c->kh, c->kw}, bd[1] = {c->oc};
    m.wany = cpu_md(&k, 4, wd, dnnl_f32, dnnl_format_tag_any);
    /* the operands the engine made bf16: the primitives' type for them */
    dnnl_data_type_t t16 = p->native ? cpu_bf16_type() : dnnl_f32;
    m.src16 = cpu_md_typed(&k, m.src, t16);
    m.dst16 = cpu_md_typed(&k, m.dst, t16);
    m.w16 = cpu_md_typed(&k, m.wany, t16);
    m.xu = act16 ? m.src16 : m.src;
    m.yu = act16 ? m.dst16 : m.dst;
    if (p->native && bf16_layout_any(act16)) {   /* let each primitive choose */
        m.src16 = cpu_md(&k, 4, cpu_md_dims(m.src), t16, dnnl_format_tag_any);
        m.dst16 = cpu_md(&k, 4, cpu_md_dims(m.dst), t16, dnnl_format_tag_any);
    }
    m.wuser = cpu_md(&k, 4, wd, dnnl_f32, dnnl_oihw);
    m.bias = cpu_md(&k, 1, bd, dnnl_f32, dnnl_x);
    int ok = cpu_mds_check(g, &k) == 0 && wplan_make(g, p, &m, c, in, out) == 0;
    cpu_mds_free(&k);
    /* on the tape's NHWC (fp32, or native bf16 on fp32 or 16-bit buffers):
     * 3x3 stride 1 by Winograd where it applies */
    if (ok && (p->native || !conv_blocked(in[1], out[1])))
        ok = (p->wino = wino_train_new(g, c, in, out, act16)) || !g->failed;
    if (!ok) {
        wplan_destroy(&p->base);
        return NULL;
    }
    return &p->base;
}

bk_plan_t *cpu_conv_plan(bk_ctx_t *g, const bk_conv_t *c, const int in[4], const int out[4])
{
    return conv_plan(g, c, in, out, 0);
}

bk_plan_t *cpu_conv_plan16(bk_ctx_t *g, const bk_conv_t *c, const int in[4], const int out[4])
{
    return conv_plan(g, c, in, out, 1);
}

/* An inner product's primitives, created and run on one thread: oneDNN
 * splits its reduction across threads, so with the backend's threads a
 * logit's bits would depend on the thread count (the inference kernels' inner
 * product does the same, dnnl_infer.c). The layer is small next to the
 * convolutions. Inner product on x viewed 2-D when h = w = 1 (NHWC and NCHW
 * agree), else 4-D with the weights as [out, c, h, w]: oneDNN then applies
 * them in PyTorch's flatten order whatever x's layout. */
static bk_plan_t *linear_plan(bk_ctx_t *g, const int in[4], int out, int has_bias, int act16)
{
    wplan_t *p = wplan_new(g, has_bias, out);
    if (!p)
        return NULL;
    p->act16 = act16;
    cpu_prim_t *all[] = {&p->fwd,        &p->bwd_d,  &p->bwd_w,  &p->w_to_fwd, &p->w_to_bwd,
                         &p->gw_to_user, &p->x_to16, &p->gy_to16};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        all[i]->one_thread = 1;
    int flat = in[2] == 1 && in[3] == 1, nd = flat ? 2 : 4;
    const dnnl_dim_t sd2[2] = {in[0], in[1]}, dd[2] = {in[0], out}, bd[1] = {out};
    const dnnl_dim_t wd[4] = {out, in[1], in[2], in[3]};
    cpu_mds_t k = {0};
    wmds_t m = {.src = flat ? cpu_md(&k, 2, sd2, dnnl_f32, dnnl_ab) : cpu_md_act(&k, in),
                .dst = cpu_md(&k, 2, dd, dnnl_f32, dnnl_ab),
                .wany = cpu_md(&k, nd, wd, dnnl_f32, dnnl_format_tag_any),
                .wuser = cpu_md(&k, nd, wd, dnnl_f32, cpu_plain_tag(nd)),
                .bias = cpu_md(&k, 1, bd, dnnl_f32, dnnl_x)};
    dnnl_data_type_t t16 = p->native ? cpu_bf16_type() : dnnl_f32;   /* as in cpu_conv_plan */
    m.src16 = cpu_md_typed(&k, m.src, t16);
    m.dst16 = cpu_md_typed(&k, m.dst, t16);
    m.w16 = cpu_md_typed(&k, m.wany, t16);
    m.xu = act16 ? m.src16 : m.src;
    m.yu = act16 ? m.dst16 : m.dst;
    int ok = cpu_mds_check(g, &k) == 0 && wplan_make(g, p, &m, NULL, in, NULL) == 0;
    cpu_mds_free(&k);
    cpu_threads(g);
    if (!ok) {
        wplan_destroy(&p->base);
        return NULL;
    }
    return &p->base;
}

bk_plan_t *cpu_linear_plan(bk_ctx_t *g, const int in[4], int out, int has_bias)
{
    return linear_plan(g, in, out, has_bias, 0);
}

bk_plan_t *cpu_linear_plan16(bk_ctx_t *g, const int in[4], int out, int has_bias)
{
    return linear_plan(g, in, out, has_bias, 1);
}
