/* cuda_backend — the "cuda" implementation of gpud/backend.h (cuDNN
 * convolutions, cuBLAS linear layers, own kernels for the rest; see
 * docs/CUDA.md). backend_new("cuda", ...) reaches cuda_backend_new when the
 * tree was configured with the CUDA toolkit and cuDNN (DDPIPE_HAVE_CUDA).
 *
 * Environment, read by cuda_backend_new:
 *   DDPIPE_CUDA_DEVICE     device ordinal (after CUDA_VISIBLE_DEVICES); default:
 *                          DDPIPE_LOCAL_RANK modulo the visible devices, else 0
 *                          (gpud/cuda_device.h: one GPU per local rank)
 *   DDPIPE_CUDA_PRECISION  fp32 (default: no TF32 anywhere) | tf32 (cuDNN and
 *                          cuBLAS may use TF32 tensor cores for float)
 *   DDPIPE_CUDA_WORKSPACE_MB  cap of the cuDNN workspace (default 1024) */
#ifndef DDP_CUDA_BACKEND_H
#define DDP_CUDA_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "gpud/backend.h"

/* threads is ignored (host threads are not the GPU's). NULL with the reason
 * in err when there is no usable device or a library fails to start. */
backend_t *cuda_backend_new(int threads, char *err, size_t errlen);

/* Number of CUDA devices this process can use; 0 when there is none or the
 * driver is missing (tests skip then). Never fails. */
int cuda_device_count(void);

/* Top-k and cross-entropy of logits on the device, exactly as
 * model_topk_ce (gpud/model.h): logits host (n * classes floats), labels
 * host (n) or NULL, topk (n*k) / loss (n) host outputs, either NULL. 0, or -1
 * with the reason in err. */
int cuda_topk_ce(backend_t *be, const float *logits, int n, int classes,
                 const int32_t *labels, int k, int32_t *topk, float *loss, char *err,
                 size_t errlen);

/* The name of the device the backend runs on ("NVIDIA H100 80GB HBM3"). */
const char *cuda_backend_device_name(const backend_t *be);

#endif
