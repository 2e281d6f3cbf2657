/* ref_backend — the "ref" backend: plain C loops over NCHW host floats
 * (ref_ops.c, through the kernels of ref_train.c), no layouts, no
 * primitives. The oracle of the unit tests: they run whole models on it to
 * check the oneDNN and cuda backends against plain C. A 16-bit graph's
 * activations are 16-bit buffers converted around the same kernels
 * (host16_kernels.c), the reference of the engine's 16-bit storage. */
#include <stdlib.h>

#include "gpud/backend_impl.h"
#include "common/errbuf.h"
#include "gpud/cpu/host16_kernels.h"
#include "gpud/cpu/host_kernels.h"

static void ref_destroy(backend_t *be)
{
    free(be);
}

static const bk_ops_t REF_OPS = {
    .name = "ref",
    .destroy = ref_destroy,
    .train = &REF_TKERNELS,
    .train16 = &HOST16_KERNELS,   /* bf16/fp16 activations stored in 16 bits */
    .caps = BK_CAPS_REF | BK_CAP_ACT16_BF16 | BK_CAP_ACT16_FP16,
};

backend_t *ref_backend_new(int threads, char *err, size_t errlen)
{
    backend_t *be = calloc(1, sizeof *be);
    if (!be) {
        err_set(err, errlen, "ref backend: out of memory");
        return NULL;
    }
    be->ops = &REF_OPS;
    be->arena = &bk_arena_host;
    be->threads = threads;
    return be;
}
