/* cuda_priv — what the cuda backend's files share: the backend object, the
 * checked-call helpers and the convolution plan (cuDNN descriptors + the
 * algorithms chosen once per shape). Not for code outside gpud/cuda. */
#ifndef DDP_CUDA_PRIV_H
#define DDP_CUDA_PRIV_H

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include "gpud/backend_impl.h"
#include "gpud/cuda/cuda_kernels.h"

/* One cached algorithm choice: the key is every shape parameter. */
typedef struct {
    int key[13];
    cudnnConvolutionFwdAlgo_t fwd;
    cudnnConvolutionBwdDataAlgo_t bwd_data;
    cudnnConvolutionBwdFilterAlgo_t bwd_filter;
    cudnnMathType_t math_fwd, math_bwd_data, math_bwd_filter;
    size_t ws;              /* the largest workspace of the three */
    int have_bwd;
} cu_algo_t;

/* The pinned double buffer of the uint8 input path (cuda_input.c). */
#define CU_U8_MAX_C 4
typedef struct {
    uint8_t *host[2];          /* pinned */
    uint8_t *dev[2];
    cudaEvent_t used[2];       /* the normalise kernel that read dev[i] is done */
    cudaEvent_t copied[2];
    size_t bytes;
    int next;
    float *lut;                /* device, c x 256 */
    float lut_host[CU_U8_MAX_C * 256];
    int lut_c, lut_valid;
    cudaStream_t copy_stream;
    /* DDPIPE_CUDA_PROFILE: where a batch's input goes (logged when freed) */
    int prof;
    cudaEvent_t pev[4];        /* upload start, end (copy stream); normalise start, end */
    long prof_n;
    double prof_copy_s, prof_call_s, prof_up_ms, prof_norm_ms;
} cu_u8_t;

typedef struct {
    backend_t base;
    int device;
    char device_name[256];
    int tf32;               /* DDPIPE_CUDA_PRECISION=tf32 */
    int algo_find;          /* DDPIPE_CUDA_ALGO=find: benchmark (timing picks) */
    cudaStream_t stream;
    struct cuda_arena *arena;   /* base.arena's ops: the model's arenas, on stream */
    cudnnHandle_t dnn;
    cublasHandle_t blas;
    void *blas_ws;          /* cuBLAS's workspace, set once: the same kernels (and bits)
                             * inside a CUDA graph capture as outside, no allocation in one */
    void *ws;               /* shared cuDNN workspace: grown at plan time only */
    size_t ws_size, ws_cap;
    cu_algo_t *algos;       /* per-shape algorithm cache */
    size_t nalgos, capalgos;
    /* scratch for small per-call uploads/downloads (ids, sums) */
    void *scratch;
    size_t scratch_size;
    void *h16;              /* cuda_train16.c's fp32 temporaries of the generic kernels */
    size_t h16_cap;
    void *topk;             /* a training step's top-k ids before their download */
    size_t topk_cap;
    /* bumped each time cu_grow_be moves a buffer (scratch, topk, h16):
     * a recording that baked in the old address is stale (cuda_graph.c) */
    unsigned long grow_gen;
    /* first error of a kernel that cannot report one (void table entries);
     * the next checked call fails with it */
    int failed;
    char err[512];
    cu_u8_t u8;
    /* the bf16 NHWC buffers of inference graphs (cuinf_alloc), to tell
     * them from a training graph's fp32 ones in the kernels that get no
     * graph (zero, copy, add, flatten, round_half) */
    void **bf16_bufs;
    size_t nbf16, capbf16;
    /* bytes the kernels copied between host and device since
     * bk_ops_t.traffic last took them: bn training BatchNorm's per-channel
     * host vectors (centres, coefficients up, double sums down), batch_in
     * the input pixels, labels, sample ids and loss gradient, out what
     * bk_read reads back; params stays 0 (parameters and activations live
     * in device memory: the arena ops count their own copies) */
    bk_traffic_t traffic;
    struct cu_split *split; /* cuda_prof.c: DDPIPE_CUDA_PROFILE's backward split, or NULL */
    /* the start-up work, logged at the end: [0] cuDNN graphs planned
     * (cu_fused_new: heuristics, finalize, any runtime compilation), [1]
     * the legacy calls' algorithm queries */
    double plan_s[2];
    unsigned nplan[2];
    unsigned nplan_shared;  /* of nplan[0]: a plan of the same shape reused */
    unsigned nplan_rtc;     /* of nplan[0]: built on a runtime-compiled engine (NVRTC) */
    unsigned nplan_loaded;  /* of nplan_rtc: loaded from a serialized plan, not compiled */
    double plan_rtc_s;      /* of plan_s[0]: those engines' finalize (their compile) */
    /* cuda_fused.c's execution plans, one per shape, shared by the layers
     * of that shape (each holds a reference; the last one out frees it) */
    struct cu_fplan **fplans;
    size_t nfplans, capfplans;
    struct cu_tune *tune;   /* cuda_tune.h: a plans file and/or timing; NULL: heuristics */
    struct cu_decode *dec;  /* cuda_decode.h: --decode gpu's decoder, made at its first use */
} cuda_backend_t;

static inline cuda_backend_t *cu_be(backend_t *be)
{
    return (cuda_backend_t *)be;
}

/* bk_kernels_t.write_u8 (cuda_input.c, the uint8 input path): dst fp32
 * NCHW (half 0), or a 16-bit NHWC input (cuda_infer.c's layout): bf16 (half
 * 1: the inference plan's, cuda_train16.c's) or fp16 (2: cuda_train16.c's).
 * 1: not this precision (the caller writes floats). */
int cu_write_u8(bk_ctx_t *g, void *dst, const uint8_t *px, const float *lut, const int s[4],
                int half);
/* the input path's buffers and events freed (logging its profile line) */
void cu_u8_free(cuda_backend_t *cb);

/* Counted copies: cu_upload / cu_download (and the _be forms) that add
 * bytes to *count (a field of cuda_backend_t.traffic) when they succeed. */
int cu_up_n(bk_ctx_t *g, uint64_t *count, void *dev, const void *host, size_t bytes);
int cu_down_n(bk_ctx_t *g, uint64_t *count, void *host, const void *dev, size_t bytes);
int cu_up_be_n(backend_t *be, uint64_t *count, void *dev, const void *host, size_t bytes);
int cu_down_be_n(backend_t *be, uint64_t *count, void *host, const void *dev, size_t bytes);
/* The scratch of SyncBatchNorm's per-channel sums (cu_scratch_be): rows
 * double sums, then their parts partials per row, then c floats of centre,
 * uploaded (counted) when center is given, its device copy in *dcen (NULL
 * without). The sums' address, or NULL after cu_note. */
double *cu_sums_scratch(backend_t *be, uint64_t *count, size_t rows, int parts, size_t c,
                        const float *center, const float **dcen);
/* k host vectors of c floats each (SyncBatchNorm's centres and
 * coefficients), one after another in the backend's scratch (cu_scratch_be),
 * counted; the device copy, or NULL after cu_note. */
float *cu_vectors_up(backend_t *be, uint64_t *count, size_t c, int k, const float *const *v);

/* Each returns 0, or -1 after bk_ctx_fail(g, "<what> failed: <reason>. <advice>"). */
/* what to do about a CUDA failure, by its kind (cuda_checked.c) */
const char *cu_advice(cudaError_t e);
int cu_check(bk_ctx_t *g, cudaError_t e, const char *what);
int cudnn_check(bk_ctx_t *g, cudnnStatus_t s, const char *what);
int cublas_check(bk_ctx_t *g, cublasStatus_t s, const char *what);
/* A kernel launch without a graph: remember the first failure in be. */
void cu_note(backend_t *be, cudaError_t e, const char *what);
/* bn_grad_sums / bn_grad_apply's gscale: the cuda backend gives no
 * bn_relu_drop, so the tape fuses no dropout into a BatchNorm there and
 * passes 1; anything else is noted as a caller's error (backend_impl.h). */
static inline int cu_gscale_one(backend_t *be, float gscale)
{
    if (gscale == 1.0f)
        return 1;
    cu_note(be, cudaErrorNotSupported,
            "batch-norm gradient with a fused dropout's scale (no bn_relu_drop on cuda)");
    return 0;
}
/* Fails g with the backend's remembered error, if any. */
int cu_sticky(bk_ctx_t *g);

/* cudaMalloc + memset 0; NULL after bk_ctx_fail. */
void *cu_alloc(bk_ctx_t *g, size_t bytes);
/* Synchronous copies on the backend's stream (pageable host memory). */
int cu_upload(bk_ctx_t *g, void *dev, const void *host, size_t bytes);
int cu_download(bk_ctx_t *g, void *host, const void *dev, size_t bytes);
/* A device scratch of at least bytes, owned by the backend (valid until the
 * next cu_scratch call; work queued before a growth is waited for). */
void *cu_scratch(bk_ctx_t *g, size_t bytes);
/* The same for kernels without a graph: failures go to cu_note. */
void *cu_scratch_be(backend_t *be, size_t bytes);
/* *buf (device, *cap bytes) grown to at least bytes, after the stream's
 * queued work (which may read the old one); its contents are not kept.
 * NULL after cu_note (what: the message of a failure). */
void *cu_grow_be(backend_t *be, void **buf, size_t *cap, size_t bytes, const char *what);
int cu_upload_be(backend_t *be, void *dev, const void *host, size_t bytes);
int cu_download_be(backend_t *be, void *host, const void *dev, size_t bytes);
/* Make sure the shared workspace holds bytes (plan time only). */
int cu_workspace(bk_ctx_t *g, size_t bytes);

/* 1 when g's convolutions may run on TF32 tensor cores: with
 * DDPIPE_CUDA_PRECISION=tf32, and in a bf16 tape graph (training), whose
 * operands are all bf16 values (the engine's rounding points), exact in
 * TF32: the products are exact and the sums fp32, autocast's numbers. */
int cu_tensor_ops(const bk_ctx_t *g);

/* A convolution for fixed shapes. */
typedef struct {
    cudnnTensorDescriptor_t xd, yd;
    cudnnFilterDescriptor_t wd;
    cudnnConvolutionDescriptor_t cd;
    cu_algo_t algo;
} cu_conv_t;

/* Descriptors for x in[4] -> y out[4] with weights (oc, ic, kh, kw) and the
 * algorithms (forward; backward data + filter when train). 0 or -1. */
int cu_conv_init(bk_ctx_t *g, cu_conv_t *c, const int in[4], const int out[4], int kh,
                 int kw, int sh, int sw, int ph, int pw, int train);
/* The same for 16-bit NHWC tensors and filter (half 1 bf16, 2 fp16;
 * cuda_train16.c): fp32 sums, tensor-op math, deterministic algorithms as
 * ever. */
int cu_conv_init_as(bk_ctx_t *g, cu_conv_t *c, const int in[4], const int out[4], int kh,
                    int kw, int sh, int sw, int ph, int pw, int train, int half);
void cu_conv_fini(cu_conv_t *c);
/* y = conv(x, w) (no bias) */
int cu_conv_fwd(bk_ctx_t *g, cu_conv_t *c, const float *x, const float *w, float *y);
/* y[n, out] = x[n, in] @ w[out, in]^T (+ bias) on the backend's stream */
int cu_linear_fwd(bk_ctx_t *g, const float *x, int n, int in, const float *w,
                  const float *bias, int out, float *y);

extern const bk_kernels_t CUDA_TKERNELS;
/* cuda_train16.c: the same on bf16 NHWC activations (bk_ops_t.train16). */
extern const bk_kernels_t CUDA_T16KERNELS;
/* cuda_graph.c: the engine's recorded forward on CUDA graphs. */
extern const bk_graph_ops_t CUDA_GRAPH_OPS;
/* cuda_prof.c: per-op device time with cudaEvents (DDPIPE_CUDA_PROFILE). */
extern const bk_timer_ops_t CUDA_TIMER_OPS;
/* Whether DDPIPE_CUDA_PROFILE asks for profiling (set, not empty, not 0);
 * *every (may be NULL): N when it is a number N > 1, else 0. The timer and
 * the convolutions' choice lines (cuda_backend.c, cuda_fused.c) read it. */
int cu_profile_env(int *every);

/* cuda_prof.c: with DDPIPE_CUDA_PROFILE, a convolution backward's device
 * time split into its data and filter gradients (the per-op profile times
 * the op whole): cu_split_begin before the first, cu_split_mark(be,
 * CU_SPLIT_DATA or _FILTER) after each; the sums are logged by
 * cu_split_report (one line, at the backend's end, which frees it).
 * cu_split_new, at the backend's start: NULL without the variable (then
 * begin and mark do nothing, nothing read per call); a CUDA graph is never
 * recorded meanwhile (profiling keeps recording off). */
enum { CU_SPLIT_DATA = 1, CU_SPLIT_FILTER = 2 };
typedef struct cu_split cu_split_t;
cu_split_t *cu_split_new(void);
void cu_split_begin(backend_t *be);
void cu_split_mark(backend_t *be, int what);
void cu_split_report(backend_t *be);

#endif
