/* dnnl_backend — the "cpu" backend (backend.h) on oneDNN 3.x (CPU engine,
 * OpenMP runtime): the backend object (engine, stream, the scratchpad
 * shared by every primitive: dnnl_prim.c's cpu_scratch) and its table. The kernels: dnnl_kernels.c
 * (the table), dnnl_train.c and dnnl_layers.c (training), dnnl_infer.c (an
 * inference graph's: blocked activations, BatchNorm folded, post-ops),
 * dnnl_bf16.c (native bf16). */
#include <stdlib.h>

#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>

#include "common/errbuf.h"
#include "gpud/cpu/dnnl_priv.h"
#include "gpud/cpu/host_kernels.h"

static void cpu_destroy(backend_t *b)
{
    cpu_backend_t *be = (cpu_backend_t *)b;
    if (be->strm)
        dnnl_stream_destroy(be->strm);
    if (be->eng)
        dnnl_engine_destroy(be->eng);
    free(be->scratch);
    cpu_bf16_free(be);
    cpu_train16_free(be);
    free(be);
}

static const bk_ops_t CPU_OPS = {
    .name = "cpu",
    .destroy = cpu_destroy,
    .train = &CPU_TKERNELS,
    .train16 = &CPU_T16KERNELS,   /* bf16 activations stored in 16 bits (dnnl_train16.c) */
    .caps = BK_CAPS_CPU | BK_CAP_FUSED_BF16 | BK_CAP_ACT16_BF16,
};

backend_t *cpu_backend_new(int threads, char *err, size_t errlen)
{
    cpu_backend_t *be = calloc(1, sizeof *be);
    if (!be) {
        err_set(err, errlen, "cpu backend: out of memory");
        return NULL;
    }
    cpu_train16_init();
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
