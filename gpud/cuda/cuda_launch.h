/* cuda_launch — how the own element-wise kernels (cuda_kernels.cu,
 * cuda_infer_kernels.cu) are launched: THREADS per block, a grid capped at
 * 65535 x 8 blocks, and a grid-stride loop in the kernel covering the rest.
 * Only for .cu files. */
#ifndef DDP_CUDA_LAUNCH_H
#define DDP_CUDA_LAUNCH_H

#include <stddef.h>

#define THREADS 256

static inline unsigned blocks_for(size_t count)
{
    size_t b = (count + THREADS - 1) / THREADS;
    if (b < 1)
        b = 1;
    return b > 65535u * 8 ? 65535u * 8 : (unsigned)b;   /* grid-stride covers the rest */
}

/* for each i in [0, count) this thread owns */
#define GRID_STRIDE(i, count) \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (count); \
         i += (size_t)gridDim.x * blockDim.x)

/* Sum of v over the block (THREADS threads); the result is valid in thread 0.
 * The same tree in every kernel that uses it: a reduction's bits depend on
 * the block size and the data alone. */
__device__ static inline double block_sum(double v)
{
    __shared__ double sh[THREADS];
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int k = THREADS / 2; k > 0; k >>= 1) {
        if ((int)threadIdx.x < k)
            sh[threadIdx.x] += sh[threadIdx.x + k];
        __syncthreads();
    }
    double r = sh[0];
    __syncthreads();   /* sh is reused by the next call */
    return r;
}

#endif
