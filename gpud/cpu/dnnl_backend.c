/* dnnl_backend — backend.h on oneDNN 2.x (CPU engine, OpenMP runtime).
 *
 * Speed comes from three things: every convolution is created with
 * format_tag_any so oneDNN picks its blocked layout (nChw16c on AVX-512) and
 * consecutive layers agree on it, so no reorder runs between layers;
 * BatchNorm is already folded into the weights by the model; bias, ReLU and
 * the residual sum run as post-ops inside the convolution.
 *
 * Exactness: primitives are created once per graph (fixed shapes) with
 * fpmath_mode strict (no silent bf16 on AMX machines), and run with the
 * same thread count they were created with (per step). Forward convolution
 * and pooling never split a reduction across threads; inner products can
 * (small batches), so they are created and run on one thread. The value of
 * an output element therefore depends neither on the thread count nor on
 * its position in the batch; tests/gpud checks this bit for bit.
 *
 * Memory: activations are owned by the graph (one buffer each; a residual
 * sum accumulates in place into its residual's buffer); one scratchpad
 * buffer, sized for the largest primitive, is shared by all steps.
 */
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>

#include "gpud/backend_impl.h"
#include "common/errbuf.h"
#include "gpud/cpu/dnnl_priv.h"
#include "gpud/cpu/host_kernels.h"

typedef struct {
    bk_ptensor_t base;
    dnnl_memory_desc_t md;      /* actual layout chosen by the producer */
    dnnl_memory_t mem;          /* owned iff owns */
    int owns;
    int rounded;                /* emulated bf16: an input with its rounding step */
    dnnl_primitive_t rd;        /* cached reorder to plain, for bk_prog_read */
    dnnl_memory_t rd_dst;
} cpu_tensor_t;

#define MAX_ARGS 8
typedef struct {
    dnnl_primitive_t prim;
    int nargs;
    dnnl_exec_arg_t args[MAX_ARGS];
    dnnl_memory_desc_t scratch_md;
    dnnl_memory_t scratch;      /* view of the shared buffer, made at finalize */
    int threads;                /* created and run with this many threads */
    char name[128];
    /* prim NULL: a host step rounding round_n floats at round to bf16 in
     * place (the emulated bf16 program) */
    float *round;
    size_t round_n;
} cpu_step_t;

typedef struct {
    bk_prog_t base;
    cpu_tensor_t **t;
    size_t nt, capt;
    cpu_step_t *s;
    size_t ns, caps;
    dnnl_memory_t *owned;       /* weights and biases */
    size_t nown, capown;
    void *scratch_buf;
    int finalized;
    /* --precision bf16 (docs/BF16.md "bf16 inference plan"): dt is the
     * activations' and weights' type (bf16 where the backend runs native);
     * emu: they are fp32 memories, rounded to bf16 after every op */
    dnnl_data_type_t dt;
    int emu;
} cpu_graph_t;

static cpu_backend_t *be_of(bk_prog_t *g)
{
    return (cpu_backend_t *)g->be;
}

/* 0 on success; else fail the graph with the oneDNN status. */
static int dn(bk_prog_t *g, dnnl_status_t st, const char *what)
{
    if (st == dnnl_success)
        return 0;
    bk_prog_fail(g, "oneDNN %s failed: %s", what, dnnl_status2str(st));
    return -1;
}

/* Primitives are created and run with the backend's thread count: oneDNN
 * sizes its work split at creation time. The setting is per OS thread, so
 * it is repeated on every entry point. */
static void set_threads(int n)
{
    if (omp_get_max_threads() != n)
        omp_set_num_threads(n);
}

static void use_threads(bk_prog_t *g)
{
    set_threads(g->be->threads);
}

/* ---------------------------------------------------------------- backend */

static void cpu_destroy(backend_t *b)
{
    cpu_backend_t *be = (cpu_backend_t *)b;
    if (be->strm)
        dnnl_stream_destroy(be->strm);
    if (be->eng)
        dnnl_engine_destroy(be->eng);
    free(be->scratch);
    cpu_bf16_free(be);
    free(be);
}

/* ------------------------------------------------------------------ graph */

static bk_prog_t *cpu_graph_new(backend_t *be)
{
    cpu_graph_t *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->base.be = be;
    g->dt = be->precision == BK_BF16_NATIVE ? cpu_bf16_type() : dnnl_f32;
    g->emu = be->precision != BK_FP32 && g->dt == dnnl_f32;
    return &g->base;
}

static void tensor_free(cpu_tensor_t *t)
{
    if (t->rd)
        dnnl_primitive_destroy(t->rd);
    if (t->rd_dst)
        dnnl_memory_destroy(t->rd_dst);
    if (t->owns && t->mem)
        dnnl_memory_destroy(t->mem);
    free(t);
}

static void cpu_graph_destroy(bk_prog_t *bg)
{
    cpu_graph_t *g = (cpu_graph_t *)bg;
    for (size_t i = 0; i < g->ns; i++) {
        if (g->s[i].prim)
            dnnl_primitive_destroy(g->s[i].prim);
        if (g->s[i].scratch)
            dnnl_memory_destroy(g->s[i].scratch);
    }
    for (size_t i = 0; i < g->nt; i++)
        tensor_free(g->t[i]);
    for (size_t i = 0; i < g->nown; i++)
        dnnl_memory_destroy(g->owned[i]);
    free(g->s);
    free(g->t);
    free(g->owned);
    free(g->scratch_buf);
    free(g);
}

static int grow(bk_prog_t *g, void **arr, size_t *cap, size_t n, size_t elem)
{
    if (n < *cap)
        return 0;
    size_t nc = *cap ? 2 * *cap : 32;
    void *a = realloc(*arr, nc * elem);
    if (!a) {
        bk_prog_fail(g, "out of memory");
        return -1;
    }
    *arr = a;
    *cap = nc;
    return 0;
}

/* A tensor of logical shape out with layout md. alias: share its memory
 * (a residual accumulated in place) instead of allocating. */
static cpu_tensor_t *tensor_new(cpu_graph_t *g, const int out[4], const dnnl_memory_desc_t *md,
                                cpu_tensor_t *alias)
{
    if (grow(&g->base, (void **)&g->t, &g->capt, g->nt, sizeof *g->t) < 0)
        return NULL;
    cpu_tensor_t *t = calloc(1, sizeof *t);
    if (!t)
        return bk_prog_fail(&g->base, "out of memory");
    t->base.n = out[0];
    t->base.c = out[1];
    t->base.h = out[2];
    t->base.w = out[3];
    t->md = *md;
    if (alias) {
        t->mem = alias->mem;
    } else {
        t->owns = 1;
        if (dn(&g->base, dnnl_memory_create(&t->mem, md, be_of(&g->base)->eng,
                                            DNNL_MEMORY_ALLOCATE), "memory_create") < 0) {
            free(t);
            return NULL;
        }
    }
    g->t[g->nt++] = t;
    return t;
}

static int own_memory(cpu_graph_t *g, dnnl_memory_t m)
{
    if (grow(&g->base, (void **)&g->owned, &g->capown, g->nown, sizeof *g->owned) < 0) {
        dnnl_memory_destroy(m);
        return -1;
    }
    g->owned[g->nown++] = m;
    return 0;
}

/* Attributes of every primitive of both CPU engines (inference graphs and
 * training kernels): a scratchpad we own (dnnl_priv.h says why) and strict
 * fp32 math (no silent bf16 on AMX machines). */
dnnl_primitive_attr_t cpu_attr_new(bk_prog_t *g)
{
    dnnl_primitive_attr_t a = NULL;
    if (dn(g, dnnl_primitive_attr_create(&a), "attr_create") < 0)
        return NULL;
    if (dn(g, dnnl_primitive_attr_set_scratchpad_mode(a, dnnl_scratchpad_mode_user),
           "set_scratchpad_mode") < 0 ||
        dn(g, dnnl_primitive_attr_set_fpmath_mode(a, dnnl_fpmath_mode_strict),
           "set_fpmath_mode") < 0) {
        dnnl_primitive_attr_destroy(a);
        return NULL;
    }
    return a;
}

/* Append a step running the primitive of pd (pd stays the caller's). */
static cpu_step_t *step_add(cpu_graph_t *g, const_dnnl_primitive_desc_t pd)
{
    if (grow(&g->base, (void **)&g->s, &g->caps, g->ns, sizeof *g->s) < 0)
        return NULL;
    cpu_step_t *s = &g->s[g->ns];
    memset(s, 0, sizeof *s);
    if (dn(&g->base, dnnl_primitive_create(&s->prim, pd), "primitive_create") < 0)
        return NULL;
    s->scratch_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    s->threads = omp_get_max_threads();
    snprintf(s->name, sizeof s->name, "%s", g->base.name);
    g->ns++;
    return s;
}

static void step_arg(cpu_step_t *s, int arg, dnnl_memory_t m)
{
    s->args[s->nargs++] = (dnnl_exec_arg_t){arg, m};
}

/* Emulated bf16: a host step rounding t's memory (its padding is zeros,
 * which stay) to bf16 in place. 0, or -1 after bk_prog_fail. */
static int round_step(cpu_graph_t *g, cpu_tensor_t *t)
{
    void *h = NULL;
    if (dn(&g->base, dnnl_memory_get_data_handle(t->mem, &h), "get_data_handle") < 0 ||
        grow(&g->base, (void **)&g->s, &g->caps, g->ns, sizeof *g->s) < 0)
        return -1;
    cpu_step_t *s = &g->s[g->ns++];
    memset(s, 0, sizeof *s);
    s->round = h;
    s->round_n = dnnl_memory_desc_get_size(&t->md) / sizeof(float);
    s->threads = omp_get_max_threads();
    snprintf(s->name, sizeof s->name, "%.100s (bf16 rounding)", g->base.name);
    return 0;
}

/* Emulated bf16: input x (the caller's floats) rounded in place before its
 * first reader, once whatever the readers. 0, or -1 after bk_prog_fail. */
static int input_rounded(cpu_graph_t *g, cpu_tensor_t *x)
{
    if (!g->emu || !x->base.is_input || x->rounded)
        return 0;
    x->rounded = 1;
    return round_step(g, x);
}

/* An op's output: rounded to bf16 after the op in the emulated program. */
static bk_ptensor_t *op_out(cpu_graph_t *g, cpu_tensor_t *y)
{
    if (y && g->emu && round_step(g, y) < 0)
        return NULL;
    return y ? &y->base : NULL;
}

static cpu_tensor_t *reorder_step(cpu_graph_t *g, cpu_tensor_t *x, const dnnl_memory_desc_t *md,
                                  cpu_tensor_t *into);

/* x as an op other than a convolution reads it in bf16: the program's
 * inputs are fp32 (the caller's floats), so natively a bf16 copy, emulated
 * rounded in place. Everything else already is. */
static cpu_tensor_t *src_ready(cpu_graph_t *g, cpu_tensor_t *x)
{
    if (input_rounded(g, x) < 0)
        return NULL;
    if (x->md.data_type == g->dt)
        return x;
    dnnl_memory_desc_t md;
    dnnl_format_tag_t tag = x->md.ndims == 4 ? dnnl_abcd : dnnl_ab;
    if (dn(&g->base, dnnl_memory_desc_init_by_tag(&md, x->md.ndims, x->md.dims, g->dt, tag),
           "memory_desc_init") < 0)
        return NULL;
    return reorder_step(g, x, &md, NULL);
}

/* Reorder pd from src to dst layout, with the graph's attributes. */
static dnnl_primitive_desc_t reorder_pd(bk_prog_t *g, const dnnl_memory_desc_t *src,
                                        const dnnl_memory_desc_t *dst)
{
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_attr_t a = cpu_attr_new(g);
    if (!a)
        return NULL;
    dnnl_engine_t e = be_of(g)->eng;
    dn(g, dnnl_reorder_primitive_desc_create(&pd, src, e, dst, e, a), "reorder");
    dnnl_primitive_attr_destroy(a);
    return pd;
}

/* Step copying x into a new tensor of layout md (or into `into`). */
static cpu_tensor_t *reorder_step(cpu_graph_t *g, cpu_tensor_t *x, const dnnl_memory_desc_t *md,
                                  cpu_tensor_t *into)
{
    int out[4] = {x->base.n, x->base.c, x->base.h, x->base.w};
    cpu_tensor_t *y = into ? into : tensor_new(g, out, md, NULL);
    if (!y)
        return NULL;
    dnnl_primitive_desc_t pd = reorder_pd(&g->base, &x->md, md);
    if (!pd)
        return NULL;
    cpu_step_t *s = step_add(g, pd);
    dnnl_primitive_desc_destroy(pd);
    if (!s)
        return NULL;
    step_arg(s, DNNL_ARG_FROM, x->mem);
    step_arg(s, DNNL_ARG_TO, y->mem);
    return y;
}

/* Owned memory of layout md holding host data of plain layout user_md,
 * reordered now (weights are converted once, at build time). */
static dnnl_memory_t const_memory(cpu_graph_t *g, const dnnl_memory_desc_t *md,
                                  const dnnl_memory_desc_t *user_md, const float *host)
{
    cpu_backend_t *be = be_of(&g->base);
    dnnl_memory_t user = NULL, m = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_t r = NULL;
    int ok = dn(&g->base, dnnl_memory_create(&user, user_md, be->eng, (void *)host),
                "memory_create") == 0 &&
             dn(&g->base, dnnl_memory_create(&m, md, be->eng, DNNL_MEMORY_ALLOCATE),
                "memory_create") == 0;
    /* the default attr (library scratchpad): this reorder runs only once */
    ok = ok && dn(&g->base, dnnl_reorder_primitive_desc_create(&pd, user_md, be->eng, md,
                                                               be->eng, NULL), "reorder") == 0;
    ok = ok && dn(&g->base, dnnl_primitive_create(&r, pd), "primitive_create") == 0;
    if (ok) {
        dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, user}, {DNNL_ARG_TO, m}};
        ok = dn(&g->base, dnnl_primitive_execute(r, be->strm, 2, args), "weights reorder") == 0 &&
             dn(&g->base, dnnl_stream_wait(be->strm), "stream_wait") == 0;
    }
    if (r)
        dnnl_primitive_destroy(r);
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    if (user)
        dnnl_memory_destroy(user);
    if (!ok) {
        if (m)
            dnnl_memory_destroy(m);
        return NULL;
    }
    return own_memory(g, m) == 0 ? m : NULL;
}

static void md_plain(dnnl_memory_desc_t *md, int ndims, const dnnl_dims_t dims)
{
    static const dnnl_format_tag_t tags[] = {dnnl_format_tag_undef, dnnl_a, dnnl_ab, dnnl_abc,
                                             dnnl_abcd};
    dnnl_memory_desc_init_by_tag(md, ndims, dims, dnnl_f32, tags[ndims]);
}

/* --------------------------------------------------------------- builders */

static bk_ptensor_t *cpu_input(bk_prog_t *bg, const int *out)
{
    dnnl_dims_t dims = {out[0], out[1], out[2], out[3]};
    dnnl_memory_desc_t md;
    md_plain(&md, 4, dims);
    cpu_tensor_t *t = tensor_new((cpu_graph_t *)bg, out, &md, NULL);
    return t ? &t->base : NULL;
}

static int post_ops_attr(bk_prog_t *g, dnnl_primitive_attr_t a, const bk_postop_t *post,
                         int n_post)
{
    if (n_post == 0)
        return 0;
    dnnl_post_ops_t po = NULL;
    if (dn(g, dnnl_post_ops_create(&po), "post_ops_create") < 0)
        return -1;
    int rc = 0;
    for (int i = 0; i < n_post && rc == 0; i++)
        rc = post[i] == BK_PO_RELU
                 ? dn(g, dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_relu, 0.f, 0.f),
                      "append_eltwise")
                 : dn(g, dnnl_post_ops_append_sum(po, 1.0f), "append_sum");
    if (rc == 0)
        rc = dn(g, dnnl_primitive_attr_set_post_ops(a, po), "set_post_ops");
    dnnl_post_ops_destroy(po);
    return rc;
}

static dnnl_primitive_desc_t conv_pd(bk_prog_t *g, const cpu_tensor_t *x, const bk_pconv_t *p,
                                     const int *out)
{
    dnnl_dims_t src_d = {x->base.n, p->ic, x->base.h, x->base.w};
    dnnl_dims_t wei_d = {p->oc, p->ic, p->kh, p->kw};
    dnnl_dims_t bia_d = {p->oc};
    dnnl_dims_t dst_d = {out[0], out[1], out[2], out[3]};
    dnnl_dims_t strides = {p->stride_h, p->stride_w};
    /* symmetric padding is consistent with floor-mode output sizes: oneDNN
     * checks (in - k + pl + pr) / stride + 1 == out with integer division */
    dnnl_dims_t pad = {p->pad_h, p->pad_w};
    dnnl_memory_desc_t src, wei, bia, dst;
    dnnl_data_type_t dt = ((cpu_graph_t *)g)->dt;   /* bias stays fp32 */
    dnnl_memory_desc_init_by_tag(&src, 4, src_d, dt, dnnl_format_tag_any);
    dnnl_memory_desc_init_by_tag(&wei, 4, wei_d, dt, dnnl_format_tag_any);
    dnnl_memory_desc_init_by_tag(&bia, 1, bia_d, dnnl_f32, dnnl_x);
    dnnl_memory_desc_init_by_tag(&dst, 4, dst_d, dt, dnnl_format_tag_any);
    dnnl_convolution_desc_t d;
    if (dn(g, dnnl_convolution_forward_desc_init(&d, dnnl_forward_inference,
                                                 dnnl_convolution_direct, &src, &wei,
                                                 p->bias ? &bia : NULL, &dst, strides, pad,
                                                 pad), "convolution_forward_desc_init") < 0)
        return NULL;
    dnnl_primitive_attr_t a = cpu_attr_new(g);
    if (!a)
        return NULL;
    dnnl_primitive_desc_t pd = NULL;
    if (post_ops_attr(g, a, p->post, p->n_post) == 0)
        dn(g, dnnl_primitive_desc_create(&pd, &d, a, be_of(g)->eng, NULL),
           "convolution primitive_desc_create");
    dnnl_primitive_attr_destroy(a);
    return pd;
}

/* The conv's output tensor: the residual's own buffer when the layouts
 * agree (sum post-op accumulates in place), else a reordered copy. */
static cpu_tensor_t *conv_dst(cpu_graph_t *g, cpu_tensor_t *res, const dnnl_memory_desc_t *md,
                              const int *out)
{
    if (!res)
        return tensor_new(g, out, md, NULL);
    if (dnnl_memory_desc_equal(&res->md, md))
        return tensor_new(g, out, md, res);
    cpu_tensor_t *y = tensor_new(g, out, md, NULL);
    return y ? reorder_step(g, res, md, y) : NULL;
}

/* True when oneDNN chose its reference (plain loop) implementation. */
static int is_reference_impl(const_dnnl_primitive_desc_t pd)
{
    const char *impl = NULL;
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success)
        return 0;
    return impl && strncmp(impl, "ref", 3) == 0;
}

static int sum_position(const bk_pconv_t *p)
{
    for (int i = 0; i < p->n_post; i++)
        if (p->post[i] == BK_PO_SUM)
            return i;
    return -1;
}

static bk_ptensor_t *cpu_add(bk_prog_t *bg, bk_ptensor_t *ba, bk_ptensor_t *bb, int relu,
                            const int *out);
static bk_ptensor_t *conv_build(bk_prog_t *bg, bk_ptensor_t *bx, const bk_pconv_t *p,
                                bk_ptensor_t *bres, const int *out, int round_out);

/* The residual sum as its own step: conv with the post-ops before the sum,
 * then a binary add carrying the ReLU that followed it. The float
 * operations and their order are those of the fused sum post-op (relu(acc)
 * + residual), so the logits are the same bits. */
static bk_ptensor_t *conv_then_add(bk_prog_t *bg, bk_ptensor_t *bx, const bk_pconv_t *p, int at,
                                  bk_ptensor_t *bres, const int *out)
{
    bk_pconv_t head = *p;
    head.n_post = at;
    int relu_after = 0;
    for (int i = at + 1; i < p->n_post; i++)
        relu_after |= p->post[i] == BK_PO_RELU;
    /* emulated bf16: rounded once, after the sum, as the fused op would */
    bk_ptensor_t *t = conv_build(bg, bx, &head, NULL, out, 0);
    return t ? cpu_add(bg, t, bres, relu_after, out) : NULL;
}

/* round_out: the emulated bf16 program rounds the output (0: a later op
 * of the same fused op will). */
static bk_ptensor_t *conv_build(bk_prog_t *bg, bk_ptensor_t *bx, const bk_pconv_t *p,
                                bk_ptensor_t *bres, const int *out, int round_out)
{
    cpu_graph_t *g = (cpu_graph_t *)bg;
    cpu_tensor_t *x = (cpu_tensor_t *)bx;
    use_threads(bg);
    dnnl_primitive_desc_t pd = conv_pd(bg, x, p, out);
    if (!pd)
        return NULL;
    /* oneDNN 2.6 has no JIT convolution below AVX-512 for a sum post-op
     * after an eltwise ({relu, sum}: the seed WideResNet's order) and falls
     * back to its reference loops, ~100x slower: split the sum off. */
    int at = sum_position(p);
    if (bres && at >= 0 && is_reference_impl(pd)) {
        dnnl_primitive_desc_destroy(pd);
        return conv_then_add(bg, bx, p, at, bres, out);
    }
    cpu_tensor_t *y = NULL;
    dnnl_memory_t wmem = NULL, bmem = NULL;
    const dnnl_memory_desc_t *src_md = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    const dnnl_memory_desc_t *wei_md = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    const dnnl_memory_desc_t *dst_md = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    dnnl_dims_t wd = {p->oc, p->ic, p->kh, p->kw}, bd = {p->oc};
    dnnl_memory_desc_t wuser, buser;
    md_plain(&wuser, 4, wd);
    md_plain(&buser, 1, bd);
    if (input_rounded(g, x) < 0)
        x = NULL;
    if (x && !dnnl_memory_desc_equal(&x->md, src_md))   /* natively: to bf16 too */
        x = reorder_step(g, x, src_md, NULL);
    if (x)
        wmem = const_memory(g, wei_md, &wuser, p->weight);
    if (wmem && p->bias)
        bmem = const_memory(g, &buser, &buser, p->bias);
    if (wmem && (bmem || !p->bias))
        y = conv_dst(g, (cpu_tensor_t *)bres, dst_md, out);
    cpu_step_t *s = y ? step_add(g, pd) : NULL;
    dnnl_primitive_desc_destroy(pd);
    if (!s)
        return NULL;
    step_arg(s, DNNL_ARG_SRC, x->mem);
    step_arg(s, DNNL_ARG_WEIGHTS, wmem);
    if (bmem)
        step_arg(s, DNNL_ARG_BIAS, bmem);
    step_arg(s, DNNL_ARG_DST, y->mem);
    return round_out ? op_out(g, y) : &y->base;
}

static bk_ptensor_t *cpu_conv2d(bk_prog_t *bg, bk_ptensor_t *bx, const bk_pconv_t *p,
                               bk_ptensor_t *bres, const int *out)
{
    return conv_build(bg, bx, p, bres, out, 1);
}

/* Run a single-input primitive described by op_desc on x: output layout as
 * the primitive wants (dst any), or x's when dst_like_src. */
static cpu_tensor_t *unary_step(cpu_graph_t *g, const_dnnl_op_desc_t op_desc,
                                dnnl_primitive_attr_t a, cpu_tensor_t *x, const int out[4],
                                const char *what)
{
    dnnl_primitive_desc_t pd = NULL;
    if (dn(&g->base, dnnl_primitive_desc_create(&pd, op_desc, a, be_of(&g->base)->eng, NULL),
           what) < 0)
        return NULL;
    const dnnl_memory_desc_t *dst_md = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    cpu_tensor_t *y = tensor_new(g, out, dst_md, NULL);
    cpu_step_t *s = y ? step_add(g, pd) : NULL;
    dnnl_primitive_desc_destroy(pd);
    if (!s)
        return NULL;
    step_arg(s, DNNL_ARG_SRC, x->mem);
    step_arg(s, DNNL_ARG_DST, y->mem);
    return y;
}

static bk_ptensor_t *cpu_pool2d(bk_prog_t *bg, bk_ptensor_t *bx, const bk_pool_t *p,
                               const int *out)
{
    cpu_graph_t *g = (cpu_graph_t *)bg;
    use_threads(bg);
    cpu_tensor_t *x = src_ready(g, (cpu_tensor_t *)bx);
    if (!x)
        return NULL;
    dnnl_dims_t dst_d = {out[0], out[1], out[2], out[3]};
    dnnl_dims_t strides = {p->stride_h, p->stride_w}, kernel = {p->kh, p->kw};
    dnnl_dims_t pad = {p->pad_h, p->pad_w};
    dnnl_memory_desc_t dst;
    dnnl_memory_desc_init_by_tag(&dst, 4, dst_d, g->dt, dnnl_format_tag_any);
    dnnl_alg_kind_t alg = p->alg == BK_POOL_MAX   ? dnnl_pooling_max
                          : p->alg == BK_POOL_AVG ? dnnl_pooling_avg_include_padding
                                                  : dnnl_pooling_avg_exclude_padding;
    dnnl_pooling_desc_t d;
    if (dn(bg, dnnl_pooling_forward_desc_init(&d, dnnl_forward_inference, alg, &x->md, &dst,
                                              strides, kernel, pad, pad),
           "pooling_forward_desc_init") < 0)
        return NULL;
    dnnl_primitive_attr_t a = cpu_attr_new(bg);
    if (!a)
        return NULL;
    cpu_tensor_t *y = unary_step(g, &d, a, x, out, "pooling primitive_desc");
    dnnl_primitive_attr_destroy(a);
    return op_out(g, y);
}

/* x viewed as 2-D (n, c*h*w) when its layout allows (h = w = 1 after a
 * global pool in NHWC): a 2-D inner product runs a far better kernel than
 * the 4-D one (which ends up in a slow gemm). Else x itself. */
static int linear_src(cpu_graph_t *g, cpu_tensor_t *x, dnnl_memory_desc_t *md,
                      dnnl_memory_t *mem)
{
    *md = x->md;
    *mem = x->mem;
    if (x->md.ndims != 4)
        return 0;
    dnnl_dims_t d2 = {x->base.n, (dnnl_dim_t)x->base.c * x->base.h * x->base.w};
    dnnl_memory_desc_t flat;
    void *h = NULL;
    if (dnnl_memory_desc_reshape(&flat, &x->md, 2, d2) != dnnl_success)
        return 0;   /* blocked layout: keep the 4-D view */
    dnnl_memory_t m = NULL;
    if (dn(&g->base, dnnl_memory_get_data_handle(x->mem, &h), "get_data_handle") < 0 ||
        dn(&g->base, dnnl_memory_create(&m, &flat, be_of(&g->base)->eng, h),
           "memory_create") < 0 || own_memory(g, m) < 0)
        return -1;
    *md = flat;
    *mem = m;
    return 0;
}

static bk_ptensor_t *cpu_linear(bk_prog_t *bg, bk_ptensor_t *bx, const float *weight,
                               const float *bias, const int *out)
{
    cpu_graph_t *g = (cpu_graph_t *)bg;
    cpu_tensor_t *x = src_ready(g, (cpu_tensor_t *)bx);
    if (!x)
        return NULL;
    /* One thread: oneDNN's inner products may split the reduction over the
     * input features across threads when the batch is small, which would
     * make the logits depend on the thread count. The layer is tiny. */
    set_threads(1);
    dnnl_memory_desc_t src;
    dnnl_memory_t src_mem;
    if (linear_src(g, x, &src, &src_mem) < 0)
        return NULL;
    int nd = src.ndims;   /* 4: blocked conv/pool output, 2: flat */
    dnnl_dims_t wd = {out[1], x->base.c, x->base.h, x->base.w};
    if (nd == 2)
        wd[1] = (dnnl_dim_t)x->base.c * x->base.h * x->base.w;
    dnnl_dims_t bd = {out[1]}, dd = {out[0], out[1]};
    dnnl_memory_desc_t wei, wuser, bia, dst;
    dnnl_memory_desc_init_by_tag(&wei, nd, wd, g->dt, dnnl_format_tag_any);
    md_plain(&wuser, nd, wd);
    md_plain(&bia, 1, bd);
    dnnl_memory_desc_init_by_tag(&dst, 2, dd, g->dt, dnnl_format_tag_any);
    dnnl_inner_product_desc_t d;
    if (dn(bg, dnnl_inner_product_forward_desc_init(&d, dnnl_forward_inference, &src, &wei,
                                                    bias ? &bia : NULL, &dst),
           "inner_product_forward_desc_init") < 0)
        return NULL;
    dnnl_primitive_attr_t a = cpu_attr_new(bg);
    dnnl_primitive_desc_t pd = NULL;
    if (a)
        dn(bg, dnnl_primitive_desc_create(&pd, &d, a, be_of(bg)->eng, NULL),
           "inner_product primitive_desc");
    dnnl_primitive_attr_destroy(a);
    if (!pd)
        return NULL;
    const dnnl_memory_desc_t *wei_md = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    const dnnl_memory_desc_t *dst_md = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    dnnl_memory_t wmem = const_memory(g, wei_md, &wuser, weight), bmem = NULL;
    if (wmem && bias)
        bmem = const_memory(g, &bia, &bia, bias);
    cpu_tensor_t *y = wmem && (bmem || !bias) ? tensor_new(g, out, dst_md, NULL) : NULL;
    cpu_step_t *s = y ? step_add(g, pd) : NULL;
    dnnl_primitive_desc_destroy(pd);
    if (!s)
        return NULL;
    step_arg(s, DNNL_ARG_SRC, src_mem);
    step_arg(s, DNNL_ARG_WEIGHTS, wmem);
    if (bmem)
        step_arg(s, DNNL_ARG_BIAS, bmem);
    step_arg(s, DNNL_ARG_DST, y->mem);
    return op_out(g, y);
}

static bk_ptensor_t *cpu_relu(bk_prog_t *bg, bk_ptensor_t *bx, const int *out)
{
    cpu_graph_t *g = (cpu_graph_t *)bg;
    use_threads(bg);
    cpu_tensor_t *x = src_ready(g, (cpu_tensor_t *)bx);
    if (!x)
        return NULL;
    dnnl_eltwise_desc_t d;
    if (dn(bg, dnnl_eltwise_forward_desc_init(&d, dnnl_forward_inference, dnnl_eltwise_relu,
                                              &x->md, 0.f, 0.f), "eltwise_forward_desc_init") < 0)
        return NULL;
    dnnl_primitive_attr_t a = cpu_attr_new(bg);
    if (!a)
        return NULL;
    cpu_tensor_t *y = unary_step(g, &d, a, x, out, "eltwise primitive_desc");
    dnnl_primitive_attr_destroy(a);
    return op_out(g, y);
}

static bk_ptensor_t *cpu_add(bk_prog_t *bg, bk_ptensor_t *ba, bk_ptensor_t *bb, int relu,
                            const int *out)
{
    cpu_graph_t *g = (cpu_graph_t *)bg;
    use_threads(bg);
    cpu_tensor_t *a = src_ready(g, (cpu_tensor_t *)ba);
    cpu_tensor_t *b = a ? src_ready(g, (cpu_tensor_t *)bb) : NULL;
    if (!b)
        return NULL;
    dnnl_dims_t dd = {out[0], out[1], out[2], out[3]};
    dnnl_memory_desc_t dst;
    dnnl_memory_desc_init_by_tag(&dst, a->md.ndims, dd, g->dt, dnnl_format_tag_any);
    dnnl_binary_desc_t d;
    if (dn(bg, dnnl_binary_desc_init(&d, dnnl_binary_add, &a->md, &b->md, &dst),
           "binary_desc_init") < 0)
        return NULL;
    dnnl_primitive_attr_t attr = cpu_attr_new(bg);
    bk_postop_t po = BK_PO_RELU;
    dnnl_primitive_desc_t pd = NULL;
    if (attr && post_ops_attr(bg, attr, &po, relu ? 1 : 0) == 0)
        dn(bg, dnnl_primitive_desc_create(&pd, &d, attr, be_of(bg)->eng, NULL),
           "binary primitive_desc");
    dnnl_primitive_attr_destroy(attr);
    if (!pd)
        return NULL;
    const dnnl_memory_desc_t *dst_md = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    cpu_tensor_t *y = tensor_new(g, out, dst_md, NULL);
    cpu_step_t *s = y ? step_add(g, pd) : NULL;
    dnnl_primitive_desc_destroy(pd);
    if (!s)
        return NULL;
    step_arg(s, DNNL_ARG_SRC_0, a->mem);
    step_arg(s, DNNL_ARG_SRC_1, b->mem);
    step_arg(s, DNNL_ARG_DST, y->mem);
    return op_out(g, y);
}

/* -------------------------------------------------------------- execution */

/* One scratchpad buffer, as large as the largest step needs, shared by all
 * steps (they run one after another). */
static int finalize(cpu_graph_t *g)
{
    size_t need = 0;
    for (size_t i = 0; i < g->ns; i++) {
        size_t sz = dnnl_memory_desc_get_size(&g->s[i].scratch_md);
        need = sz > need ? sz : need;
    }
    if (need && posix_memalign(&g->scratch_buf, 64, need) != 0) {
        g->scratch_buf = NULL;
        bk_prog_fail(&g->base, "out of memory for a %zu-byte scratchpad", need);
        return -1;
    }
    for (size_t i = 0; i < g->ns; i++) {
        cpu_step_t *s = &g->s[i];
        if (dnnl_memory_desc_get_size(&s->scratch_md) == 0)
            continue;
        if (dn(&g->base, dnnl_memory_create(&s->scratch, &s->scratch_md, be_of(&g->base)->eng,
                                            g->scratch_buf), "scratchpad memory") < 0)
            return -1;
        step_arg(s, DNNL_ARG_SCRATCHPAD, s->scratch);
    }
    g->finalized = 1;
    return 0;
}

static int cpu_run(bk_prog_t *bg)
{
    cpu_graph_t *g = (cpu_graph_t *)bg;
    cpu_backend_t *be = be_of(bg);
    if (!g->finalized && finalize(g) < 0)
        return -1;
    for (size_t i = 0; i < g->ns; i++) {
        cpu_step_t *s = &g->s[i];
        set_threads(s->threads);
        if (!s->prim) {   /* the primitives before it have written its buffer */
            if (dn(bg, dnnl_stream_wait(be->strm), "stream_wait") < 0)
                return -1;
            hk_round_bf16(&be->base, s->round, s->round_n);
            continue;
        }
        dnnl_status_t st = dnnl_primitive_execute(s->prim, be->strm, s->nargs, s->args);
        if (st != dnnl_success) {
            bk_prog_set_name(bg, s->name);
            return dn(bg, st, "execute");
        }
    }
    use_threads(bg);   /* leave the caller's OpenMP setting as the backend's */
    return dn(bg, dnnl_stream_wait(be->strm), "stream_wait");
}

static int cpu_write(bk_prog_t *bg, bk_ptensor_t *bt, const float *src)
{
    cpu_tensor_t *t = (cpu_tensor_t *)bt;
    void *h = NULL;
    if (dn(bg, dnnl_memory_get_data_handle(t->mem, &h), "get_data_handle") < 0)
        return -1;
    memcpy(h, src, dnnl_memory_desc_get_size(&t->md));
    return 0;
}

/* Plain layout of t: nchw, or nc for the 2-D output of a linear layer. */
static int cpu_read(bk_prog_t *bg, bk_ptensor_t *bt, float *dst)
{
    cpu_tensor_t *t = (cpu_tensor_t *)bt;
    cpu_backend_t *be = be_of(bg);
    dnnl_memory_desc_t plain;
    md_plain(&plain, t->md.ndims, t->md.dims);
    if (dnnl_memory_desc_equal(&plain, &t->md)) {
        void *h = NULL;
        if (dn(bg, dnnl_memory_get_data_handle(t->mem, &h), "get_data_handle") < 0)
            return -1;
        memcpy(dst, h, dnnl_memory_desc_get_size(&plain));
        return 0;
    }
    if (!t->rd) {
        dnnl_primitive_desc_t pd = NULL;
        use_threads(bg);
        int ok = dn(bg, dnnl_reorder_primitive_desc_create(&pd, &t->md, be->eng, &plain,
                                                           be->eng, NULL), "reorder") == 0 &&
                 dn(bg, dnnl_primitive_create(&t->rd, pd), "primitive_create") == 0 &&
                 dn(bg, dnnl_memory_create(&t->rd_dst, &plain, be->eng, DNNL_MEMORY_NONE),
                    "memory_create") == 0;
        if (pd)
            dnnl_primitive_desc_destroy(pd);
        if (!ok)
            return -1;
    }
    use_threads(bg);
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, t->mem}, {DNNL_ARG_TO, t->rd_dst}};
    if (dn(bg, dnnl_memory_set_data_handle(t->rd_dst, dst), "set_data_handle") < 0 ||
        dn(bg, dnnl_primitive_execute(t->rd, be->strm, 2, args), "read reorder") < 0)
        return -1;
    return dn(bg, dnnl_stream_wait(be->strm), "stream_wait");
}

static const bk_ops_t CPU_OPS = {
    .name = "cpu",
    .destroy = cpu_destroy,
    .graph_new = cpu_graph_new,
    .graph_destroy = cpu_graph_destroy,
    .input = cpu_input,
    .conv2d = cpu_conv2d,
    .pool2d = cpu_pool2d,
    .linear = cpu_linear,
    .relu = cpu_relu,
    .add = cpu_add,
    .write = cpu_write,
    .run = cpu_run,
    .read = cpu_read,
    .train = &CPU_TKERNELS,
    .prog_bf16 = 1,
};

backend_t *cpu_backend_new(int threads, char *err, size_t errlen)
{
    cpu_backend_t *be = calloc(1, sizeof *be);
    if (!be) {
        err_set(err, errlen, "cpu backend: out of memory");
        return NULL;
    }
    be->base.ops = &CPU_OPS;
    be->base.arena = &bk_arena_host;
    be->base.threads = threads;
    dnnl_status_t st = dnnl_engine_create(&be->eng, dnnl_cpu, 0);
    if (st == dnnl_success)
        st = dnnl_stream_create(&be->strm, be->eng, dnnl_stream_default_flags);
    if (st != dnnl_success) {
        err_set(err, errlen, "cpu backend: oneDNN engine/stream creation failed: %s",
                 dnnl_status2str(st));
        cpu_destroy(&be->base);
        return NULL;
    }
    return &be->base;
}
