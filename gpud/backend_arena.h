/* backend_arena — where a backend keeps a model's parameters, gradients
 * and optimizer state: ONE contiguous arena each (llm.c's params_memory /
 * grads_memory / the optimizer's m_memory), allocated by the backend.
 * Every tensor is a view into its arena (base + offset); nothing is a
 * calloc of its own.
 *
 * What lives where (the layout is pstore.c's, pstore_place):
 *   params  the trainable tensors (weights, biases) in state_dict order,
 *           then the "buffers" part: BatchNorm's running_mean/var (each
 *           tensor 64-byte aligned: zero gaps between them). The
 *           buffers sit with the weights because they are what the
 *           weights are: state_dict floats the forward reads (eval) and
 *           writes (training BN), checkpointed and broadcast with them, so
 *           on a device they must be device memory too. The tail keeps
 *           them one range: the BN-buffer broadcast and trainer_restore's
 *           save are a single copy/all-reduce of it.
 *           BatchNorm's num_batches_tracked are NOT in an arena: int64
 *           counters the host increments once per step and no kernel reads
 *           (model_i64_at), so device memory would only cost copies.
 *   grads   the gradient of every trainable, unfrozen tensor in the order
 *           of model_param_at = the optimizer's order, WITHOUT gaps (the
 *           ring's chunks, hence every float's summation order, depend on
 *           the array's length); frozen tensors have none. The trainer's gradient buckets (buckets.h) are plain
 *           ranges of it and the ring all-reduces it in place: no
 *           pack/unpack copy. Re-laid out when the freezes change.
 *   state   the optimizer's moments (optim.c): per parameter, its
 *           momentum_buffer / exp_avg / exp_avg_sq / max_exp_avg_sq at
 *           fixed offsets, zero until used ("exists" flags keep PyTorch's
 *           lazily-created state visible in checkpoints).
 *
 * Per-chunk gradients and exact accumulation (the "same bits" issue 31):
 * the gradient layout is a pure function of the model and its freezes, so
 * a second (k-th) gradient arena of the same layout can be allocated with
 * the same ops (alloc(grads floats)) and bound to a chunk's backward the
 * way the grads arena is; the accumulator (e.g. int64 fixed point, the
 * same offsets scaled to its element size) is one more arena of that
 * layout. Buckets, the optimizer and checkpoints only see the final grads
 * arena, so they need no change.
 *
 * Host memory on cpu and ref (they compute on the host); device memory on
 * cuda (gpud/cuda/cuda_arena.c, one per backend): the kernels read and write the
 * views in place, the optimizer is a device kernel over the arenas, and
 * the host reaches the arenas only through the ops below (checkpoints,
 * STATE, the ring's host mirror, the non-finite scan), each copy counted
 * (bk_traffic_t). The "ref-device" backend (gpud/cpu/ref_device.c) runs
 * the ref kernels over an emulated device arena whose addresses the host
 * cannot dereference: the tests' proof that nothing else touches them.
 */
#ifndef DDP_BACKEND_ARENA_H
#define DDP_BACKEND_ARENA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpud/backend.h"
#include "gpud/optim/optim.h"

typedef enum { BK_MEM_HOST = 0, BK_MEM_DEVICE = 1 } bk_mem_t;

/* Bytes moved between host memory and the backend's memory, by purpose
 * (on host backends the batch/output bytes are what crosses the graph's
 * boundary, bk_write/bk_read; params stays 0: the arenas are the memory
 * the kernels use). */
typedef struct bk_traffic {
    uint64_t batch_in;      /* input pixels (+ their normalisation table), labels,
                             * sample ids, the loss gradient */
    uint64_t out;           /* loss and logits read back */
    uint64_t params;        /* parameter / gradient / state copies (arena read/write:
                             * checkpoints, STATE, the ring's host mirror) */
    uint64_t bn;            /* training BatchNorm's per-channel vectors: the batch
                             * statistics and gradient sums the host computes and
                             * all-reduces (SyncBatchNorm), the running statistics
                             * it updates, gamma, the centres and coefficients the
                             * kernels take (tape_bn.c; model_copy_plan plans them) */
} bk_traffic_t;

/* One parameter for the optimizer slot: views into the arenas (device
 * addresses on a device arena) and its host-side step state. */
typedef struct {
    float *w;               /* params arena, numel */
    const float *g;         /* grads arena, numel */
    float *buf;             /* SGD momentum_buffer / Adam, NovoGrad exp_avg (numel) */
    float *sq;              /* Adam exp_avg_sq (numel); NovoGrad its scalar (1) */
    float *sq_max;          /* amsgrad max_exp_avg_sq (as sq), else NULL */
    int64_t numel;
    bool decay;             /* cfg.weight_decay applies (else 0) */
    int64_t step;           /* steps taken (PyTorch's state["step"]) */
    bool have_buf;          /* SGD: the momentum buffer was initialised */
} bk_oparam_t;

struct xsum;   /* common/xsum.h */

/* A device collective for the exact sums (NCCL: gpud/collective.h), each
 * in place over n values of device memory, behind the device work queued
 * so far and done when it returns: the max of uint32, the sum of int64.
 * 0, or -1 with the reason in err. */
typedef int (*bk_max_u32_fn)(void *ctx, uint32_t *dev, size_t n, int timeout_ms, char *err,
                             size_t errlen);
typedef int (*bk_sum_i64_fn)(void *ctx, int64_t *dev, size_t n, int timeout_ms, char *err,
                             size_t errlen);
typedef struct bk_xsum_coll {
    bk_max_u32_fn max_u32;
    bk_sum_i64_fn sum_i64;
    void *ctx;
    int timeout_ms;
} bk_xsum_coll_t;

/* Bitwise training's exact sums (common/xsum.h, the same limbs bit for
 * bit) kept in an arena's memory, so a chunk's gradient is added where
 * backward wrote it and the limbs are read once a step. Every op takes the
 * arena's ctx first. new: nseg segments of len[s] floats, zero; NULL
 * when out of memory. clear and add (segment seg += x[0,
 * len[seg]), x in this memory) are queued; read waits for them, then
 * dst (an xsum_t of the same segments) = the sums. 0 or -1. */
typedef struct bk_xsum_ops {
    void *(*new)(void *ctx, const size_t *len, int nseg);
    void (*free)(void *ctx, void *xs);
    int (*clear)(void *ctx, void *xs);
    int (*add)(void *ctx, void *xs, int seg, const float *x);
    int (*read)(void *ctx, void *xs, struct xsum *dst);
    /* bytes one read brings to the host */
    size_t (*read_bytes)(void *ctx, const void *xs);
    /* Optional: the sums over every rank of coll, without the host: the
     * tops' max and the limbs' sum through coll where they are, each sum
     * rounded once into out (this memory, the segments one after the
     * other): the same bits on every rank, and as read, an all-reduce
     * and xsum_get_f32 would give. 0, or -1 with the reason in err. */
    int (*reduce)(void *ctx, void *xs, const bk_xsum_coll_t *coll, float *out, char *err,
                       size_t errlen);
} bk_xsum_ops_t;

typedef struct bk_arena_ops {
    const char *name;       /* "host", "cuda device" */
    bk_mem_t mem;
    /* What every op gets first: the implementation's own state (cuda: the
     * stream the backend's kernels run on, the scan's result word, the
     * optimizer's chunk table; cuda_arena.h). NULL on the host. */
    void *ctx;
    /* floats zeroed floats; NULL when out of memory. */
    float *(*alloc)(void *ctx, size_t floats);
    void (*free)(void *ctx, float *base);
    /* Copies between host memory and base[off, off + n). 0 or -1. A read
     * returns with dst filled; a write may return before the copy lands
     * (src may be reused at once), ordered before every later op and kernel. */
    int (*read)(void *ctx, const float *base, size_t off, size_t n, float *dst);
    int (*write)(void *ctx, float *base, size_t off, size_t n, const float *src);
    int (*zero)(void *ctx, float *base, size_t off, size_t n);
    /* dst[doff, doff + n) = src[soff, soff + n), both memory of this kind
     * (no host round trip). 0 or -1. */
    int (*copy)(void *ctx, float *dst, size_t doff, const float *src, size_t soff, size_t n);
    /* *at = the index (from off) of the first NaN or +-inf in
     * base[off, off + n), -1 when all are finite. 0, or -1 when the scan
     * itself failed. */
    int (*find_nonfinite)(void *ctx, const float *base, size_t off, size_t n, int64_t *at);
    /* base[off, off + n) *= factor, each float alone (fp16 training's
     * unscale, loss_scale.h: a power of two, exact). 0 or -1. */
    int (*scale)(void *ctx, float *base, size_t off, size_t n, float factor);
    /* One optimizer step at lr of the n parameters (optim.h's arithmetic,
     * bit-identical on every implementation); step/have_buf updated. 0, or
     * -1 with the reason in err. A device may return with the update
     * queued (ordered before every later op and kernel). */
    int (*optim_step)(void *ctx, const optim_cfg_t *c, double lr, bk_oparam_t *p, int n,
                      char *err, size_t errlen);
    /* Optional: the device stream (a cudaStream_t) the ops and the kernels
     * that use the arenas are queued on: work of another stream (NCCL's)
     * queued behind an event of it follows them. NULL: host memory, or
     * nothing to order. */
    void *(*stream)(void *ctx);
    /* Optional (NULL: the host sums from its copy of the arena, host
     * memory or the mirror): bitwise training's exact sums kept in this
     * memory (bk_xsum_ops_t). */
    const struct bk_xsum_ops *xsum;
} bk_arena_ops_t;

/* Host memory (64-byte aligned), the optimizer in plain C (optim_host.c). */
extern const bk_arena_ops_t bk_arena_host;

/* One arena: its floats and where they are. */
typedef struct bk_arena {
    const bk_arena_ops_t *ops;
    float *base;            /* host memory, or a device address (ops->mem) */
    size_t floats;
    bk_traffic_t *traffic;  /* read/write count params bytes here; NULL: not counted */
} bk_arena_t;

/* base = ops->alloc(floats) (zeroed). 0, or -1 (out of memory). */
int bk_arena_alloc(bk_arena_t *a, const bk_arena_ops_t *ops, size_t floats,
                   bk_traffic_t *traffic);
void bk_arena_free(bk_arena_t *a);
/* Copies through ops, counted in traffic->params when the arena is not
 * host memory. 0 or -1. */
int bk_arena_read(const bk_arena_t *a, size_t off, size_t n, float *dst);
int bk_arena_write(const bk_arena_t *a, size_t off, size_t n, const float *src);
int bk_arena_zero(const bk_arena_t *a, size_t off, size_t n);
/* dst[doff..] = src[soff..] (n floats; the same ops on both). 0 or -1. */
int bk_arena_copy(const bk_arena_t *dst, size_t doff, const bk_arena_t *src, size_t soff,
                  size_t n);
/* ops->stream: the device stream a's ops and kernels are ordered on; NULL
 * on the host. */
void *bk_arena_stream(const bk_arena_t *a);
/* ops->find_nonfinite / ops->scale over base[off, off + n). 0 or -1. */
int bk_arena_scan(const bk_arena_t *a, size_t off, size_t n, int64_t *at);
int bk_arena_scale(const bk_arena_t *a, size_t off, size_t n, float factor);
/* 0 when base[off, off + n) is finite, else -1 with finite_check's message
 * ("name: element i of n is nan", i from off) in err; a failed scan says so. */
int bk_arena_check(const bk_arena_t *a, size_t off, size_t n, const char *name, char *err,
                   size_t errlen);
/* base[off, off + n) as host memory: a view on a host arena, else NULL
 * (read/write through a staging copy). */
float *bk_arena_host_view(const bk_arena_t *a, size_t off);

/* The arena ops of a backend (struct backend's `arena`; host memory when
 * the backend names none). */
const bk_arena_ops_t *backend_arena_ops(const backend_t *be);

/* Adds to *t the bytes be's kernels copied between host and device memory
 * since the last call (bk_ops_t.traffic; cuda: training BatchNorm's
 * centres, coefficients and double sums in bn, its batch and output
 * copies in batch_in and out; never params: the kernels use the arenas in
 * place), and starts counting anew.
 * Nothing on host backends. */
void backend_traffic_take(backend_t *be, bk_traffic_t *t);

#endif
