/* cuda_backend — backend.h on an NVIDIA GPU: device buffers in NCHW float,
 * convolutions through cuDNN (algorithm found once per shape and cached in
 * the backend, one workspace owned by the backend), linear layers through
 * cuBLAS, everything else in gpud/cuda/cuda_kernels.cu. All work of a
 * backend runs in order on one stream; bk_read and the kernels that hand
 * values to the host synchronise it, and every CUDA, cuDNN and cuBLAS status
 * is checked. The model's arenas are device memory (cuda_arena.c), whose
 * ops and optimizer step are queued on this same stream. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/errbuf.h"
#include "common/log.h"
#include "gpud/cuda/cuda_backend.h"
#include "gpud/cuda/cuda_infer_kernels.h"
#include "gpud/cuda/cuda_arena.h"
#include "gpud/cuda_device.h"
#include "gpud/cuda/cuda_ce_kernels.h"
#ifdef DDPIPE_HAVE_NVJPEG
#include "gpud/cuda/cuda_decode.h"
#endif
#include "gpud/cuda/cuda_priv.h"
#include "gpud/cuda/cuda_tune.h"

/* ------------------------------------------------------------ convolution */

/* Prefer deterministic algorithms (ddpipe promises the same bytes for the
 * same inputs); in fp32 mode never a TF32 tensor-op one. Picks perf[i] of
 * the first acceptable entry, or -1. The entries come from cuDNN's
 * heuristics by default: the same order for the same shapes, device and
 * cuDNN in every process, so every gpud of a job picks the same algorithm
 * and a sample's logits do not depend on which worker ran it. With
 * DDPIPE_CUDA_ALGO=find they come from a benchmark (fastest first), whose
 * timings can order them differently in two processes. */
#define DEFINE_PICK(name, T)                                                          \
    static int name(const T *perf, int count, int tf32, size_t cap)                    \
    {                                                                                  \
        for (int pass = 0; pass < 2; pass++)                                           \
            for (int i = 0; i < count; i++)                                            \
                if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= cap &&  \
                    (tf32 || perf[i].mathType != CUDNN_TENSOR_OP_MATH) &&               \
                    (pass == 1 || perf[i].determinism == CUDNN_DETERMINISTIC))         \
                    return i;                                                          \
        return -1;                                                                     \
    }
DEFINE_PICK(pick_fwd, cudnnConvolutionFwdAlgoPerf_t)
DEFINE_PICK(pick_bwd_data, cudnnConvolutionBwdDataAlgoPerf_t)
DEFINE_PICK(pick_bwd_filter, cudnnConvolutionBwdFilterAlgoPerf_t)

static cu_algo_t *algo_lookup(cuda_backend_t *cb, const int key[13])
{
    for (size_t i = 0; i < cb->nalgos; i++)
        if (memcmp(cb->algos[i].key, key, sizeof cb->algos[i].key) == 0)
            return &cb->algos[i];
    return NULL;
}

/* The math type an algorithm runs with: fp32 mode forbids TF32 (FMA only). */
static cudnnMathType_t run_math(int tf32, cudnnMathType_t found)
{
    return tf32 ? found : CUDNN_FMA_MATH;
}

int cu_tensor_ops(const bk_ctx_t *g)
{
    return cu_be(g->be)->tf32 || (g->be->precision != BK_FP32 && !g->infer);
}

static int find_fwd(bk_ctx_t *g, cu_conv_t *c, cu_algo_t *a, int tf32)
{
    cuda_backend_t *cb = cu_be(g->be);
    cudnnConvolutionFwdAlgoPerf_t perf[16];
    int n = 0;
    cudnnStatus_t st =
        cb->algo_find
            ? cudnnFindConvolutionForwardAlgorithm(cb->dnn, c->xd, c->wd, c->cd, c->yd, 16, &n,
                                                   perf)
            : cudnnGetConvolutionForwardAlgorithm_v7(cb->dnn, c->xd, c->wd, c->cd, c->yd, 16, &n,
                                                     perf);
    if (cudnn_check(g, st, cb->algo_find ? "cudnnFindConvolutionForwardAlgorithm"
                                         : "cudnnGetConvolutionForwardAlgorithm_v7") < 0)
        return -1;
    int i = pick_fwd(perf, n, tf32, cb->ws_cap);
    if (i < 0) {
        bk_ctx_fail(g, "cuDNN offers no usable forward algorithm (%d tried, workspace cap %zu MB): "
                "raise DDPIPE_CUDA_WORKSPACE_MB", n, cb->ws_cap >> 20);
        return -1;
    }
    a->fwd = perf[i].algo;
    a->math_fwd = run_math(tf32, perf[i].mathType);
    a->ws = perf[i].memory > a->ws ? perf[i].memory : a->ws;
    return 0;
}

static int find_bwd(bk_ctx_t *g, cu_conv_t *c, cu_algo_t *a, int tf32)
{
    cuda_backend_t *cb = cu_be(g->be);
    cudnnConvolutionBwdDataAlgoPerf_t pd[16];
    cudnnConvolutionBwdFilterAlgoPerf_t pf[16];
    int nd = 0, nf = 0;
    cudnnStatus_t sd, sf;
    if (cb->algo_find) {
        sd = cudnnFindConvolutionBackwardDataAlgorithm(cb->dnn, c->wd, c->yd, c->cd, c->xd, 16,
                                                       &nd, pd);
        sf = cudnnFindConvolutionBackwardFilterAlgorithm(cb->dnn, c->xd, c->yd, c->cd, c->wd, 16,
                                                         &nf, pf);
    } else {
        sd = cudnnGetConvolutionBackwardDataAlgorithm_v7(cb->dnn, c->wd, c->yd, c->cd, c->xd, 16,
                                                         &nd, pd);
        sf = cudnnGetConvolutionBackwardFilterAlgorithm_v7(cb->dnn, c->xd, c->yd, c->cd, c->wd,
                                                           16, &nf, pf);
    }
    if (cudnn_check(g, sd, "cuDNN backward-data algorithm query") < 0 ||
        cudnn_check(g, sf, "cuDNN backward-filter algorithm query") < 0)
        return -1;
    int id = pick_bwd_data(pd, nd, tf32, cb->ws_cap);
    int jf = pick_bwd_filter(pf, nf, tf32, cb->ws_cap);
    if (id < 0 || jf < 0) {
        bk_ctx_fail(g, "cuDNN offers no usable backward-%s algorithm (workspace cap %zu MB): raise "
                "DDPIPE_CUDA_WORKSPACE_MB", id < 0 ? "data" : "filter", cb->ws_cap >> 20);
        return -1;
    }
    a->bwd_data = pd[id].algo;
    a->math_bwd_data = run_math(tf32, pd[id].mathType);
    a->bwd_filter = pf[jf].algo;
    a->math_bwd_filter = run_math(tf32, pf[jf].mathType);
    size_t m = pd[id].memory > pf[jf].memory ? pd[id].memory : pf[jf].memory;
    a->ws = m > a->ws ? m : a->ws;
    a->have_bwd = 1;
    return 0;
}

/* With DDPIPE_CUDA_PROFILE set, each shape's choice once (where a slow
 * convolution's time goes: cuDNN's algorithm numbers, cudnn.h's enums). */
static void log_choice(const int key[13], const cu_algo_t *a, int train)
{
    if (!cu_profile_env(NULL))
        return;
    static const char *fmt[] = {"fp32 NCHW", "bf16 NHWC", "fp16 NHWC"};
    char bwd[96] = "";
    if (train)
        snprintf(bwd, sizeof bwd, ", backward data %d (math %d), filter %d (math %d)",
                 (int)a->bwd_data, (int)a->math_bwd_data, (int)a->bwd_filter,
                 (int)a->math_bwd_filter);
    log_info("cuda conv %s [%d,%d,%d,%d] -> %d %dx%d/%d: forward algorithm %d (math %d)%s, "
             "workspace %zu KB", fmt[key[12] >= 0 && key[12] <= 2 ? key[12] : 0], key[0], key[1],
             key[2], key[3], key[4], key[5], key[6], key[7], (int)a->fwd, (int)a->math_fwd, bwd,
             a->ws >> 10);
}

/* The cached choice for c's shapes, chosen on first use. */
static int choose_algos(bk_ctx_t *g, cu_conv_t *c, const int key[13], int train)
{
    cuda_backend_t *cb = cu_be(g->be);
    cu_algo_t *a = algo_lookup(cb, key);
    if (a && (a->have_bwd || !train)) {
        c->algo = *a;
        return cu_workspace(g, a->ws);
    }
    int fresh = !a;   /* a new shape: its forward choice too */
    if (fresh) {
        if (cb->nalgos == cb->capalgos) {
            size_t cap = cb->capalgos ? 2 * cb->capalgos : 32;
            cu_algo_t *p = realloc(cb->algos, cap * sizeof *p);
            if (!p) {
                bk_ctx_fail(g, "out of memory");
                return -1;
            }
            cb->algos = p;
            cb->capalgos = cap;
        }
        a = &cb->algos[cb->nalgos];
        memset(a, 0, sizeof *a);
        memcpy(a->key, key, sizeof a->key);
    }
    double t0 = clock_mono_s();   /* the queries' time: gpud's start-up */
    int rc = (fresh ? find_fwd(g, c, a, key[11]) : 0) < 0 ||
             (train && !a->have_bwd && find_bwd(g, c, a, key[11]) < 0);
    cb->plan_s[1] += clock_mono_s() - t0;
    cb->nplan[1] += fresh;
    if (rc)
        return -1;
    cb->nalgos += fresh;
    log_choice(key, a, train);
    c->algo = *a;
    return cu_workspace(g, a->ws);
}

int cu_conv_init(bk_ctx_t *g, cu_conv_t *c, const int in[4], const int out[4], int kh,
                 int kw, int sh, int sw, int ph, int pw, int train)
{
    return cu_conv_init_as(g, c, in, out, kh, kw, sh, sw, ph, pw, train, 0);
}

int cu_conv_init_as(bk_ctx_t *g, cu_conv_t *c, const int in[4], const int out[4], int kh,
                    int kw, int sh, int sw, int ph, int pw, int train, int half)
{
    /* 16-bit operands: tensor-op math (fp32 sums); fp32: TF32 only where allowed */
    int tf32 = half || cu_tensor_ops(g);
    cudnnTensorFormat_t fmt = half ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
    cudnnDataType_t dt = half == 2 ? CUDNN_DATA_HALF
                         : half    ? CUDNN_DATA_BFLOAT16
                                   : CUDNN_DATA_FLOAT;
    memset(c, 0, sizeof *c);
    if (cudnn_check(g, cudnnCreateTensorDescriptor(&c->xd), "cudnnCreateTensorDescriptor") < 0 ||
        cudnn_check(g, cudnnCreateTensorDescriptor(&c->yd), "cudnnCreateTensorDescriptor") < 0 ||
        cudnn_check(g, cudnnCreateFilterDescriptor(&c->wd), "cudnnCreateFilterDescriptor") < 0 ||
        cudnn_check(g, cudnnCreateConvolutionDescriptor(&c->cd),
                    "cudnnCreateConvolutionDescriptor") < 0)
        return -1;
    if (cudnn_check(g, cudnnSetTensor4dDescriptor(c->xd, fmt, dt, in[0], in[1], in[2], in[3]),
                    "cudnnSetTensor4dDescriptor (input)") < 0 ||
        cudnn_check(g, cudnnSetTensor4dDescriptor(c->yd, fmt, dt, out[0], out[1], out[2], out[3]),
                    "cudnnSetTensor4dDescriptor (output)") < 0 ||
        cudnn_check(g, cudnnSetFilter4dDescriptor(c->wd, dt, fmt, out[1], in[1], kh, kw),
                    "cudnnSetFilter4dDescriptor") < 0 ||
        /* PyTorch's conv is a cross-correlation */
        cudnn_check(g, cudnnSetConvolution2dDescriptor(c->cd, ph, pw, sh, sw, 1, 1,
                                                       CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
                    "cudnnSetConvolution2dDescriptor") < 0 ||
        cudnn_check(g, cudnnSetConvolutionMathType(c->cd, tf32 ? CUDNN_DEFAULT_MATH
                                                               : CUDNN_FMA_MATH),
                    "cudnnSetConvolutionMathType") < 0)
        return -1;
    /* key[11]: tensor ops allowed (find_fwd / find_bwd read it); key[12]: the
     * 16-bit NHWC format, if any */
    int key[13] = {in[0], in[1], in[2], in[3], out[1], kh, kw, sh, sw, ph, pw, tf32, half};
    return choose_algos(g, c, key, train);
}

void cu_conv_fini(cu_conv_t *c)
{
    if (c->xd)
        cudnnDestroyTensorDescriptor(c->xd);
    if (c->yd)
        cudnnDestroyTensorDescriptor(c->yd);
    if (c->wd)
        cudnnDestroyFilterDescriptor(c->wd);
    if (c->cd)
        cudnnDestroyConvolutionDescriptor(c->cd);
    memset(c, 0, sizeof *c);
}

int cu_conv_fwd(bk_ctx_t *g, cu_conv_t *c, const float *x, const float *w, float *y)
{
    cuda_backend_t *cb = cu_be(g->be);
    const float one = 1.0f, zero = 0.0f;
    if (cudnn_check(g, cudnnSetConvolutionMathType(c->cd, c->algo.math_fwd),
                    "cudnnSetConvolutionMathType") < 0)
        return -1;
    return cudnn_check(g, cudnnConvolutionForward(cb->dnn, &one, c->xd, x, c->wd, w, c->cd,
                                                  c->algo.fwd, cb->ws, cb->ws_size, &zero,
                                                  c->yd, y),
                       "cudnnConvolutionForward");
}

/* Row-major y[n, out] = x[n, in] w[out, in]^T is column-major
 * y^T (out x n) = op_T(w as in x out) * (x^T as in x n). */
int cu_linear_fwd(bk_ctx_t *g, const float *x, int n, int in, const float *w,
                  const float *bias, int out, float *y)
{
    cuda_backend_t *cb = cu_be(g->be);
    const float one = 1.0f, zero = 0.0f;
    if (cublas_check(g, cublasSgemm(cb->blas, CUBLAS_OP_T, CUBLAS_OP_N, out, n, in, &one, w, in,
                                    x, in, &zero, y, out),
                     "cublasSgemm (linear forward)") < 0)
        return -1;
    return bias ? cu_check(g, ck_bias_rows(cb->stream, y, bias, n, out), "linear bias kernel")
                : 0;
}

/* ----------------------------------------------------------- top-k and CE */

int cuda_topk_ce(backend_t *be, const float *logits, int n, int classes,
                 const int32_t *labels, int k, int32_t *topk, float *loss, char *err,
                 size_t errlen)
{
    if (!be || be->ops->train != &CUDA_TKERNELS || n < 0 || classes < 1 || k < 0) {
        err_set(err, errlen, "cuda_topk_ce: needs a cuda backend, n >= 0, classes >= 1, k >= 0");
        return -1;
    }
    if (n == 0 || (!topk && !loss))
        return 0;
    bk_ctx_t ctx = {.be = be}, *g = &ctx;   /* the checked calls' error */
    size_t nl = (size_t)n * classes, nk = (size_t)n * k;
    char *d = cu_alloc(g, nl * 4 + (size_t)n * 4 + nk * 4 + (size_t)n * 4);
    int rc = -1;
    if (d) {
        float *dl = (float *)d, *dloss = (float *)(d + nl * 4 + (size_t)n * 4 + nk * 4);
        int32_t *dlab = (int32_t *)(d + nl * 4), *dtop = (int32_t *)(d + nl * 4 + (size_t)n * 4);
        rc = cu_upload(g, dl, logits, nl * 4);
        if (rc == 0 && labels)
            rc = cu_upload(g, dlab, labels, (size_t)n * 4);
        if (rc == 0)
            rc = cu_check(g, ck_topk_ce(cu_be(be)->stream, dl, n, classes, labels ? dlab : NULL,
                                        k, topk ? dtop : NULL, loss ? dloss : NULL),
                          "top-k kernel");
        if (rc == 0 && topk)
            rc = cu_download(g, topk, dtop, nk * 4);
        if (rc == 0 && loss)
            rc = cu_download(g, loss, dloss, (size_t)n * 4);
        cudaFree(d);
    }
    if (rc < 0)
        err_set(err, errlen, "%s", g->err);
    return rc;
}

/* ---------------------------------------------------------------- backend */

static void cb_destroy(backend_t *be)
{
    cuda_backend_t *cb = cu_be(be);
    cu_split_report(be);
    if (cb->nplan[0] || cb->nplan[1])   /* where a job's start-up went (gpud's first batch) */
        log_info("cuda backend: %u cuDNN graph plans in %.2fs (%u of them a shape's plan "
                 "shared, %u runtime-compiled in %.2fs, %u loaded serialized), %u legacy "
                 "algorithm choices in %.2fs", cb->nplan[0], cb->plan_s[0], cb->nplan_shared,
                 cb->nplan_rtc, cb->plan_rtc_s, cb->nplan_loaded, cb->nplan[1], cb->plan_s[1]);
    cu_tune_free(cb->tune);   /* its summary, and the plans file when it timed */
#ifdef DDPIPE_HAVE_NVJPEG
    cu_decode_destroy(&cb->dec);
#endif
    if (cb->stream)
        cudaStreamSynchronize(cb->stream);
    cuda_arena_destroy(&cb->arena);   /* the model freed its arenas first */
    cu_u8_free(cb);
    cudaFree(cb->ws);
    cudaFree(cb->scratch);
    cudaFree(cb->topk);
    cudaFree(cb->h16);
    if (cb->blas)
        cublasDestroy(cb->blas);
    cudaFree(cb->blas_ws);
    if (cb->dnn)
        cudnnDestroy(cb->dnn);
    if (cb->stream)
        cudaStreamDestroy(cb->stream);
    free(cb->algos);
    free(cb->fplans);   /* empty: each plan went with its last layer */
    free(cb->bf16_bufs);
    free(cb);
}

/* bk_ops_t.traffic: the counters since the last take */
static void cb_traffic(backend_t *be, bk_traffic_t *t)
{
    bk_traffic_t *c = &cu_be(be)->traffic;
    t->batch_in += c->batch_in;
    t->out += c->out;
    t->params += c->params;
    t->bn += c->bn;
    *c = (bk_traffic_t){0};
}

static const bk_ops_t CUDA_OPS = {
    .name = "cuda",
    .destroy = cb_destroy,
    .train = &CUDA_TKERNELS,
    .train16 = &CUDA_T16KERNELS,   /* bf16/fp16 training on 16-bit NHWC activations */
    .caps = BK_CAPS_CUDA | BK_CAP_FUSED_BF16 | BK_CAP_FUSED_FP16 | BK_CAP_ACT16_BF16 |
            BK_CAP_ACT16_FP16,
    .traffic = cb_traffic,
    .graphs = &CUDA_GRAPH_OPS,
    .timer = &CUDA_TIMER_OPS,
#ifdef DDPIPE_HAVE_NVJPEG
    .decode = &CUDA_DECODE_OPS,
#endif
};

int cuda_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();   /* clear: "no device" is not an error here */
        return 0;
    }
    return n;
}

const char *cuda_backend_device_name(const backend_t *be)
{
    return be && be->ops == &CUDA_OPS ? ((const cuda_backend_t *)be)->device_name : "";
}

static long env_long(const char *name, long dflt)
{
    const char *v = getenv(name);
    char *end;
    long x = v && *v ? strtol(v, &end, 10) : dflt;
    return v && *v && *end ? -1 : x;
}

/* cuBLAS's workspace: NVIDIA's recommendation for Hopper (cublasSetWorkspace) */
#define CU_BLAS_WS (32 << 20)

/* Handles, stream and the first device check; message in err. */
static int cb_start(cuda_backend_t *cb, char *err, size_t errlen)
{
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        err_set(err, errlen, "cuda backend: no CUDA device (%s): check nvidia-smi, the driver "
                 "and CUDA_VISIBLE_DEVICES, or use --backend cpu",
                 e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return -1;
    }
    char why[256];
    if ((cb->device = cuda_device_pick(getenv("DDPIPE_CUDA_DEVICE"), getenv("DDPIPE_LOCAL_RANK"),
                                       count, why, sizeof why)) < 0) {
        err_set(err, errlen, "cuda backend: %s", why);
        return -1;
    }
    struct cudaDeviceProp prop;
    if ((e = cudaSetDevice(cb->device)) != cudaSuccess ||
        (e = cudaGetDeviceProperties(&prop, cb->device)) != cudaSuccess ||
        (e = cudaStreamCreateWithFlags(&cb->stream, cudaStreamNonBlocking)) != cudaSuccess) {
        err_set(err, errlen, "cuda backend: starting device %d failed: %s; %s", cb->device,
                 cudaGetErrorString(e), cu_advice(e));
        return -1;
    }
    snprintf(cb->device_name, sizeof cb->device_name, "%s", prop.name);
    cudnnStatus_t ds = cudnnCreate(&cb->dnn);
    if (ds == CUDNN_STATUS_SUCCESS)
        ds = cudnnSetStream(cb->dnn, cb->stream);
    if (ds != CUDNN_STATUS_SUCCESS) {
        err_set(err, errlen, "cuda backend: cuDNN failed to start: %s (is libcudnn 9 installed "
                 "and on the loader path?)", cudnnGetErrorString(ds));
        return -1;
    }
    cublasStatus_t bs = cublasCreate(&cb->blas);
    if (bs == CUBLAS_STATUS_SUCCESS)
        bs = cublasSetStream(cb->blas, cb->stream);
    if (bs == CUBLAS_STATUS_SUCCESS)
        bs = cublasSetMathMode(cb->blas, cb->tf32 ? CUBLAS_TF32_TENSOR_OP_MATH
                                                  : CUBLAS_PEDANTIC_MATH);
    if (bs == CUBLAS_STATUS_SUCCESS && (e = cudaMalloc(&cb->blas_ws, CU_BLAS_WS)) != cudaSuccess) {
        err_set(err, errlen, "cuda backend: cudaMalloc of cuBLAS's workspace (%d MiB) failed: "
                 "%s; %s", CU_BLAS_WS >> 20, cudaGetErrorString(e), cu_advice(e));
        return -1;
    }
    if (bs == CUBLAS_STATUS_SUCCESS)
        bs = cublasSetWorkspace(cb->blas, cb->blas_ws, CU_BLAS_WS);
    if (bs != CUBLAS_STATUS_SUCCESS) {
        err_set(err, errlen, "cuda backend: cuBLAS failed to start: %s",
                 cublasGetStatusString(bs));
        return -1;
    }
    return 0;
}

backend_t *cuda_backend_new(int threads, char *err, size_t errlen)
{
    cuda_backend_t *cb = calloc(1, sizeof *cb);
    if (!cb) {
        err_set(err, errlen, "cuda backend: out of memory");
        return NULL;
    }
    cb->base.ops = &CUDA_OPS;
    cb->base.threads = threads;
    const char *prec = getenv("DDPIPE_CUDA_PRECISION"), *algo = getenv("DDPIPE_CUDA_ALGO");
    if (algo && *algo && strcmp(algo, "heuristic") != 0 && strcmp(algo, "find") != 0) {
        err_set(err, errlen, "cuda backend: DDPIPE_CUDA_ALGO=%s: heuristic (default: the same "
                 "choice in every process) or find (benchmarked)", algo);
        free(cb);
        return NULL;
    }
    cb->algo_find = algo && strcmp(algo, "find") == 0;
    long ws_mb = env_long("DDPIPE_CUDA_WORKSPACE_MB", 1024);
    if (prec && *prec && strcmp(prec, "fp32") != 0 && strcmp(prec, "tf32") != 0) {
        err_set(err, errlen, "cuda backend: DDPIPE_CUDA_PRECISION=%s: fp32 or tf32 (the float "
                 "math; bf16 and fp16 are the model's --precision: docs/CUDA.md)", prec);
        free(cb);
        return NULL;
    }
    if (ws_mb < 0 || ws_mb > (1l << 20)) {
        err_set(err, errlen, "cuda backend: DDPIPE_CUDA_WORKSPACE_MB must be a non-negative "
                 "integer");
        free(cb);
        return NULL;
    }
    cb->tf32 = prec && strcmp(prec, "tf32") == 0;
    cb->ws_cap = (size_t)ws_mb << 20;
    cb->split = cu_split_new();   /* DDPIPE_CUDA_PROFILE's backward split, or NULL */
    /* the model's parameters, gradients and optimizer state in device
     * memory: the kernels use them in place, the arena's ops and the
     * optimizer run on the backend's stream (cuda_arena.h) */
    if (cb_start(cb, err, errlen) < 0 || !(cb->arena = cuda_arena_new(cb->stream, err, errlen))) {
        cb_destroy(&cb->base);
        return NULL;
    }
    cb->base.arena = cuda_arena_ops(cb->arena);
    /* the cuDNN loaded, not only the one built against: a machine may hold
     * several (CUDA's, PyTorch's wheels), and their engines differ */
    size_t dnn = cudnnGetVersion();
    log_info("cuda backend: device %d (%s), %s, convolution algorithms by %s, cuDNN %zu.%zu.%zu "
             "loaded (built against %d.%d.%d)", cb->device, cb->device_name,
             cb->tf32 ? "tf32" : "fp32",
             cb->algo_find ? "benchmark (DDPIPE_CUDA_ALGO=find)" : "cuDNN heuristics",
             dnn / 10000, dnn / 100 % 100, dnn % 100, CUDNN_MAJOR, CUDNN_MINOR, CUDNN_PATCHLEVEL);
    cb->tune = cu_tune_new(cb->device_name, (long)dnn);   /* DDPIPE_CUDNN_PLANS / _TUNE */
    return &cb->base;
}
