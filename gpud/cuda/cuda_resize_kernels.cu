/* cuda_resize_kernels — see cuda_resize_kernels.h. A thread an output
 * value; the sums are the CPU's integer sums in the same order, so no
 * thread order or block size changes a bit. */
#include "gpud/cuda/cuda_launch.h"
#include "gpud/cuda/cuda_resize_kernels.h"

#define RZ_BITS 22   /* resize.c's PRECISION_BITS */

__device__ static inline uint8_t rz_clip8(int32_t v)
{
    v >>= RZ_BITS;
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* source pixel q of a row, channel ch, as the output's channels see it */
__device__ static inline int32_t rz_px(const uint8_t *row, int q, int sc, int oc, int ch)
{
    if (sc == oc)
        return row[(size_t)q * sc + ch];
    if (sc == 1)   /* gray to 3 channels: the same value each */
        return row[q];
    const uint8_t *p = row + (size_t)q * 3;   /* PIL's convert("L") */
    return (int32_t)((p[0] * 19595u + p[1] * 38470u + p[2] * 7471u + 0x8000u) >> 16);
}

/* the job that owns block b: the last whose first block is <= b (jobs
 * sorted by it; a job of no blocks is passed over) */
__device__ static inline int rz_job(const ck_rz_job_t *jobs, int n, unsigned b, int v)
{
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if ((v ? jobs[mid].vb0 : jobs[mid].hb0) <= b)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

unsigned ck_resize_blocks(size_t count)
{
    return (unsigned)((count + THREADS - 1) / THREADS);
}

__global__ static void k_resize_h(const ck_rz_job_t *jobs, int n, int oc)
{
    const ck_rz_job_t *j = &jobs[rz_job(jobs, n, blockIdx.x, 0)];
    size_t i = (size_t)(blockIdx.x - j->hb0) * blockDim.x + threadIdx.x;
    if (i >= (size_t)j->rows * j->cols * oc)
        return;
    int ch = (int)(i % (size_t)oc);
    size_t xy = i / (size_t)oc;
    int x = (int)(xy % (size_t)j->cols), r = (int)(xy / (size_t)j->cols);
    const uint8_t *row = j->src + (size_t)(j->y0 + r) * j->pitch;
    const int32_t *kx = j->hk + (size_t)x * j->hks;
    int32_t s = 1 << (RZ_BITS - 1);
    for (int t = 0; t < j->hks; t++)
        s += rz_px(row, j->hlo[x] + t, j->sc, oc, ch) * kx[t];
    j->mid[i] = rz_clip8(s);
}

cudaError_t ck_resize_h(cudaStream_t s, const ck_rz_job_t *jobs, int n, int oc, unsigned blocks)
{
    if (n < 1 || blocks < 1)
        return cudaSuccess;
    k_resize_h<<<blocks, THREADS, 0, s>>>(jobs, n, oc);
    return cudaGetLastError();
}

__global__ static void k_resize_v(const ck_rz_job_t *jobs, int n, int oc, int out_w,
                                  size_t plane)
{
    const ck_rz_job_t *j = &jobs[rz_job(jobs, n, blockIdx.x, 1)];
    size_t i = (size_t)(blockIdx.x - j->vb0) * blockDim.x + threadIdx.x;
    if (i >= (size_t)j->vrows * j->cols * oc)
        return;
    /* channel-major: a warp's stores are one row's */
    int x = (int)(i % (size_t)j->cols);
    size_t rc = i / (size_t)j->cols;
    int r = (int)(rc % (size_t)j->vrows), ch = (int)(rc / (size_t)j->vrows);
    const int32_t *kr = j->vk + (size_t)r * j->vks;
    const uint8_t *col = j->mid + ((size_t)(j->vlo[r] - j->y0) * j->cols + x) * oc + ch;
    size_t step = (size_t)j->cols * oc;
    int32_t s = 1 << (RZ_BITS - 1);
    for (int t = 0; t < j->vks; t++)
        s += col[(size_t)t * step] * kr[t];
    int ox = j->ox + x;
    j->out[(size_t)ch * plane + (size_t)(j->oy + r) * out_w + (j->flip ? out_w - 1 - ox : ox)] =
        rz_clip8(s);
}

cudaError_t ck_resize_v(cudaStream_t s, const ck_rz_job_t *jobs, int n, int oc, int out_w,
                        size_t plane, unsigned blocks)
{
    if (n < 1 || blocks < 1)
        return cudaSuccess;
    k_resize_v<<<blocks, THREADS, 0, s>>>(jobs, n, oc, out_w, plane);
    return cudaGetLastError();
}
