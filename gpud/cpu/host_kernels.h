/* host_kernels — training kernels on host float memory shared by the CPU
 * backends: element-wise ops, concat, flatten, dropout and cross-entropy.
 * Layout-dependent ones take nhwc (1: the oneDNN backend's NHWC
 * activations, 0: the reference backend's NCHW). */
#ifndef DDP_HOST_KERNELS_H
#define DDP_HOST_KERNELS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "gpud/backend_impl.h"

void *hk_alloc(bk_ctx_t *g, size_t count);
void hk_release(backend_t *be, void *buf);
void hk_zero(backend_t *be, void *y, size_t count);
void hk_copy(backend_t *be, void *y, const void *x, size_t count);
void hk_add(backend_t *be, void *y, const void *a, const void *b, size_t count, int relu);
void hk_acc(backend_t *be, void *y, const void *x, size_t count);
/* --precision bf16: y rounded to bf16 in place (gpud/bf16.h). */
void hk_round_half(backend_t *be, bk_half_t fmt, void *y, size_t count);
void hk_ce_fwd(backend_t *be, const void *logits, const int32_t *labels, int n, int k,
               float eps, void *loss);
void hk_ce_bwd(backend_t *be, const void *logits, const int32_t *labels, int n, int k,
               float eps, const void *dloss, void *glogits);

/* y = relu(bn(x) + res) over npix NHWC rows of c channels, bn(x) the value
 * of oneDNN's BatchNorm with the statistics given (host_bn_add.c). 0, or
 * -1 after bk_ctx_fail. */
int hk_bn_add_relu(bk_ctx_t *g, float *y, const float *x, const float *res, size_t npix,
                   int c, const float *gamma, const float *beta, const float *mean,
                   const float *var, float eps);
/* scale[c] = gamma[c] / sqrtf(var[c] + eps) in float: with fmaf(x -
 * mean, scale, beta) the value oneDNN's BatchNorm stores (the fused
 * passes' bn(x)); a new array of c, or NULL (out of memory). */
float *hk_bn_scale_new(const float *gamma, const float *var, float eps, int c);
/* y = dropout(relu(bn(x))) on NHWC activations of shape s (NCHW dims),
 * bn(x) as hk_bn_add_relu's, the dropout hk_dropout's (p, op, keys; p = 0:
 * none) (host_bn_drop.c). 0, or -1 after bk_ctx_fail. */
int hk_bn_relu_drop(bk_ctx_t *g, float *y, const float *x, const int s[4], const float *gamma,
                    const float *beta, const float *mean, const float *var, float eps, float p,
                    uint32_t op, const uint64_t *keys);

/* uint8 NCHW pixels through a per-channel table (c x 256) into y. */
void hk_write_u8(void *y, const uint8_t *px, const float *lut, const int s[4], int nhwc,
                 int threads);
void hk_concat(void *y, int cy, void *x, const int xs[4], int off, int to_y, int nhwc);
void hk_flatten(void *y, const void *x, const int xs[4], int backward, int nhwc);
/* keys[b]: sample b's dropout key (gpud/dropout_key.h), op mixed in here */
void hk_dropout(void *y, const void *x, const int s[4], float p, uint32_t op,
                const uint64_t *keys, int nhwc);
/* One sample's index mixes of dropout's mask (ref_dropout_index of the
 * logical NCHW index of memory element i, shape s, NHWC or NCHW memory):
 * a new array of c*h*w, or NULL (out of memory). */
uint64_t *hk_dropout_ix_new(const int s[4], int nhwc);
/* A dropout's output element: v (already times 1 / (1 - p)) where its
 * mask bits keep it, else +0 (its bits cleared: branch-free). */
static inline float hk_drop_keep(float v, uint64_t bits, uint64_t thr)
{
    uint32_t u, keep = -(uint32_t)(bits >= thr);
    memcpy(&u, &v, sizeof u);
    u &= keep;
    memcpy(&v, &u, sizeof u);
    return v;
}
/* Training-mode BatchNorm on host memory (backend_impl.h chan_sums,
 * chan_axpb, bn_grad_sums, bn_grad_apply). Partial sums are combined in a fixed order,
 * so results do not depend on the thread count. */
void hk_chan_sums(const void *x, const int s[4], const float *center, double *out, int nhwc,
                  int threads);
void hk_chan_axpb(void *y, const void *x, const int s[4], const float *center, const float *a,
                  const float *b, int nhwc, int threads);
void hk_bn_grad_sums(const void *x, const void *y, const void *gy, const int s[4], int relu,
                     float gscale, const float *center, double *out, int nhwc, int threads);
void hk_bn_grad_apply(void *gx, const void *x, const void *y, const void *gy, const int s[4],
                      int relu, float gscale, const float *center, const float *scale,
                      const float *a, const float *b, int nhwc, int threads);

/* 16-bit activations (bk_ops_t.train16, gpud/half_bits.h): n values of
 * format fmt unpacked to floats (exact) or floats packed (rounded as
 * bf16_round / fp16_round1), in chunks over threads (each element alone:
 * the split changes no bit). */
void hk_unpack16(bk_half_t fmt, float *f, const uint16_t *h, size_t n, int threads);
void hk_pack16(bk_half_t fmt, uint16_t *h, const float *f, size_t n, int threads);
/* The same moves on NHWC 16-bit buffers (count: elements). */
void hk16_zero(backend_t *be, void *y, size_t count);
void hk16_copy(backend_t *be, void *y, const void *x, size_t count);
void hk16_concat(void *y, int cy, void *x, const int xs[4], int off, int to_y);
void hk16_flatten(void *y, const void *x, const int xs[4], int backward);
/* hk_write_u8 into NHWC bf16 values, each rounded as bf16_round. */
void hk16_write_u8(void *y, const uint8_t *px, const float *lut, const int s[4], int threads);
/* The training-mode BatchNorm host loops above on NHWC bf16 buffers (the
 * cpu backend's train16): rows of their values unpacked into per-thread
 * float tiles that the fp32 loops run on, so every channel adds the same
 * values in the same order (the same bits as the fp32 buffers); gx packed. */
void hk16_chan_sums(const void *x, const int s[4], const float *center, double *out,
                    int threads);
void hk16_bn_grad_sums(const void *x, const void *y, const void *gy, const int s[4], int relu,
                       float gscale, const float *center, double *out, int threads);
void hk16_bn_grad_apply(void *gx, const void *x, const void *y, const void *gy, const int s[4],
                        int relu, float gscale, const float *center, const float *scale,
                        const float *a, const float *b, int threads);

/* The training kernel tables of the CPU backends. */
extern const bk_kernels_t REF_TKERNELS;
extern const bk_kernels_t CPU_TKERNELS;

#endif
