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
} cpu_backend_t;

#endif
