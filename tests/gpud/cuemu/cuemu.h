/* cuemu — the cuda backend's own kernels (the .cu files of gpud/cuda) run on the CPU,
 * so that each is checked against its CPU reference on a machine without a
 * GPU (tests/gpud/test_cuemu.c). A .cu file is compiled as C++ with this
 * header after cu2cc.py has turned its launches into cuemu_launch calls:
 * device memory is host memory, a launch runs every block in turn and the
 * threads of a block as fibers that switch at __syncthreads (so a block's
 * barrier and __shared__ arrays behave), and the device intrinsics the
 * kernels use are their IEEE host equivalents. What it cannot show: speed,
 * races between threads (they never run at once) beyond those whose result
 * depends on the threads' order (CUEMU_ORDER=reverse runs blocks, and a
 * block's threads between two barriers, last first: cuemu.cc), and
 * anything of cuDNN, cuBLAS or NCCL. */
#ifndef DDP_CUEMU_H
#define DDP_CUEMU_H

#include <cuda_runtime_api.h>
#include <vector_types.h>

#include <functional>
#include <math.h>
#include <stdint.h>
#include <string.h>

#undef __global__
#undef __device__
#undef __host__
#undef __forceinline__
#undef __shared__
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static   /* one block at a time: a static is its shared memory */
#undef __launch_bounds__
#define __launch_bounds__(...)   /* a register budget: nothing to emulate */

/* the launch coordinates of the running emulated thread (one OS thread
 * runs every launch: plain globals) */
extern uint3 threadIdx, blockIdx;
extern dim3 blockDim, gridDim;

/* Run body as every thread of a grid x block launch (1-D grids and blocks,
 * which are all the kernels use). Records nothing in a stream: the work is
 * done when this returns. name: the kernel's, for CUEMU_TRACE (cu2cc.py
 * gives it), or NULL. */
void cuemu_launch_fn(const char *name, dim3 grid, dim3 block,
                     const std::function<void()> &body);
#define cuemu_launch(grid, block, stream, ...) \
    ((void)(stream), cuemu_launch_fn(nullptr, dim3(grid), dim3(block), __VA_ARGS__))
#define cuemu_launch_named(name, grid, block, stream, ...) \
    ((void)(stream), cuemu_launch_fn(name, dim3(grid), dim3(block), __VA_ARGS__))

/* CUEMU_TRACE=1 (stderr) or =FILE: a line for each kernel run, copy,
 * memset and fake cuDNN/cuBLAS call as it runs on the emulated device (a
 * recorded graph's at each replay): the sequence of device work a step
 * queues, and the bytes it moves, which the emulator cannot time.
 * printf's format; nothing when CUEMU_TRACE is unset or 0. */
extern "C" void cuemu_trace(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Stream capture (CUDA graphs): while a capture is open, launches, async
 * copies and the fake cuDNN/cuBLAS calls are recorded, not run; a graph
 * launch runs them in order. C callers (fake_dnn.c) record through
 * cuemu_record (arg's bytes copied). */
extern "C" int cuemu_capturing(void);
extern "C" void cuemu_record(void (*fn)(void *), const void *arg, size_t bytes);

/* Aborts, saying what, where p is not align-byte aligned: a device's
 * vector load or store faults there (cuda_half16.h checks its own). */
void cuemu_aligned(const void *p, size_t align, const char *what);

/* Wait for every thread of the block (the fibers' switch point). */
void __syncthreads(void);

static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float __fsqrt_rn(float a) { return sqrtf(a); }
static inline float __double2float_rn(double a) { return (float)a; }
static inline unsigned __float_as_uint(float f)
{
    unsigned u;
    memcpy(&u, &f, sizeof u);
    return u;
}
static inline float __uint_as_float(unsigned u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
/* threads never run at once: a plain read-modify-write is atomic */
static inline unsigned long long atomicMin(unsigned long long *p, unsigned long long v)
{
    unsigned long long old = *p;
    if (v < old)
        *p = v;
    return old;
}
static inline unsigned atomicMax(unsigned *p, unsigned v)
{
    unsigned old = *p;
    if (v > old)
        *p = v;
    return old;
}

#endif
