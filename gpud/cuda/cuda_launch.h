/* cuda_launch — how the own element-wise kernels (cuda_kernels.cu,
 * cuda_infer_kernels.cu) are launched: THREADS per block, a grid capped at
 * CK_GRID_CAP blocks, and a grid-stride loop in the kernel covering the rest.
 * Only for .cu files. */
#ifndef DDP_CUDA_LAUNCH_H
#define DDP_CUDA_LAUNCH_H

#include <stddef.h>

#define THREADS 256

/* The most blocks of a grid-stride launch: 4096 x 256 threads, four waves
 * of an H200's 132 SMs at 2048 threads each, so that a thread walks many
 * elements and its start (gs_idx3's twelve 64-bit divisions, a long
 * instruction sequence each) is paid once for them: with a thread per
 * element (the cap was 524,280 blocks) ResNet-18's 16-bit max pooling took
 * 1.1 ms and its backward 3.1 ms on an H200 (ncu, 2026-11-30), ten times
 * their memory traffic. The emulator's kernel test builds with a small
 * cap, so that there every grid-stride loop takes several steps, as on a
 * device every tensor of over 1M elements does. */
#ifndef CK_GRID_CAP
#define CK_GRID_CAP 4096u
#endif

static inline unsigned blocks_for(size_t count)
{
    size_t b = (count + THREADS - 1) / THREADS;
    if (b < 1)
        b = 1;
    return b > CK_GRID_CAP ? CK_GRID_CAP : (unsigned)b;   /* grid-stride covers the rest */
}

/* for each i in [0, count) this thread owns */
#define GRID_STRIDE(i, count) \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (count); \
         i += (size_t)gridDim.x * blockDim.x)

/* i / d and i % d for i, i + stride, ...: one division where the walk
 * starts, then additions each step (a 64-bit division is a long
 * instruction sequence on a GPU, too slow per element of a memory-bound
 * kernel). */
typedef struct {
    size_t q, r;    /* i / d, i % d */
    size_t dq, dr;  /* stride / d, stride % d */
    size_t d;
} gs_divmod_t;

__device__ static inline gs_divmod_t gs_divmod_by(size_t i, size_t d, size_t stride)
{
    gs_divmod_t v = {i / d, i % d, stride / d, stride % d, d};
    return v;
}

/* i += stride + extra (extra 0 or 1: a walk over another walk's quotient) */
__device__ static inline void gs_divmod_step(gs_divmod_t *v, size_t extra)
{
    v->q += v->dq;
    v->r += v->dr + extra;
    if (v->r >= v->d) {
        v->r -= v->d;
        v->q++;
    }
}

/* A GRID_STRIDE loop that also keeps the digits of its index i in the
 * mixed radix (d0 innermost, d1, d2): v[0].r = i % d0, v[1].r = i / d0 %
 * d1, v[2].r = i / (d0 d1) % d2, v[2].q = i / (d0 d1 d2). NHWC over
 * (c, w, h): channel, x, y, sample; NCHW over (hw, c, 1): pixel, channel,
 * sample. Each step moves the digits by additions (gs_divmod_step). */
typedef struct {
    size_t i, stride;
    gs_divmod_t v[3];
} gs_idx3_t;

__device__ static inline gs_idx3_t gs_idx3(size_t d0, size_t d1, size_t d2)
{
    gs_idx3_t w;
    w.i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    w.stride = (size_t)gridDim.x * blockDim.x;
    w.v[0] = gs_divmod_by(w.i, d0, w.stride);
    w.v[1] = gs_divmod_by(w.v[0].q, d1, w.v[0].dq);
    w.v[2] = gs_divmod_by(w.v[1].q, d2, w.v[1].dq);
    return w;
}

__device__ static inline void gs_idx3_next(gs_idx3_t *w)
{
    size_t carry = 0;
    w->i += w->stride;
    for (int k = 0; k < 3; k++) {   /* each digit's quotient moved dq or dq + 1 */
        size_t q = w->v[k].q;
        gs_divmod_step(&w->v[k], carry);
        carry = w->v[k].q - q - w->v[k].dq;
    }
}

/* for each w.i in [0, count) this thread owns, with its digits w.v[] */
#define GRID_STRIDE_IDX3(w, count, d0, d1, d2) \
    for (gs_idx3_t w = gs_idx3(d0, d1, d2); w.i < (count); gs_idx3_next(&w))

/* op(v) over the block (THREADS threads), in one tree; the result is
 * valid in thread 0. The same tree in every kernel that uses it: a
 * reduction's bits depend on the block size and the data alone. */
template <typename T, typename Op>
__device__ static inline T block_reduce(T v, Op op)
{
    __shared__ T sh[THREADS];
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int k = THREADS / 2; k > 0; k >>= 1) {
        if ((int)threadIdx.x < k)
            sh[threadIdx.x] = op(sh[threadIdx.x], sh[threadIdx.x + k]);
        __syncthreads();
    }
    T r = sh[0];
    __syncthreads();   /* sh is reused by the next call */
    return r;
}

__device__ static inline double block_sum(double v)
{
    return block_reduce(v, [](double a, double b) { return a + b; });
}

#endif
