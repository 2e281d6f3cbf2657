/* cuemu — the launch and the barrier of cuemu.h: a block's threads are
 * ucontext fibers run round-robin, each until it reaches __syncthreads or
 * returns; a round ends when every thread stands at the barrier (or has
 * returned), so no thread passes a barrier before all reach it. Device
 * runtime calls the kernels' files make (cudaGetLastError, cudaMemcpyAsync)
 * act on host memory. */
#include "cuemu.h"

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <ucontext.h>

#include <vector>

uint3 threadIdx, blockIdx;
dim3 blockDim, gridDim;

namespace {

enum { STACK = 256 * 1024 };

struct Fiber {
    ucontext_t ctx;
    std::vector<char> stack;
    bool done;
    uint3 tid;
};

struct Block {
    ucontext_t sched;
    std::vector<Fiber> fibers;
    size_t cur;
    const std::function<void()> *body;
};

Block *g_block;

void fiber_main(void)
{
    Block *b = g_block;
    (*b->body)();
    b->fibers[b->cur].done = true;   /* uc_link returns to the scheduler */
}

}  // namespace

void __syncthreads(void)
{
    Block *b = g_block;
    if (!b) {
        fprintf(stderr, "cuemu: __syncthreads outside a launch\n");
        abort();
    }
    swapcontext(&b->fibers[b->cur].ctx, &b->sched);
}

void cuemu_launch_fn(dim3 grid, dim3 block, const std::function<void()> &body)
{
    if (grid.y != 1 || grid.z != 1 || block.y != 1 || block.z != 1 || block.x == 0) {
        fprintf(stderr, "cuemu: only 1-D launches (grid %u, block %u)\n", grid.x, block.x);
        abort();
    }
    Block b;
    b.body = &body;
    b.fibers.resize(block.x);
    for (Fiber &f : b.fibers)
        f.stack.resize(STACK);
    gridDim = grid;
    blockDim = block;
    for (unsigned bx = 0; bx < grid.x; bx++) {
        for (unsigned t = 0; t < block.x; t++) {
            Fiber &f = b.fibers[t];
            f.done = false;
            f.tid = uint3{t, 0, 0};
            getcontext(&f.ctx);
            f.ctx.uc_stack.ss_sp = f.stack.data();
            f.ctx.uc_stack.ss_size = f.stack.size();
            f.ctx.uc_link = &b.sched;
            makecontext(&f.ctx, fiber_main, 0);
        }
        blockIdx = uint3{bx, 0, 0};
        g_block = &b;
        for (size_t left = block.x; left > 0;) {   /* rounds until every thread returned */
            left = 0;
            for (size_t t = 0; t < b.fibers.size(); t++) {
                if (b.fibers[t].done)
                    continue;
                b.cur = t;
                threadIdx = b.fibers[t].tid;
                swapcontext(&b.sched, &b.fibers[t].ctx);
                left += !b.fibers[t].done;
            }
        }
        g_block = nullptr;
    }
}

/* The runtime calls of cuda_optim.c (the device arena) and the tests: device
 * memory is host memory, every call finishes before it returns. */
extern "C" cudaError_t cudaMalloc(void **p, size_t size)
{
    *p = calloc(size ? size : 1, 1);
    return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}

extern "C" cudaError_t cudaFree(void *p)
{
    free(p);
    return cudaSuccess;
}

extern "C" cudaError_t cudaMemset(void *p, int v, size_t count)
{
    memset(p, v, count);
    return cudaSuccess;
}

extern "C" cudaError_t cudaMemcpy(void *dst, const void *src, size_t count,
                                  enum cudaMemcpyKind kind)
{
    (void)kind;
    memmove(dst, src, count);
    return cudaSuccess;
}

extern "C" cudaError_t cudaDeviceSynchronize(void)
{
    return cudaSuccess;
}

extern "C" cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    (void)s;
    return cudaSuccess;
}

extern "C" const char *cudaGetErrorName(cudaError_t e)
{
    return e == cudaSuccess ? "cudaSuccess" : "cudaError (emulated)";
}

extern "C" const char *cudaGetErrorString(cudaError_t e)
{
    return e == cudaSuccess ? "no error" : "error (emulated)";
}

extern "C" cudaError_t cudaGetLastError(void)
{
    return cudaSuccess;
}

extern "C" cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count,
                                       enum cudaMemcpyKind kind, cudaStream_t stream)
{
    (void)kind, (void)stream;
    memmove(dst, src, count);
    return cudaSuccess;
}
