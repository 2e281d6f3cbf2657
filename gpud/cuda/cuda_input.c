/* cuda_input — the cuda backend's uint8 input path (bk_kernels_t.write_u8
 * of the fp32, 16-bit and bf16 inference tables: cu_write_u8), docs/CUDA.md
 * "The input path". */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "gpud/cuda/cuda_infer_kernels.h"
#include "gpud/cuda/cuda_priv.h"
#ifdef DDPIPE_HAVE_NVJPEG
#include "gpud/cuda/cuda_decode.h"
#endif

/* ------------------------------------------------------ uint8 input path
 * bk_kernels_t.write_u8: a batch of uint8 NCHW pixels copied as bytes (a
 * quarter of the float traffic) through a pinned double buffer on a copy
 * stream of its own, and normalised on the device through the engine's
 * table (c x 256 floats: exactly the floats of a host conversion). The copy
 * of batch i+1 overlaps the work queued for batch i. The buffers belong to
 * the backend (a backend runs one graph at a time). */

/* The host's copy threads (DDPIPE_CUDA_COPY_THREADS, default 4: a batch
 * of 224² images is 38 MB, which one core copies at a third of the PCIe
 * rate), read once. */
static int copy_threads(void)
{
    static atomic_int cached;   /* 0: not read yet */
    int n = atomic_load_explicit(&cached, memory_order_relaxed);
    if (n == 0) {
        const char *v = getenv("DDPIPE_CUDA_COPY_THREADS");
        char *end = NULL;
        long x = v && *v ? strtol(v, &end, 10) : 4;
        if (v && *v && (*end || x < 1 || x > 64)) {
            log_warn("DDPIPE_CUDA_COPY_THREADS='%s' is not 1..64; 4 input copy threads", v);
            x = 4;
        }
        n = (int)x;
        atomic_store_explicit(&cached, n, memory_order_relaxed);
    }
    return n;
}

void cu_u8_free(cuda_backend_t *cb)
{
    cu_u8_t *u = &cb->u8;
    if (u->prof_n > 0)
        log_info("cuda profile input: %ld batches of %zu bytes: host copy %.3f ms (%d threads), "
                 "the call %.3f ms, upload %.3f ms, normalise %.3f ms (a batch)", u->prof_n,
                 u->bytes, 1e3 * u->prof_copy_s / u->prof_n, copy_threads(),
                 1e3 * u->prof_call_s / u->prof_n, u->prof_up_ms / u->prof_n,
                 u->prof_norm_ms / u->prof_n);
    for (int i = 0; i < 4; i++)
        if (u->pev[i])
            cudaEventDestroy(u->pev[i]);
    for (int i = 0; i < 2; i++) {
        if (u->used[i])
            cudaEventSynchronize(u->used[i]);
        cudaFreeHost(u->host[i]);
        cudaFree(u->dev[i]);
        if (u->used[i])
            cudaEventDestroy(u->used[i]);
        if (u->copied[i])
            cudaEventDestroy(u->copied[i]);
    }
    cudaFree(u->lut);
    if (u->copy_stream)
        cudaStreamDestroy(u->copy_stream);
    memset(u, 0, sizeof *u);
}

static int u8_setup(bk_ctx_t *g, size_t bytes)
{
    cuda_backend_t *cb = cu_be(g->be);
    cu_u8_t *u = &cb->u8;
    if (u->bytes >= bytes && u->lut)
        return 0;
    cu_u8_free(cb);
    if (cu_check(g, cudaStreamCreateWithFlags(&u->copy_stream, cudaStreamNonBlocking),
                 "cudaStreamCreate (input copies)") < 0 ||
        !(u->lut = cu_alloc(g, CU_U8_MAX_C * 256 * sizeof(float))))
        return -1;
    for (int i = 0; i < 2; i++) {
        if (cu_check(g, cudaHostAlloc((void **)&u->host[i], bytes, cudaHostAllocDefault),
                     "cudaHostAlloc (pinned input buffer)") < 0 ||
            !(u->dev[i] = cu_alloc(g, bytes)) ||
            cu_check(g, cudaEventCreateWithFlags(&u->used[i], cudaEventDisableTiming),
                     "cudaEventCreate") < 0 ||
            cu_check(g, cudaEventCreateWithFlags(&u->copied[i], cudaEventDisableTiming),
                     "cudaEventCreate") < 0)
            return -1;
        /* "used" must be complete before the first wait on it */
        if (cu_check(g, cudaEventRecord(u->used[i], cb->stream), "cudaEventRecord") < 0)
            return -1;
    }
    u->bytes = bytes;
    u->prof = cu_profile_env(NULL);
    for (int i = 0; u->prof && i < 4; i++)
        if (cu_check(g, cudaEventCreate(&u->pev[i]), "cudaEventCreate (input profile)") < 0)
            return -1;
    /* cu_alloc zeroed dev[] on the main stream; the copy stream must not
     * write them before that has run */
    return cu_check(g, cudaStreamSynchronize(cb->stream), "input buffer setup");
}

/* The device copy of the engine's table, uploaded when it changes. */
static int u8_lut(bk_ctx_t *g, int c, const float *lut)
{
    cu_u8_t *u = &cu_be(g->be)->u8;
    size_t bytes = (size_t)c * 256 * sizeof(float);
    if (u->lut_valid && u->lut_c == c && memcmp(lut, u->lut_host, bytes) == 0)
        return 0;
    memcpy(u->lut_host, lut, bytes);
    u->lut_c = c;
    u->lut_valid = 1;
    return cu_up_n(g, &cu_be(g->be)->traffic.batch_in, u->lut, lut, bytes);
}

/* px into the pinned buffer i and on to the device, slab by slab: each
 * slab's upload is queued on the copy stream as soon as the host threads
 * have copied it, so the upload of one overlaps the copy of the next (the
 * host copy is the slow half: the caller's pages are not pinned). */
#define U8_SLAB (4u << 20)
static int u8_stage(bk_ctx_t *g, cu_u8_t *u, int i, const uint8_t *px, size_t bytes)
{
    int nt = copy_threads();
    for (size_t off = 0; off < bytes; off += U8_SLAB) {
        size_t len = bytes - off < U8_SLAB ? bytes - off : U8_SLAB;
        size_t part = (len + (size_t)nt - 1) / (size_t)nt;
        double t0 = u->prof ? clock_mono_s() : 0.0;
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1 && len > (256u << 10))
        for (int t = 0; t < nt; t++) {
            size_t a = (size_t)t * part, b = a + part < len ? a + part : len;
            if (a < b)
                memcpy(u->host[i] + off + a, px + off + a, b - a);
        }
        if (u->prof)
            u->prof_copy_s += clock_mono_s() - t0;
        if (cu_check(g, cudaMemcpyAsync(u->dev[i] + off, u->host[i] + off, len,
                                        cudaMemcpyHostToDevice, u->copy_stream),
                     "input copy to the GPU") < 0)
            return -1;
    }
    return 0;
}

/* DDPIPE_CUDA_PROFILE: event k of a batch's input (none when off) */
static int u8_mark(bk_ctx_t *g, cu_u8_t *u, int k, cudaStream_t s)
{
    return u->prof ? cu_check(g, cudaEventRecord(u->pev[k], s), "cudaEventRecord") : 0;
}

/* DDPIPE_CUDA_PROFILE: the call's host time, the upload's and the
 * normalise kernel's device times (waiting for them: profiling syncs) */
static int u8_profile(bk_ctx_t *g, cu_u8_t *u, double t0)
{
    float up = 0, norm = 0;
    double call = clock_mono_s() - t0;   /* before waiting for the device */
    if (cu_check(g, cudaEventRecord(u->pev[3], cu_be(g->be)->stream), "cudaEventRecord") < 0 ||
        cu_check(g, cudaEventSynchronize(u->pev[3]), "cudaEventSynchronize (input profile)") < 0 ||
        cu_check(g, cudaEventElapsedTime(&up, u->pev[0], u->pev[1]), "cudaEventElapsedTime") < 0 ||
        cu_check(g, cudaEventElapsedTime(&norm, u->pev[2], u->pev[3]), "cudaEventElapsedTime") < 0)
        return -1;
    u->prof_n++;
    u->prof_call_s += call;
    u->prof_up_ms += up;
    u->prof_norm_ms += norm;
    return 0;
}

/* 1 (the engine converts on the host) past CU_U8_MAX_C channels, and for
 * the fp32 buffers of a bf16/fp16 tape graph (written as floats). half: 0
 * fp32 NCHW, 1 bf16 NHWC, 2 fp16 NHWC (the 16-bit plan's or table's). */
int cu_write_u8(bk_ctx_t *g, void *dst, const uint8_t *px, const float *lut, const int s[4],
                int half)
{
    /* fp32 buffers of a bf16/fp16 training graph take floats (the engine
     * rounds them); a 16-bit NHWC input is rounded here, as its write
     * rounds the floats */
    if (s[1] > CU_U8_MAX_C || (!half && g->be->precision != BK_FP32))
        return 1;
    cuda_backend_t *cb = cu_be(g->be);
    cu_u8_t *u = &cb->u8;
    size_t bytes = (size_t)s[0] * s[1] * s[2] * s[3];
    if (cu_sticky(g) < 0 || u8_setup(g, bytes) < 0 || u8_lut(g, s[1], lut) < 0)
        return -1;
#ifdef DDPIPE_HAVE_NVJPEG
    /* --decode gpu: the batch is in device memory already: read in place */
    const uint8_t *dv = cu_decode_device_view(cb->dec, px, bytes);
    if (dv) {
        cudaError_t e = half ? ckb_from_u8(cb->stream, half == 2, dv, s[0], s[1], s[2] * s[3],
                                           u->lut, dst)
                             : ck_u8_normalize(cb->stream, dv, s[0], s[1], s[2] * s[3], u->lut,
                                               dst);
        if (cu_check(g, e, "uint8 normalise kernel") < 0)
            return -1;
        return cu_check(g, cu_decode_mark_used(cb->dec, cb->stream),
                        "cudaEventRecord (the decoded batch read)");
    }
#endif
    int i = u->next;
    u->next ^= 1;
    /* buffer i was last read by the normalise kernel two calls ago */
    if (cu_check(g, cudaEventSynchronize(u->used[i]), "waiting for an input buffer") < 0)
        return -1;
    double t0 = u->prof ? clock_mono_s() : 0.0;
    if (u8_mark(g, u, 0, u->copy_stream) < 0 || u8_stage(g, u, i, px, bytes) < 0 ||
        u8_mark(g, u, 1, u->copy_stream) < 0 ||
        cu_check(g, cudaEventRecord(u->copied[i], u->copy_stream), "cudaEventRecord") < 0 ||
        cu_check(g, cudaStreamWaitEvent(cb->stream, u->copied[i], 0), "cudaStreamWaitEvent") < 0 ||
        u8_mark(g, u, 2, cb->stream) < 0 ||
        cu_check(g, half ? ckb_from_u8(cb->stream, half == 2, u->dev[i], s[0], s[1], s[2] * s[3],
                                       u->lut, dst)
                          : ck_u8_normalize(cb->stream, u->dev[i], s[0], s[1], s[2] * s[3],
                                            u->lut, dst),
                 "uint8 normalise kernel") < 0)
        return -1;
    cb->traffic.batch_in += bytes;
    if (cu_check(g, cudaEventRecord(u->used[i], cb->stream), "cudaEventRecord") < 0)
        return -1;
    return u->prof ? u8_profile(g, u, t0) : 0;
}
