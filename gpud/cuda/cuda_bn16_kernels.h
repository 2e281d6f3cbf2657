/* cuda_bn16_kernels — training BatchNorm on bf16 or fp16 NHWC buffers
 * (cuda_train16.c's bn_train_*; layout and rounding as
 * cuda_train16_kernels.h), callable from C, each launcher's fp16 picking
 * the format (0: bf16). The fp32 kernels' arithmetic (ck_chan_sums,
 * ck_bn_apply, ck_bn_grad_sums, ck_bn_grad_apply: bn_math.h) with each
 * output rounded once:
 *   ckb_sum_parts  the slices a channel's cnt values are summed in (the
 *                  partials: ckb_sum_parts(cnt) per channel and sum);
 *   ckb_chan_sums  out[c] = sum x, or sum (x - center)^2, in double: each
 *                  slice's pixels strided over 8 rows, each row's partial
 *                  in pixel order, the rows in order, then the slices
 *                  (k16_sum_slices: lane l of 32 adds slices l, l + 32,
 *                  ... in order, then the lanes in order): an order
 *                  fixed by the shape, the same bits in every process,
 *                  whichever threads hold a channel; another order than
 *                  the NCHW kernel's, equal after rounding to float but
 *                  for a sum within 1e-16 of a float tie;
 *   ckb_bn_apply   y = bf16(normalised x * gamma + beta), ReLU'd if relu;
 *                  with res (the residual block's tail fused, tape_fuse.c)
 *                  that value plus res as ckb_add sums it, then the ReLU;
 *                  with relu and mask (NULL: none), also y's signs as bits
 *                  (bit l of byte (pixel * c + ch) / 8: channel ch + l's
 *                  output > 0), on the 8-channel path only: *masked (when
 *                  not NULL) says whether they were written;
 *   ckb_bn_grad_sums   out[0, c) = sum dy', out[c, 2c) = sum dy' (x - center),
 *                  dy' = gy, or gy where y > 0 (y non-NULL: the fused ReLU);
 *                  with gout, dy' also stored there as ckb_relu_bwd would
 *                  (the block end's ReLU backward fused, tape_fuse.c);
 *   ckb_bn_grad_apply  gx = bf16(scale dy' + a (x - center) + b);
 *   (ckb_bn_grad, ckb_bn_grad_apply: with y, a mask ckb_bn_apply wrote for
 *                  that y is read in place of y where they take 8 channels
 *                  a thread, y elsewhere: the same dy'; NULL: y)
 *   ckb_bn_stats   a training BatchNorm's statistics: stat[0, c) = the
 *                  mean (ckb_chan_sums, then ck_bn_stat), stat[c, 2c) the
 *                  variance about it, and the running statistics rm, rv
 *                  updated as ck_bn_running does (momentum, unbias): the
 *                  same bits as those five launches, in four (sums: 2c
 *                  doubles, the sums);
 *   ckb_bn_grad    ckb_bn_grad_sums then ck_bn_grad_finish's
 *                  coefficients (ggamma, gbeta, coef: 3c), the same bits,
 *                  in two launches (sums as ckb_bn_grad_sums' out, its
 *                  second half sum dy' xhat as the finish leaves it);
 *                  gy2 (with gout; NULL: none): gy's last term, dy' made
 *                  from gy + gy2 as ckb_acc adds them (the tape's fold,
 *                  tape_fuse.c), gy itself unchanged.
 * part: ckb_sum_parts(n * hw) doubles per output sum (slice-major). Each enqueues on s
 * and returns the launch status; 16-byte loads of 8 channels where c is a
 * multiple of 8 and the buffers 16-byte aligned (the same bits). */
#ifndef DDP_CUDA_BN16_KERNELS_H
#define DDP_CUDA_BN16_KERNELS_H

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

int ckb_sum_parts(size_t cnt);
cudaError_t ckb_chan_sums(cudaStream_t s, int fp16, const void *x, int npix, int c,
                          const float *center, double *out, double *part);
cudaError_t ckb_bn_apply(cudaStream_t s, int fp16, void *y, const void *x, int npix, int c,
                         const float *gamma, const float *beta, const float *mean,
                         const float *var, float eps, int relu, const void *res, uint8_t *mask,
                         int *masked);
cudaError_t ckb_bn_grad_sums(cudaStream_t s, int fp16, const void *x, const void *y,
                             const void *gy, void *gout, int npix, int c, const float *center,
                             double *out, double *part);
cudaError_t ckb_bn_grad_apply(cudaStream_t s, int fp16, void *gx, const void *x, const void *y,
                              const uint8_t *mask, const void *gy, int npix, int c,
                              const float *center, const float *scale, const float *a,
                              const float *b);
cudaError_t ckb_bn_stats(cudaStream_t s, int fp16, const void *x, int npix, int c, double count,
                         float *stat, float *rm, float *rv, double momentum, double unbias,
                         double *sums, double *part);
cudaError_t ckb_bn_grad(cudaStream_t s, int fp16, const void *x, const void *y,
                        const uint8_t *mask, const void *gy, const void *gy2, void *gout,
                        int npix, int c, const float *center, const float *gamma,
                        const float *var, float eps, double count, float *ggamma, float *gbeta,
                        float *coef, double *sums, double *part);

#ifdef __cplusplus
}
#endif
#endif
