/* cuda_xsum — see cuda_xsum.h. */
#include "gpud/cuda/cuda_xsum.h"

#include <cuda_runtime.h>
#include <stdlib.h>

#include "common/errbuf.h"
#include "common/log.h"
#include "common/xsum_f32.h"
#include "gpud/cuda/cuda_xsum_kernels.h"

struct cuda_xsum {
    int nseg;
    size_t *off;          /* host: nseg + 1, segment s is elements [off[s], off[s + 1]) */
    int64_t *limbs;       /* device: off[nseg] * XSUM_LIMBS, xsum.h's layout */
    unsigned *run;        /* device: per segment, the largest magnitude bits added so far */
    unsigned *cur;        /* device: per segment, the add in flight's (0 between adds) */
    unsigned *hrun;       /* host: run, read */
    int32_t *tops;        /* host: run's tops */
};

static int ok(cudaError_t e, const char *what)
{
    if (e == cudaSuccess)
        return 0;
    log_error("cuda exact sums (bitwise training): %s failed: %s (%s); %s", what,
              cudaGetErrorName(e), cudaGetErrorString(e),
              e == cudaErrorMemoryAllocation
                  ? "the GPU is out of memory: lower the batch or --chunk, or stop other "
                    "processes on the device (nvidia-smi)"
                  : "the CUDA context may be unusable: restart the process (run with "
                    "CUDA_LAUNCH_BLOCKING=1 to locate a failing kernel)");
    return -1;
}

static size_t limb_bytes(const cuda_xsum_t *self)
{
    size_t n = self->off[self->nseg] * XSUM_LIMBS * sizeof *self->limbs;
    return n ? n : sizeof *self->limbs;   /* no zero-byte cudaMalloc */
}

cuda_xsum_t *cuda_xsum_new(const size_t *len, int nseg)
{
    cuda_xsum_t *self = nseg >= 1 && len ? calloc(1, sizeof *self) : NULL;
    if (!self)
        return NULL;
    self->nseg = nseg;
    self->off = malloc(((size_t)nseg + 1) * sizeof *self->off);
    self->hrun = malloc((size_t)nseg * sizeof *self->hrun);
    self->tops = malloc((size_t)nseg * sizeof *self->tops);
    if (!self->off || !self->hrun || !self->tops) {
        log_error("cuda exact sums: out of host memory for %d segments", nseg);
        cuda_xsum_destroy(&self, NULL);
        return NULL;
    }
    self->off[0] = 0;
    for (int s = 0; s < nseg; s++)
        self->off[s + 1] = self->off[s] + len[s];
    size_t seg_bytes = (size_t)nseg * sizeof *self->run;
    if (ok(cudaMalloc((void **)&self->limbs, limb_bytes(self)), "cudaMalloc (limbs)") < 0 ||
        ok(cudaMalloc((void **)&self->run, seg_bytes), "cudaMalloc (tops)") < 0 ||
        ok(cudaMalloc((void **)&self->cur, seg_bytes), "cudaMalloc (tops)") < 0 ||
        ok(cudaMemset(self->cur, 0, seg_bytes), "cudaMemset (tops)") < 0 ||
        cuda_xsum_clear(self, NULL) < 0 || ok(cudaDeviceSynchronize(), "the sums' start") < 0) {
        cuda_xsum_destroy(&self, NULL);
        return NULL;
    }
    return self;
}

void cuda_xsum_destroy(cuda_xsum_t **self, void *stream)
{
    if (!self || !*self)
        return;
    cuda_xsum_t *x = *self;
    ok(cudaStreamSynchronize((cudaStream_t)stream), "device work before freeing the sums");
    if (x->limbs)
        ok(cudaFree(x->limbs), "cudaFree (limbs)");
    if (x->run)
        ok(cudaFree(x->run), "cudaFree (tops)");
    if (x->cur)
        ok(cudaFree(x->cur), "cudaFree (tops)");
    free(x->off);
    free(x->hrun);
    free(x->tops);
    free(x);
    *self = NULL;
}

int cuda_xsum_clear(cuda_xsum_t *self, void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    return ok(cudaMemsetAsync(self->limbs, 0, limb_bytes(self), s), "clearing the limbs") < 0 ||
                   ok(cudaMemsetAsync(self->run, 0, (size_t)self->nseg * sizeof *self->run, s),
                      "clearing the tops") < 0
               ? -1
               : 0;
}

int cuda_xsum_add(cuda_xsum_t *self, int seg, const float *x, void *stream)
{
    if (seg < 0 || seg >= self->nseg) {
        log_error("cuda exact sums: segment %d of %d (a caller's bug)", seg, self->nseg);
        return -1;
    }
    size_t n = self->off[seg + 1] - self->off[seg];
    if (!n)
        return 0;
    cudaStream_t s = (cudaStream_t)stream;
    unsigned *run = self->run + seg, *cur = self->cur + seg;
    return ok(ck_xsum_amax(s, x, n, cur), "the sums' max kernel") < 0 ||
                   ok(ck_xsum_add(s, x, n, self->limbs + self->off[seg] * XSUM_LIMBS, run, cur),
                      "the sums' add kernel") < 0 ||
                   ok(ck_xsum_commit(s, run, cur), "the sums' commit kernel") < 0
               ? -1
               : 0;
}

int cuda_xsum_read(cuda_xsum_t *self, xsum_t *dst, void *stream)
{
    size_t count = self->off[self->nseg];
    int same = xsum_segments(dst) == self->nseg;
    for (int g = 0; same && g < self->nseg; g++)
        same = xsum_len(dst, g) == self->off[g + 1] - self->off[g];
    if (!same) {
        log_error("cuda exact sums: read into %d segments of %zu elements, the device has %d "
                  "of %zu, or their lengths differ (a caller's bug)", xsum_segments(dst),
                  xsum_count(dst), self->nseg, count);
        return -1;
    }
    cudaStream_t s = (cudaStream_t)stream;
    if (ok(cudaMemcpyAsync(self->hrun, self->run, (size_t)self->nseg * sizeof *self->hrun,
                           cudaMemcpyDeviceToHost, s), "reading the tops") < 0 ||
        ok(cudaMemcpyAsync(xsum_limbs(dst), self->limbs, count * XSUM_LIMBS * sizeof(int64_t),
                           cudaMemcpyDeviceToHost, s), "reading the limbs") < 0 ||
        ok(cudaStreamSynchronize(s), "the sums' read") < 0)
        return -1;
    for (int g = 0; g < self->nseg; g++)
        self->tops[g] = xsum_top_f32(self->hrun[g]);
    xsum_set_tops(dst, self->tops);
    return 0;
}

static int dev_failed(char *err, size_t errlen)
{
    err_set(err, errlen, "the exact gradient sums failed on the device (the log says what "
            "failed and what to do)");
    return -1;
}

/* Each segment's limbs through kernel k (align: from run's window to
 * cur's; round: into out in cur's window). 0 or -1 (logged). */
static int per_segment(cuda_xsum_t *self, int round, float *out, cudaStream_t s)
{
    for (int g = 0; g < self->nseg; g++) {
        size_t o = self->off[g], n = self->off[g + 1] - o;
        int64_t *L = self->limbs + o * XSUM_LIMBS;
        if (n && ok(round ? ck_xsum_round(s, L, n, self->cur + g, out + o)
                          : ck_xsum_align(s, L, n, self->run + g, self->cur + g),
                    round ? "the sums' round kernel" : "the sums' align kernel") < 0)
            return -1;
    }
    return 0;
}

int cuda_xsum_reduce(cuda_xsum_t *self, const bk_xsum_coll_t *coll, float *out, void *stream,
                     char *err, size_t errlen)
{
    cudaStream_t s = (cudaStream_t)stream;
    size_t tb = (size_t)self->nseg * sizeof *self->run, nl = self->off[self->nseg] * XSUM_LIMBS;
    int rc = 0;
    /* cur (zero between adds) takes the ranks' max of run; each segment's
     * limbs move from run's window to it, are summed, and rounded in it */
    if (ok(cudaMemcpyAsync(self->cur, self->run, tb, cudaMemcpyDeviceToDevice, s),
           "copying the tops") < 0)
        rc = dev_failed(err, errlen);
    if (rc == 0)
        rc = coll->max_u32(coll->ctx, self->cur, (size_t)self->nseg, coll->timeout_ms, err,
                           errlen);
    if (rc == 0 && per_segment(self, 0, NULL, s) < 0)
        rc = dev_failed(err, errlen);
    if (rc == 0)
        rc = coll->sum_i64(coll->ctx, self->limbs, nl, coll->timeout_ms, err, errlen);
    if (rc == 0 && (per_segment(self, 1, out, s) < 0 ||
                    ok(cudaMemcpyAsync(self->run, self->cur, tb, cudaMemcpyDeviceToDevice, s),
                       "copying the tops") < 0))
        rc = dev_failed(err, errlen);
    /* cur back to zero for the next step's adds, whatever happened */
    if (ok(cudaMemsetAsync(self->cur, 0, tb, s), "clearing the tops") < 0 && rc == 0)
        rc = dev_failed(err, errlen);
    return rc < 0 ? -1 : 0;
}

size_t cuda_xsum_read_bytes(const cuda_xsum_t *self)
{
    return self->off[self->nseg] * XSUM_LIMBS * sizeof(int64_t) +
           (size_t)self->nseg * sizeof *self->hrun;
}
