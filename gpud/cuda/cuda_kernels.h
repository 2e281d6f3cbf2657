/* cuda_kernels — the cuda backend's own kernels (gpud/cuda/cuda_kernels.cu),
 * callable from C. Every tensor is device memory, NCHW float unless said
 * otherwise. Each launcher enqueues on `s` and returns the launch status
 * (cudaGetLastError); execution errors surface at the next synchronisation.
 *
 * The kernels follow gpud/cpu/ref_ops.c op for op (double accumulators for
 * reductions, PyTorch's pooling windows and tie rules, the same dropout hash)
 * so that the cuda backend agrees with the CPU reference to float rounding.
 * The optimizer's kernels are cuda_optim_kernels.h's. */
#ifndef DDP_CUDA_KERNELS_H
#define DDP_CUDA_KERNELS_H

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CK_MAX_POST 4
/* The epilogue of a convolution: y = conv + bias[c], then post[i] in order:
 * 1 = ReLU, 2 = + res (values as bk_postop_t). */
typedef struct {
    int n_post;
    int post[CK_MAX_POST];
} ck_post_t;

/* y[n, c, hw] = lut[c][px[n, c, hw]] (lut: c x 256 floats, the normalised
 * value of each byte, computed on the host exactly as model.c does). */
cudaError_t ck_u8_normalize(cudaStream_t s, const uint8_t *px, int n, int c, int hw,
                            const float *lut, float *y);
/* conv epilogue: y = post(x + bias); bias and res may be NULL; y may be x
 * (in place) or res (a sum accumulated into its residual's buffer). */
cudaError_t ck_bias_post(cudaStream_t s, float *y, const float *x, const float *bias, int n,
                         int c, int hw, ck_post_t post, const float *res);
/* y[b, o] += bias[o] (linear) */
cudaError_t ck_bias_rows(cudaStream_t s, float *y, const float *bias, int n, int out);
/* gb[o] = sum_b gy[b, o] (double accumulator) */
cudaError_t ck_col_sums(cudaStream_t s, const float *gy, int n, int out, float *gb);
/* y[i] = x[i] rounded to bf16 in float, gpud/bf16.c's bits (ties to even
 * on the bits, every NaN 0xffff0000); y == x allowed. */
cudaError_t ck_round_bf16(cudaStream_t s, const float *x, size_t n, float *y);
/* x[i] *= factor (fp16 training's unscale by a power of two: exact) */
cudaError_t ck_scale(cudaStream_t s, float *x, size_t n, float factor);
/* y = x rounded to fp16 (gpud/fp16_math.h's bits; y == x allowed) */
cudaError_t ck_round_fp16(cudaStream_t s, const float *x, size_t n, float *y);
/* y[i] = (float)x[i], rounded to nearest as the host's cast (a gradient's
 * double sums into its float parameter-gradient array) */
cudaError_t ck_d2f(cudaStream_t s, const double *x, size_t n, float *y);
/* *first = min(*first, i) over the NaN / +-inf elements i of x[0, n);
 * *first must start as ~0ull (no such element then leaves it so). */
cudaError_t ck_find_nonfinite(cudaStream_t s, const float *x, size_t n,
                              unsigned long long *first);

cudaError_t ck_relu(cudaStream_t s, float *y, const float *x, size_t count);
cudaError_t ck_relu_bwd(cudaStream_t s, float *gx, const float *y, const float *gy,
                        size_t count);
/* y = a + b, then ReLU if relu (y may alias a or b) */
cudaError_t ck_add(cudaStream_t s, float *y, const float *a, const float *b, size_t count,
                   int relu);
cudaError_t ck_acc(cudaStream_t s, float *y, const float *x, size_t count);

/* y (n, cy, hw) channels [off, off + cx) <-> x (n, cx, hw) */
cudaError_t ck_concat(cudaStream_t s, float *y, int cy, float *x, int n, int cx, int hw,
                      int off, int to_y);
/* y = x * keep / (1 - p); keys: the n samples' dropout keys in device memory
 * (gpud/dropout_key.h; unread when p = 0). per = c*h*w */
cudaError_t ck_dropout(cudaStream_t s, float *y, const float *x, int n, size_t per, float p,
                       uint32_t op, const uint64_t *keys);

/* The partial sums a channel's reduction over cnt = n * hw values takes
 * (1..64, from cnt alone): ck_chan_sums needs c of them, ck_bn_grad_sums
 * 2c, as device doubles of workspace (part). */
int ck_sum_parts(size_t cnt);
/* out[r] = the parts partials of row r (part[r * parts + i]) summed in order. */
cudaError_t ck_sum_rows(cudaStream_t s, const double *part, int rows, int parts, double *out);
/* Per-channel sums over (n, hw) in double: out[c] = sum x (center NULL) or
 * sum (x - center[c])^2; slices of each channel in parallel, then their
 * partials in order (deterministic). */
cudaError_t ck_chan_sums(cudaStream_t s, const float *x, int n, int c, int hw,
                         const float *center, double *out, double *part);
/* y += a[c] * (x - center[c]) + b[c] */
cudaError_t ck_chan_axpb(cudaStream_t s, float *y, const float *x, int n, int c, int hw,
                         const float *center, const float *a, const float *b);
/* Training BN statistics: batch mean and biased variance (two passes, double). */
cudaError_t ck_bn_stats(cudaStream_t s, const float *x, int n, int c, int hw, float *mean,
                        float *var);
/* y = (x - mean) / sqrt(var + eps) * gamma + beta, plus res[i] as ck_add
 * sums (res non-NULL: the residual block's tail fused, tape_fuse.c), ReLU
 * if relu */
cudaError_t ck_bn_apply(cudaStream_t s, float *y, const float *x, int n, int c, int hw,
                        const float *gamma, const float *beta, const float *mean,
                        const float *var, float eps, int relu, const float *res);
/* BN backward. y != NULL: the op's output was relu(bn(x)), gy is masked by
 * y > 0 first. sums: 2*c doubles, [sum g (c), sum g*xhat (c)] (out). */
cudaError_t ck_bn_bwd_sums(cudaStream_t s, const float *x, const float *y, const float *gy,
                           int n, int c, int hw, const float *mean, const float *var,
                           float eps, double *sums);
cudaError_t ck_bn_bwd_data(cudaStream_t s, float *gx, const float *x, const float *y,
                           const float *gy, int n, int c, int hw, const float *gamma,
                           const float *mean, const float *var, float eps, int training,
                           const double *sums);

/* SyncBatchNorm backward in double (bk_kernels_t.bn_grad_sums/apply):
 * dy' = gy (+ gy2 when not NULL, added as ck_acc adds: the tape's fold of a
 * gradient's last term; needs gout), masked by y > 0 when y != NULL (with
 * gout, also stored there as ck_relu_bwd stores it: the block end's ReLU
 * backward fused, tape_fuse.c). out[0, c) = sum dy', out[c, 2c) = sum dy'
 * (x - center[c]); gx = scale[c] dy' + a[c] (x - center[c]) + b[c]. */
cudaError_t ck_bn_grad_sums(cudaStream_t s, const float *x, const float *y, const float *gy,
                            const float *gy2, float *gout, int n, int c, int hw,
                            const float *center, double *out, double *part);
cudaError_t ck_bn_grad_apply(cudaStream_t s, float *gx, const float *x, const float *y,
                             const float *gy, int n, int c, int hw, const float *center,
                             const float *scale, const float *a, const float *b);

/* Training BatchNorm's per-channel steps on the device (bk_kernels_t
 * .bn_train_*), gpud/bn_math.h's arithmetic, one thread per channel:
 * out[c] = sum[c] / count (a mean or biased variance); the running stats
 * moved towards stat = [mean, var] (momentum m, unbias for the variance);
 * backward, from sums = [sum dy', sum dy' (x - mean)] (2c, in place: the
 * second half becomes sum dy' xhat): ggamma/gbeta (each optional) and the
 * coefficients coef = [scale, a, b] (3c) of ck_bn_grad_apply. */
cudaError_t ck_bn_stat(cudaStream_t s, const double *sum, int c, double count, float *out);
cudaError_t ck_bn_running(cudaStream_t s, float *rm, float *rv, const float *stat, int c,
                          double m, double unbias);
cudaError_t ck_bn_grad_finish(cudaStream_t s, double *sums, int c, const float *gamma,
                              const float *var, float eps, double count, float *ggamma,
                              float *gbeta, float *coef);

/* Pooling as ref_maxpool2d / ref_avgpool2d (alg: 0 max, 1 avg incl. pad,
 * 2 avg excl. pad). nc = n*c planes. */
typedef struct {
    int nc, ih, iw, oh, ow, kh, kw, sh, sw, ph, pw, alg;
} ck_pool_t;
/* A 16-bit max pooling's saved choice for a window with no input pixel
 * (ckb_pool's win). */
#define CKB_NO_WIN 255
cudaError_t ck_pool_fwd(cudaStream_t s, const ck_pool_t *p, const float *x, float *y);
/* gx from gy (max: to the first maximum of each window, as ref). */
cudaError_t ck_pool_bwd(cudaStream_t s, const ck_pool_t *p, const float *x, const float *gy,
                        float *gx);


#ifdef __cplusplus
}
#endif
#endif
