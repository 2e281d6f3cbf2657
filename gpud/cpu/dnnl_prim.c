/* dnnl_prim — the cpu backend's oneDNN helpers: checked calls, the
 * primitives' attributes and the backend's shared scratchpad (every kernel
 * file's), memory descriptors of the tape's NHWC activations and
 * primitives that carry their arguments (the training kernels',
 * dnnl_train.c and dnnl_layers.c). */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>

#include "gpud/cpu/dnnl_priv.h"

cpu_backend_t *cpu_be(bk_ctx_t *g)
{
    return (cpu_backend_t *)g->be;
}

int cpu_dn(bk_ctx_t *g, dnnl_status_t st, const char *what)
{
    if (st == dnnl_success)
        return 0;
    bk_ctx_fail(g, "oneDNN %s failed: %s", what, dnnl_status2str(st));
    return -1;
}

void cpu_threads(bk_ctx_t *g)
{
    if (omp_get_max_threads() != g->be->threads)
        omp_set_num_threads(g->be->threads);
}

/* Keep *md, which the oneDNN call that is the argument st has just made
 * (*md is read after that call). */
static const_dnnl_memory_desc_t mds_keep(cpu_mds_t *k, dnnl_status_t st, dnnl_memory_desc_t *md)
{
    if (st != dnnl_success || k->n == CPU_MDS_MAX) {
        if (st == dnnl_success)
            dnnl_memory_desc_destroy(*md);
        k->failed = 1;
        return NULL;
    }
    return k->md[k->n++] = *md;
}

const_dnnl_memory_desc_t cpu_md(cpu_mds_t *k, int nd, const dnnl_dim_t *dims,
                                dnnl_data_type_t dt, dnnl_format_tag_t tag)
{
    dnnl_dims_t d = {0};
    memcpy(d, dims, (size_t)nd * sizeof *dims);
    dnnl_memory_desc_t md = NULL;
    return mds_keep(k, dnnl_memory_desc_create_with_tag(&md, nd, d, dt, tag), &md);
}

const_dnnl_memory_desc_t cpu_md_act(cpu_mds_t *k, const int s[4])
{
    const dnnl_dim_t d[4] = {s[0], s[1], s[2], s[3]};
    return cpu_md(k, 4, d, dnnl_f32, dnnl_acdb);
}

int cpu_md_ndims(const_dnnl_memory_desc_t md)
{
    int nd = 0;
    return md && dnnl_memory_desc_query(md, dnnl_query_ndims_s32, &nd) == dnnl_success ? nd : 0;
}

const dnnl_dim_t *cpu_md_dims(const_dnnl_memory_desc_t md)
{
    static const dnnl_dims_t none = {0};
    const dnnl_dims_t *d = NULL;
    return md && dnnl_memory_desc_query(md, dnnl_query_dims, &d) == dnnl_success && d ? *d : none;
}

/* md with its elements of type dt (a plain or format_any md: its strides
 * count elements, so they stay valid). */
const_dnnl_memory_desc_t cpu_md_typed(cpu_mds_t *k, const_dnnl_memory_desc_t md,
                                      dnnl_data_type_t dt)
{
    dnnl_format_kind_t fk = dnnl_format_kind_undef;
    const dnnl_dims_t *strides = NULL;
    dnnl_memory_desc_t out = NULL;
    int nd = cpu_md_ndims(md);
    if (!md || dnnl_memory_desc_query(md, dnnl_query_format_kind, &fk) != dnnl_success) {
        k->failed = 1;
        return NULL;
    }
    if (fk == dnnl_format_kind_any)
        return cpu_md(k, nd, cpu_md_dims(md), dt, dnnl_format_tag_any);
    if (dnnl_memory_desc_query(md, dnnl_query_strides, &strides) != dnnl_success || !strides) {
        k->failed = 1;
        return NULL;
    }
    dnnl_dims_t d = {0};
    memcpy(d, cpu_md_dims(md), (size_t)nd * sizeof d[0]);
    return mds_keep(k, dnnl_memory_desc_create_with_strides(&out, nd, d, dt, *strides), &out);
}

const_dnnl_memory_desc_t cpu_md_reshape(cpu_mds_t *k, const_dnnl_memory_desc_t md, int nd,
                                        const dnnl_dim_t *dims)
{
    dnnl_dims_t d = {0};
    memcpy(d, dims, (size_t)nd * sizeof *dims);
    dnnl_memory_desc_t out = NULL;
    if (dnnl_memory_desc_reshape(&out, md, nd, d) != dnnl_success)
        return NULL;
    return mds_keep(k, dnnl_success, &out);
}

int cpu_mds_check(bk_ctx_t *g, const cpu_mds_t *k)
{
    if (!k->failed)
        return 0;
    bk_ctx_fail(g, "oneDNN memory descriptor creation failed (out of memory?)");
    return -1;
}

void cpu_mds_free(cpu_mds_t *k)
{
    for (int i = 0; i < k->n; i++)
        dnnl_memory_desc_destroy(k->md[i]);
    k->n = 0;
}

dnnl_format_tag_t cpu_plain_tag(int nd)
{
    static const dnnl_format_tag_t t[] = {dnnl_format_tag_undef, dnnl_a, dnnl_ab, dnnl_abc,
                                          dnnl_abcd};
    return t[nd];
}


void cpu_prim_arg(cpu_prim_t *pr, int arg, dnnl_memory_t m)
{
    pr->args[pr->nargs++] = (dnnl_exec_arg_t){arg, m};
}

/* The primitive of pd, with a scratchpad argument when it needs one. */
int cpu_prim_create(bk_ctx_t *g, cpu_prim_t *pr, const_dnnl_primitive_desc_t pd,
                       const char *what)
{
    if (cpu_dn(g, dnnl_primitive_create(&pr->p, pd), what) < 0)
        return -1;
    const_dnnl_memory_desc_t smd = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    pr->scratch_size = smd ? dnnl_memory_desc_get_size(smd) : 0;
    if (pr->scratch_size == 0)
        return 0;
    if (cpu_dn(g, dnnl_memory_create(&pr->scratch, smd, cpu_be(g)->eng, DNNL_MEMORY_NONE),
               "scratchpad memory_create") < 0)
        return -1;
    cpu_prim_arg(pr, DNNL_ARG_SCRATCHPAD, pr->scratch);
    return 0;
}

int cpu_prim_make(bk_ctx_t *g, cpu_prim_t *pr, dnnl_status_t st, dnnl_primitive_desc_t *pd,
                  int keep, const char *what)
{
    int ok = cpu_dn(g, st, what) == 0 && cpu_prim_create(g, pr, *pd, what) == 0;
    if ((!ok || !keep) && st == dnnl_success && *pd) {
        dnnl_primitive_desc_destroy(*pd);
        *pd = NULL;
    }
    return ok ? 0 : -1;
}

void cpu_prim_free(cpu_prim_t *pr)
{
    if (pr->p)
        dnnl_primitive_destroy(pr->p);
    if (pr->scratch)
        dnnl_memory_destroy(pr->scratch);
    pr->p = NULL;
    pr->scratch = NULL;
}

/* Point pr's scratchpad at the backend's buffer, grown if pr needs more. */
static int cpu_prim_scratch(bk_ctx_t *g, cpu_prim_t *pr)
{
    if (!pr->scratch)
        return 0;
    void *buf = cpu_scratch(g, pr->scratch_size);
    return buf ? cpu_dn(g, dnnl_memory_set_data_handle(pr->scratch, buf), "scratchpad handle")
               : -1;
}

int cpu_prim_run(bk_ctx_t *g, cpu_prim_t *pr, const char *what)
{
    if (pr->one_thread)
        omp_set_num_threads(1);
    else
        cpu_threads(g);
    if (cpu_prim_scratch(g, pr) < 0)
        return -1;
    if (cpu_dn(g, dnnl_primitive_execute(pr->p, cpu_be(g)->strm, pr->nargs, pr->args), what) < 0)
        return -1;
    return cpu_dn(g, dnnl_stream_wait(cpu_be(g)->strm), "stream_wait");
}

/* Memory of md: allocated (owned) or a handle set at each call (NONE). */
dnnl_memory_t cpu_mem(bk_ctx_t *g, const_dnnl_memory_desc_t md, int alloc)
{
    dnnl_memory_t m = NULL;
    if (cpu_dn(g, dnnl_memory_create(&m, md, cpu_be(g)->eng,
                                     alloc ? DNNL_MEMORY_ALLOCATE : DNNL_MEMORY_NONE),
               "memory_create") < 0)
        return NULL;
    return m;
}

int cpu_handle(bk_ctx_t *g, dnnl_memory_t m, const void *p)
{
    return cpu_dn(g, dnnl_memory_set_data_handle(m, (void *)p), "set_data_handle");
}

void cpu_mem_free(dnnl_memory_t *m)
{
    if (*m)
        dnnl_memory_destroy(*m);
    *m = NULL;
}

const_dnnl_memory_desc_t cpu_mem_md(dnnl_memory_t m)
{
    const_dnnl_memory_desc_t md = NULL;
    dnnl_memory_get_memory_desc(m, &md);
    return md;
}

/* Reorder from `from` to `to` (created once). */
int cpu_reorder_make(bk_ctx_t *g, cpu_prim_t *pr, dnnl_memory_t from, dnnl_memory_t to)
{
    const_dnnl_memory_desc_t a = cpu_mem_md(from), b = cpu_mem_md(to);
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_attr_t attr = cpu_attr_new(g);
    int ok = attr &&
             cpu_dn(g, dnnl_reorder_primitive_desc_create(&pd, a, cpu_be(g)->eng, b, cpu_be(g)->eng, attr),
                    "reorder") == 0 &&
             cpu_prim_create(g, pr, pd, "reorder") == 0;
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    cpu_prim_arg(pr, DNNL_ARG_FROM, from);
    cpu_prim_arg(pr, DNNL_ARG_TO, to);
    return ok ? 0 : -1;
}

const_dnnl_memory_desc_t cpu_q_md(const_dnnl_primitive_desc_t pd, dnnl_query_t q)
{
    return dnnl_primitive_desc_query_md(pd, q, 0);
}

const char *cpu_impl(const_dnnl_primitive_desc_t pd)
{
    const char *impl = NULL;
    if (!pd || dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success)
        return "";
    return impl ? impl : "";
}

dnnl_alg_kind_t cpu_pool_alg(const bk_pool_t *q)
{
    return q->alg == BK_POOL_MAX   ? dnnl_pooling_max
           : q->alg == BK_POOL_AVG ? dnnl_pooling_avg_include_padding
                                   : dnnl_pooling_avg_exclude_padding;
}

/* Attributes of every primitive: a scratchpad we own (dnnl_priv.h says
 * why) and strict fp32 math (no silent bf16 on AMX machines). */
dnnl_primitive_attr_t cpu_attr_new(bk_ctx_t *g)
{
    dnnl_primitive_attr_t a = NULL;
    if (cpu_dn(g, dnnl_primitive_attr_create(&a), "attr_create") < 0)
        return NULL;
    if (cpu_dn(g, dnnl_primitive_attr_set_scratchpad_mode(a, dnnl_scratchpad_mode_user),
               "set_scratchpad_mode") < 0 ||
        cpu_dn(g, dnnl_primitive_attr_set_fpmath_mode(a, dnnl_fpmath_mode_strict),
               "set_fpmath_mode") < 0) {
        dnnl_primitive_attr_destroy(a);
        return NULL;
    }
    return a;
}

void *cpu_grow(bk_ctx_t *g, void **buf, size_t *cap, size_t bytes, const char *what)
{
    if (bytes > *cap) {
        void *p = NULL;
        if (posix_memalign(&p, 64, bytes) != 0)
            return bk_ctx_fail(g, "out of memory for a %zu-byte %s", bytes, what);
        free(*buf);
        *buf = p;
        *cap = bytes;
    }
    return *buf;
}

void *cpu_scratch(bk_ctx_t *g, size_t bytes)
{
    cpu_backend_t *be = (cpu_backend_t *)g->be;
    return cpu_grow(g, &be->scratch, &be->scratch_cap, bytes, "oneDNN scratchpad");
}
