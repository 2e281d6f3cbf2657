/* cuda_xsum_kernels — see cuda_xsum_kernels.h. */
#include "gpud/cuda/cuda_xsum_kernels.h"
#include "gpud/cuda/cuda_launch.h"

#include "common/xsum_f32.h"

__global__ static void k_xsum_amax(const float *x, size_t n, unsigned *cur)
{
    auto max = [](unsigned a, unsigned b) { return a > b ? a : b; };
    unsigned m = 0;
    GRID_STRIDE(i, n)
    m = max(m, __float_as_uint(x[i]) & 0x7fffffffu);
    m = block_reduce(m, max);
    if (threadIdx.x == 0 && m)
        atomicMax(cur, m);
}

cudaError_t ck_xsum_amax(cudaStream_t s, const float *x, size_t n, unsigned *cur)
{
    k_xsum_amax<<<blocks_for(n), THREADS, 0, s>>>(x, n, cur);
    return cudaGetLastError();
}

__global__ static void k_xsum_add(const float *x, size_t n, int64_t *limbs,
                                  const unsigned *run, const unsigned *cur)
{
    /* every thread reads the same two words: the old top and the new one */
    const unsigned r = *run, c = *cur;
    const int32_t own = xsum_top_f32(r), top = xsum_top_f32(r > c ? r : c);
    if (top == XSUM_NONFINITE || top == XSUM_EMPTY || c == 0)
        return;   /* a NaN's sum is NaN whatever the limbs; zeros add nothing */
    const int d = own == XSUM_EMPTY ? 0 : top - own;   /* empty: the limbs are zero */
    GRID_STRIDE(i, n)
    {
        int64_t *L = limbs + i * XSUM_LIMBS;
        if (d > 0)
            xsum_shift(L, d);
        xsum_add_bits_f32(L, top, __float_as_uint(x[i]));
    }
}

cudaError_t ck_xsum_add(cudaStream_t s, const float *x, size_t n, int64_t *limbs,
                        const unsigned *run, const unsigned *cur)
{
    k_xsum_add<<<blocks_for(n), THREADS, 0, s>>>(x, n, limbs, run, cur);
    return cudaGetLastError();
}

__global__ static void k_xsum_commit(unsigned *run, unsigned *cur)
{
    if (*cur > *run)
        *run = *cur;
    *cur = 0;
}

cudaError_t ck_xsum_commit(cudaStream_t s, unsigned *run, unsigned *cur)
{
    k_xsum_commit<<<1, 1, 0, s>>>(run, cur);
    return cudaGetLastError();
}

__global__ static void k_xsum_align(int64_t *limbs, size_t n, const unsigned *own,
                                    const unsigned *all)
{
    const int32_t from = xsum_top_f32(*own), to = xsum_top_f32(*all);
    if (from == XSUM_EMPTY || from == XSUM_NONFINITE || to == XSUM_NONFINITE || to <= from)
        return;   /* zero limbs, a NaN's, or the window already the widest */
    GRID_STRIDE(i, n)
    xsum_shift(limbs + i * XSUM_LIMBS, to - from);
}

cudaError_t ck_xsum_align(cudaStream_t s, int64_t *limbs, size_t n, const unsigned *own,
                          const unsigned *all)
{
    k_xsum_align<<<blocks_for(n), THREADS, 0, s>>>(limbs, n, own, all);
    return cudaGetLastError();
}

__global__ static void k_xsum_round(const int64_t *limbs, size_t n, const unsigned *top,
                                    float *out)
{
    const int32_t t = xsum_top_f32(*top);
    GRID_STRIDE(i, n)
    out[i] = __uint_as_float(xsum_bits_f32(limbs + i * XSUM_LIMBS, t));
}

cudaError_t ck_xsum_round(cudaStream_t s, const int64_t *limbs, size_t n, const unsigned *top,
                          float *out)
{
    k_xsum_round<<<blocks_for(n), THREADS, 0, s>>>(limbs, n, top, out);
    return cudaGetLastError();
}
