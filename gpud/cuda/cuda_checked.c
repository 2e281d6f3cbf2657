/* cuda_checked — the cuda backend's checked calls, below every other file
 * of it: CUDA, cuDNN and cuBLAS statuses turned into the graph's error (with
 * what to do), the sticky failure, device allocations, counted host-device
 * copies, the scratch and the shared cuDNN workspace. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpud/cuda/cuda_priv.h"

/* ----------------------------------------------------------------- errors */

/* What to do about a failure, by its kind. */
const char *cu_advice(cudaError_t e)
{
    switch (e) {
    case cudaErrorMemoryAllocation:
        return "the GPU is out of memory: lower the batch / micro-batch, or stop other "
               "processes on the device (nvidia-smi)";
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice:
        return "no usable GPU: check nvidia-smi, the driver version and CUDA_VISIBLE_DEVICES";
    default:
        return "the CUDA context may be unusable now: restart the process (run with "
               "CUDA_LAUNCH_BLOCKING=1 to locate a failing kernel)";
    }
}

int cu_check(bk_ctx_t *g, cudaError_t e, const char *what)
{
    if (e == cudaSuccess)
        return 0;
    bk_ctx_fail(g, "%s failed: %s (%s); %s", what, cudaGetErrorName(e), cudaGetErrorString(e),
            cu_advice(e));
    return -1;
}

int cudnn_check(bk_ctx_t *g, cudnnStatus_t s, const char *what)
{
    if (s == CUDNN_STATUS_SUCCESS)
        return 0;
    char last[256] = "";
    cudnnGetLastErrorString(last, sizeof last);
    bk_ctx_fail(g, "cuDNN %s failed: %s%s%s; %s", what, cudnnGetErrorString(s), last[0] ? ": " : "",
            last, s == CUDNN_STATUS_ALLOC_FAILED
                      ? "the GPU is out of memory: lower the batch or DDPIPE_CUDA_WORKSPACE_MB"
                      : "check that libcudnn matches the headers it was built with "
                        "(CUDNN_LOGERR_DBG=1 CUDNN_LOGDEST_DBG=stderr logs the cause)");
    return -1;
}

int cublas_check(bk_ctx_t *g, cublasStatus_t s, const char *what)
{
    if (s == CUBLAS_STATUS_SUCCESS)
        return 0;
    bk_ctx_fail(g, "cuBLAS %s failed: %s (%s); %s", what, cublasGetStatusName(s),
            cublasGetStatusString(s),
            s == CUBLAS_STATUS_ALLOC_FAILED ? "the GPU is out of memory: lower the batch"
                                            : "restart the process; report the shapes if it "
                                              "persists");
    return -1;
}

void cu_note(backend_t *be, cudaError_t e, const char *what)
{
    cuda_backend_t *cb = cu_be(be);
    if (e == cudaSuccess || cb->failed)
        return;
    cb->failed = 1;
    snprintf(cb->err, sizeof cb->err, "%s failed: %s (%s); %s", what, cudaGetErrorName(e),
             cudaGetErrorString(e), cu_advice(e));
}

int cu_sticky(bk_ctx_t *g)
{
    cuda_backend_t *cb = cu_be(g->be);
    if (!cb->failed)
        return 0;
    bk_ctx_fail(g, "%s", cb->err);
    return -1;
}

void *cu_alloc(bk_ctx_t *g, size_t bytes)
{
    void *p = NULL;
    char what[96];
    snprintf(what, sizeof what, "cudaMalloc of %zu bytes", bytes);
    if (cu_check(g, cudaMalloc(&p, bytes ? bytes : 4), what) < 0)
        return NULL;
    if (cu_check(g, cudaMemsetAsync(p, 0, bytes ? bytes : 4, cu_be(g->be)->stream),
                 "cudaMemsetAsync") < 0) {
        cudaFree(p);
        return NULL;
    }
    return p;
}

int cu_upload(bk_ctx_t *g, void *dev, const void *host, size_t bytes)
{
    cudaStream_t s = cu_be(g->be)->stream;
    /* from pageable memory the call returns once the source is staged, so
     * the caller may reuse it at once; the copy itself runs in stream order */
    return cu_check(g, cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, s),
                    "copy to the GPU (cudaMemcpyAsync)");
}

int cu_download(bk_ctx_t *g, void *host, const void *dev, size_t bytes)
{
    cudaStream_t s = cu_be(g->be)->stream;
    if (cu_check(g, cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, s),
                 "copy from the GPU (cudaMemcpyAsync)") < 0)
        return -1;
    if (cu_check(g, cudaStreamSynchronize(s), "GPU work before a copy from the GPU") < 0)
        return -1;
    return cu_sticky(g);
}

void *cu_grow_be(backend_t *be, void **buf, size_t *cap, size_t bytes, const char *what)
{
    if (bytes <= *cap)
        return *buf;
    /* the old buffer may still be read by queued work */
    cudaError_t e = cudaStreamSynchronize(cu_be(be)->stream);
    if (e != cudaSuccess) {
        cu_note(be, e, what);
        return NULL;
    }
    cudaFree(*buf);
    *buf = NULL;
    *cap = 0;
    cu_be(be)->grow_gen++;
    e = cudaMalloc(buf, bytes);
    cu_note(be, e, what);
    if (e != cudaSuccess) {
        *buf = NULL;
        return NULL;
    }
    *cap = bytes;
    return *buf;
}

void *cu_scratch_be(backend_t *be, size_t bytes)
{
    cuda_backend_t *cb = cu_be(be);
    return cu_grow_be(be, &cb->scratch, &cb->scratch_size, bytes, "growing the scratch buffer");
}

void *cu_scratch(bk_ctx_t *g, size_t bytes)
{
    void *p = cu_scratch_be(g->be, bytes);
    if (!p)
        cu_sticky(g);
    return p;
}

int cu_upload_be(backend_t *be, void *dev, const void *host, size_t bytes)
{
    cudaError_t e = cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, cu_be(be)->stream);
    cu_note(be, e, "copy to the GPU (cudaMemcpyAsync)");
    return e == cudaSuccess ? 0 : -1;
}

int cu_download_be(backend_t *be, void *host, const void *dev, size_t bytes)
{
    cudaStream_t s = cu_be(be)->stream;
    cudaError_t e = cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, s);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(s);
    cu_note(be, e, "copy from the GPU");
    return e == cudaSuccess && !cu_be(be)->failed ? 0 : -1;
}

/* rc of a copy of bytes, counted in *count when it succeeded */
static int counted(int rc, uint64_t *count, size_t bytes)
{
    *count += rc == 0 ? bytes : 0;
    return rc;
}

int cu_up_n(bk_ctx_t *g, uint64_t *count, void *dev, const void *host, size_t bytes)
{
    return counted(cu_upload(g, dev, host, bytes), count, bytes);
}

int cu_down_n(bk_ctx_t *g, uint64_t *count, void *host, const void *dev, size_t bytes)
{
    return counted(cu_download(g, host, dev, bytes), count, bytes);
}

int cu_up_be_n(backend_t *be, uint64_t *count, void *dev, const void *host, size_t bytes)
{
    return counted(cu_upload_be(be, dev, host, bytes), count, bytes);
}

int cu_down_be_n(backend_t *be, uint64_t *count, void *host, const void *dev, size_t bytes)
{
    return counted(cu_download_be(be, host, dev, bytes), count, bytes);
}

double *cu_sums_scratch(backend_t *be, uint64_t *count, size_t rows, int parts, size_t c,
                        const float *center, const float **dcen)
{
    size_t nd = rows * (1 + (size_t)parts);
    char *d = cu_scratch_be(be, nd * sizeof(double) + c * sizeof(float));
    float *cen = d && center ? (float *)(d + nd * sizeof(double)) : NULL;
    *dcen = cen;
    if (!d || (cen && cu_up_be_n(be, count, cen, center, c * sizeof(float)) < 0))
        return NULL;
    return (double *)d;
}

float *cu_vectors_up(backend_t *be, uint64_t *count, size_t c, int k, const float *const *v)
{
    float *d = cu_scratch_be(be, (size_t)k * c * sizeof(float));
    for (int i = 0; d && i < k; i++)
        if (cu_up_be_n(be, count, d + (size_t)i * c, v[i], c * sizeof(float)) < 0)
            return NULL;
    return d;
}

int cu_workspace(bk_ctx_t *g, size_t bytes)
{
    cuda_backend_t *cb = cu_be(g->be);
    if (bytes <= cb->ws_size)
        return 0;
    if (cu_check(g, cudaStreamSynchronize(cb->stream), "GPU work before growing the workspace") < 0)
        return -1;
    cudaFree(cb->ws);
    cb->ws = NULL;
    cb->ws_size = 0;
    if (!(cb->ws = cu_alloc(g, bytes)))
        return -1;
    cb->ws_size = bytes;
    return 0;
}
