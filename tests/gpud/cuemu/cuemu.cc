/* cuemu — the launch and the barrier of cuemu.h: a block's threads are
 * fibers (cuemu_fiber.h) run round-robin, each until it reaches
 * __syncthreads or returns; a round ends when every thread stands at the
 * barrier (or has returned), so no thread passes a barrier before all reach
 * it. Device runtime calls the kernels' files make (cudaGetLastError,
 * cudaMemcpyAsync) act on host memory. */
#include "cuemu_counts.h"
#include "cuemu.h"
#include "cuemu_fiber.h"
extern "C" {
#include "common/clock.h"
}

#include <cuda_runtime_api.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <map>
#include <typeindex>
#include <unordered_set>
#include <vector>

uint3 threadIdx, blockIdx;
dim3 blockDim, gridDim;

namespace {

enum { STACK = 64 * 1024 };

void thread_run(void *arg);

/* The fibers of a block, kept from launch to launch (their stacks are the
 * cost); body is the running launch's. */
struct Block {
    std::vector<cuemu_fiber_t *> fibers;
    std::vector<char> done;   /* per thread: its run returned */
    const std::function<void()> *body;
    bool direct;    /* threads called one after another: no barrier may come */
    bool synced;    /* a barrier was reached in this launch */
    ~Block()
    {
        for (cuemu_fiber_t *&f : fibers)
            cuemu_fiber_destroy(&f);
    }
    /* at least n fibers; aborts when out of memory (a test tool) */
    void grow(unsigned n)
    {
        while (fibers.size() < n) {
            cuemu_fiber_t *f = cuemu_fiber_new(STACK, thread_run, nullptr);
            if (!f) {
                fprintf(stderr, "cuemu: out of memory for a thread's %d-byte stack\n", STACK);
                abort();
            }
            fibers.push_back(f);
        }
        done.resize(fibers.size());
    }
};

Block g_pool;
Block *g_block;
/* launch sites (their lambda's type) seen to reach no barrier: run direct */
std::unordered_set<std::type_index> g_no_sync;

void thread_run(void *)   /* a fiber's run (run_fibers set threadIdx) */
{
    (*g_block->body)();
}

/* CUEMU_ORDER=reverse runs a launch's blocks, and a block's threads
 * between two barriers, last first. A kernel whose result depends on that
 * order has a race a device would show (a thread reading what another
 * writes before their barrier, two blocks writing one element): its
 * results then differ from the forward order's, which the bit-for-bit
 * checks catch (gpud_cuemu_reverse). */
bool reverse_order(void)
{
    static int r = -1;
    if (r < 0) {
        const char *v = getenv("CUEMU_ORDER");
        r = v && strcmp(v, "reverse") == 0;
    }
    return r == 1;
}

/* the i-th of n in the run's order */
inline unsigned nth(unsigned i, unsigned n)
{
    return reverse_order() ? n - 1 - i : i;
}

void run_fibers(Block &b, unsigned nthreads)
{
    for (unsigned t = 0; t < nthreads; t++)
        b.done[t] = 0;
    for (size_t left = nthreads; left > 0;) {   /* rounds until every thread returned */
        left = 0;
        for (unsigned i = 0; i < nthreads; i++) {
            unsigned t = nth(i, nthreads);
            if (b.done[t])
                continue;
            threadIdx = uint3{(unsigned)t, 0, 0};
            if (cuemu_fiber_resume(b.fibers[t]))
                left++;
            else
                b.done[t] = 1;
        }
    }
}

}  // namespace

void __syncthreads(void)
{
    Block *b = g_block;
    if (!b || b->direct) {
        fprintf(stderr, "cuemu: __syncthreads %s\n",
                b ? "in a launch site that reached none before (a data-dependent barrier?)"
                  : "outside a launch");
        abort();
    }
    b->synced = true;
    cuemu_fiber_yield();
}

/* A launch site's first launch runs every block as fibers; one that reached
 * no barrier runs its threads one after another from then on (most kernels:
 * element-wise), which is what makes the emulator fast enough for whole
 * models. */
namespace {
/* the open capture (one stream at a time: the backend captures its one) */
struct Graph {
    std::vector<std::function<void()>> ops;
};
Graph *g_capture;          /* non-NULL while capturing */
bool g_invalidated;        /* a call not allowed in a capture was made */
std::map<const char *, size_t> g_pinned;   /* cudaHostAlloc's blocks: base, bytes */

bool pinned(const void *p)   /* inside a block of cudaHostAlloc */
{
    const char *c = (const char *)p;
    auto it = g_pinned.upper_bound(c);
    return it != g_pinned.begin() && c < (--it)->first + it->second;
}

cudaError_t not_in_capture(void)
{
    if (!g_capture)
        return cudaSuccess;
    g_invalidated = true;   /* as the runtime does: the capture is lost */
    return cudaErrorStreamCaptureUnsupported;
}
}  // namespace

static cuemu_counts_t g_counts;

extern "C" cuemu_counts_t cuemu_counts(void)
{
    return g_counts;
}

extern "C" int cuemu_capturing(void)
{
    return g_capture != nullptr;
}

static FILE *trace_file(void)
{
    static FILE *f;
    static int opened;
    if (!opened) {
        opened = 1;
        const char *v = getenv("CUEMU_TRACE");
        if (v && *v && strcmp(v, "0") != 0) {
            f = strcmp(v, "1") == 0 ? stderr : fopen(v, "w");
            if (!f)
                fprintf(stderr, "cuemu: cannot write CUEMU_TRACE=%s: no trace\n", v);
        }
    }
    return f;
}

extern "C" void cuemu_trace(const char *fmt, ...)
{
    FILE *f = trace_file();
    if (!f)
        return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fputc('\n', f);
    fflush(f);
}

static const char *copy_kind(enum cudaMemcpyKind k)
{
    switch (k) {
    case cudaMemcpyHostToDevice:
        return "H2D";
    case cudaMemcpyDeviceToHost:
        return "D2H";
    case cudaMemcpyDeviceToDevice:
        return "D2D";
    case cudaMemcpyHostToHost:
        return "H2H";
    default:
        return "default";
    }
}

void cuemu_aligned(const void *p, size_t align, const char *what)
{
    if ((uintptr_t)p % align == 0)
        return;
    fprintf(stderr, "cuemu: %s at %p (block %u, thread %u) is not %zu-byte aligned: a device "
            "stops the kernel there (misaligned address)\n", what, p, blockIdx.x, threadIdx.x,
            align);
    abort();
}

extern "C" void cuemu_record(void (*fn)(void *), const void *arg, size_t bytes)
{
    std::vector<char> copy((const char *)arg, (const char *)arg + bytes);
    g_capture->ops.push_back([fn, copy]() mutable { fn(copy.data()); });
}

static void launch_now(const char *name, dim3 grid, dim3 block,
                       const std::function<void()> &body);

void cuemu_launch_fn(const char *name, dim3 grid, dim3 block, const std::function<void()> &body)
{
    if (g_capture) {
        std::function<void()> copy = body;
        g_capture->ops.push_back([name, grid, block, copy] { launch_now(name, grid, block, copy); });
        return;
    }
    g_counts.launches++;
    launch_now(name, grid, block, body);
}

static void launch_now(const char *name, dim3 grid, dim3 block,
                       const std::function<void()> &body)
{
    cuemu_trace("kernel %s grid %u block %u", name ? name : "(unnamed)", grid.x, block.x);
    if (grid.y != 1 || grid.z != 1 || block.y != 1 || block.z != 1 || block.x == 0) {
        fprintf(stderr, "cuemu: only 1-D launches (grid %u, block %u)\n", grid.x, block.x);
        abort();
    }
    Block &b = g_pool;
    std::type_index site(body.target_type());
    b.body = &body;
    b.direct = g_no_sync.count(site) > 0;
    b.synced = false;
    if (!b.direct)
        b.grow(block.x);
    gridDim = grid;
    blockDim = block;
    g_block = &b;
    for (unsigned i = 0; i < grid.x; i++) {
        blockIdx = uint3{nth(i, grid.x), 0, 0};
        if (b.direct) {
            for (unsigned t = 0; t < block.x; t++) {
                threadIdx = uint3{nth(t, block.x), 0, 0};
                body();
            }
        } else {
            run_fibers(b, block.x);
        }
    }
    g_block = nullptr;
    if (!b.direct && !b.synced)
        g_no_sync.insert(site);
}

/* The runtime calls of cuda_arena.c / cuda_optim.c and the tests: device
 * memory is host memory, every call finishes before it returns. */
/* CUEMU_POISON=0 zeroes fresh memory instead (to tell a poison failure
 * from another); default 0xff: NaN in every float type, -1 in integers. */
static int poison_byte(void)
{
    static int b = -1;
    if (b < 0) {
        const char *v = getenv("CUEMU_POISON");
        b = v && *v ? (int)(strtol(v, NULL, 0) & 0xff) : 0xff;
    }
    return b;
}

extern "C" cudaError_t cudaMalloc(void **p, size_t size)
{
    if (not_in_capture() != cudaSuccess)
        return cudaErrorStreamCaptureUnsupported;
    g_counts.malloc_calls++;
    /* 256-byte aligned as cudaMalloc's: views into a buffer keep the
     * device's alignment, which cuemu_aligned checks */
    if (posix_memalign(p, 256, size ? size : 1) != 0)
        return cudaErrorMemoryAllocation;
    /* a device's fresh memory holds whatever was there: NaN bytes here,
     * so a kernel that reads what nothing wrote shows (calloc hid it) */
    memset(*p, poison_byte(), size ? size : 1);
    return cudaSuccess;
}

extern "C" cudaError_t cudaFree(void *p)
{
    g_counts.free_calls++;
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
    if (not_in_capture() != cudaSuccess)
        return cudaErrorStreamCaptureUnsupported;
    cuemu_trace("copy %s %zu bytes (synchronous)", copy_kind(kind), count);
    memmove(dst, src, count);
    return cudaSuccess;
}

extern "C" cudaError_t cudaDeviceSynchronize(void)
{
    g_counts.device_syncs++;
    if (not_in_capture() != cudaSuccess)
        return cudaErrorStreamCaptureUnsupported;
    return cudaSuccess;
}

extern "C" cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    g_counts.stream_syncs++;
    (void)s;
    if (not_in_capture() != cudaSuccess)
        return cudaErrorStreamCaptureUnsupported;
    return cudaSuccess;
}

/* every queued operation is done when it returns: a stream is always idle */
extern "C" cudaError_t cudaStreamQuery(cudaStream_t s)
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

/* In a capture a copy is recorded; one to or from pageable host memory
 * cannot be (the runtime refuses it and the capture is lost), the rule the
 * backend's capture must keep. */
extern "C" cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count,
                                       enum cudaMemcpyKind kind, cudaStream_t stream)
{
    (void)stream;
    if (g_capture) {
        if ((kind == cudaMemcpyHostToDevice && !pinned(src)) ||
            (kind == cudaMemcpyDeviceToHost && !pinned(dst)) || kind == cudaMemcpyDefault) {
            g_invalidated = true;
            return cudaErrorStreamCaptureUnsupported;
        }
        g_capture->ops.push_back([=] {
            cuemu_trace("copy %s %zu bytes", copy_kind(kind), count);
            memmove(dst, src, count);
        });
        return cudaSuccess;
    }
    cuemu_trace("copy %s %zu bytes", copy_kind(kind), count);
    memmove(dst, src, count);
    return cudaSuccess;
}

/* ---- the rest of the runtime the cuda backend calls (cuda_backend.c,
 * cuda_train.c, cuda_graph.c, cuda_prof.c): one emulated device, streams
 * and events as tokens (work is done when it is queued), pinned memory as
 * plain memory; a stream capture records what is queued and a graph launch
 * replays it (cuemu.h). */
namespace {
struct Token {
    int unused;
};
template <typename T> cudaError_t token(T *out)
{
    *out = reinterpret_cast<T>(new Token());
    return cudaSuccess;
}
template <typename T> cudaError_t untoken(T t)
{
    delete reinterpret_cast<Token *>(t);
    return cudaSuccess;
}
}  // namespace

extern "C" cudaError_t cudaMemsetAsync(void *p, int v, size_t count, cudaStream_t s)
{
    (void)s;
    if (g_capture) {
        g_capture->ops.push_back([=] {
            cuemu_trace("memset %zu bytes", count);
            memset(p, v, count);
        });
    } else {
        cuemu_trace("memset %zu bytes", count);
        memset(p, v, count);
    }
    return cudaSuccess;
}

extern "C" cudaError_t cudaHostAlloc(void **p, size_t size, unsigned int flags)
{
    (void)flags;
    cudaError_t e = cudaMalloc(p, size);
    if (e == cudaSuccess)
        g_pinned[(const char *)*p] = size;
    return e;
}

extern "C" cudaError_t cudaFreeHost(void *p)
{
    g_pinned.erase((const char *)p);
    free(p);
    return cudaSuccess;
}

extern "C" cudaError_t cudaGetDeviceCount(int *n)
{
    *n = 1;
    return cudaSuccess;
}

extern "C" cudaError_t cudaSetDevice(int d)
{
    return d == 0 ? cudaSuccess : cudaErrorInvalidDevice;
}

extern "C" cudaError_t cudaGetDevice(int *d)
{
    *d = 0;
    return cudaSuccess;
}

extern "C" cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int d)
{
    if (d != 0)
        return cudaErrorInvalidDevice;
    memset(prop, 0, sizeof *prop);
    snprintf(prop->name, sizeof prop->name, "cuemu (the kernel emulator, no GPU)");
    prop->totalGlobalMem = (size_t)8 << 30;
    prop->major = 9;
    prop->minor = 0;
    prop->multiProcessorCount = 1;
    return cudaSuccess;
}

extern "C" cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags)
{
    (void)flags;
    return token(s);
}

extern "C" cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    return untoken(s);
}

extern "C" cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int flags)
{
    (void)s, (void)e, (void)flags;
    return cudaSuccess;
}

/* An event holds the host clock of its recording: work is done when it is
 * queued, so an interval between two events is the host time of the work
 * queued between them, and DDPIPE_CUDA_PROFILE's per-op lines mean on the
 * emulator what they mean on a device (each op's share of the pass). In a
 * capture the recording is replayed with the graph. */
namespace {
struct Event {
    double ms;
};
double now_ms(void)
{
    return clock_mono_s() * 1e3;
}
}  // namespace

extern "C" cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags)
{
    (void)flags;
    *e = reinterpret_cast<cudaEvent_t>(new Event{now_ms()});
    return cudaSuccess;
}

extern "C" cudaError_t cudaEventCreate(cudaEvent_t *e)
{
    return cudaEventCreateWithFlags(e, 0);
}

extern "C" cudaError_t cudaEventDestroy(cudaEvent_t e)
{
    delete reinterpret_cast<Event *>(e);
    return cudaSuccess;
}

extern "C" cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
    (void)s;
    Event *ev = reinterpret_cast<Event *>(e);
    if (g_capture)
        g_capture->ops.push_back([=] { ev->ms = now_ms(); });
    else
        ev->ms = now_ms();
    return cudaSuccess;
}

extern "C" cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
    (void)e;
    return cudaSuccess;
}

extern "C" cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
    *ms = (float)(reinterpret_cast<Event *>(b)->ms - reinterpret_cast<Event *>(a)->ms);
    return cudaSuccess;
}

extern "C" cudaError_t cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode m)
{
    (void)s, (void)m;
    if (g_capture)
        return cudaErrorIllegalState;
    g_capture = new Graph();
    g_invalidated = false;
    return cudaSuccess;
}

extern "C" cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g)
{
    (void)s;
    *g = nullptr;
    if (!g_capture)
        return cudaErrorIllegalState;
    Graph *graph = g_capture;
    g_capture = nullptr;
    if (g_invalidated) {
        delete graph;
        return cudaErrorStreamCaptureInvalidated;
    }
    *g = reinterpret_cast<cudaGraph_t>(graph);
    return cudaSuccess;
}

extern "C" cudaError_t cudaStreamIsCapturing(cudaStream_t s, enum cudaStreamCaptureStatus *st)
{
    (void)s;
    *st = !g_capture ? cudaStreamCaptureStatusNone
                     : g_invalidated ? cudaStreamCaptureStatusInvalidated
                                     : cudaStreamCaptureStatusActive;
    return cudaSuccess;
}

extern "C" cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t *x, cudaGraph_t g,
                                                     unsigned long long flags)
{
    (void)flags;
    *x = reinterpret_cast<cudaGraphExec_t>(new Graph(*reinterpret_cast<Graph *>(g)));
    return cudaSuccess;
}

extern "C" cudaError_t cudaGraphLaunch(cudaGraphExec_t x, cudaStream_t s)
{
    g_counts.launches++;   /* one launch, whatever it replays */
    (void)s;
    if (g_capture)
        return cudaErrorStreamCaptureUnsupported;
    for (auto &op : reinterpret_cast<Graph *>(x)->ops)
        op();
    return cudaSuccess;
}

extern "C" cudaError_t cudaGraphDestroy(cudaGraph_t g)
{
    delete reinterpret_cast<Graph *>(g);
    return cudaSuccess;
}

extern "C" cudaError_t cudaGraphExecDestroy(cudaGraphExec_t x)
{
    delete reinterpret_cast<Graph *>(x);
    return cudaSuccess;
}
