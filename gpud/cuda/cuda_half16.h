/* cuda_half16 — the two 16-bit formats of the bf16 and fp16 NHWC kernels
 * (cuda_infer_kernels.cu, cuda_train16_kernels.cu): a kernel is a template
 * on the element type T (__nv_bfloat16 or __half), reads and writes its
 * buffers through h16<T> (to float exactly, from float rounded to nearest
 * even: torch's .to(dtype)), and is launched for the format a launcher's
 * `fp16` names with LAUNCH16. Only for .cu files. */
#ifndef DDP_CUDA_HALF16_H
#define DDP_CUDA_HALF16_H

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "gpud/cuda/cuda_launch.h"

template <typename T> struct h16;

template <> struct h16<__nv_bfloat16> {
    __device__ static inline float ld(__nv_bfloat16 v) { return __bfloat162float(v); }
    __device__ static inline __nv_bfloat16 st(float v) { return __float2bfloat16_rn(v); }
};

template <> struct h16<__half> {
    __device__ static inline float ld(__half v) { return __half2float(v); }
    __device__ static inline __half st(float v) { return __float2half_rn(v); }
};

/* L neighbouring elements (channels of an NHWC pixel) as one load or
 * store: 16 bytes for L = 8 where the channel count is a multiple of 8 and
 * the buffers 16-byte aligned (vec8_ok; cudaMalloc'd buffers are), the
 * plain element for L = 1. A kernel written for L lanes serves both. */
template <typename T, int L> struct alignas(sizeof(T) * L) h16v {
    T v[L];
};
template <typename T> using h16x8 = h16v<T, 8>;

/* The kernel emulator checks what a device faults on and the host does
 * not: a vector access off its size's alignment (misaligned address). */
#ifdef DDP_CUEMU_H
#define H16_ALIGNED(p, n) cuemu_aligned((const void *)(p), (n), "a vector access")
#else
#define H16_ALIGNED(p, n) ((void)0)
#endif

template <typename T, int L> __device__ static inline h16v<T, L> ldv(const T *p)
{
    H16_ALIGNED(p, sizeof(h16v<T, L>));
    return *reinterpret_cast<const h16v<T, L> *>(p);
}

template <typename T, int L> __device__ static inline void stv(T *p, const h16v<T, L> &x)
{
    H16_ALIGNED(p, sizeof(h16v<T, L>));
    *reinterpret_cast<h16v<T, L> *>(p) = x;
}

template <typename T> __device__ static inline h16x8<T> ld8(const T *p)
{
    return ldv<T, 8>(p);
}

template <typename T> __device__ static inline void st8(T *p, const h16x8<T> &x)
{
    stv<T, 8>(p, x);
}

/* 1 when an element-wise kernel may take 8 elements a thread: count a
 * multiple of 8 and every buffer 16-byte aligned (views into a buffer may
 * not be) */
static inline int vec8_ok(size_t count, const void *a, const void *b, const void *c)
{
    return count % 8 == 0 && (((uintptr_t)a | (uintptr_t)b | (uintptr_t)c) & 15) == 0;
}

/* the L bytes of a max pooling's choices beside h16v's L channels */
template <int L> struct alignas(L) u8v {
    uint8_t v[L];
};

template <int L> __device__ static inline u8v<L> ldu8(const uint8_t *p)
{
    H16_ALIGNED(p, L);
    return *reinterpret_cast<const u8v<L> *>(p);
}

template <int L> __device__ static inline void stu8(uint8_t *p, const u8v<L> &x)
{
    H16_ALIGNED(p, L);
    *reinterpret_cast<u8v<L> *>(p) = x;
}

/* kernel<T> over count elements on stream s, T by fp16 (0: bf16); the
 * arguments as void pointers (the kernel casts them to T *); evaluates to
 * the launch status. The kernel emulator (tests/gpud/cuemu, whose header
 * comes first there) runs the same launch through cuemu_launch, as
 * cu2cc.py rewrites the .cu files' own launches. */
#ifdef DDP_CUEMU_H
#define KLAUNCH16_(k, grid, ...) \
    cuemu_launch_named(#k, grid, THREADS, s, [=] { k(__VA_ARGS__); })
#else
#define KLAUNCH16_(k, grid, ...) k<<<grid, THREADS, 0, s>>>(__VA_ARGS__)
#endif
#define LAUNCH16_GRID(fp16, kernel, grid, ...)                                   \
    ((fp16) ? (void)KLAUNCH16_(kernel<__half>, grid, __VA_ARGS__)                 \
            : (void)KLAUNCH16_(kernel<__nv_bfloat16>, grid, __VA_ARGS__),         \
     cudaGetLastError())
#define LAUNCH16(fp16, kernel, count, ...) \
    LAUNCH16_GRID(fp16, kernel, blocks_for(count), __VA_ARGS__)

#endif
