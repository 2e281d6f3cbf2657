/* dnnl_train — training kernels of the "cpu" backend on oneDNN 2.6:
 * convolution forward_training / backward_data / backward_weights, batch
 * normalization forward (batch or global statistics) / backward, eltwise
 * ReLU forward / backward (from dst), pooling forward / backward (max with
 * its workspace), inner product forward / backward_data / backward_weights.
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

static cpu_backend_t *cbe(bk_prog_t *g)
{
    return (cpu_backend_t *)g->be;
}

static int dn(bk_prog_t *g, dnnl_status_t st, const char *what)
{
    if (st == dnnl_success)
        return 0;
    bk_prog_fail(g, "oneDNN %s failed: %s", what, dnnl_status2str(st));
    return -1;
}

static void use_threads(bk_prog_t *g)
{
    if (omp_get_max_threads() != g->be->threads)
        omp_set_num_threads(g->be->threads);
}

static void md_act(dnnl_memory_desc_t *md, const int s[4])
{
    dnnl_dims_t d = {s[0], s[1], s[2], s[3]};
    dnnl_memory_desc_init_by_tag(md, 4, d, dnnl_f32, dnnl_acdb);
}

static void md_tag(dnnl_memory_desc_t *md, int nd, const dnnl_dim_t *dims,
                   dnnl_format_tag_t tag)
{
    dnnl_dims_t d = {0};
    memcpy(d, dims, (size_t)nd * sizeof *dims);
    dnnl_memory_desc_init_by_tag(md, nd, d, dnnl_f32, tag);
}

/* md with its elements of type dt (a plain or format_any md: its strides
 * count elements, so they stay valid). */
static dnnl_memory_desc_t md_typed(const dnnl_memory_desc_t *md, dnnl_data_type_t dt)
{
    dnnl_memory_desc_t m = *md;
    m.data_type = dt;
    return m;
}

static dnnl_format_tag_t plain_tag(int nd)
{
    static const dnnl_format_tag_t t[] = {dnnl_format_tag_undef, dnnl_a, dnnl_ab, dnnl_abc,
                                          dnnl_abcd};
    return t[nd];
}

/* ------------------------------------------------------------ helpers */

/* A primitive with the memory objects its arguments use; scratch is a
 * view of the backend's shared scratchpad (its handle set at each run). */
typedef struct {
    dnnl_primitive_t p;
    int nargs;
    dnnl_exec_arg_t args[12];
    dnnl_memory_t scratch;
    size_t scratch_size;
    int one_thread;     /* created and run on one thread (inner products) */
} prim_t;

static void prim_arg(prim_t *pr, int arg, dnnl_memory_t m)
{
    pr->args[pr->nargs++] = (dnnl_exec_arg_t){arg, m};
}

/* The primitive of pd, with a scratchpad argument when it needs one. */
static int prim_create(bk_prog_t *g, prim_t *pr, const_dnnl_primitive_desc_t pd,
                       const char *what)
{
    if (dn(g, dnnl_primitive_create(&pr->p, pd), what) < 0)
        return -1;
    const dnnl_memory_desc_t *smd = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    pr->scratch_size = smd ? dnnl_memory_desc_get_size(smd) : 0;
    if (pr->scratch_size == 0)
        return 0;
    if (dn(g, dnnl_memory_create(&pr->scratch, smd, cbe(g)->eng, DNNL_MEMORY_NONE),
           "scratchpad memory_create") < 0)
        return -1;
    prim_arg(pr, DNNL_ARG_SCRATCHPAD, pr->scratch);
    return 0;
}

static int prim_make(bk_prog_t *g, prim_t *pr, const_dnnl_op_desc_t d,
                     const_dnnl_primitive_desc_t hint, dnnl_primitive_desc_t *pd_out,
                     const char *what)
{
    dnnl_primitive_attr_t a = cpu_attr_new(g);
    dnnl_primitive_desc_t pd = NULL;
    int ok = a && dn(g, dnnl_primitive_desc_create(&pd, d, a, cbe(g)->eng, hint), what) == 0 &&
             prim_create(g, pr, pd, what) == 0;
    if (a)
        dnnl_primitive_attr_destroy(a);
    if (ok && pd_out)
        *pd_out = pd;
    else if (pd)
        dnnl_primitive_desc_destroy(pd);
    return ok ? 0 : -1;
}

static void prim_free(prim_t *pr)
{
    if (pr->p)
        dnnl_primitive_destroy(pr->p);
    if (pr->scratch)
        dnnl_memory_destroy(pr->scratch);
    pr->p = NULL;
    pr->scratch = NULL;
}

/* Point pr's scratchpad at the backend's buffer, grown if pr needs more. */
static int prim_scratch(bk_prog_t *g, prim_t *pr)
{
    cpu_backend_t *be = cbe(g);
    if (!pr->scratch)
        return 0;
    if (pr->scratch_size > be->scratch_cap) {
        void *buf = NULL;
        if (posix_memalign(&buf, 64, pr->scratch_size) != 0) {
            bk_prog_fail(g, "out of memory for a %zu-byte oneDNN scratchpad", pr->scratch_size);
            return -1;
        }
        free(be->scratch);
        be->scratch = buf;
        be->scratch_cap = pr->scratch_size;
    }
    return dn(g, dnnl_memory_set_data_handle(pr->scratch, be->scratch), "scratchpad handle");
}

static int prim_run(bk_prog_t *g, prim_t *pr, const char *what)
{
    if (pr->one_thread)
        omp_set_num_threads(1);
    else
        use_threads(g);
    if (prim_scratch(g, pr) < 0)
        return -1;
    if (dn(g, dnnl_primitive_execute(pr->p, cbe(g)->strm, pr->nargs, pr->args), what) < 0)
        return -1;
    return dn(g, dnnl_stream_wait(cbe(g)->strm), "stream_wait");
}

/* Memory of md: allocated (owned) or a handle set at each call (NONE). */
static dnnl_memory_t mem(bk_prog_t *g, const dnnl_memory_desc_t *md, int alloc)
{
    dnnl_memory_t m = NULL;
    if (dn(g, dnnl_memory_create(&m, md, cbe(g)->eng,
                                 alloc ? DNNL_MEMORY_ALLOCATE : DNNL_MEMORY_NONE),
           "memory_create") < 0)
        return NULL;
    return m;
}

static int set_handle(bk_prog_t *g, dnnl_memory_t m, const void *p)
{
    return dn(g, dnnl_memory_set_data_handle(m, (void *)p), "set_data_handle");
}

static void mem_free(dnnl_memory_t *m)
{
    if (*m)
        dnnl_memory_destroy(*m);
    *m = NULL;
}

/* Reorder from `from` to `to` (created once). */
static int reorder_make(bk_prog_t *g, prim_t *pr, dnnl_memory_t from, dnnl_memory_t to)
{
    const dnnl_memory_desc_t *a, *b;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_memory_get_memory_desc(from, &a);
    dnnl_memory_get_memory_desc(to, &b);
    dnnl_primitive_attr_t attr = cpu_attr_new(g);
    int ok = attr &&
             dn(g, dnnl_reorder_primitive_desc_create(&pd, a, cbe(g)->eng, b, cbe(g)->eng, attr),
                "reorder") == 0 &&
             prim_create(g, pr, pd, "reorder") == 0;
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    prim_arg(pr, DNNL_ARG_FROM, from);
    prim_arg(pr, DNNL_ARG_TO, to);
    return ok ? 0 : -1;
}

static const dnnl_memory_desc_t *q_md(const_dnnl_primitive_desc_t pd, dnnl_query_t q)
{
    return dnnl_primitive_desc_query_md(pd, q, 0);
}

/* ------------------------------------------- blocked activations
 * On AVX2, oneDNN 2.6's convolutions are faster on nChw8c than on NHWC
 * (the WideResNet's training step: forward 4-5 %, backward-data 12 %,
 * backward-weights 20 % less time), but the reorders of the activations in
 * and out take most of that back, and the results differ from NHWC's in
 * the last bits (another summation order), which one epoch of this model
 * amplifies into other end-of-epoch weights (bench/RESULTS.md, "Training
 * pipeline"). So it is opt-in: DDPIPE_CONV_LAYOUT=blocked lets the
 * primitives of a convolution whose channels are multiples of 8 pick their
 * layout ("any"); the tape's NHWC buffers are then reordered in and out
 * around them, the forward's reordered input kept for backward-weights.
 * By default every argument is the tape's NHWC buffer, as before. */
typedef struct {
    dnnl_memory_t xf, yf, gyd, gxd, xw, gyw;   /* a plain handle, or owned[] */
    prim_t x_to_f, yf_to_y, gy_to_d, gxd_to_gx, x_to_w, gy_to_w;
    dnnl_memory_t owned[6];
    int nowned;
} act_args_t;

static void act_args_free(act_args_t *a)
{
    prim_t *r[] = {&a->x_to_f, &a->yf_to_y, &a->gy_to_d, &a->gxd_to_gx, &a->x_to_w, &a->gy_to_w};
    for (size_t i = 0; i < sizeof r / sizeof *r; i++)
        prim_free(r[i]);
    for (int i = 0; i < a->nowned; i++)
        mem_free(&a->owned[i]);
    a->nowned = 0;
}

/* The plain layout of an activation described by want: NHWC for 4-D. */
static void act_plain(const dnnl_memory_desc_t *want, dnnl_memory_desc_t *out)
{
    if (want->ndims == 4)
        md_tag(out, 4, want->dims, dnnl_acdb);
    else
        *out = *want;
}

/* What a primitive's activation argument of layout want uses: the plain
 * memory itself when want is plain, else a buffer of its own with a reorder
 * from the plain one (to_prim) or back to it. NULL after bk_prog_fail. */
static dnnl_memory_t act_arg(bk_prog_t *g, act_args_t *a, dnnl_memory_t plain,
                             const dnnl_memory_desc_t *want, prim_t *ro, int to_prim)
{
    const dnnl_memory_desc_t *pm;
    dnnl_memory_get_memory_desc(plain, &pm);
    if (dnnl_memory_desc_equal(pm, want))
        return plain;
    dnnl_memory_t m = mem(g, want, 1);
    if (!m)
        return NULL;
    a->owned[a->nowned++] = m;
    if (reorder_make(g, ro, to_prim ? plain : m, to_prim ? m : plain) < 0)
        return NULL;
    return m;
}

/* The six activation arguments of a forward / backward-data /
 * backward-weights triple over the plain x, y, gy, gx. 0 or -1. */
static int act_args_make(bk_prog_t *g, act_args_t *a, dnnl_memory_t x, dnnl_memory_t y,
                         dnnl_memory_t gy, dnnl_memory_t gx, const_dnnl_primitive_desc_t fpd,
                         const_dnnl_primitive_desc_t dpd, const_dnnl_primitive_desc_t wpd)
{
    const dnnl_memory_desc_t *ws = dnnl_primitive_desc_query_md(wpd, dnnl_query_src_md, 0);
    const dnnl_memory_desc_t *wgy = dnnl_primitive_desc_query_md(wpd, dnnl_query_diff_dst_md, 0);
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
    const dnnl_memory_desc_t *m;
    dnnl_memory_get_memory_desc(a->xf, &m);   /* the forward's copy serves again */
    a->xw = dnnl_memory_desc_equal(m, ws) ? a->xf : act_arg(g, a, x, ws, &a->x_to_w, 1);
    dnnl_memory_get_memory_desc(a->gyd, &m);
    a->gyw = dnnl_memory_desc_equal(m, wgy) ? a->gyd : act_arg(g, a, gy, wgy, &a->gy_to_w, 1);
    return a->xw && a->gyw ? 0 : -1;
}

static int act_reorder(bk_prog_t *g, prim_t *ro)
{
    return ro->p ? prim_run(g, ro, "activation reorder") : 0;
}

/* ------------------------------------- forward by backward data
 * oneDNN 2.6's AVX2 forward kernel for NHWC is slow on the stride-1 3x3
 * convolutions of ResNets and WideResNets (ic == oc: 40-50 GFLOP/s on one
 * Zen core) where its backward-data kernel for the same shape runs at
 * 60-85 (bench/conv_floor.sh, bench/RESULTS.md). A stride-1 convolution
 * with "same" padding, y = conv(x, W), is the backward data of the
 * convolution from y's channels to x's whose weights are W transposed
 * (in <-> out) and flipped in both spatial axes, with x as its diff_dst:
 *   y[n,k,p] = sum over c, i, j of x[n,c,p + (i,j) - pad] W[k,c,i,j]
 *            = sum over c, i', j' of x[n,c,p - (i',j') + pad] W'[c,k,i',j']
 *   with W'[c,k,i',j'] = W[k,c,kh-1-i',kw-1-j'] and pad = (k-1)/2.
 * So those forwards run that primitive: the same products in another
 * summation order, fixed per shape and CPU (never chosen by timing: a
 * sample's bits must not depend on the machine's load). The backward
 * passes are unchanged. DDPIPE_CONV_FWD=direct turns it off. */
typedef struct fswap {
    prim_t run;                 /* the swapped convolution's backward data */
    prim_t w_to;                /* flipped weights (oihw) -> its layout */
    dnnl_memory_t x, y;         /* handles: x as diff_dst, y as diff_src */
    dnnl_memory_t w_flip, w;    /* the flipped weights, user layout / its own */
    float *flip;                /* w_flip's buffer */
    int ic, oc, kh, kw;
} fswap_t;

static void fswap_destroy(fswap_t **sp)
{
    fswap_t *sw = *sp;
    if (!sw)
        return;
    prim_free(&sw->run);
    prim_free(&sw->w_to);
    dnnl_memory_t *mems[] = {&sw->x, &sw->y, &sw->w_flip, &sw->w};
    for (size_t i = 0; i < sizeof mems / sizeof *mems; i++)
        mem_free(mems[i]);
    free(sw->flip);
    free(sw);
    *sp = NULL;
}

/* Where the swap applies and is measured faster: fp32 NHWC (not native
 * bf16, not DDPIPE_CONV_LAYOUT=blocked), stride 1, 3x3 with padding 1,
 * ic == oc, no bias (the convolutions before a BatchNorm), and oneDNN's
 * forward for it is its AVX2 kernel (fwd: the direct forward primitive). */
static int fswap_wanted(int plain_f32, const bk_conv_t *c, const int in[4], const int out[4],
                        const_dnnl_primitive_t fwd)
{
    const char *e = getenv("DDPIPE_CONV_FWD"), *impl = NULL;
    const_dnnl_primitive_desc_t pd = NULL;
    if ((e && strcmp(e, "direct") == 0) || !plain_f32 || c->bias || c->ic != c->oc ||
        c->kh != 3 || c->kw != 3 || c->stride_h != 1 || c->stride_w != 1 || c->pad_h != 1 ||
        c->pad_w != 1 || in[2] != out[2] || in[3] != out[3])
        return 0;
    if (dnnl_primitive_get_primitive_desc(fwd, &pd) != dnnl_success ||
        dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success)
        return 0;
    return impl && strcmp(impl, "jit:avx2") == 0;
}

/* The swapped convolution's backward-data primitive descriptor (a forward
 * one is only its hint, as oneDNN asks). Plain oneDNN calls: where oneDNN
 * cannot make them the forward stays direct, the graph is not failed. */
static int fswap_pd(bk_prog_t *g, const fswap_t *sw, const dnnl_memory_desc_t *ys,
                    const dnnl_memory_desc_t *xd, dnnl_primitive_desc_t *dpd)
{
    dnnl_memory_desc_t wany;
    dnnl_dim_t wd[4] = {sw->ic, sw->oc, sw->kh, sw->kw};
    md_tag(&wany, 4, wd, dnnl_format_tag_any);
    dnnl_dims_t st = {1, 1}, pad = {(sw->kh - 1) / 2, (sw->kw - 1) / 2};
    dnnl_convolution_desc_t fd, dd;
    dnnl_primitive_desc_t fpd = NULL;
    dnnl_primitive_attr_t a = cpu_attr_new(g);
    int ok = a &&
             dnnl_convolution_forward_desc_init(&fd, dnnl_forward_training,
                                                dnnl_convolution_direct, ys, &wany, NULL, xd,
                                                st, pad, pad) == dnnl_success &&
             dnnl_convolution_backward_data_desc_init(&dd, dnnl_convolution_direct, ys, &wany,
                                                      xd, st, pad, pad) == dnnl_success &&
             dnnl_primitive_desc_create(&fpd, &fd, NULL, cbe(g)->eng, NULL) == dnnl_success &&
             dnnl_primitive_desc_create(dpd, &dd, a, cbe(g)->eng, fpd) == dnnl_success;
    if (fpd)
        dnnl_primitive_desc_destroy(fpd);
    if (a)
        dnnl_primitive_attr_destroy(a);
    return ok ? 0 : -1;
}

/* The swap of convolution c over NHWC x and y; NULL with nothing failed
 * where oneDNN gives it no AVX2 backward-data kernel, NULL after
 * bk_prog_fail on an error (out of memory). */
static fswap_t *fswap_new(bk_prog_t *g, const bk_conv_t *c, const int in[4], const int out[4])
{
    fswap_t *sw = calloc(1, sizeof *sw);
    if (!sw)
        return bk_prog_fail(g, "out of memory");
    *sw = (fswap_t){.ic = c->ic, .oc = c->oc, .kh = c->kh, .kw = c->kw};
    dnnl_memory_desc_t ys, xd, wflip;
    md_act(&ys, out);   /* the swapped convolution's src: y's shape */
    md_act(&xd, in);    /* ... and its dst: x's */
    dnnl_dim_t wd[4] = {c->ic, c->oc, c->kh, c->kw};
    md_tag(&wflip, 4, wd, dnnl_oihw);
    dnnl_primitive_desc_t dpd = NULL;
    const char *impl = NULL;
    if (fswap_pd(g, sw, &ys, &xd, &dpd) == 0)
        dnnl_primitive_desc_query(dpd, dnnl_query_impl_info_str, 0, &impl);
    int avx2 = impl && strcmp(impl, "jit:avx2") == 0, ok = 1;
    if (avx2 && !(sw->flip = malloc((size_t)c->ic * c->oc * c->kh * c->kw * sizeof(float)))) {
        bk_prog_fail(g, "out of memory");
        ok = 0;
    }
    ok = ok && (!avx2 || (prim_create(g, &sw->run, dpd, "swap backward-data primitive") == 0 &&
                          (sw->x = mem(g, &xd, 0)) && (sw->y = mem(g, &ys, 0)) &&
                          (sw->w_flip = mem(g, &wflip, 0)) &&
                          (sw->w = mem(g, q_md(dpd, dnnl_query_weights_md), 1)) &&
                          set_handle(g, sw->w_flip, sw->flip) == 0 &&
                          reorder_make(g, &sw->w_to, sw->w_flip, sw->w) == 0));
    if (dpd)
        dnnl_primitive_desc_destroy(dpd);
    if (!ok || !avx2) {
        fswap_destroy(&sw);
        return NULL;
    }
    prim_arg(&sw->run, DNNL_ARG_DIFF_DST, sw->x);
    prim_arg(&sw->run, DNNL_ARG_WEIGHTS, sw->w);
    prim_arg(&sw->run, DNNL_ARG_DIFF_SRC, sw->y);
    return sw;
}

/* y = conv(x, w): w [oc, ic, kh, kw] transposed and flipped into
 * [ic, oc, kh, kw], reordered, then the backward-data primitive. */
static int fswap_run(bk_prog_t *g, fswap_t *sw, const void *x, const float *w, void *y)
{
    const int kh = sw->kh, kw = sw->kw, taps = kh * kw;
    for (int k = 0; k < sw->oc; k++)
        for (int c = 0; c < sw->ic; c++) {
            const float *src = w + ((size_t)k * sw->ic + c) * taps;
            float *dst = sw->flip + ((size_t)c * sw->oc + k) * taps;
            for (int t = 0; t < taps; t++)
                dst[t] = src[taps - 1 - t];   /* (i, j) -> (kh-1-i, kw-1-j) */
        }
    if (prim_run(g, &sw->w_to, "swap weights reorder") < 0 || set_handle(g, sw->x, x) < 0 ||
        set_handle(g, sw->y, y) < 0)
        return -1;
    return prim_run(g, &sw->run, "forward (backward-data kernel)");
}

/* -------------------------------------------------- weighted layers
 * Convolution and inner product share the structure: forward, backward
 * data and backward weights, with the weights in whatever layout each
 * primitive chose and the host arrays in PyTorch layout. */
typedef struct {
    bk_plan_t base;
    prim_t fwd, bwd_d, bwd_w;
    prim_t w_to_fwd, w_to_bwd, gw_to_user;   /* reorders (p NULL: not needed) */
    prim_t x_to16, gy_to16;             /* native bf16: x -> x16, gy -> gy16 */
    prim_t x_to16w, gy_to16w;           /* the same for backward weights, when it
                                         * wants other layouts than the others */
    dnnl_memory_t x, y, gy, gx;         /* activation handles (plain: NHWC or 2-D) */
    dnnl_memory_t x16, gy16;            /* native bf16: the shared buffers' views */
    dnnl_memory_t x16w, gy16w;          /* NULL: backward weights takes x16, gy16 */
    size_t x16_bytes, gy16_bytes, x16w_bytes, gy16w_bytes;
    act_args_t a;                       /* the primitives' activations */
    fswap_t *swap;                      /* forward by backward data, or NULL */
    dnnl_memory_t w_user, w_fwd, w_bwd; /* w_bwd may be w_fwd */
    dnnl_memory_t gw_user, gw_prim;     /* gw_prim may be gw_user */
    dnnl_memory_t b, gb;                /* bias handles */
    float *gb_tmp, *gw_tmp;             /* when only one of gw/gb is wanted */
    size_t w_count;
    int has_bias;
    int native;                         /* BK_BF16_NATIVE */
} wplan_t;

static void wplan_destroy(bk_plan_t *bp)
{
    wplan_t *p = (wplan_t *)bp;
    fswap_destroy(&p->swap);
    prim_t *prims[] = {&p->fwd,      &p->bwd_d,      &p->bwd_w,  &p->w_to_fwd,
                       &p->w_to_bwd, &p->gw_to_user, &p->x_to16, &p->gy_to16,
                       &p->x_to16w,  &p->gy_to16w};
    for (size_t i = 0; i < sizeof prims / sizeof *prims; i++)
        prim_free(prims[i]);
    act_args_free(&p->a);
    if (p->w_bwd == p->w_fwd)
        p->w_bwd = NULL;
    if (p->gw_prim == p->gw_user)
        p->gw_prim = NULL;
    dnnl_memory_t *mems[] = {&p->x, &p->y, &p->gy, &p->gx, &p->w_user, &p->w_fwd, &p->w_bwd,
                             &p->gw_user, &p->gw_prim, &p->b, &p->gb, &p->x16, &p->gy16,
                             &p->x16w, &p->gy16w};
    for (size_t i = 0; i < sizeof mems / sizeof *mems; i++)
        mem_free(mems[i]);
    free(p->gb_tmp);
    free(p->gw_tmp);
    free(p);
}

/* Backward weights' own bf16 copy of an activation (user: its f32 handle)
 * when it chose another layout than the forward / backward data: *m16 and
 * its reorder; nothing when the layouts agree. */
static int wplan_native_w(bk_prog_t *g, const dnnl_memory_desc_t *want,
                          const dnnl_memory_desc_t *have, dnnl_memory_t user, prim_t *ro,
                          dnnl_memory_t *m16, size_t *bytes)
{
    if (dnnl_memory_desc_equal(want, have))
        return 0;
    *bytes = dnnl_memory_desc_get_size(want);
    if (!(*m16 = mem(g, want, 0)) || reorder_make(g, ro, user, *m16) < 0)
        return -1;
    return 0;
}

/* Native bf16: x (f32, the engine's buffer) -> x16 (the primitive's bf16
 * src), gy likewise; x16 and gy16 view the backend's shared buffers. A
 * reference implementation would run but far slower than fp32: said. */
static int wplan_native(bk_prog_t *g, wplan_t *p, const_dnnl_primitive_desc_t fpd,
                        const_dnnl_primitive_desc_t dpd, const_dnnl_primitive_desc_t wpd,
                        const dnnl_memory_desc_t *x_user, const dnnl_memory_desc_t *y_user)
{
    const dnnl_memory_desc_t *x16 = q_md(fpd, dnnl_query_src_md);
    const dnnl_memory_desc_t *gy16 = q_md(dpd, dnnl_query_diff_dst_md);
    const char *impl = NULL;
    dnnl_primitive_desc_query(fpd, dnnl_query_impl_info_str, 0, &impl);
    if (impl && strncmp(impl, "ref", 3) == 0)
        log_warn("%s: oneDNN has only its reference bf16 kernel for this layer (slow)",
                 g->name);
    p->x16_bytes = dnnl_memory_desc_get_size(x16);
    p->gy16_bytes = dnnl_memory_desc_get_size(gy16);
    /* src's buffer sized now (the diff_dst one at the first backward: an
     * inference graph never needs it), so steps do not allocate */
    if (!cpu_bf16_buf(g, 0, p->x16_bytes) || !(p->x = mem(g, x_user, 0)) || !(p->gy = mem(g, y_user, 0)) ||
        !(p->x16 = mem(g, x16, 0)) || !(p->gy16 = mem(g, gy16, 0)) ||
        reorder_make(g, &p->x_to16, p->x, p->x16) < 0 ||
        reorder_make(g, &p->gy_to16, p->gy, p->gy16) < 0 ||
        wplan_native_w(g, q_md(wpd, dnnl_query_src_md), x16, p->x, &p->x_to16w, &p->x16w,
                       &p->x16w_bytes) < 0 ||
        wplan_native_w(g, q_md(wpd, dnnl_query_diff_dst_md), gy16, p->gy, &p->gy_to16w,
                       &p->gy16w, &p->gy16w_bytes) < 0)
        return -1;
    return 0;
}

/* Native bf16: reorder m (its handle set) into the shared buffer `which`. */
static int stage16(bk_prog_t *g, prim_t *r, dnnl_memory_t m16, size_t bytes, int which)
{
    void *buf = cpu_bf16_buf(g, which, bytes);
    if (!buf || set_handle(g, m16, buf) < 0)
        return -1;
    return prim_run(g, r, "bf16 reorder");
}

/* fp32: the plain activation handles and, where the primitives chose
 * another layout, their own buffers and reorders (act_args_t). */
static int wplan_acts(bk_prog_t *g, wplan_t *p, const_dnnl_primitive_desc_t fpd,
                      const_dnnl_primitive_desc_t dpd, const_dnnl_primitive_desc_t wpd)
{
    dnnl_memory_desc_t xpl, ypl;
    act_plain(q_md(fpd, dnnl_query_src_md), &xpl);
    act_plain(q_md(fpd, dnnl_query_dst_md), &ypl);
    if (!(p->x = mem(g, &xpl, 0)) || !(p->y = mem(g, &ypl, 0)) || !(p->gy = mem(g, &ypl, 0)) ||
        !(p->gx = mem(g, &xpl, 0)))
        return -1;
    return act_args_make(g, &p->a, p->x, p->y, p->gy, p->gx, fpd, dpd, wpd);
}

/* The three primitives from their op descriptors (fwd first: it is the
 * others' hint), then the memories and reorders around them. x_user and
 * y_user: the f32 activations (NHWC, or 2-D), as the engine holds them. */
static int wplan_build(bk_prog_t *g, wplan_t *p, const_dnnl_op_desc_t fd,
                       const_dnnl_op_desc_t bdd, const_dnnl_op_desc_t bwd,
                       const dnnl_memory_desc_t *w_user_md, const dnnl_memory_desc_t *bias_md,
                       const dnnl_memory_desc_t *x_user, const dnnl_memory_desc_t *y_user)
{
    dnnl_primitive_desc_t fpd = NULL, dpd = NULL, wpd = NULL;
    int rc = -1;
    if (p->fwd.one_thread)   /* created with the thread count it runs with */
        omp_set_num_threads(1);
    else
        use_threads(g);
    if (prim_make(g, &p->fwd, fd, NULL, &fpd, "forward primitive") < 0 ||
        prim_make(g, &p->bwd_d, bdd, fpd, &dpd, "backward-data primitive") < 0 ||
        prim_make(g, &p->bwd_w, bwd, fpd, &wpd, "backward-weights primitive") < 0)
        goto out;
    const dnnl_memory_desc_t *wf = q_md(fpd, dnnl_query_weights_md);
    const dnnl_memory_desc_t *wb = q_md(dpd, dnnl_query_weights_md);
    const dnnl_memory_desc_t *gwm = q_md(wpd, dnnl_query_diff_weights_md);
    p->w_count = dnnl_memory_desc_get_size(w_user_md) / sizeof(float);
    if (p->native ? wplan_native(g, p, fpd, dpd, wpd, x_user, y_user) < 0 ||
                        !(p->y = mem(g, q_md(fpd, dnnl_query_dst_md), 0)) ||
                        !(p->gx = mem(g, q_md(dpd, dnnl_query_diff_src_md), 0))
                  : wplan_acts(g, p, fpd, dpd, wpd) < 0)
        goto out;
    if (p->native)   /* the bf16 staging is native's own; no activation reorders */
        p->a = (act_args_t){.xf = p->x16, .yf = p->y, .gyd = p->gy16, .gxd = p->gx,
                            .xw = p->x16w ? p->x16w : p->x16,
                            .gyw = p->gy16w ? p->gy16w : p->gy16};
    if (!(p->w_user = mem(g, w_user_md, 0)) || !(p->w_fwd = mem(g, wf, 1)) ||
        !(p->gw_user = mem(g, w_user_md, 0)))
        goto out;
    if (reorder_make(g, &p->w_to_fwd, p->w_user, p->w_fwd) < 0)
        goto out;
    if (dnnl_memory_desc_equal(wf, wb)) {
        p->w_bwd = p->w_fwd;
    } else if (!(p->w_bwd = mem(g, wb, 1)) ||
               reorder_make(g, &p->w_to_bwd, p->w_user, p->w_bwd) < 0) {
        goto out;
    }
    if (dnnl_memory_desc_equal(gwm, w_user_md)) {
        p->gw_prim = p->gw_user;
    } else if (!(p->gw_prim = mem(g, gwm, 1)) ||
               reorder_make(g, &p->gw_to_user, p->gw_prim, p->gw_user) < 0) {
        goto out;
    }
    if (p->has_bias && (!(p->b = mem(g, bias_md, 0)) || !(p->gb = mem(g, bias_md, 0))))
        goto out;
    prim_arg(&p->fwd, DNNL_ARG_SRC, p->a.xf);
    prim_arg(&p->fwd, DNNL_ARG_WEIGHTS, p->w_fwd);
    if (p->has_bias)
        prim_arg(&p->fwd, DNNL_ARG_BIAS, p->b);
    prim_arg(&p->fwd, DNNL_ARG_DST, p->a.yf);
    prim_arg(&p->bwd_d, DNNL_ARG_DIFF_DST, p->a.gyd);
    prim_arg(&p->bwd_d, DNNL_ARG_WEIGHTS, p->w_bwd);
    prim_arg(&p->bwd_d, DNNL_ARG_DIFF_SRC, p->a.gxd);
    prim_arg(&p->bwd_w, DNNL_ARG_SRC, p->a.xw);
    prim_arg(&p->bwd_w, DNNL_ARG_DIFF_DST, p->a.gyw);
    prim_arg(&p->bwd_w, DNNL_ARG_DIFF_WEIGHTS, p->gw_prim);
    if (p->has_bias)
        prim_arg(&p->bwd_w, DNNL_ARG_DIFF_BIAS, p->gb);
    rc = 0;
out:
    if (fpd)
        dnnl_primitive_desc_destroy(fpd);
    if (dpd)
        dnnl_primitive_desc_destroy(dpd);
    if (wpd)
        dnnl_primitive_desc_destroy(wpd);
    return rc;
}

static wplan_t *wplan_new(bk_prog_t *g, int has_bias, int oc)
{
    wplan_t *p = calloc(1, sizeof *p);
    if (!p)
        return bk_prog_fail(g, "out of memory");
    p->base.destroy = wplan_destroy;
    p->has_bias = has_bias;
    p->native = g->be->precision == BK_BF16_NATIVE;
    if (has_bias && !(p->gb_tmp = malloc((size_t)oc * sizeof(float)))) {
        free(p);
        return bk_prog_fail(g, "out of memory");
    }
    return p;
}

static int w_fwd(bk_prog_t *g, bk_plan_t *bp, const void *x, const float *w, const float *b,
                 void *y)
{
    wplan_t *p = (wplan_t *)bp;
    /* the forward primitive's copy only when something runs it or backward
     * data shares it: a swapped forward uses its own flipped weights */
    int fwd_w = !p->swap || p->w_bwd == p->w_fwd;
    if (set_handle(g, p->w_user, w) < 0 ||
        (fwd_w && prim_run(g, &p->w_to_fwd, "weights reorder") < 0))
        return -1;
    if (p->w_to_bwd.p && prim_run(g, &p->w_to_bwd, "weights reorder") < 0)
        return -1;
    if (p->swap)   /* forward by backward data (fswap_t); no bias, plain f32 */
        return fswap_run(g, p->swap, x, w, y);
    if (set_handle(g, p->x, x) < 0 || set_handle(g, p->y, y) < 0 ||
        (p->has_bias && set_handle(g, p->b, b) < 0) ||
        (p->native && stage16(g, &p->x_to16, p->x16, p->x16_bytes, 0) < 0) ||
        act_reorder(g, &p->a.x_to_f) < 0 || prim_run(g, &p->fwd, "forward") < 0)
        return -1;
    return act_reorder(g, &p->a.yf_to_y);
}

/* Weights were reordered by the forward of the same step. */
static int w_bwd(bk_prog_t *g, bk_plan_t *bp, const void *x, const float *w, const void *gy,
                 void *gx, float *gw, float *gb)
{
    wplan_t *p = (wplan_t *)bp;
    (void)w;
    if (set_handle(g, p->gy, gy) < 0 ||
        (p->native && stage16(g, &p->gy_to16, p->gy16, p->gy16_bytes, 1) < 0) ||
        act_reorder(g, &p->a.gy_to_d) < 0)
        return -1;
    if (gx && (set_handle(g, p->gx, gx) < 0 || prim_run(g, &p->bwd_d, "backward data") < 0 ||
               act_reorder(g, &p->a.gxd_to_gx) < 0))
        return -1;
    if (!gw && !gb)
        return 0;
    if (!gw && !p->gw_tmp && !(p->gw_tmp = malloc(p->w_count * sizeof(float)))) {
        bk_prog_fail(g, "out of memory");
        return -1;
    }
    /* native: x16 again, the shared buffer has held other layers' since
     * (x16w, gy16w: backward weights' own layouts, gy16's buffer reused:
     * backward data is done); x_to_w, gy_to_w: fp32, likewise */
    if (set_handle(g, p->x, x) < 0 || set_handle(g, p->gw_user, gw ? gw : p->gw_tmp) < 0 ||
        (p->has_bias && set_handle(g, p->gb, gb ? gb : p->gb_tmp) < 0) ||
        (p->native && (p->x16w ? stage16(g, &p->x_to16w, p->x16w, p->x16w_bytes, 0)
                               : stage16(g, &p->x_to16, p->x16, p->x16_bytes, 0)) < 0) ||
        (p->gy16w && stage16(g, &p->gy_to16w, p->gy16w, p->gy16w_bytes, 1) < 0) ||
        act_reorder(g, &p->a.x_to_w) < 0 || act_reorder(g, &p->a.gy_to_w) < 0 ||
        prim_run(g, &p->bwd_w, "backward weights") < 0)
        return -1;
    return p->gw_to_user.p ? prim_run(g, &p->gw_to_user, "weight-gradient reorder") : 0;
}

/* Native bf16: the staged bf16 copies of src and diff_dst in the layouts
 * the primitives choose instead of NHWC: they are reordered from the fp32
 * activations anyway, and AMX's kernels prefer their blocked layouts (a
 * ResNet-18 step 7 % faster on 16 cores, bench/RESULTS.md).
 * DDPIPE_BF16_LAYOUT=nhwc keeps NHWC (other fp32 sum orders only). */
static int bf16_layout_any(void)
{
    const char *e = getenv("DDPIPE_BF16_LAYOUT");
    return !(e && strcmp(e, "nhwc") == 0);
}

/* Blocked activations for a convolution of ic -> oc channels (opt-in,
 * see act_args_t). */
static int conv_blocked(int ic, int oc)
{
    const char *e = getenv("DDPIPE_CONV_LAYOUT");
    return ic % 8 == 0 && oc % 8 == 0 && e && strcmp(e, "blocked") == 0;
}

static bk_plan_t *c_conv_plan(bk_prog_t *g, const bk_conv_t *c, const int in[4],
                              const int out[4])
{
    wplan_t *p = wplan_new(g, c->bias != NULL, c->oc);
    if (!p)
        return NULL;
    dnnl_memory_desc_t src, dst, wany, wuser, bias;
    md_act(&src, in);
    md_act(&dst, out);
    if (!p->native && conv_blocked(in[1], out[1])) {
        md_tag(&src, 4, src.dims, dnnl_format_tag_any);
        md_tag(&dst, 4, dst.dims, dnnl_format_tag_any);
    }
    dnnl_dim_t wd[4] = {c->oc, c->ic, c->kh, c->kw}, bd[1] = {c->oc};
    md_tag(&wany, 4, wd, dnnl_format_tag_any);
    /* the operands the engine made bf16: the primitives' type for them */
    dnnl_data_type_t t16 = p->native ? cpu_bf16_type() : dnnl_f32;
    dnnl_memory_desc_t src16 = md_typed(&src, t16), dst16 = md_typed(&dst, t16),
                       w16 = md_typed(&wany, t16);
    if (p->native && bf16_layout_any()) {   /* staged anyway: let each primitive choose */
        md_tag(&src16, 4, src.dims, dnnl_format_tag_any);
        md_tag(&dst16, 4, dst.dims, dnnl_format_tag_any);
        src16 = md_typed(&src16, t16);
        dst16 = md_typed(&dst16, t16);
    }
    md_tag(&wuser, 4, wd, dnnl_oihw);
    md_tag(&bias, 1, bd, dnnl_x);
    dnnl_dims_t st = {c->stride_h, c->stride_w}, pl = {c->pad_h, c->pad_w};
    /* right padding that makes oneDNN's size formula give the floor-mode out */
    dnnl_dims_t pr = {(out[2] - 1) * c->stride_h + c->kh - in[2] - c->pad_h,
                      (out[3] - 1) * c->stride_w + c->kw - in[3] - c->pad_w};
    const dnnl_memory_desc_t *bp = c->bias ? &bias : NULL;
    dnnl_convolution_desc_t fd, dd, wd_;
    if (dn(g, dnnl_convolution_forward_desc_init(&fd, dnnl_forward_training,
                                                 dnnl_convolution_direct, &src16, &w16, bp,
                                                 &dst, st, pl, pr), "conv forward desc") < 0 ||
        dn(g, dnnl_convolution_backward_data_desc_init(&dd, dnnl_convolution_direct, &src,
                                                       &w16, &dst16, st, pl, pr),
           "conv backward-data desc") < 0 ||
        dn(g, dnnl_convolution_backward_weights_desc_init(&wd_, dnnl_convolution_direct,
                                                          &src16, &wany, bp, &dst16, st, pl,
                                                          pr), "conv backward-weights desc") < 0 ||
        wplan_build(g, p, &fd, &dd, &wd_, &wuser, &bias, &src, &dst) < 0) {
        wplan_destroy(&p->base);
        return NULL;
    }
    if (fswap_wanted(!p->native && !conv_blocked(in[1], out[1]), c, in, out, p->fwd.p) &&
        !(p->swap = fswap_new(g, c, in, out)) && bk_prog_error(g)) {
        wplan_destroy(&p->base);
        return NULL;
    }
    return &p->base;
}

/* An inner product's primitives, created and run on one thread: oneDNN
 * splits its reduction across threads, so with the backend's threads a
 * logit's bits would depend on the thread count (the fused program's inner
 * product does the same, dnnl_backend.c). The layer is small next to the
 * convolutions. */
static int linear_build(bk_prog_t *g, wplan_t *p, const_dnnl_op_desc_t fd,
                        const_dnnl_op_desc_t ddd, const_dnnl_op_desc_t wdd,
                        const dnnl_memory_desc_t *wuser, const dnnl_memory_desc_t *bias,
                        const dnnl_memory_desc_t *x_user, const dnnl_memory_desc_t *y_user)
{
    prim_t *all[] = {&p->fwd,        &p->bwd_d,  &p->bwd_w,  &p->w_to_fwd, &p->w_to_bwd,
                     &p->gw_to_user, &p->x_to16, &p->gy_to16};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        all[i]->one_thread = 1;
    int rc = wplan_build(g, p, fd, ddd, wdd, wuser, bias, x_user, y_user);
    use_threads(g);
    return rc;
}

/* Inner product on x viewed 2-D when h = w = 1 (NHWC and NCHW agree),
 * else 4-D with the weights as [out, c, h, w]: oneDNN then applies them
 * in PyTorch's flatten order whatever x's layout. */
static bk_plan_t *c_linear_plan(bk_prog_t *g, const int in[4], int out, int has_bias)
{
    wplan_t *p = wplan_new(g, has_bias, out);
    if (!p)
        return NULL;
    int flat = in[2] == 1 && in[3] == 1, nd = flat ? 2 : 4;
    dnnl_memory_desc_t src, dst, wany, wuser, bias;
    dnnl_dim_t sd2[2] = {in[0], in[1]}, dd[2] = {in[0], out}, bd[1] = {out};
    dnnl_dim_t wd[4] = {out, in[1], in[2], in[3]};
    if (flat)
        md_tag(&src, 2, sd2, dnnl_ab);
    else
        md_act(&src, in);
    md_tag(&dst, 2, dd, dnnl_ab);
    md_tag(&wany, nd, wd, dnnl_format_tag_any);
    md_tag(&wuser, nd, wd, plain_tag(nd));
    md_tag(&bias, 1, bd, dnnl_x);
    const dnnl_memory_desc_t *bp = has_bias ? &bias : NULL;
    dnnl_data_type_t t16 = p->native ? cpu_bf16_type() : dnnl_f32;   /* as in c_conv_plan */
    dnnl_memory_desc_t src16 = md_typed(&src, t16), dst16 = md_typed(&dst, t16),
                       w16 = md_typed(&wany, t16);
    dnnl_inner_product_desc_t fd, ddd, wdd;
    if (dn(g, dnnl_inner_product_forward_desc_init(&fd, dnnl_forward_training, &src16, &w16,
                                                   bp, &dst), "inner product forward desc") < 0 ||
        dn(g, dnnl_inner_product_backward_data_desc_init(&ddd, &src, &w16, &dst16),
           "inner product backward-data desc") < 0 ||
        dn(g, dnnl_inner_product_backward_weights_desc_init(&wdd, &src16, &wany, bp, &dst16),
           "inner product backward-weights desc") < 0 ||
        linear_build(g, p, &fd, &ddd, &wdd, &wuser, &bias, &src, &dst) < 0) {
        wplan_destroy(&p->base);
        return NULL;
    }
    return &p->base;
}

/* ------------------------------------------------------------ batchnorm */

typedef struct {
    bk_plan_t base;
    prim_t fwd[2], bwd[2];   /* [training] */
    dnnl_memory_t x, y, gy, gx, scale, shift, mean, var, gscale, gshift;
    dnnl_memory_t ws[2];     /* fused ReLU's mask, forward to backward */
    float *tmp_c;            /* 2c: frozen gamma/beta gradients */
    float *tmp_x;            /* gx when the input needs none */
    size_t count;
} bnplan_t;

static void bnplan_destroy(bk_plan_t *bp)
{
    bnplan_t *p = (bnplan_t *)bp;
    for (int i = 0; i < 2; i++) {
        prim_free(&p->fwd[i]);
        prim_free(&p->bwd[i]);
    }
    dnnl_memory_t *m[] = {&p->x, &p->y, &p->gy, &p->gx, &p->scale, &p->shift, &p->mean,
                          &p->var, &p->gscale, &p->gshift, &p->ws[0], &p->ws[1]};
    for (size_t i = 0; i < sizeof m / sizeof *m; i++)
        mem_free(m[i]);
    free(p->tmp_c);
    free(p->tmp_x);
    free(p);
}

static int bn_prims(bk_prog_t *g, bnplan_t *p, const dnnl_memory_desc_t *data, float eps,
                    int training, int relu)
{
    unsigned flags = dnnl_use_scale | dnnl_use_shift | (training ? 0 : dnnl_use_global_stats) |
                     (relu ? dnnl_fuse_norm_relu : 0);
    dnnl_batch_normalization_desc_t fd, bd;
    dnnl_primitive_desc_t fpd = NULL;
    int rc = -1;
    if (dn(g, dnnl_batch_normalization_forward_desc_init(&fd, dnnl_forward_training, data, eps,
                                                         flags), "bnorm forward desc") < 0 ||
        dn(g, dnnl_batch_normalization_backward_desc_init(&bd, dnnl_backward, data, data, eps,
                                                          flags), "bnorm backward desc") < 0 ||
        prim_make(g, &p->fwd[training], &fd, NULL, &fpd, "bnorm forward") < 0 ||
        prim_make(g, &p->bwd[training], &bd, fpd, NULL, "bnorm backward") < 0)
        goto out;
    if (relu && !(p->ws[training] = mem(g, q_md(fpd, dnnl_query_workspace_md), 1)))
        goto out;
    prim_t *f = &p->fwd[training], *b = &p->bwd[training];
    prim_arg(f, DNNL_ARG_SRC, p->x);
    prim_arg(f, DNNL_ARG_DST, p->y);
    prim_arg(f, DNNL_ARG_SCALE, p->scale);
    prim_arg(f, DNNL_ARG_SHIFT, p->shift);
    prim_arg(f, DNNL_ARG_MEAN, p->mean);
    prim_arg(f, DNNL_ARG_VARIANCE, p->var);
    prim_arg(b, DNNL_ARG_SRC, p->x);
    prim_arg(b, DNNL_ARG_MEAN, p->mean);
    prim_arg(b, DNNL_ARG_VARIANCE, p->var);
    prim_arg(b, DNNL_ARG_DIFF_DST, p->gy);
    prim_arg(b, DNNL_ARG_SCALE, p->scale);
    prim_arg(b, DNNL_ARG_SHIFT, p->shift);   /* unused, but checked: the forward's beta */
    prim_arg(b, DNNL_ARG_DIFF_SRC, p->gx);
    prim_arg(b, DNNL_ARG_DIFF_SCALE, p->gscale);
    prim_arg(b, DNNL_ARG_DIFF_SHIFT, p->gshift);
    if (relu) {
        prim_arg(f, DNNL_ARG_WORKSPACE, p->ws[training]);
        prim_arg(b, DNNL_ARG_WORKSPACE, p->ws[training]);
    }
    rc = 0;
out:
    if (fpd)
        dnnl_primitive_desc_destroy(fpd);
    return rc;
}

static bk_plan_t *c_bn_plan(bk_prog_t *g, const int in[4], float eps, int relu)
{
    bnplan_t *p = calloc(1, sizeof *p);
    if (!p)
        return bk_prog_fail(g, "out of memory");
    p->base.destroy = bnplan_destroy;
    p->count = (size_t)in[0] * in[1] * in[2] * in[3];
    dnnl_memory_desc_t data, ch;
    dnnl_dim_t cd[1] = {in[1]};
    md_act(&data, in);
    md_tag(&ch, 1, cd, dnnl_x);
    use_threads(g);
    int ok = (p->tmp_c = malloc(2 * (size_t)in[1] * sizeof(float))) != NULL;
    if (!ok)
        bk_prog_fail(g, "out of memory");
    dnnl_memory_t *m4[] = {&p->x, &p->y, &p->gy, &p->gx};
    dnnl_memory_t *m1[] = {&p->scale, &p->shift, &p->mean, &p->var, &p->gscale, &p->gshift};
    for (int i = 0; ok && i < 4; i++)
        ok = (*m4[i] = mem(g, &data, 0)) != NULL;
    for (int i = 0; ok && i < 6; i++)
        ok = (*m1[i] = mem(g, &ch, 0)) != NULL;
    if (!ok || bn_prims(g, p, &data, eps, 1, relu) < 0 ||
        bn_prims(g, p, &data, eps, 0, relu) < 0) {
        bnplan_destroy(&p->base);
        return NULL;
    }
    return &p->base;
}

static int c_bn_fwd(bk_prog_t *g, bk_plan_t *bp, int training, const void *x,
                    const float *gamma, const float *beta, float *mean, float *var, void *y)
{
    bnplan_t *p = (bnplan_t *)bp;
    if (set_handle(g, p->x, x) < 0 || set_handle(g, p->y, y) < 0 ||
        set_handle(g, p->scale, gamma) < 0 || set_handle(g, p->shift, beta) < 0 ||
        set_handle(g, p->mean, mean) < 0 || set_handle(g, p->var, var) < 0)
        return -1;
    return prim_run(g, &p->fwd[training != 0], "bnorm forward");
}

/* A fused ReLU's mask is in the workspace of this step's forward. */
static int c_bn_bwd(bk_prog_t *g, bk_plan_t *bp, int training, const void *x, const void *y,
                    const void *gy, const float *gamma, const float *mean, const float *var,
                    void *gx, float *ggamma, float *gbeta)
{
    bnplan_t *p = (bnplan_t *)bp;
    (void)y;
    const dnnl_memory_desc_t *md;
    dnnl_memory_get_memory_desc(p->scale, &md);
    size_t c = (size_t)md->dims[0];
    if (!gx && !p->tmp_x && !(p->tmp_x = malloc(p->count * sizeof(float)))) {
        bk_prog_fail(g, "out of memory");
        return -1;
    }
    if (set_handle(g, p->x, x) < 0 || set_handle(g, p->gy, gy) < 0 ||
        set_handle(g, p->scale, gamma) < 0 || set_handle(g, p->mean, mean) < 0 ||
        set_handle(g, p->var, var) < 0 || set_handle(g, p->gx, gx ? gx : p->tmp_x) < 0 ||
        set_handle(g, p->gscale, ggamma ? ggamma : p->tmp_c) < 0 ||
        set_handle(g, p->gshift, gbeta ? gbeta : p->tmp_c + c) < 0)
        return -1;
    return prim_run(g, &p->bwd[training != 0], "bnorm backward");
}

/* ---------------------------------------------------------- relu, pool */

typedef struct {
    bk_plan_t base;
    prim_t fwd, bwd;
    dnnl_memory_t x, y, gy, gx, ws;
} uplan_t;

static void uplan_destroy(bk_plan_t *bp)
{
    uplan_t *p = (uplan_t *)bp;
    prim_free(&p->fwd);
    prim_free(&p->bwd);
    dnnl_memory_t *m[] = {&p->x, &p->y, &p->gy, &p->gx, &p->ws};
    for (size_t i = 0; i < sizeof m / sizeof *m; i++)
        mem_free(m[i]);
    free(p);
}

/* fwd/bwd pair over x (in) and y (out) of an NHWC unary op. */
static uplan_t *uplan_new(bk_prog_t *g, const_dnnl_op_desc_t fd, const_dnnl_op_desc_t bd,
                          const int in[4], const int out[4], int max_pool)
{
    uplan_t *p = calloc(1, sizeof *p);
    if (!p)
        return bk_prog_fail(g, "out of memory");
    p->base.destroy = uplan_destroy;
    dnnl_memory_desc_t xm, ym;
    md_act(&xm, in);
    md_act(&ym, out);
    dnnl_primitive_desc_t fpd = NULL;
    use_threads(g);
    int ok = prim_make(g, &p->fwd, fd, NULL, &fpd, "forward primitive") == 0 &&
             prim_make(g, &p->bwd, bd, fpd, NULL, "backward primitive") == 0 &&
             (p->x = mem(g, &xm, 0)) && (p->gx = mem(g, &xm, 0)) && (p->y = mem(g, &ym, 0)) &&
             (p->gy = mem(g, &ym, 0));
    if (ok && max_pool)
        ok = (p->ws = mem(g, q_md(fpd, dnnl_query_workspace_md), 1)) != NULL;
    if (fpd)
        dnnl_primitive_desc_destroy(fpd);
    if (!ok) {
        uplan_destroy(&p->base);
        return NULL;
    }
    prim_arg(&p->fwd, DNNL_ARG_SRC, p->x);
    prim_arg(&p->fwd, DNNL_ARG_DST, p->y);
    prim_arg(&p->bwd, DNNL_ARG_DIFF_DST, p->gy);
    prim_arg(&p->bwd, DNNL_ARG_DIFF_SRC, p->gx);
    if (p->ws) {
        prim_arg(&p->fwd, DNNL_ARG_WORKSPACE, p->ws);
        prim_arg(&p->bwd, DNNL_ARG_WORKSPACE, p->ws);
    }
    return p;
}

static bk_plan_t *c_relu_plan(bk_prog_t *g, const int in[4])
{
    dnnl_memory_desc_t md;
    md_act(&md, in);
    dnnl_eltwise_desc_t fd, bd;
    /* from dst: backward needs only y, which the tape keeps anyway */
    if (dn(g, dnnl_eltwise_forward_desc_init(&fd, dnnl_forward_training,
                                             dnnl_eltwise_relu_use_dst_for_bwd, &md, 0.f, 0.f),
           "eltwise forward desc") < 0 ||
        dn(g, dnnl_eltwise_backward_desc_init(&bd, dnnl_eltwise_relu_use_dst_for_bwd, &md, &md,
                                              0.f, 0.f), "eltwise backward desc") < 0)
        return NULL;
    uplan_t *p = uplan_new(g, &fd, &bd, in, in, 0);
    if (!p)
        return NULL;
    p->bwd.args[p->bwd.nargs++] = (dnnl_exec_arg_t){DNNL_ARG_DST, p->y};
    return &p->base;
}

static int c_relu_fwd(bk_prog_t *g, bk_plan_t *bp, const void *x, void *y)
{
    uplan_t *p = (uplan_t *)bp;
    if (set_handle(g, p->x, x) < 0 || set_handle(g, p->y, y) < 0)
        return -1;
    return prim_run(g, &p->fwd, "relu forward");
}

static int c_relu_bwd(bk_prog_t *g, bk_plan_t *bp, const void *y, const void *gy, void *gx)
{
    uplan_t *p = (uplan_t *)bp;
    if (set_handle(g, p->y, y) < 0 || set_handle(g, p->gy, gy) < 0 ||
        set_handle(g, p->gx, gx) < 0)
        return -1;
    return prim_run(g, &p->bwd, "relu backward");
}

static bk_plan_t *c_pool_plan(bk_prog_t *g, const bk_pool_t *q, const int in[4],
                              const int out[4])
{
    dnnl_memory_desc_t xm, ym;
    md_act(&xm, in);
    md_act(&ym, out);
    dnnl_dims_t st = {q->stride_h, q->stride_w}, k = {q->kh, q->kw}, pl = {q->pad_h, q->pad_w};
    dnnl_dims_t pr = {(out[2] - 1) * q->stride_h + q->kh - in[2] - q->pad_h,
                      (out[3] - 1) * q->stride_w + q->kw - in[3] - q->pad_w};
    dnnl_alg_kind_t alg = q->alg == BK_POOL_MAX   ? dnnl_pooling_max
                          : q->alg == BK_POOL_AVG ? dnnl_pooling_avg_include_padding
                                                  : dnnl_pooling_avg_exclude_padding;
    dnnl_pooling_desc_t fd, bd;
    if (dn(g, dnnl_pooling_forward_desc_init(&fd, dnnl_forward_training, alg, &xm, &ym, st, k,
                                             pl, pr), "pooling forward desc") < 0 ||
        dn(g, dnnl_pooling_backward_desc_init(&bd, alg, &xm, &ym, st, k, pl, pr),
           "pooling backward desc") < 0)
        return NULL;
    uplan_t *p = uplan_new(g, &fd, &bd, in, out, q->alg == BK_POOL_MAX);
    return p ? &p->base : NULL;
}

static int c_pool_fwd(bk_prog_t *g, bk_plan_t *bp, const void *x, void *y)
{
    uplan_t *p = (uplan_t *)bp;
    if (set_handle(g, p->x, x) < 0 || set_handle(g, p->y, y) < 0)
        return -1;
    return prim_run(g, &p->fwd, "pooling forward");
}

/* Max pooling reads its workspace, written by this step's forward. */
static int c_pool_bwd(bk_prog_t *g, bk_plan_t *bp, const void *x, const void *gy, void *gx)
{
    uplan_t *p = (uplan_t *)bp;
    (void)x;
    if (set_handle(g, p->gy, gy) < 0 || set_handle(g, p->gx, gx) < 0)
        return -1;
    return prim_run(g, &p->bwd, "pooling backward");
}

/* ------------------------------------------------- layout and host ops */

static int c_write(bk_prog_t *g, void *dst, const float *src, const int s[4])
{
    (void)g;
    float *d = dst;
    size_t hw = (size_t)s[2] * s[3];
    for (int b = 0; b < s[0]; b++)
        for (int c = 0; c < s[1]; c++)
            for (size_t p = 0; p < hw; p++)
                d[((size_t)b * hw + p) * s[1] + c] = src[((size_t)b * s[1] + c) * hw + p];
    return 0;
}

static int c_read(bk_prog_t *g, const void *src, float *dst, const int s[4])
{
    (void)g;
    const float *x = src;
    size_t hw = (size_t)s[2] * s[3];
    for (int b = 0; b < s[0]; b++)
        for (int c = 0; c < s[1]; c++)
            for (size_t p = 0; p < hw; p++)
                dst[((size_t)b * s[1] + c) * hw + p] = x[((size_t)b * hw + p) * s[1] + c];
    return 0;
}

static int c_write_u8(bk_prog_t *g, void *dst, const uint8_t *px, const float *lut,
                      const int s[4])
{
    hk_write_u8(dst, px, lut, s, 1, g->be->threads);
    return 0;
}

static void c_concat(backend_t *be, void *y, int cy, void *x, const int xs[4], int off, int to_y)
{
    (void)be;
    hk_concat(y, cy, x, xs, off, to_y, 1);
}

static void c_flatten(backend_t *be, void *y, const void *x, const int xs[4], int backward)
{
    (void)be;
    hk_flatten(y, x, xs, backward, 1);
}

static void c_dropout(backend_t *be, void *y, const void *x, const int s[4], float p,
                      uint64_t seed, uint64_t step, uint32_t op, const int64_t *ids)
{
    (void)be;
    hk_dropout(y, x, s, p, seed, step, op, ids, 1);
}

static void c_chan_sums(backend_t *be, const void *x, const int s[4], const float *center,
                        double *out)
{
    hk_chan_sums(x, s, center, out, 1, be->threads);
}

static void c_chan_axpb(backend_t *be, void *y, const void *x, const int s[4],
                        const float *center, const float *a, const float *b)
{
    hk_chan_axpb(y, x, s, center, a, b, 1, be->threads);
}

static void c_bn_grad_sums(backend_t *be, const void *x, const void *y, const void *gy,
                           const int s[4], int relu, const float *center, double *out)
{
    hk_bn_grad_sums(x, y, gy, s, relu, center, out, 1, be->threads);
}

static void c_bn_grad_apply(backend_t *be, void *gx, const void *x, const void *y,
                            const void *gy, const int s[4], int relu, const float *center,
                            const float *scale, const float *a, const float *b)
{
    hk_bn_grad_apply(gx, x, y, gy, s, relu, center, scale, a, b, 1, be->threads);
}

const bk_kernels_t CPU_TKERNELS = {
    .alloc = hk_alloc,
    .release = hk_release,
    .write = c_write,
    .read = c_read,
    .write_u8 = c_write_u8,
    .zero = hk_zero,
    .copy = hk_copy,
    .add = hk_add,
    .acc = hk_acc,
    .concat = c_concat,
    .flatten = c_flatten,
    .dropout = c_dropout,
    .ce_fwd = hk_ce_fwd,
    .ce_bwd = hk_ce_bwd,
    .conv_plan = c_conv_plan,
    .conv_fwd = w_fwd,
    .conv_bwd = w_bwd,
    .bn_plan = c_bn_plan,
    .bn_fwd = c_bn_fwd,
    .bn_bwd = c_bn_bwd,
    .chan_sums = c_chan_sums,
    .chan_axpb = c_chan_axpb,
    .bn_grad_sums = c_bn_grad_sums,
    .bn_grad_apply = c_bn_grad_apply,
    .relu_plan = c_relu_plan,
    .relu_fwd = c_relu_fwd,
    .relu_bwd = c_relu_bwd,
    .pool_plan = c_pool_plan,
    .pool_fwd = c_pool_fwd,
    .pool_bwd = c_pool_bwd,
    .linear_plan = c_linear_plan,
    .linear_fwd = w_fwd,
    .linear_bwd = w_bwd,
    .round_bf16 = hk_round_bf16,
    .bf16_native = cpu_bf16_native,
};
