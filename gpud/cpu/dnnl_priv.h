/* dnnl_priv — the oneDNN backend's state, shared by its files: the backend
 * (dnnl_backend.c), the kernel table (dnnl_kernels.c), the training kernels
 * (dnnl_train.c, dnnl_layers.c, dnnl_bf16.c) and the inference graph's
 * (dnnl_infer.c). */
#ifndef DDP_DNNL_PRIV_H
#define DDP_DNNL_PRIV_H

#include <oneapi/dnnl/dnnl.h>

#include "gpud/backend_impl.h"

typedef struct {
    backend_t base;
    dnnl_engine_t eng;
    dnnl_stream_t strm;
    /* The training kernels' scratchpad (user mode, dnnl_train.c): one
     * buffer, grown to the largest primitive's need, shared by the
     * primitives of every plan (a backend runs on one thread, one
     * primitive at a time). oneDNN's own scratchpad is thread-local and
     * leaks when a plan is destroyed on another thread. */
    void *scratch;
    size_t scratch_cap;
    /* BK_BF16_NATIVE: the bf16 copies of a conv's or linear's src and
     * diff_dst (dnnl_bf16.c), shared by every plan like the scratchpad. */
    void *b16[2];
    size_t b16_cap[2];
    /* 16-bit activations (dnnl_train16.c): fp32 temporaries of the kernels
     * that unpack their operands, shared by every plan likewise. */
    void *t32[4];
    size_t t32_cap[4];
    /* The activation layout of inference graphs (dnnl_infer.c), asked of
     * oneDNN at the first one; 0 not yet. */
    int infer_layout;
} cpu_backend_t;

/* *buf (64-byte aligned, *cap bytes) grown to at least bytes, its old
 * contents lost; NULL after bk_ctx_fail ("out of memory for a N-byte what").
 * The backend's shared buffers (one kernel at a time) are all this. */
void *cpu_grow(bk_ctx_t *g, void **buf, size_t *cap, size_t bytes, const char *what);
/* The backend's shared scratchpad, grown to at least bytes (its old
 * contents lost); NULL after bk_ctx_fail. */
void *cpu_scratch(bk_ctx_t *g, size_t bytes);

/* dnnl_infer.c: the kernels of an inference graph (g->infer). Layouts
 * (bk_kernels_t.layout): 0 NHWC (the tape's), CPU_LAYOUT_NCHW, or the
 * channel block of oneDNN's nChw8c / nChw16c (8, 16). */
#define CPU_LAYOUT_NCHW 1
#define CPU_LAYOUT_NHWC (-1)   /* cpu_backend_t.infer_layout only: layout 0 */
int cpu_infer_layout(backend_t *be, const int s[4]);
int cpu_infer_write(bk_ctx_t *g, void *dst, const float *src, const int s[4], int layout);
int cpu_infer_read(bk_ctx_t *g, const void *src, float *dst, const int s[4], int layout);
bk_plan_t *cpu_infer_conv_plan(bk_ctx_t *g, const bk_conv_t *c, const bk_post_t *post,
                               const int in[4], const int out[4]);
int cpu_infer_conv_fwd(bk_ctx_t *g, bk_plan_t *p, const void *x, const float *w,
                       const float *b, const void *res, void *y);
bk_plan_t *cpu_infer_pool_plan(bk_ctx_t *g, const bk_pool_t *q, const int in[4],
                               const int out[4]);
bk_plan_t *cpu_infer_relu_plan(bk_ctx_t *g, const int in[4]);
/* pool and relu */
int cpu_infer_fwd(bk_ctx_t *g, bk_plan_t *p, const void *x, void *y);
bk_plan_t *cpu_infer_linear_plan(bk_ctx_t *g, const int in[4], int out, int has_bias);
int cpu_infer_linear_fwd(bk_ctx_t *g, bk_plan_t *p, const void *x, const float *w,
                         const float *b, void *y);

/* A primitive attribute with a user scratchpad and strict fp32 math (NULL:
 * the graph failed, with the reason). The caller destroys it. */
dnnl_primitive_attr_t cpu_attr_new(bk_ctx_t *g);

/* dnnl_prim.c: helpers of the training kernels. Each int-returning one
 * gives 0, or -1 after bk_ctx_fail. */
/* A primitive with the memory objects its arguments use; scratch is a
 * view of the backend's shared scratchpad (its handle set at each run). */
typedef struct {
    dnnl_primitive_t p;
    int nargs;
    dnnl_exec_arg_t args[12];
    dnnl_memory_t scratch;
    size_t scratch_size;
    int one_thread;     /* created and run on one thread (inner products) */
} cpu_prim_t;
cpu_backend_t *cpu_be(bk_ctx_t *g);
/* 0 on success; else fail g with oneDNN's status. */
int cpu_dn(bk_ctx_t *g, dnnl_status_t st, const char *what);
/* Primitives are created and run with the backend's thread count. */
void cpu_threads(bk_ctx_t *g);

/* Memory descriptors are oneDNN 3's handles: a plan's builder makes them
 * in a cpu_mds_t on its stack and frees them all when it is done (the
 * primitives and memories copy what they need). A descriptor that cannot
 * be made is NULL and marks the set failed (cpu_mds_check). */
#define CPU_MDS_MAX 32
typedef struct {
    dnnl_memory_desc_t md[CPU_MDS_MAX];
    int n, failed;
} cpu_mds_t;
const_dnnl_memory_desc_t cpu_md(cpu_mds_t *k, int nd, const dnnl_dim_t *dims,
                                dnnl_data_type_t dt, dnnl_format_tag_t tag);
/* NHWC f32 of shape s: the tape's activations. */
const_dnnl_memory_desc_t cpu_md_act(cpu_mds_t *k, const int s[4]);
/* md with its elements of type dt (a plain or format_any md: its strides
 * count elements, so they stay valid). */
const_dnnl_memory_desc_t cpu_md_typed(cpu_mds_t *k, const_dnnl_memory_desc_t md,
                                      dnnl_data_type_t dt);
/* md viewed with nd dims (NULL, the set not failed, where the layout does
 * not allow it). */
const_dnnl_memory_desc_t cpu_md_reshape(cpu_mds_t *k, const_dnnl_memory_desc_t md, int nd,
                                        const dnnl_dim_t *dims);
int cpu_md_ndims(const_dnnl_memory_desc_t md);
/* md's dims (its ndims of them). */
const dnnl_dim_t *cpu_md_dims(const_dnnl_memory_desc_t md);
/* 0, or -1 after bk_ctx_fail when a descriptor of k could not be made. */
int cpu_mds_check(bk_ctx_t *g, const cpu_mds_t *k);
void cpu_mds_free(cpu_mds_t *k);
dnnl_format_tag_t cpu_plain_tag(int nd);

void cpu_prim_arg(cpu_prim_t *pr, int arg, dnnl_memory_t m);
/* The primitive of pd, with a scratchpad argument when it needs one. */
int cpu_prim_create(bk_ctx_t *g, cpu_prim_t *pr, const_dnnl_primitive_desc_t pd,
                    const char *what);
/* The primitive of *pd, which a oneDNN *_primitive_desc_create call has
 * just made with status st (the call is an argument: *pd is read after
 * it); *pd is kept when keep (the caller destroys it), else destroyed and
 * NULL. */
int cpu_prim_make(bk_ctx_t *g, cpu_prim_t *pr, dnnl_status_t st, dnnl_primitive_desc_t *pd,
                  int keep, const char *what);
void cpu_prim_free(cpu_prim_t *pr);
int cpu_prim_run(bk_ctx_t *g, cpu_prim_t *pr, const char *what);
/* Memory of md: allocated (owned) or a handle set at each call (NONE). */
dnnl_memory_t cpu_mem(bk_ctx_t *g, const_dnnl_memory_desc_t md, int alloc);
int cpu_handle(bk_ctx_t *g, dnnl_memory_t m, const void *p);
void cpu_mem_free(dnnl_memory_t *m);
/* m's descriptor (owned by m). */
const_dnnl_memory_desc_t cpu_mem_md(dnnl_memory_t m);
/* Reorder from `from` to `to` (created once). */
int cpu_reorder_make(bk_ctx_t *g, cpu_prim_t *pr, dnnl_memory_t from, dnnl_memory_t to);
const_dnnl_memory_desc_t cpu_q_md(const_dnnl_primitive_desc_t pd, dnnl_query_t q);
/* The implementation's name ("jit:avx2", "brg:avx512_core_amx", "ref:any"). */
const char *cpu_impl(const_dnnl_primitive_desc_t pd);
/* oneDNN's algorithm for pooling q (training and inference plans). */
dnnl_alg_kind_t cpu_pool_alg(const bk_pool_t *q);

/* dnnl_train.c: convolution and inner product (forward, backward data,
 * backward weights); dnnl_layers.c: batchnorm, relu, pooling. The training
 * plans, bk_kernels_t's (dnnl_kernels.c dispatches). */
bk_plan_t *cpu_conv_plan(bk_ctx_t *g, const bk_conv_t *c, const int in[4], const int out[4]);
bk_plan_t *cpu_linear_plan(bk_ctx_t *g, const int in[4], int out, int has_bias);
int cpu_w_fwd(bk_ctx_t *g, bk_plan_t *p, const void *x, const float *w, const float *b,
              void *y);
int cpu_w_bwd(bk_ctx_t *g, bk_plan_t *p, const void *x, const float *w, const void *gy,
              void *gx, float *gw, float *gb);
/* The same writing y and gx as bf16 (the engine's rounding) where the plan
 * (of cpu_conv_plan16) runs all of it by Winograd (wino.h): 1 when it does
 * not (cpu_w_fwd/_bwd then, on fp32 temporaries), 0, or -1. */
int cpu_w_fwd16(bk_ctx_t *g, bk_plan_t *p, const void *x, const float *w, const float *b,
                void *y);
int cpu_w_bwd16(bk_ctx_t *g, bk_plan_t *p, const void *x, const void *gy, void *gx, float *gw,
                float *gb);
bk_plan_t *cpu_bn_plan(bk_ctx_t *g, const int in[4], float eps, int relu);
int cpu_bn_fwd(bk_ctx_t *g, bk_plan_t *p, int training, const void *x, const float *gamma,
               const float *beta, float *mean, float *var, void *y);
int cpu_bn_add_relu(bk_ctx_t *g, bk_plan_t *p, const void *x, const float *gamma,
                    const float *beta, const float *mean, const float *var, const void *res,
                    void *y);
int cpu_bn_relu_drop(bk_ctx_t *g, bk_plan_t *p, const void *x, const int s[4],
                     const float *gamma, const float *beta, const float *mean, const float *var,
                     float drop_p, uint32_t op, const uint64_t *keys, void *y);
int cpu_bn_bwd(bk_ctx_t *g, bk_plan_t *p, int training, const void *x, const void *y,
               const void *gy, const float *gamma, const float *mean, const float *var,
               void *gx, float *ggamma, float *gbeta);
bk_plan_t *cpu_relu_plan(bk_ctx_t *g, const int in[4]);
int cpu_relu_fwd(bk_ctx_t *g, bk_plan_t *p, const void *x, void *y);
int cpu_relu_bwd(bk_ctx_t *g, bk_plan_t *p, const void *y, const void *gy, void *gx);
bk_plan_t *cpu_pool_plan(bk_ctx_t *g, const bk_pool_t *q, const int in[4], const int out[4]);
int cpu_pool_fwd(bk_ctx_t *g, bk_plan_t *p, const void *x, void *y);
int cpu_pool_bwd(bk_ctx_t *g, bk_plan_t *p, const void *x, const void *gy, void *gx);

/* The same on 16-bit buffers (bk_ops_t.train16, native bf16 only): x and gy
 * are the graph's bf16 NHWC buffers, read by the primitives where their
 * layouts agree (no staging copy); y and gx stay f32. */
bk_plan_t *cpu_conv_plan16(bk_ctx_t *g, const bk_conv_t *c, const int in[4], const int out[4]);
bk_plan_t *cpu_linear_plan16(bk_ctx_t *g, const int in[4], int out, int has_bias);

/* dnnl_train16.c: the table of 16-bit activations (bk_ops_t.train16), filled
 * by cpu_train16_init before the backend's first graph; the temporaries'
 * release. */
extern bk_kernels_t CPU_T16KERNELS;
void cpu_train16_init(void);
void cpu_train16_free(cpu_backend_t *be);

/* dnnl_bf16.c. bk_kernels_t.bf16_native: oneDNN's bf16 convolution and
 * inner product on this CPU (backend.h, backend_bf16_native). */
int cpu_bf16_native(const char **isa);
/* The shared bf16 buffer `which` (0: src, 1: diff_dst), grown to at least
 * bytes (its old contents lost); NULL after bk_ctx_fail. */
void *cpu_bf16_buf(bk_ctx_t *g, int which, size_t bytes);
void cpu_bf16_free(cpu_backend_t *be);
/* The type of the native plans' bf16 operands: dnnl_bf16, or dnnl_f32
 * under cpu_bf16_test_f32. */
dnnl_data_type_t cpu_bf16_type(void);
/* Tests: on a CPU where oneDNN has no bf16 primitives, 1 makes the probe
 * say level 1 and the native plans run with f32 in place of bf16, so that
 * their staging (reorders, the shared buffers, the arguments) runs under
 * the sanitizers on every CPU. No effect where bf16 primitives exist. */
void cpu_bf16_test_f32(int on);

#endif
