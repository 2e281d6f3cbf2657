/* cuda_infer_kernels — the own kernels of the cuda backend's bf16 and fp16
 * inference plan (gpud/cuda/cuda_infer.c; docs/CUDA.md "bf16 eval on tensor
 * cores"), callable from C. Activations are bf16 in NHWC (channels last): element
 * (b, ch, y, x) of a (n, c, h, w) tensor at ((b * h + y) * w + x) * c + ch,
 * 2 bytes each (void * here: __nv_bfloat16 in the .cu). Parameters stay
 * fp32 device memory (the engine's folded copies, already bf16 values).
 * Each launcher enqueues on `s` and returns the launch status.
 *
 * Numbers: every kernel computes in fp32 from bf16 inputs (sums of pooling
 * in double, as gpud/cpu/ref_ops.c) and rounds its result once to bf16,
 * round-to-nearest-even (__float2bfloat16_rn, torch's .to(torch.bfloat16)
 * and gpud/bf16.c for finite values). Their CPU reference is the ref and cpu
 * backends' bf16 inference (docs/BF16.md), which test_cuda_bf16 compares
 * against. */
#ifndef DDP_CUDA_INFER_KERNELS_H
#define DDP_CUDA_INFER_KERNELS_H

#include <cuda_runtime.h>
#include <stddef.h>

#include "gpud/cuda/cuda_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* fp16 (every launcher takes it): the same kernel on fp16 (IEEE binary16,
 * __float2half_rn: torch's .to(torch.float16)) in bf16's place, for the
 * fp16 inference plan and training buffers (cuda_train16.c); 0: bf16. */
/* y (n, c, hw) bf16 NHWC = x (n, c, hw) float NCHW, rounded. */
cudaError_t ckb_from_nchw(cudaStream_t s, int fp16, const float *x, int n, int c, int hw,
                          void *y);
/* y (n, c, hw) bf16 NHWC = lut[ch * 256 + px] of uint8 NCHW pixels, rounded:
 * ckb_from_nchw of the floats the host would normalise them to. */
cudaError_t ckb_from_u8(cudaStream_t s, int fp16, const uint8_t *px, int n, int c, int hw,
                        const float *lut, void *y);
/* y float NCHW = x bf16 NHWC (exact). */
cudaError_t ckb_to_nchw(cudaStream_t s, int fp16, const void *x, int n, int c, int hw,
                        float *y);
/* y bf16 NCHW = x bf16 NHWC (a flatten in PyTorch's order). */
cudaError_t ckb_flatten(cudaStream_t s, int fp16, const void *x, int n, int c, int hw, void *y);
/* Weights [o, i, k] float (PyTorch's OIHW, k = kh*kw) -> y [op, k, ip] bf16
 * (cuDNN's NHWC filter), rounded; rows o >= o and columns >= i (channel
 * padding to op >= o, ip >= i) are zeros. A linear layer's [out, c*h*w]
 * weight with (i, k) = (c, h*w) becomes the order of its NHWC input. */
cudaError_t ckb_weights(cudaStream_t s, int fp16, const float *w, int o, int i, int k, int op,
                        int ip, void *y);
/* A stride-2 convolution's input and weights in space-to-depth form (the
 * stem's 7x7/2 over 3 channels as a 4x4/1 over 12, padded to cp = 16: the
 * same products, tensor-core tiles cuDNN runs several times faster).
 * ckb_s2d_shape: 1 when a conv of c input channels over h x w, kernel kh x
 * kw, stride sh x sw, padding ph, pw, output oh x ow, has that form (c <= 4,
 * stride 2, and DDPIPE_CUDA_S2D not 0), with s2d = {hs, ws, kh2, kw2}: the
 * form's input height and width and its kernel (stride 1, no padding).
 * ckb_s2d: y (n, hs, ws, cp) 16-bit NHWC, y[b][Y][X][(py * 2 + px) * c + ch]
 * = x[b][2Y + py - ph][2X + px - pw][ch] (x (n, h, w, c) 16-bit NHWC; zero
 * outside it and for channels >= 4c). ckb_weights_s2d: wy (o, kh2, kw2, cp)
 * 16-bit = w (o, c, kh, kw) fp32 (16-bit values) as the 2x2 blocks of
 * those channels: wy[oo][dy][dx][(py * 2 + px) * c + ch] =
 * w[oo][ch][2dy + py][2dx + px], zero past the kernel and for channels
 * >= 4c. Their backward (cuda_train16_kernels.h): ckb_s2d_back,
 * ckb_weights_back_s2d. */
int ckb_s2d_shape(int c, int h, int w, int kh, int kw, int sh, int sw, int ph, int pw, int oh,
                  int ow, int s2d[4]);
cudaError_t ckb_s2d(cudaStream_t s, int fp16, const void *x, int n, int h, int w, int c, int ph,
                    int pw, int hs, int ws, int cp, void *y);
cudaError_t ckb_weights_s2d(cudaStream_t s, int fp16, const float *w, int o, int c, int kh,
                            int kw, int kh2, int kw2, int cp, void *wy);
/* y (npix, cp) = x (npix, c) with channels [c, cp) zero (bf16 NHWC). */
cudaError_t ckb_pad(cudaStream_t s, int fp16, const void *x, size_t npix, int c, int cp,
                    void *y);
/* conv epilogue over count NHWC elements of c channels, x of xc >= c
 * channels (the conv's output, padded): v = x + bias[ch] (bias may be
 * NULL), then post in order (1 ReLU, 2 + res), y = bf16(v). y may be x
 * (in place, xc == c) or res (the sum accumulated into its residual). */
cudaError_t ckb_epilogue(cudaStream_t s, int fp16, void *y, const void *x, int xc,
                         const float *bias, size_t count, int c, ck_post_t post, const void *res);
/* linear output: y[b, o] = bf16(acc[b, o] + bias[o]) (bias may be NULL). */
cudaError_t ckb_linear_out(cudaStream_t s, int fp16, void *y, const float *acc,
                           const float *bias, int n, int out);
/* y = bf16(a + b), then ReLU if relu (y may alias a or b). */
cudaError_t ckb_add(cudaStream_t s, int fp16, void *y, const void *a, const void *b,
                    size_t count, int relu);
cudaError_t ckb_relu(cudaStream_t s, int fp16, void *y, const void *x, size_t count);
/* Pooling as ck_pool_fwd (p->nc = n * c planes) on NHWC bf16 of c channels.
 * win (max pooling, may be NULL): each output's choice, the window position
 * (a * kw + e) of its first maximum or CKB_NO_WIN, for ckb_pool_bwd. */
cudaError_t ckb_pool(cudaStream_t s, int fp16, const ck_pool_t *p, int c, const void *x,
                     void *y, uint8_t *win);

#ifdef __cplusplus
}
#endif
#endif
