/* cuda_arena — see cuda_arena.h. The ops get no backend: a failure is
 * logged here (what failed, what to do) and the caller gets -1. */
#include "gpud/cuda/cuda_arena.h"
#include "common/env_switch.h"
#include "common/errbuf.h"
#include "common/log.h"

#include <cuda_runtime.h>
#include <stdlib.h>

#include "gpud/cuda/cuda_kernels.h"
#include "gpud/cuda/cuda_xsum.h"

struct cuda_arena {
    bk_arena_ops_t ops;            /* ctx = self */
    cudaStream_t stream;
    unsigned long long *word;      /* device: the non-finite scan's first bad index */
    cuda_optim_t *optim;
};

static int dev_ok(cudaError_t e, const char *what)
{
    if (e == cudaSuccess)
        return 0;
    log_error("cuda device arena: %s failed: %s (%s); %s", what, cudaGetErrorName(e),
              cudaGetErrorString(e),
              e == cudaErrorMemoryAllocation
                  ? "the GPU is out of memory: lower the batch or the model, or stop other "
                    "processes on the device (nvidia-smi)"
                  : "the CUDA context may be unusable: restart the process (run with "
                    "CUDA_LAUNCH_BLOCKING=1 to locate a failing kernel)");
    return -1;
}

/* The stream's queued work (the kernels that wrote what the host is about
 * to read) is done. */
static int dev_wait(const cuda_arena_t *self, const char *what)
{
    return dev_ok(cudaStreamSynchronize(self->stream), what);
}

static float *dev_alloc(void *ctx, size_t floats)
{
    cuda_arena_t *self = ctx;
    void *p = NULL;
    size_t bytes = (floats ? floats : 1) * sizeof(float);
    if (dev_ok(cudaMalloc(&p, bytes), "cudaMalloc (arena)") < 0)
        return NULL;
    /* queued: every later op and kernel on the stream sees the zeros */
    if (dev_ok(cudaMemsetAsync(p, 0, bytes, self->stream), "cudaMemsetAsync (arena)") < 0) {
        cudaFree(p);
        return NULL;
    }
    return p;
}

static void dev_free(void *ctx, float *base)
{
    /* kernels queued on the stream may still use the arena */
    dev_wait(ctx, "device work before freeing an arena");
    dev_ok(cudaFree(base), "cudaFree (arena)");
}

static int dev_read(void *ctx, const float *base, size_t off, size_t n, float *dst)
{
    cuda_arena_t *self = ctx;
    if (!n)
        return 0;
    if (dev_ok(cudaMemcpyAsync(dst, base + off, n * sizeof *dst, cudaMemcpyDeviceToHost,
                               self->stream), "arena read (device to host)") < 0)
        return -1;
    return dev_wait(self, "arena read");
}

/* From pageable memory the copy is staged before the call returns: src may
 * change at once, the copy lands in stream order. */
static int dev_write(void *ctx, float *base, size_t off, size_t n, const float *src)
{
    cuda_arena_t *self = ctx;
    if (!n)
        return 0;
    return dev_ok(cudaMemcpyAsync(base + off, src, n * sizeof *src, cudaMemcpyHostToDevice,
                                  self->stream), "arena write (host to device)");
}

static int dev_zero(void *ctx, float *base, size_t off, size_t n)
{
    cuda_arena_t *self = ctx;
    if (!n)
        return 0;
    return dev_ok(cudaMemsetAsync(base + off, 0, n * sizeof *base, self->stream),
                  "arena zero (cudaMemsetAsync)");
}

static int dev_copy(void *ctx, float *dst, size_t doff, const float *src, size_t soff,
                    size_t n)
{
    cuda_arena_t *self = ctx;
    if (!n)
        return 0;
    return dev_ok(cudaMemcpyAsync(dst + doff, src + soff, n * sizeof *dst,
                                  cudaMemcpyDeviceToDevice, self->stream),
                  "arena copy (device to device)");
}

/* The arena's word, all ones (= none found), lowered by the kernel to the
 * first bad index, read back when the stream gets there. */
static int dev_find_nonfinite(void *ctx, const float *base, size_t off, size_t n, int64_t *at)
{
    cuda_arena_t *self = ctx;
    unsigned long long first = ~0ull;
    *at = -1;
    if (!n)
        return 0;
    if (dev_ok(cudaMemsetAsync(self->word, 0xff, sizeof *self->word, self->stream),
               "non-finite scan start (cudaMemsetAsync)") < 0 ||
        dev_ok(ck_find_nonfinite(self->stream, base + off, n, self->word),
               "non-finite scan kernel") < 0 ||
        dev_ok(cudaMemcpyAsync(&first, self->word, sizeof first, cudaMemcpyDeviceToHost,
                               self->stream), "non-finite scan result (device to host)") < 0 ||
        dev_wait(self, "non-finite scan") < 0)
        return -1;
    if (first != ~0ull)
        *at = (int64_t)first;
    return 0;
}

static int dev_scale(void *ctx, float *base, size_t off, size_t n, float factor)
{
    cuda_arena_t *self = ctx;
    if (!n)
        return 0;
    return dev_ok(ck_scale(self->stream, base + off, n, factor), "arena scale kernel");
}

static int dev_optim(void *ctx, const optim_cfg_t *c, double lr, bk_oparam_t *p, int n,
                     char *err, size_t errlen)
{
    cuda_arena_t *self = ctx;
    return cuda_optim_run(self->optim, c, lr, p, n, self->stream, err, errlen);
}

static void *dev_stream(void *ctx)
{
    return ((cuda_arena_t *)ctx)->stream;
}

static void *dev_xsum_new(void *ctx, const size_t *len, int nseg)
{
    (void)ctx;
    return cuda_xsum_new(len, nseg);
}

static void dev_xsum_free(void *ctx, void *xs)
{
    cuda_xsum_t *x = xs;
    cuda_xsum_destroy(&x, ((cuda_arena_t *)ctx)->stream);
}

static int dev_xsum_clear(void *ctx, void *xs)
{
    return cuda_xsum_clear(xs, ((cuda_arena_t *)ctx)->stream);
}

static int dev_xsum_add(void *ctx, void *xs, int seg, const float *x)
{
    return cuda_xsum_add(xs, seg, x, ((cuda_arena_t *)ctx)->stream);
}

static int dev_xsum_read(void *ctx, void *xs, struct xsum *dst)
{
    return cuda_xsum_read(xs, dst, ((cuda_arena_t *)ctx)->stream);
}

static size_t dev_xsum_read_bytes(void *ctx, const void *xs)
{
    (void)ctx;
    return cuda_xsum_read_bytes(xs);
}

static int dev_xsum_reduce(void *ctx, void *xs, const bk_xsum_coll_t *coll, float *out,
                           char *err, size_t errlen)
{
    return cuda_xsum_reduce(xs, coll, out, ((cuda_arena_t *)ctx)->stream, err, errlen);
}

static const bk_xsum_ops_t CUDA_XSUM_OPS = {
    .new = dev_xsum_new,
    .free = dev_xsum_free,
    .clear = dev_xsum_clear,
    .add = dev_xsum_add,
    .read = dev_xsum_read,
    .read_bytes = dev_xsum_read_bytes,
    .reduce = dev_xsum_reduce,
};

static const bk_arena_ops_t CUDA_ARENA_OPS = {
    .name = "cuda device",
    .mem = BK_MEM_DEVICE,
    .alloc = dev_alloc,
    .free = dev_free,
    .read = dev_read,
    .write = dev_write,
    .zero = dev_zero,
    .copy = dev_copy,
    .find_nonfinite = dev_find_nonfinite,
    .scale = dev_scale,
    .optim_step = dev_optim,
    .stream = dev_stream,
    .xsum = &CUDA_XSUM_OPS,
};

cuda_arena_t *cuda_arena_new(void *stream, char *err, size_t errlen)
{
    cuda_arena_t *self = calloc(1, sizeof *self);
    if (!self) {
        err_set(err, errlen, "cuda device arena: out of memory");
        return NULL;
    }
    self->ops = CUDA_ARENA_OPS;
    self->ops.ctx = self;
    /* DDPIPE_CUDA_XSUM=0: bitwise training's sums on the host, from the
     * mirror (the same bytes; a fallback, and the tests' cross-check) */
    if (!env_switch_on("DDPIPE_CUDA_XSUM"))
        self->ops.xsum = NULL;
    self->stream = (cudaStream_t)stream;
    cudaError_t e = cudaMalloc((void **)&self->word, sizeof *self->word);
    if (e != cudaSuccess) {
        err_set(err, errlen, "cuda device arena: cudaMalloc of the scan's word failed: %s",
                cudaGetErrorString(e));
        free(self);
        return NULL;
    }
    self->optim = cuda_optim_new(err, errlen);
    if (!self->optim) {
        cudaFree(self->word);
        free(self);
        return NULL;
    }
    return self;
}

void cuda_arena_destroy(cuda_arena_t **self)
{
    if (!self || !*self)
        return;
    dev_wait(*self, "device work before closing the arena");
    cuda_optim_destroy(&(*self)->optim);
    cudaFree((*self)->word);
    free(*self);
    *self = NULL;
}

const bk_arena_ops_t *cuda_arena_ops(cuda_arena_t *self)
{
    return &self->ops;
}

cuda_optim_counts_t cuda_arena_optim_counts(const cuda_arena_t *self)
{
    return cuda_optim_counts(self->optim);
}
