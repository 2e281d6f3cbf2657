/* dnnl_infer — the cpu backend's kernels for an inference graph (a
 * forward-only eval-mode graph rewritten by graph_plan.c, g->infer):
 * convolution with its BatchNorm folded in and bias, ReLU and the residual
 * sum as post-ops; pooling; inner product; ReLU.
 *
 * Speed: activations are in the layout oneDNN's convolutions choose on this
 * CPU (nChw8c on AVX2; nChw16c or NHWC on AVX-512), blocked wherever the
 * channels allow (cpu_infer_layout: a function of the shape, so an op's
 * plan and its readers' agree without asking each other), so consecutive
 * convolutions need no reorder; primitives
 * are created once, for fixed shapes, with format_any (oneDNN picks its
 * layouts; a buffer of another layout is reordered in or out around the
 * primitive); the weights are reordered into the primitive's layout once,
 * and again only when the engine refolds them (g->params_version).
 *
 * Exactness: the primitives are those of the hand-folded eval graphs
 * (forward_inference, the same descriptors and post-ops, strict fp32 math),
 * created and run with the backend's thread count; inner products on one
 * thread (their reduction may split across threads). Reorders copy. So an
 * output element's bits depend neither on the thread count nor on its
 * place in the batch (tests/gpud checks this bit for bit).
 *
 * --precision bf16: the values the engine rounds to bf16 (the folded
 * weights, every op's output; docs/BF16.md "bf16 inference plan") in fp32
 * buffers; emulated, these fp32 kernels; native, the convolutions take
 * bf16 src and weights (exact reorders) and give fp32. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <oneapi/dnnl/dnnl.h>

#include "common/log.h"
#include "gpud/cpu/dnnl_priv.h"
#include "gpud/cpu/host_kernels.h"
#include "gpud/cpu/wino.h"

static void set_threads(int n)
{
    if (omp_get_max_threads() != n)
        omp_set_num_threads(n);
}

/* ------------------------------------------------------------- layouts */

/* The conv data type of the backend's precision: bf16 where it runs native
 * bf16 (the engine has rounded the values, so the reorders are exact). */
static dnnl_data_type_t conv_type(const backend_t *be)
{
    return be->precision == BK_BF16_NATIVE ? cpu_bf16_type() : dnnl_f32;
}

/* The activation layout oneDNN's convolutions choose on this CPU (format
 * any): asked once per backend of a typical ResNet conv (64 -> 64, 3x3,
 * 56x56). The channel block (8: nChw8c on AVX2, 16: nChw16c), else
 * CPU_LAYOUT_NHWC (AVX-512's brgemm convs) or CPU_LAYOUT_NCHW. */
static int preferred(backend_t *be)
{
    cpu_backend_t *cb = (cpu_backend_t *)be;
    if (cb->infer_layout)
        return cb->infer_layout;
    const dnnl_dim_t sd[4] = {16, 64, 56, 56}, wd[4] = {64, 64, 3, 3};
    const dnnl_dims_t st = {1, 1}, pad = {1, 1}, dil = {0, 0};
    cpu_mds_t k = {0};
    const_dnnl_memory_desc_t src = cpu_md(&k, 4, sd, conv_type(be), dnnl_format_tag_any);
    const_dnnl_memory_desc_t wei = cpu_md(&k, 4, wd, conv_type(be), dnnl_format_tag_any);
    const_dnnl_memory_desc_t dst = cpu_md(&k, 4, sd, dnnl_f32, dnnl_format_tag_any);
    dnnl_primitive_desc_t pd = NULL;
    int layout = CPU_LAYOUT_NCHW;
    if (!k.failed &&
        dnnl_convolution_forward_primitive_desc_create(
            &pd, cb->eng, dnnl_forward_inference, dnnl_convolution_direct, src, wei, NULL, dst, st,
            dil, pad, pad, NULL) == dnnl_success) {
        const_dnnl_memory_desc_t got = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
        const struct { dnnl_format_tag_t tag; int layout; } known[] = {
            {dnnl_nChw16c, 16}, {dnnl_nChw8c, 8}, {dnnl_acdb, CPU_LAYOUT_NHWC}};
        for (size_t i = 0; i < sizeof known / sizeof *known; i++) {
            const_dnnl_memory_desc_t m = cpu_md(&k, 4, sd, dnnl_f32, known[i].tag);
            if (m && dnnl_memory_desc_equal(m, got))
                layout = known[i].layout;
        }
    }
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    cpu_mds_free(&k);
    cb->infer_layout = layout;
    return layout;
}

int cpu_infer_layout(backend_t *be, const int s[4])
{
    int p = preferred(be);
    if (p == CPU_LAYOUT_NHWC)
        return 0;   /* the tape's own */
    return p > 1 && s[1] % p == 0 ? p : CPU_LAYOUT_NCHW;
}

static dnnl_format_tag_t layout_tag(int layout)
{
    return layout == 16                ? dnnl_nChw16c
           : layout == 8               ? dnnl_nChw8c
           : layout == CPU_LAYOUT_NCHW ? dnnl_abcd
                                       : dnnl_acdb;
}

/* The memory descriptor of a buffer of shape s in layout code. */
static const_dnnl_memory_desc_t md_of(cpu_mds_t *k, const int s[4], int layout)
{
    const dnnl_dim_t d[4] = {s[0], s[1], s[2], s[3]};
    return cpu_md(k, 4, d, dnnl_f32, layout_tag(layout));
}

/* NCHW <-> a blocked layout of b channels (c % b == 0). */
int cpu_infer_write(bk_ctx_t *g, void *dst, const float *src, const int s[4], int layout)
{
    float *d = dst;
    size_t hw = (size_t)s[2] * s[3], n = (size_t)s[0] * s[1] * hw;
    if (layout == CPU_LAYOUT_NCHW) {
        memcpy(d, src, n * sizeof *d);
        return 0;
    }
    int b = layout, nb = s[1] / b;
#pragma omp parallel for collapse(2) schedule(static) num_threads(g->be->threads)
    for (int i = 0; i < s[0]; i++)
        for (int c = 0; c < s[1]; c++) {
            const float *x = src + ((size_t)i * s[1] + c) * hw;
            float *y = d + (((size_t)i * nb + c / b) * hw) * b + c % b;
            for (size_t p = 0; p < hw; p++)
                y[p * b] = x[p];
        }
    return 0;
}

int cpu_infer_read(bk_ctx_t *g, const void *src, float *dst, const int s[4], int layout)
{
    const float *x = src;
    size_t hw = (size_t)s[2] * s[3], n = (size_t)s[0] * s[1] * hw;
    if (layout == CPU_LAYOUT_NCHW) {
        memcpy(dst, x, n * sizeof *dst);
        return 0;
    }
    int b = layout, nb = s[1] / b;
#pragma omp parallel for collapse(2) schedule(static) num_threads(g->be->threads)
    for (int i = 0; i < s[0]; i++)
        for (int c = 0; c < s[1]; c++) {
            const float *y = x + (((size_t)i * nb + c / b) * hw) * b + c % b;
            float *d = dst + ((size_t)i * s[1] + c) * hw;
            for (size_t p = 0; p < hw; p++)
                d[p] = y[p * b];
        }
    return 0;
}

/* ------------------------------------------------------------- plans */

/* A reorder between two memories (created once); p NULL: none needed. */
typedef struct {
    dnnl_primitive_t p;
    dnnl_memory_t from, to;
} reorder_t;

/* One primitive over the tape's buffers: x (x_md, the buffer's layout)
 * reordered into xp when the primitive wants another; its dst yp reordered
 * into y when y's layout differs (and, with a sum post-op, y's residual
 * into yp first); the weights reordered from the host array w_user into
 * w when the engine's params_version moved. */
typedef struct {
    bk_plan_t base;
    dnnl_primitive_t prim;
    int nargs;
    dnnl_exec_arg_t args[8];
    int threads;                    /* created and run with */
    size_t scratch_size;
    dnnl_memory_t scratch;
    dnnl_memory_t x, y;             /* handles: the tape's buffers */
    dnnl_memory_t xp, yp;           /* the primitive's own, or x / y */
    reorder_t x_in, res_in, y_out, w_in;
    dnnl_memory_t w_user, w, b;     /* w: reordered once per params_version */
    unsigned wver;
    int wset;
    int sum;                        /* conv: a sum post-op (residual in y) */
    /* conv whose sum post-op oneDNN has no JIT kernel for: the conv with
     * the post-ops before it into tmp, then y = tmp + residual (+ ReLU) */
    float *tmp;
    size_t count;
    int split_relu;
} iplan_t;

static void reorder_free(reorder_t *r)
{
    if (r->p)
        dnnl_primitive_destroy(r->p);
    r->p = NULL;
}

static void iplan_destroy(bk_plan_t *bp)
{
    iplan_t *p = (iplan_t *)bp;
    if (p->prim)
        dnnl_primitive_destroy(p->prim);
    reorder_t *r[] = {&p->x_in, &p->res_in, &p->y_out, &p->w_in};
    for (size_t i = 0; i < sizeof r / sizeof *r; i++)
        reorder_free(r[i]);
    if (p->xp == p->x)
        p->xp = NULL;
    if (p->yp == p->y)
        p->yp = NULL;
    dnnl_memory_t *m[] = {&p->scratch, &p->x, &p->y, &p->xp, &p->yp, &p->w_user, &p->w, &p->b};
    for (size_t i = 0; i < sizeof m / sizeof *m; i++)
        cpu_mem_free(m[i]);
    free(p->tmp);
    free(p);
}

static iplan_t *iplan_new(bk_ctx_t *g)
{
    iplan_t *p = calloc(1, sizeof *p);
    if (!p)
        return bk_ctx_fail(g, "out of memory");
    p->base.destroy = iplan_destroy;
    return p;
}

static int reorder_make(bk_ctx_t *g, reorder_t *r, dnnl_memory_t from, dnnl_memory_t to)
{
    const_dnnl_memory_desc_t a = cpu_mem_md(from), b = cpu_mem_md(to);
    dnnl_primitive_desc_t pd = NULL;
    /* the default attr (library scratchpad), as the weights' reorder at build */
    int ok = cpu_dn(g, dnnl_reorder_primitive_desc_create(&pd, a, cpu_be(g)->eng, b, cpu_be(g)->eng,
                                                          NULL), "reorder") == 0 &&
             cpu_dn(g, dnnl_primitive_create(&r->p, pd), "reorder primitive_create") == 0;
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    r->from = from;
    r->to = to;
    return ok ? 0 : -1;
}

static int reorder_run(bk_ctx_t *g, reorder_t *r)
{
    if (!r->p)
        return 0;
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, r->from}, {DNNL_ARG_TO, r->to}};
    return cpu_dn(g, dnnl_primitive_execute(r->p, cpu_be(g)->strm, 2, args), "reorder");
}

/* Memory for a primitive's argument of layout want over the tape buffer
 * `have` (a handle): have itself when the layouts agree, else a buffer of
 * its own with a reorder (in: have -> own; else own -> have). */
static dnnl_memory_t arg_mem(bk_ctx_t *g, dnnl_memory_t have, const_dnnl_memory_desc_t want,
                             reorder_t *r, int in)
{
    if (dnnl_memory_desc_equal(cpu_mem_md(have), want))
        return have;
    dnnl_memory_t m = cpu_mem(g, want, 1);
    if (m && reorder_make(g, r, in ? have : m, in ? m : have) < 0) {
        dnnl_memory_destroy(m);
        return NULL;
    }
    return m;
}

static void arg(iplan_t *p, int a, dnnl_memory_t m)
{
    p->args[p->nargs++] = (dnnl_exec_arg_t){a, m};
}

/* The primitive of pd, its x / y memories (xs, ys: the buffers' shapes and
 * layouts) and scratchpad. 0 or -1. */
static int iplan_prim(bk_ctx_t *g, iplan_t *p, const_dnnl_primitive_desc_t pd, const int xs[4],
                      int xl, const int ys[4], int yl)
{
    cpu_mds_t k = {0};
    const_dnnl_memory_desc_t xm = md_of(&k, xs, xl), ym = md_of(&k, ys, yl);
    const_dnnl_memory_desc_t src = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    const_dnnl_memory_desc_t dst = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    const_dnnl_memory_desc_t smd = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    p->threads = omp_get_max_threads();
    p->scratch_size = smd ? dnnl_memory_desc_get_size(smd) : 0;
    int ok = cpu_mds_check(g, &k) == 0 &&
             cpu_dn(g, dnnl_primitive_create(&p->prim, pd), "primitive_create") == 0 &&
             (p->x = cpu_mem(g, xm, 0)) && (p->y = cpu_mem(g, ym, 0));
    cpu_mds_free(&k);
    if (!ok)
        return -1;
    /* not 4-D: a 2-D view of x (inner product): same bytes */
    if (!(p->xp = cpu_md_ndims(src) == 4 ? arg_mem(g, p->x, src, &p->x_in, 1) : cpu_mem(g, src, 0)))
        return -1;
    if (!(p->yp = cpu_md_ndims(dst) == 4 ? arg_mem(g, p->y, dst, &p->y_out, 0) : cpu_mem(g, dst, 0)))
        return -1;
    if (p->sum && p->yp != p->y && reorder_make(g, &p->res_in, p->y, p->yp) < 0)
        return -1;
    if (p->scratch_size && !(p->scratch = cpu_mem(g, smd, 0)))
        return -1;
    arg(p, DNNL_ARG_SRC, p->xp);
    arg(p, DNNL_ARG_DST, p->yp);
    if (p->scratch)
        arg(p, DNNL_ARG_SCRATCHPAD, p->scratch);
    return 0;
}

/* Weights (and bias) arguments: w in the primitive's layout, from the host
 * array in PyTorch layout (user_md). */
static int iplan_weights(bk_ctx_t *g, iplan_t *p, const_dnnl_primitive_desc_t pd,
                         const_dnnl_memory_desc_t user_md, const_dnnl_memory_desc_t bias_md)
{
    const_dnnl_memory_desc_t wm = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    if (!(p->w_user = cpu_mem(g, user_md, 0)) || !(p->w = cpu_mem(g, wm, 1)) ||
        reorder_make(g, &p->w_in, p->w_user, p->w) < 0 ||
        (bias_md && !(p->b = cpu_mem(g, bias_md, 0))))
        return -1;
    arg(p, DNNL_ARG_WEIGHTS, p->w);
    if (p->b)
        arg(p, DNNL_ARG_BIAS, p->b);
    return 0;
}

/* Run p over x, y (and weights w, bias b for a weighted op). */
static int iplan_run(bk_ctx_t *g, iplan_t *p, const void *x, const float *w, const float *b,
                     void *y)
{
    cpu_backend_t *be = cpu_be(g);
    set_threads(p->threads);
    if (dnnl_memory_set_data_handle(p->x, (void *)x) != dnnl_success ||
        dnnl_memory_set_data_handle(p->y, y) != dnnl_success ||
        (p->xp != p->x && !p->x_in.p &&
         dnnl_memory_set_data_handle(p->xp, (void *)x) != dnnl_success) ||
        (p->yp != p->y && !p->y_out.p && dnnl_memory_set_data_handle(p->yp, y) != dnnl_success) ||
        (p->b && dnnl_memory_set_data_handle(p->b, (void *)b) != dnnl_success)) {
        bk_ctx_fail(g, "oneDNN set_data_handle failed");
        return -1;
    }
    if (p->w && (!p->wset || p->wver != g->params_version)) {
        if (dnnl_memory_set_data_handle(p->w_user, (void *)w) != dnnl_success ||
            reorder_run(g, &p->w_in) < 0)
            return -1;
        p->wset = 1;
        p->wver = g->params_version;
    }
    if (p->scratch) {
        void *s = cpu_scratch(g, p->scratch_size);
        if (!s || cpu_dn(g, dnnl_memory_set_data_handle(p->scratch, s), "scratchpad handle") < 0)
            return -1;
    }
    if (reorder_run(g, &p->x_in) < 0 || reorder_run(g, &p->res_in) < 0 ||
        cpu_dn(g, dnnl_primitive_execute(p->prim, be->strm, p->nargs, p->args), "execute") < 0 ||
        reorder_run(g, &p->y_out) < 0)
        return -1;
    int rc = cpu_dn(g, dnnl_stream_wait(be->strm), "stream_wait");
    set_threads(g->be->threads);
    return rc;
}

/* ------------------------------------------------------------- conv */

static int post_ops_attr(bk_ctx_t *g, dnnl_primitive_attr_t a, const bk_postop_t *post, int n)
{
    dnnl_post_ops_t po = NULL;
    if (n == 0)
        return 0;
    if (cpu_dn(g, dnnl_post_ops_create(&po), "post_ops_create") < 0)
        return -1;
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++)
        rc = post[i] == BK_PO_RELU
                 ? cpu_dn(g, dnnl_post_ops_append_eltwise(po, dnnl_eltwise_relu, 0.f, 0.f),
                          "post_ops relu")
                 : cpu_dn(g, dnnl_post_ops_append_sum(po, 1.f, 0, dnnl_data_type_undef),
                          "post_ops sum");
    if (rc == 0)
        rc = cpu_dn(g, dnnl_primitive_attr_set_post_ops(a, po), "set_post_ops");
    dnnl_post_ops_destroy(po);
    return rc;
}

/* The conv's primitive descriptor with src and dst in the layouts oneDNN
 * chooses (tape 0: a failure fails g), or in the tape's (tape 1: NULL when
 * oneDNN has no kernel for them, g untouched). */
static dnnl_primitive_desc_t conv_pd(bk_ctx_t *g, const bk_conv_t *c, const bk_postop_t *post,
                                     int npost, const int in[4], const int out[4], int tape)
{
    const dnnl_dim_t sd[4] = {in[0], in[1], in[2], in[3]}, wd[4] = {c->oc, c->ic, c->kh, c->kw};
    const dnnl_dim_t bd[1] = {c->oc}, dd[4] = {out[0], out[1], out[2], out[3]};
    const dnnl_dims_t st = {c->stride_h, c->stride_w}, pad = {c->pad_h, c->pad_w}, dil = {0, 0};
    dnnl_format_tag_t ts = tape ? layout_tag(cpu_infer_layout(g->be, in)) : dnnl_format_tag_any;
    dnnl_format_tag_t td = tape ? layout_tag(cpu_infer_layout(g->be, out)) : dnnl_format_tag_any;
    cpu_mds_t k = {0};
    const_dnnl_memory_desc_t src = cpu_md(&k, 4, sd, conv_type(g->be), ts);
    const_dnnl_memory_desc_t wei = cpu_md(&k, 4, wd, conv_type(g->be), dnnl_format_tag_any);
    const_dnnl_memory_desc_t bia = cpu_md(&k, 1, bd, dnnl_f32, dnnl_x);
    const_dnnl_memory_desc_t dst = cpu_md(&k, 4, dd, dnnl_f32, td);
    dnnl_primitive_attr_t a = NULL;
    dnnl_primitive_desc_t pd = NULL;
    if (cpu_mds_check(g, &k) == 0 && (a = cpu_attr_new(g)) &&
        post_ops_attr(g, a, post, npost) == 0) {
        dnnl_status_t status = dnnl_convolution_forward_primitive_desc_create(
            &pd, cpu_be(g)->eng, dnnl_forward_inference, dnnl_convolution_direct, src, wei,
            c->bias ? bia : NULL, dst, st, dil, pad, pad, a);
        if (status != dnnl_success &&
            (tape || cpu_dn(g, status, "convolution primitive_desc_create") < 0))
            pd = NULL;
    }
    if (a)
        dnnl_primitive_attr_destroy(a);
    cpu_mds_free(&k);
    return pd;
}

static int is_reference_impl(const_dnnl_primitive_desc_t pd)
{
    return strncmp(cpu_impl(pd), "ref", 3) == 0;
}

/* Where oneDNN's choice puts src or dst in another layout than the tape's
 * (ResNet's stem on AVX2 with oneDNN 3.2: 3 channels NCHW in, nChw8c out),
 * each call pays a reorder of each: 12 ms of a ResNet-18 batch of 16, 2.6 %
 * of it (bench/RESULTS.md, "Issue 32: oneDNN 3.7 from source, and where the
 * AVX2 bars stop"). When the same kernel also takes the tape's layouts, pd
 * is swapped for that one. fp32 only: native bf16's choices were measured
 * on AMX as they are. */
static dnnl_primitive_desc_t prefer_tape_layouts(bk_ctx_t *g, const bk_conv_t *c,
                                                 const bk_post_t *post, const int in[4],
                                                 const int out[4], dnnl_primitive_desc_t pd)
{
    if (!pd || g->be->precision == BK_BF16_NATIVE)
        return pd;
    cpu_mds_t k = {0};
    const_dnnl_memory_desc_t ti = md_of(&k, in, cpu_infer_layout(g->be, in));
    const_dnnl_memory_desc_t to = md_of(&k, out, cpu_infer_layout(g->be, out));
    int same = k.failed || (dnnl_memory_desc_equal(cpu_q_md(pd, dnnl_query_src_md), ti) &&
                            dnnl_memory_desc_equal(cpu_q_md(pd, dnnl_query_dst_md), to));
    cpu_mds_free(&k);
    if (same)
        return pd;
    dnnl_primitive_desc_t alt = conv_pd(g, c, post->op, post->n, in, out, 1);
    if (!alt)
        return pd;
    if (strcmp(cpu_impl(alt), cpu_impl(pd)) != 0) {
        dnnl_primitive_desc_destroy(alt);
        return pd;
    }
    log_debug("cpu inference plan: conv %d->%d %dx%d on the tape's layouts (%s, no activation "
              "reorders)", c->ic, c->oc, c->kh, c->kw, cpu_impl(alt));
    dnnl_primitive_desc_destroy(pd);
    return alt;
}

bk_plan_t *cpu_infer_conv_plan(bk_ctx_t *g, const bk_conv_t *c, const bk_post_t *post,
                               const int in[4], const int out[4])
{
    int at = -1;
    for (int i = 0; i < post->n; i++)
        if (post->op[i] == BK_PO_SUM)
            at = i;
    /* 3x3 stride 1 on AVX-512 or AVX2 + FMA: Winograd, 2.25x fewer
     * multiplications (wino.h says where it applies) */
    if (cpu_infer_layout(g->be, in) == 0 && cpu_infer_layout(g->be, out) == 0) {
        bk_plan_t *wp = wino_plan_new(g, c, post, in, out);
        if (wp || g->failed)
            return wp;
    }
    iplan_t *p = iplan_new(g);
    if (!p)
        return NULL;
    set_threads(g->be->threads);
    dnnl_primitive_desc_t pd = conv_pd(g, c, post->op, post->n, in, out, 0);
    /* Where oneDNN has no JIT convolution for a sum post-op after an
     * eltwise ({relu, sum}: the seed WideResNet's order) it falls back to
     * its reference loops, ~100x slower (2.6 below AVX-512; 3.2's brgemm
     * convolutions have one on AVX2, so this is a safety net): the sum is split off, as
     * y = conv-with-the-post-ops-before-it + residual, then the ReLU that
     * followed: the float operations of the fused sum, in its order. */
    if (pd && at >= 0 && is_reference_impl(pd)) {
        dnnl_primitive_desc_destroy(pd);
        pd = conv_pd(g, c, post->op, at, in, out, 0);
        p->count = (size_t)out[0] * out[1] * out[2] * out[3];
        for (int i = at + 1; i < post->n; i++)
            p->split_relu |= post->op[i] == BK_PO_RELU;
        if (!(p->tmp = malloc(p->count * sizeof *p->tmp)))
            bk_ctx_fail(g, "out of memory");
    } else {
        p->sum = at >= 0;
        pd = prefer_tape_layouts(g, c, post, in, out, pd);
    }
    cpu_mds_t k = {0};
    const dnnl_dim_t wd[4] = {c->oc, c->ic, c->kh, c->kw}, bd[1] = {c->oc};
    const_dnnl_memory_desc_t wuser = cpu_md(&k, 4, wd, dnnl_f32, dnnl_oihw);
    const_dnnl_memory_desc_t buser = cpu_md(&k, 1, bd, dnnl_f32, dnnl_x);
    int ok = pd && !g->failed && cpu_mds_check(g, &k) == 0 &&
             iplan_prim(g, p, pd, in, cpu_infer_layout(g->be, in), out,
                        cpu_infer_layout(g->be, out)) == 0 &&
             iplan_weights(g, p, pd, wuser, c->bias ? buser : NULL) == 0;
    cpu_mds_free(&k);
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    if (!ok) {
        iplan_destroy(&p->base);
        return NULL;
    }
    return &p->base;
}

int cpu_infer_conv_fwd(bk_ctx_t *g, bk_plan_t *bp, const void *x, const float *w,
                       const float *b, const void *res, void *y)
{
    if (wino_is_plan(bp))   /* a sum post-op adds what y holds: res */
        return wino_plan_fwd(g, bp, x, w, b, y);
    iplan_t *p = (iplan_t *)bp;
    if (!p->tmp)   /* a sum post-op accumulates into y, which holds res */
        return iplan_run(g, p, x, w, b, y);
    /* split sum: the conv into tmp (in y's layout: the y_out reorder, when
     * the primitive wants another, writes tmp), then y = tmp + res */
    if (iplan_run(g, p, x, w, b, p->tmp) < 0)
        return -1;
    hk_add(g->be, y, p->tmp, res, p->count, p->split_relu);
    return 0;
}

/* ------------------------------------------------- pool, linear, relu */

/* An inference pooling (q) or ReLU (q NULL) plan over the tape's buffers
 * of shapes in, out; its primitive's dst layout is oneDNN's choice. */
static bk_plan_t *unary_plan(bk_ctx_t *g, const bk_pool_t *q, const int in[4], const int out[4])
{
    cpu_mds_t k = {0};
    const dnnl_dim_t dd[4] = {out[0], out[1], out[2], out[3]};
    const_dnnl_memory_desc_t src = md_of(&k, in, cpu_infer_layout(g->be, in));
    const_dnnl_memory_desc_t dst = q ? cpu_md(&k, 4, dd, dnnl_f32, dnnl_format_tag_any) : src;
    set_threads(g->be->threads);
    dnnl_primitive_attr_t a = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_status_t st = dnnl_invalid_arguments;
    iplan_t *p = NULL;
    if (cpu_mds_check(g, &k) == 0 && (a = cpu_attr_new(g))) {
        if (q) {
            const dnnl_dims_t stride = {q->stride_h, q->stride_w}, kern = {q->kh, q->kw},
                              pad = {q->pad_h, q->pad_w}, dil = {0, 0};
            st = dnnl_pooling_forward_primitive_desc_create(&pd, cpu_be(g)->eng,
                                                            dnnl_forward_inference,
                                                            cpu_pool_alg(q), src, dst,
                                                            stride, kern, dil, pad, pad, a);
        } else {
            st = dnnl_eltwise_forward_primitive_desc_create(&pd, cpu_be(g)->eng,
                                                            dnnl_forward_inference,
                                                            dnnl_eltwise_relu, src, dst, 0.f, 0.f, a);
        }
        int ok = cpu_dn(g, st, q ? "pooling primitive_desc" : "eltwise primitive_desc") == 0 &&
                 (p = iplan_new(g)) &&
                 iplan_prim(g, p, pd, in, cpu_infer_layout(g->be, in), out,
                            cpu_infer_layout(g->be, out)) == 0;
        if (!ok && p) {
            iplan_destroy(&p->base);
            p = NULL;
        }
    }
    if (st == dnnl_success && pd)
        dnnl_primitive_desc_destroy(pd);
    if (a)
        dnnl_primitive_attr_destroy(a);
    cpu_mds_free(&k);
    return p ? &p->base : NULL;
}

bk_plan_t *cpu_infer_pool_plan(bk_ctx_t *g, const bk_pool_t *q, const int in[4],
                               const int out[4])
{
    return unary_plan(g, q, in, out);
}

bk_plan_t *cpu_infer_relu_plan(bk_ctx_t *g, const int in[4])
{
    return unary_plan(g, NULL, in, in);
}

int cpu_infer_fwd(bk_ctx_t *g, bk_plan_t *bp, const void *x, void *y)
{
    return iplan_run(g, (iplan_t *)bp, x, NULL, NULL, y);
}

/* Inner product on x viewed 2-D (n, c*h*w) when its layout allows (plain,
 * or h = w = 1 in NHWC): a 2-D inner product runs a far better kernel than
 * the 4-D one; blocked x keeps the 4-D view (weights [out, c, h, w]: oneDNN
 * applies them in PyTorch's flatten order whatever x's layout). One thread:
 * the reduction over the input features may split across threads. */
bk_plan_t *cpu_infer_linear_plan(bk_ctx_t *g, const int in[4], int out_f, int has_bias)
{
    iplan_t *p = iplan_new(g);
    if (!p)
        return NULL;
    set_threads(1);
    cpu_mds_t k = {0};
    const_dnnl_memory_desc_t x4 = md_of(&k, in, cpu_infer_layout(g->be, in));
    const dnnl_dim_t d2[2] = {in[0], (dnnl_dim_t)in[1] * in[2] * in[3]};
    const_dnnl_memory_desc_t src = x4 ? cpu_md_reshape(&k, x4, 2, d2) : NULL;
    int nd = src ? 2 : 4;
    if (nd == 4)
        src = x4;
    dnnl_dim_t wd[4] = {out_f, in[1], in[2], in[3]};
    const dnnl_dim_t bd[1] = {out_f}, dd[2] = {in[0], out_f};
    if (nd == 2)
        wd[1] = d2[1];
    const_dnnl_memory_desc_t wei = cpu_md(&k, nd, wd, dnnl_f32, dnnl_format_tag_any);
    const_dnnl_memory_desc_t wuser = cpu_md(&k, nd, wd, dnnl_f32, nd == 2 ? dnnl_ab : dnnl_abcd);
    const_dnnl_memory_desc_t bia = cpu_md(&k, 1, bd, dnnl_f32, dnnl_x);
    const_dnnl_memory_desc_t dst = cpu_md(&k, 2, dd, dnnl_f32, dnnl_format_tag_any);
    dnnl_primitive_attr_t a = NULL;
    dnnl_primitive_desc_t pd = NULL;
    if (cpu_mds_check(g, &k) == 0 && (a = cpu_attr_new(g)) &&
        cpu_dn(g, dnnl_inner_product_forward_primitive_desc_create(
                      &pd, cpu_be(g)->eng, dnnl_forward_inference, src, wei,
                      has_bias ? bia : NULL, dst, a),
               "inner_product primitive_desc") < 0)
        pd = NULL;
    if (a)
        dnnl_primitive_attr_destroy(a);
    /* the output (n, out, 1, 1) has the bytes of the 2-D nc dst in any of
     * its layouts (NCHW, or blocked with h = w = 1) */
    int ys[4] = {in[0], out_f, 1, 1};
    int ok = pd && iplan_prim(g, p, pd, in, cpu_infer_layout(g->be, in), ys,
                              cpu_infer_layout(g->be, ys)) == 0 &&
             iplan_weights(g, p, pd, wuser, has_bias ? bia : NULL) == 0;
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    cpu_mds_free(&k);
    set_threads(g->be->threads);
    if (!ok) {
        iplan_destroy(&p->base);
        return NULL;
    }
    return &p->base;
}

int cpu_infer_linear_fwd(bk_ctx_t *g, bk_plan_t *bp, const void *x, const float *w,
                         const float *b, void *y)
{
    return iplan_run(g, (iplan_t *)bp, x, w, b, y);
}
