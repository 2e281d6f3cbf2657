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

void cpu_md_act(dnnl_memory_desc_t *md, const int s[4])
{
    dnnl_dims_t d = {s[0], s[1], s[2], s[3]};
    dnnl_memory_desc_init_by_tag(md, 4, d, dnnl_f32, dnnl_acdb);
}

void cpu_md_tag(dnnl_memory_desc_t *md, int nd, const dnnl_dim_t *dims,
                   dnnl_format_tag_t tag)
{
    dnnl_dims_t d = {0};
    memcpy(d, dims, (size_t)nd * sizeof *dims);
    dnnl_memory_desc_init_by_tag(md, nd, d, dnnl_f32, tag);
}

/* md with its elements of type dt (a plain or format_any md: its strides
 * count elements, so they stay valid). */
dnnl_memory_desc_t cpu_md_typed(const dnnl_memory_desc_t *md, dnnl_data_type_t dt)
{
    dnnl_memory_desc_t m = *md;
    m.data_type = dt;
    return m;
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
    const dnnl_memory_desc_t *smd = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    pr->scratch_size = smd ? dnnl_memory_desc_get_size(smd) : 0;
    if (pr->scratch_size == 0)
        return 0;
    if (cpu_dn(g, dnnl_memory_create(&pr->scratch, smd, cpu_be(g)->eng, DNNL_MEMORY_NONE),
               "scratchpad memory_create") < 0)
        return -1;
    cpu_prim_arg(pr, DNNL_ARG_SCRATCHPAD, pr->scratch);
    return 0;
}

int cpu_prim_make(bk_ctx_t *g, cpu_prim_t *pr, const_dnnl_op_desc_t d,
                     const_dnnl_primitive_desc_t hint, dnnl_primitive_desc_t *pd_out,
                     const char *what)
{
    dnnl_primitive_attr_t a = cpu_attr_new(g);
    dnnl_primitive_desc_t pd = NULL;
    int ok = a && cpu_dn(g, dnnl_primitive_desc_create(&pd, d, a, cpu_be(g)->eng, hint), what) == 0 &&
             cpu_prim_create(g, pr, pd, what) == 0;
    if (a)
        dnnl_primitive_attr_destroy(a);
    if (ok && pd_out)
        *pd_out = pd;
    else if (pd)
        dnnl_primitive_desc_destroy(pd);
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
dnnl_memory_t cpu_mem(bk_ctx_t *g, const dnnl_memory_desc_t *md, int alloc)
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

/* Reorder from `from` to `to` (created once). */
int cpu_reorder_make(bk_ctx_t *g, cpu_prim_t *pr, dnnl_memory_t from, dnnl_memory_t to)
{
    const dnnl_memory_desc_t *a, *b;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_memory_get_memory_desc(from, &a);
    dnnl_memory_get_memory_desc(to, &b);
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

const dnnl_memory_desc_t *cpu_q_md(const_dnnl_primitive_desc_t pd, dnnl_query_t q)
{
    return dnnl_primitive_desc_query_md(pd, q, 0);
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

void *cpu_scratch(bk_ctx_t *g, size_t bytes)
{
    cpu_backend_t *be = (cpu_backend_t *)g->be;
    if (bytes > be->scratch_cap) {
        void *buf = NULL;
        if (posix_memalign(&buf, 64, bytes) != 0)
            return bk_ctx_fail(g, "out of memory for a %zu-byte oneDNN scratchpad", bytes);
        free(be->scratch);
        be->scratch = buf;
        be->scratch_cap = bytes;
    }
    return be->scratch;
}
