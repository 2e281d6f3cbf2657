/* cuda_train16_kernels — the own kernels of training on bf16 or fp16 NHWC
 * buffers (gpud/cuda/cuda_train16.c; docs/CUDA.md "bf16 training"),
 * callable from C; each launcher's fp16 picks the format (0: bf16), as in
 * cuda_infer_kernels.h, whose layout and numbers these share (and whose
 * conversions, add, ReLU and pooling forward the training table uses too):
 * element
 * (b, ch, y, x) of (n, c, h, w) at ((b * h + y) * w + x) * c + ch, 2 bytes
 * each, computed in fp32 from bf16 inputs and rounded once. Each launcher
 * enqueues on `s` and returns the launch status. CPU references: the fp32
 * kernels of cuda_kernels.cu followed by the engine's rounding (the tape's
 * bf16 rounding points), which test_half_store compares against bit for
 * bit on the kernel emulator. */
#ifndef DDP_CUDA_TRAIN16_KERNELS_H
#define DDP_CUDA_TRAIN16_KERNELS_H

#include <cuda_runtime.h>
#include <stddef.h>

#include "gpud/cuda/cuda_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* y = bf16(y + x) over count elements (any layout: element-wise). */
cudaError_t ckb_acc(cudaStream_t s, int fp16, void *y, const void *x, size_t count);
/* gx = gy where y > 0, else 0 (exact). */
cudaError_t ckb_relu_bwd(cudaStream_t s, int fp16, void *gx, const void *y, const void *gy,
                         size_t count);
/* concat: y (npix, cy) channels [off, off + cx) = x (npix, cx) (to_y),
 * else x = that slice; 2-byte moves, either format. */
cudaError_t ckb_concat(cudaStream_t s, void *y, int cy, void *x, size_t npix, int cx, int off,
                       int to_y);
/* y (n, c, hw) NHWC = x (n, c*hw) in PyTorch's flatten order: ckb_flatten's
 * inverse (a flatten's backward). */
cudaError_t ckb_unflatten(cudaStream_t s, const void *x, int n, int c, int hw, void *y);
/* y = x * mask / (1 - p) with ck_dropout's mask (keys[b]: sample b's key,
 * the logical NCHW index hashed), the product rounded once; p 0: a copy. */
cudaError_t ckb_dropout(cudaStream_t s, int fp16, void *y, const void *x, int n, int c, int hw,
                        float p, uint32_t op, const uint64_t *keys);
/* Pooling backward (ck_pool_bwd's windows and order; p->nc = n * c planes)
 * on NHWC bf16 of c channels: gx from gy, x the forward's input. win (max
 * pooling, may be NULL): the forward's choices (ckb_pool), read instead of
 * finding each covering window's maximum again; the same result. */
cudaError_t ckb_pool_bwd(cudaStream_t s, int fp16, const ck_pool_t *p, int c, const void *x,
                         const void *gy, void *gx, const uint8_t *win);
/* A bf16 NHWC filter's gradient dw [o, k, ip] (k = kh * kw; input
 * channels padded to ip >= i) as PyTorch's OIHW floats gw [o, i, k]
 * (exact; the padding's columns dropped). */
cudaError_t ckb_weights_back(cudaStream_t s, int fp16, const void *dw, int o, int i, int k,
                             int ip, float *gw);
/* The space-to-depth form's backward (ckb_s2d, cuda_infer_kernels.h):
 * gx (n, h, w, c) 16-bit NHWC gathers its one element of the form's input
 * gradient dxs (n, hs, ws, cp): gx[b][yy][xx][ch] = dxs[b][(yy + ph) / 2]
 * [(xx + pw) / 2][(((yy + ph) % 2) * 2 + (xx + pw) % 2) * c + ch] (exact);
 * gw (o, c, kh, kw) fp32 gathers its one element of the form's filter
 * gradient dws (o, kh2, kw2, cp): gw[oo][ch][i][j] = dws[oo][i / 2][j / 2]
 * [((i % 2) * 2 + j % 2) * c + ch] (exact). */
cudaError_t ckb_s2d_back(cudaStream_t s, int fp16, const void *dxs, int n, int h, int w, int c,
                         int ph, int pw, int hs, int ws, int cp, void *gx);
cudaError_t ckb_weights_back_s2d(cudaStream_t s, int fp16, const void *dws, int o, int c, int kh,
                                 int kw, int kh2, int kw2, int cp, float *gw);
/* y (npix, c) = the first c channels of x (npix, cp): ckb_pad's inverse. */
cudaError_t ckb_unpad(cudaStream_t s, int fp16, const void *x, size_t npix, int c, int cp,
                      void *y);

#ifdef __cplusplus
}
#endif
#endif
