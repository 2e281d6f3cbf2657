/* cuda_resize_kernels — see cuda_resize_kernels.h. A thread an output
 * value (grid-stride); the sums are the CPU's integer sums in the same
 * order, so no thread order or block size changes a bit. */
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

__global__ static void k_resize_h(const uint8_t *src, size_t pitch, int sc, int oc, int y0,
                                  size_t count, int cols, const int32_t *lo, const int32_t *k,
                                  int ks, uint8_t *mid)
{
    GRID_STRIDE(i, count)
    {
        int ch = (int)(i % (size_t)oc);
        size_t xy = i / (size_t)oc;
        int x = (int)(xy % (size_t)cols), r = (int)(xy / (size_t)cols);
        const uint8_t *row = src + (size_t)(y0 + r) * pitch;
        const int32_t *kx = k + (size_t)x * ks;
        int32_t s = 1 << (RZ_BITS - 1);
        for (int j = 0; j < ks; j++)
            s += rz_px(row, lo[x] + j, sc, oc, ch) * kx[j];
        mid[i] = rz_clip8(s);
    }
}

cudaError_t ck_resize_h(cudaStream_t s, const uint8_t *src, size_t pitch, int sc, int oc,
                        int y0, int rows, int cols, const int32_t *lo, const int32_t *k, int ks,
                        uint8_t *mid)
{
    size_t count = (size_t)rows * cols * oc;
    k_resize_h<<<blocks_for(count), THREADS, 0, s>>>(src, pitch, sc, oc, y0, count, cols, lo, k,
                                                     ks, mid);
    return cudaGetLastError();
}

__global__ static void k_resize_v(const uint8_t *mid, int cols, int oc, int mid_y0, size_t count,
                                  int rows, const int32_t *lo, const int32_t *k, int ks,
                                  uint8_t *out, int out_w, size_t plane, int ox, int oy)
{
    GRID_STRIDE(i, count)   /* channel-major: the stores of a warp are one row's */
    {
        int x = (int)(i % (size_t)cols);
        size_t rc = i / (size_t)cols;
        int r = (int)(rc % (size_t)rows), ch = (int)(rc / (size_t)rows);
        const int32_t *kr = k + (size_t)r * ks;
        const uint8_t *col = mid + ((size_t)(lo[r] - mid_y0) * cols + x) * oc + ch;
        size_t step = (size_t)cols * oc;
        int32_t s = 1 << (RZ_BITS - 1);
        for (int j = 0; j < ks; j++)
            s += col[(size_t)j * step] * kr[j];
        out[(size_t)ch * plane + (size_t)(oy + r) * out_w + ox + x] = rz_clip8(s);
    }
}

cudaError_t ck_resize_v(cudaStream_t s, const uint8_t *mid, int cols, int oc, int mid_y0,
                        int rows, const int32_t *lo, const int32_t *k, int ks, uint8_t *out,
                        int out_w, size_t plane, int ox, int oy)
{
    size_t count = (size_t)rows * cols * oc;
    k_resize_v<<<blocks_for(count), THREADS, 0, s>>>(mid, cols, oc, mid_y0, count, rows, lo, k,
                                                     ks, out, out_w, plane, ox, oy);
    return cudaGetLastError();
}
