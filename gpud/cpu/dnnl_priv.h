/* dnnl_priv — the oneDNN backend's state, shared by its inference graphs
 * (dnnl_backend.c) and its training kernels (dnnl_train.c). */
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
} cpu_backend_t;

/* A primitive attribute with a user scratchpad and strict fp32 math (NULL:
 * the graph failed, with the reason). The caller destroys it. */
dnnl_primitive_attr_t cpu_attr_new(bk_prog_t *g);

/* dnnl_bf16.c. bk_kernels_t.bf16_native: oneDNN's bf16 convolution and
 * inner product on this CPU (backend.h, backend_bf16_native). */
int cpu_bf16_native(const char **isa);
/* The shared bf16 buffer `which` (0: src, 1: diff_dst), grown to at least
 * bytes (its old contents lost); NULL after bk_prog_fail. */
void *cpu_bf16_buf(bk_prog_t *g, int which, size_t bytes);
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
