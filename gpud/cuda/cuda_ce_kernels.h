/* cuda_ce_kernels — the cuda backend's cross-entropy and top-k kernels
 * (gpud/cuda/cuda_ce_kernels.cu), callable from C: logits device memory,
 * n samples of k (or classes) floats. Each launcher enqueues on s and
 * returns the launch status. */
#ifndef DDP_CUDA_CE_KERNELS_H
#define DDP_CUDA_CE_KERNELS_H

#include <cuda_runtime.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Softmax cross-entropy with label smoothing (ref_ce_fwd / ref_ce_bwd). */
cudaError_t ck_ce_fwd(cudaStream_t s, const float *logits, const int32_t *labels, int n,
                      int k, float eps, float *loss);
cudaError_t ck_ce_bwd(cudaStream_t s, const float *logits, const int32_t *labels, int n,
                      int k, float eps, const float *dloss, float *glogits);
/* model_topk_ce on the device: topk (n*k, may be NULL) best first, ties by
 * lower id, NaN first (torch.topk), -1 past the classes; loss (n, may be NULL) = lse -
 * logit[label] in double, NAN for a label outside 0..classes-1 or NULL labels. */
cudaError_t ck_topk_ce(cudaStream_t s, const float *logits, int n, int classes,
                       const int32_t *labels, int k, int32_t *topk, float *loss);

#ifdef __cplusplus
}
#endif
#endif
