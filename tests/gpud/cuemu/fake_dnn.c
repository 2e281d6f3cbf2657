/* fake_dnn — the part of cuDNN and cuBLAS the cuda backend calls, computed on
 * the CPU by gpud's reference kernels, so that the backend's host code
 * (gpud/cuda/cuda_backend.c, cuda_train.c, cuda_infer.c, cuda_optim.c) runs
 * whole on the kernel emulator (cuemu.h) and the GPU tests can run on a
 * machine without a GPU (tests/gpud/cuda/CMakeLists.txt: the *_emu tests).
 *
 * Legacy convolutions (forward, backward data, backward filter; NCHW or NHWC,
 * float, bf16 or fp16, alpha 1 / beta 0 as the backend uses them) by ref_conv2d and
 * its backward, in fp32 with double sums, a bf16 output rounded as gpud/bf16.c
 * does (cuDNN's own algorithms sum in other orders: the tests' tolerances
 * cover that); the algorithm queries offer one deterministic algorithm in
 * tensor-op and in FMA math. The graph (backend) API is fake_dnn_graph.c.
 * cuBLAS: column-major Sgemm and GemmEx (float or bf16 inputs, float or bf16
 * output, fp32 sums in double). What this cannot show: cuDNN's and cuBLAS's
 * own choices, speed, and any rule of theirs the fake does not enforce. */
#include <cublas_v2.h>
#include <cudnn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fake_dnn_layout.h"
#include "gpud/cpu/ref_ops.h"

struct cudnnContext {
    cudaStream_t s;
};
struct cudnnTensorStruct {
    cudnnTensorFormat_t fmt;
    cudnnDataType_t dt;
    int n, c, h, w;
};
struct cudnnFilterStruct {
    cudnnTensorFormat_t fmt;
    cudnnDataType_t dt;
    int k, c, h, w;
};
struct cudnnConvolutionStruct {
    int ph, pw, sh, sw, dh, dw;
    cudnnMathType_t math;
};
struct cublasContext {
    cudaStream_t s;
};

/* ---------------------------------------------------------------- helpers */

static void dims_t(const struct cudnnTensorStruct *t, int d[4])
{
    d[0] = t->n, d[1] = t->c, d[2] = t->h, d[3] = t->w;
}

static void dims_f(const struct cudnnFilterStruct *f, int d[4])
{
    d[0] = f->k, d[1] = f->c, d[2] = f->h, d[3] = f->w;
}

static int unit(const void *alpha, const void *beta)
{
    return *(const float *)alpha == 1.0f && *(const float *)beta == 0.0f;
}

/* cuemu.cc: while a stream capture is open, calls are recorded (arg's bytes
 * copied) and run at the graph's launch */
int cuemu_capturing(void);
void cuemu_record(void (*fn)(void *), const void *arg, size_t bytes);
void cuemu_trace(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ------------------------------------------------------- cuDNN: the basics */

size_t cudnnGetVersion(void)
{
    return CUDNN_VERSION;   /* the headers' */
}

cudnnStatus_t cudnnCreate(cudnnHandle_t *h)
{
    *h = calloc(1, sizeof **h);
    return *h ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_ALLOC_FAILED;
}

cudnnStatus_t cudnnDestroy(cudnnHandle_t h)
{
    free(h);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetStream(cudnnHandle_t h, cudaStream_t s)
{
    h->s = s;
    return CUDNN_STATUS_SUCCESS;
}

const char *cudnnGetErrorString(cudnnStatus_t s)
{
    return s == CUDNN_STATUS_SUCCESS ? "CUDNN_STATUS_SUCCESS" : "CUDNN_STATUS_NOT_SUPPORTED (fake)";
}

void cudnnGetLastErrorString(char *message, size_t max_size)
{
    if (max_size)
        message[0] = '\0';
}

cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t *d)
{
    *d = calloc(1, sizeof **d);
    return *d ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_ALLOC_FAILED;
}

cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t d)
{
    free(d);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t d, cudnnTensorFormat_t f,
                                         cudnnDataType_t dt, int n, int c, int h, int w)
{
    if (n < 1 || c < 1 || h < 1 || w < 1 ||
        (dt != CUDNN_DATA_FLOAT && dt != CUDNN_DATA_BFLOAT16 && dt != CUDNN_DATA_HALF) ||
        (f != CUDNN_TENSOR_NCHW && f != CUDNN_TENSOR_NHWC))
        return CUDNN_STATUS_BAD_PARAM;
    *d = (struct cudnnTensorStruct){f, dt, n, c, h, w};
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t *d)
{
    *d = calloc(1, sizeof **d);
    return *d ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_ALLOC_FAILED;
}

cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t d)
{
    free(d);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t d, cudnnDataType_t dt,
                                         cudnnTensorFormat_t f, int k, int c, int h, int w)
{
    if (k < 1 || c < 1 || h < 1 || w < 1 ||
        (dt != CUDNN_DATA_FLOAT && dt != CUDNN_DATA_BFLOAT16 && dt != CUDNN_DATA_HALF) ||
        (f != CUDNN_TENSOR_NCHW && f != CUDNN_TENSOR_NHWC))
        return CUDNN_STATUS_BAD_PARAM;
    *d = (struct cudnnFilterStruct){f, dt, k, c, h, w};
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t *d)
{
    *d = calloc(1, sizeof **d);
    return *d ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_ALLOC_FAILED;
}

cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t d)
{
    free(d);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t d, int ph, int pw,
                                              int u, int v, int dh, int dw,
                                              cudnnConvolutionMode_t mode,
                                              cudnnDataType_t compute)
{
    if (mode != CUDNN_CROSS_CORRELATION || dh != 1 || dw != 1 || compute != CUDNN_DATA_FLOAT)
        return CUDNN_STATUS_NOT_SUPPORTED;   /* the reference does none of these */
    d->ph = ph, d->pw = pw, d->sh = u, d->sw = v, d->dh = dh, d->dw = dw;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t d, cudnnMathType_t m)
{
    d->math = m;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolution2dForwardOutputDim(const cudnnConvolutionDescriptor_t cd,
                                                    const cudnnTensorDescriptor_t x,
                                                    const cudnnFilterDescriptor_t w, int *n,
                                                    int *c, int *h, int *wd)
{
    *n = x->n;
    *c = w->k;
    *h = (x->h + 2 * cd->ph - w->h) / cd->sh + 1;
    *wd = (x->w + 2 * cd->pw - w->w) / cd->sw + 1;
    return CUDNN_STATUS_SUCCESS;
}

/* ------------------------------------------ cuDNN: algorithms and the convs */

/* one algorithm, offered in tensor-op math and in FMA math */
#define OFFER(perf, req, got)                                                            \
    do {                                                                                 \
        int n_ = req < 2 ? req : 2;                                                      \
        for (int i_ = 0; i_ < n_; i_++) {                                                \
            memset(&perf[i_], 0, sizeof perf[i_]);                                       \
            perf[i_].status = CUDNN_STATUS_SUCCESS;                                      \
            perf[i_].determinism = CUDNN_DETERMINISTIC;                                  \
            perf[i_].mathType = i_ == 0 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH;         \
        }                                                                                \
        *got = n_;                                                                       \
    } while (0)

cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(cudnnHandle_t h,
                                                     const cudnnTensorDescriptor_t x,
                                                     const cudnnFilterDescriptor_t w,
                                                     const cudnnConvolutionDescriptor_t c,
                                                     const cudnnTensorDescriptor_t y, int req,
                                                     int *got,
                                                     cudnnConvolutionFwdAlgoPerf_t *perf)
{
    (void)h, (void)x, (void)w, (void)c, (void)y;
    OFFER(perf, req, got);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnFindConvolutionForwardAlgorithm(cudnnHandle_t h,
                                                   const cudnnTensorDescriptor_t x,
                                                   const cudnnFilterDescriptor_t w,
                                                   const cudnnConvolutionDescriptor_t c,
                                                   const cudnnTensorDescriptor_t y, int req,
                                                   int *got, cudnnConvolutionFwdAlgoPerf_t *perf)
{
    return cudnnGetConvolutionForwardAlgorithm_v7(h, x, w, c, y, req, got, perf);
}

cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithm_v7(
    cudnnHandle_t h, const cudnnFilterDescriptor_t w, const cudnnTensorDescriptor_t dy,
    const cudnnConvolutionDescriptor_t c, const cudnnTensorDescriptor_t dx, int req, int *got,
    cudnnConvolutionBwdDataAlgoPerf_t *perf)
{
    (void)h, (void)w, (void)dy, (void)c, (void)dx;
    OFFER(perf, req, got);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnFindConvolutionBackwardDataAlgorithm(
    cudnnHandle_t h, const cudnnFilterDescriptor_t w, const cudnnTensorDescriptor_t dy,
    const cudnnConvolutionDescriptor_t c, const cudnnTensorDescriptor_t dx, int req, int *got,
    cudnnConvolutionBwdDataAlgoPerf_t *perf)
{
    return cudnnGetConvolutionBackwardDataAlgorithm_v7(h, w, dy, c, dx, req, got, perf);
}

cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithm_v7(
    cudnnHandle_t h, const cudnnTensorDescriptor_t x, const cudnnTensorDescriptor_t dy,
    const cudnnConvolutionDescriptor_t c, const cudnnFilterDescriptor_t dw, int req, int *got,
    cudnnConvolutionBwdFilterAlgoPerf_t *perf)
{
    (void)h, (void)x, (void)dy, (void)c, (void)dw;
    OFFER(perf, req, got);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnFindConvolutionBackwardFilterAlgorithm(
    cudnnHandle_t h, const cudnnTensorDescriptor_t x, const cudnnTensorDescriptor_t dy,
    const cudnnConvolutionDescriptor_t c, const cudnnFilterDescriptor_t dw, int req, int *got,
    cudnnConvolutionBwdFilterAlgoPerf_t *perf)
{
    return cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, x, dy, c, dw, req, got, perf);
}

/* One legacy convolution call, kept whole so a capture can replay it. */
typedef struct {
    int kind;   /* 0 forward, 1 backward data, 2 backward filter */
    struct cudnnTensorStruct x, y;   /* copies: a replay must not need the caller's */
    struct cudnnFilterStruct w;
    struct cudnnConvolutionStruct c;
    const void *src, *wt;   /* forward: x, w; data: dy, w; filter: x, dy */
    void *dst;              /* y, dx or dw */
} conv_call_t;

static void conv_run(void *arg)
{
    const conv_call_t *a = arg;
    int dx[4], dw[4], dy[4];
    dims_t(&a->x, dx), dims_f(&a->w, dw), dims_t(&a->y, dy);
    static const char *kinds[] = {"forward", "backward data", "backward filter"};
    cuemu_trace("cudnn conv %s x [%d,%d,%d,%d] w [%d,%d,%d,%d]", kinds[a->kind], dx[0], dx[1],
                dx[2], dx[3], dw[0], dw[1], dw[2], dw[3]);
    size_t nx = (size_t)dx[0] * dx[1] * dx[2] * dx[3], nw = (size_t)dw[0] * dw[1] * dw[2] * dw[3];
    size_t ny = (size_t)dy[0] * dy[1] * dy[2] * dy[3];
    float *fx = a->kind == 1 ? malloc(nx * sizeof *fx) : to_nchw(a->src, a->x.fmt, a->x.dt, dx);
    float *fw = a->kind == 2 ? malloc(nw * sizeof *fw) : to_nchw(a->wt, a->w.fmt, a->w.dt, dw);
    float *fy = a->kind == 0 ? malloc(ny * sizeof *fy)
                             : to_nchw(a->kind == 1 ? a->src : a->wt, a->y.fmt, a->y.dt, dy);
    if (!fx || !fw || !fy)
        abort();   /* a test's emulator out of memory: nothing to report it to */
    const struct cudnnConvolutionStruct *c = &a->c;
    if (a->kind == 0) {
        ref_conv2d(fx, dx[0], dx[1], dx[2], dx[3], fw, NULL, dw[0], dw[2], dw[3], c->sh, c->sw,
                   c->ph, c->pw, fy, dy[2], dy[3]);
        fake_sum_order(fy, ny);
        from_nchw(a->dst, a->y.fmt, a->y.dt, dy, fy);
    } else if (a->kind == 1) {
        ref_conv2d_bwd_data(fy, dx[0], dx[1], dx[2], dx[3], fw, dw[0], dw[2], dw[3], c->sh, c->sw,
                            c->ph, c->pw, fx, dy[2], dy[3]);
        fake_sum_order(fx, nx);
        from_nchw(a->dst, a->x.fmt, a->x.dt, dx, fx);
    } else {
        ref_conv2d_bwd_weights(fx, dx[0], dx[1], dx[2], dx[3], fy, dw[0], dw[2], dw[3], c->sh,
                               c->sw, c->ph, c->pw, fw, NULL, dy[2], dy[3]);
        fake_sum_order(fw, nw);
        from_nchw(a->dst, a->w.fmt, a->w.dt, dw, fw);
    }
    free(fx), free(fw), free(fy);
}

static cudnnStatus_t conv_call(conv_call_t *a, const void *alpha, const void *beta)
{
    if (!unit(alpha, beta) || a->x.c != a->w.c || a->y.c != a->w.k || a->x.n != a->y.n)
        return CUDNN_STATUS_BAD_PARAM;
    if (cuemu_capturing())
        cuemu_record(conv_run, a, sizeof *a);
    else
        conv_run(a);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t h, const void *alpha,
                                      const cudnnTensorDescriptor_t xd, const void *x,
                                      const cudnnFilterDescriptor_t wd, const void *w,
                                      const cudnnConvolutionDescriptor_t cd,
                                      cudnnConvolutionFwdAlgo_t algo, void *ws, size_t wss,
                                      const void *beta, const cudnnTensorDescriptor_t yd,
                                      void *y)
{
    (void)h, (void)algo, (void)ws, (void)wss;
    conv_call_t a = {0, *xd, *yd, *wd, *cd, x, w, y};
    return conv_call(&a, alpha, beta);
}

cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t h, const void *alpha,
                                           const cudnnFilterDescriptor_t wd, const void *w,
                                           const cudnnTensorDescriptor_t dyd, const void *dy,
                                           const cudnnConvolutionDescriptor_t cd,
                                           cudnnConvolutionBwdDataAlgo_t algo, void *ws,
                                           size_t wss, const void *beta,
                                           const cudnnTensorDescriptor_t dxd, void *dx)
{
    (void)h, (void)algo, (void)ws, (void)wss;
    conv_call_t a = {1, *dxd, *dyd, *wd, *cd, dy, w, dx};
    return conv_call(&a, alpha, beta);
}

cudnnStatus_t cudnnConvolutionBackwardFilter(cudnnHandle_t h, const void *alpha,
                                             const cudnnTensorDescriptor_t xd, const void *x,
                                             const cudnnTensorDescriptor_t dyd, const void *dy,
                                             const cudnnConvolutionDescriptor_t cd,
                                             cudnnConvolutionBwdFilterAlgo_t algo, void *ws,
                                             size_t wss, const void *beta,
                                             const cudnnFilterDescriptor_t dwd, void *dw)
{
    (void)h, (void)algo, (void)ws, (void)wss;
    conv_call_t a = {2, *xd, *dyd, *dwd, *cd, x, dy, dw};
    return conv_call(&a, alpha, beta);
}

/* ------------------------------------------------------------------ cuBLAS */

cublasStatus_t cublasCreate_v2(cublasHandle_t *h)
{
    *h = calloc(1, sizeof **h);
    return *h ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_ALLOC_FAILED;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t h)
{
    free(h);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t h, cudaStream_t s)
{
    h->s = s;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t m)
{
    (void)h, (void)m;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t h, void *ws, size_t bytes)
{
    (void)h, (void)ws, (void)bytes;
    return CUBLAS_STATUS_SUCCESS;
}

const char *cublasGetStatusName(cublasStatus_t s)
{
    return s == CUBLAS_STATUS_SUCCESS ? "CUBLAS_STATUS_SUCCESS" : "CUBLAS_STATUS_NOT_SUPPORTED";
}

const char *cublasGetStatusString(cublasStatus_t s)
{
    return s == CUBLAS_STATUS_SUCCESS ? "success" : "not supported (fake)";
}

/* column-major C = alpha op(A) op(B) + beta C, element accessors by type */
static cudnnDataType_t dnn_type(cudaDataType t)
{
    return t == CUDA_R_16BF ? CUDNN_DATA_BFLOAT16 : t == CUDA_R_16F ? CUDNN_DATA_HALF
                                                                     : CUDNN_DATA_FLOAT;
}

static float el(const void *p, cudaDataType t, size_t i)
{
    return get(p, dnn_type(t), i);
}

typedef struct {
    cublasOperation_t ta, tb;
    int m, n, k, lda, ldb, ldc;
    float alpha, beta;
    const void *a, *b;
    void *c;
    cudaDataType at, bt, ct;
} gemm_call_t;

static void gemm_run(void *arg)
{
    const gemm_call_t *g = arg;
    cuemu_trace("cublas gemm m %d n %d k %d", g->m, g->n, g->k);
    for (int j = 0; j < g->n; j++)
        for (int i = 0; i < g->m; i++) {
            double s = 0.0;
            for (int l = 0; l < g->k; l++) {
                size_t ai = g->ta == CUBLAS_OP_N ? (size_t)l * g->lda + i : (size_t)i * g->lda + l;
                size_t bi = g->tb == CUBLAS_OP_N ? (size_t)j * g->ldb + l : (size_t)l * g->ldb + j;
                s += (double)el(g->a, g->at, ai) * el(g->b, g->bt, bi);
            }
            size_t ci = (size_t)j * g->ldc + i;
            float old = g->beta != 0.0f ? el(g->c, g->ct, ci) : 0.0f;
            put(g->c, dnn_type(g->ct), ci, (float)(g->alpha * s) + g->beta * old);
        }
}

static cublasStatus_t gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                           float alpha, const void *a, cudaDataType at_, int lda, const void *b,
                           cudaDataType bt, int ldb, float beta, void *c, cudaDataType ct, int ldc)
{
    if ((ta != CUBLAS_OP_N && ta != CUBLAS_OP_T) || (tb != CUBLAS_OP_N && tb != CUBLAS_OP_T))
        return CUBLAS_STATUS_NOT_SUPPORTED;
    cudaDataType ok[3] = {CUDA_R_32F, CUDA_R_16BF, CUDA_R_16F}, ts[3] = {at_, bt, ct};
    for (int i = 0; i < 3; i++)
        if (ts[i] != ok[0] && ts[i] != ok[1] && ts[i] != ok[2])
            return CUBLAS_STATUS_NOT_SUPPORTED;   /* a type the fake does not read */
    gemm_call_t g = {ta, tb, m, n, k, lda, ldb, ldc, alpha, beta, a, b, c, at_, bt, ct};
    if (cuemu_capturing())
        cuemu_record(gemm_run, &g, sizeof g);
    else
        gemm_run(&g);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSgemm_v2(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,
                              int m, int n, int k, const float *alpha, const float *a, int lda,
                              const float *b, int ldb, const float *beta, float *c, int ldc)
{
    (void)h;
    return gemm(ta, tb, m, n, k, *alpha, a, CUDA_R_32F, lda, b, CUDA_R_32F, ldb, *beta, c,
                CUDA_R_32F, ldc);
}

cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,
                            int m, int n, int k, const void *alpha, const void *a,
                            cudaDataType at_, int lda, const void *b, cudaDataType bt, int ldb,
                            const void *beta, void *c, cudaDataType ct, int ldc,
                            cublasComputeType_t compute, cublasGemmAlgo_t algo)
{
    (void)h, (void)algo;
    if (compute != CUBLAS_COMPUTE_32F && compute != CUBLAS_COMPUTE_32F_FAST_TF32)
        return CUBLAS_STATUS_NOT_SUPPORTED;
    return gemm(ta, tb, m, n, k, *(const float *)alpha, a, at_, lda, b, bt, ldb,
                *(const float *)beta, c, ct, ldc);
}
