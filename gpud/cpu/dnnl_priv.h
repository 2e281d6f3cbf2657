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
} cpu_backend_t;

/* A primitive attribute with a user scratchpad and strict fp32 math (NULL:
 * the graph failed, with the reason). The caller destroys it. */
dnnl_primitive_attr_t cpu_attr_new(bk_prog_t *g);

#endif
