/* ref_ops — plain C reference implementations of every backend op, on
 * NCHW float arrays (llm.c style: obvious loops, double accumulators). They
 * are the oracle the unit tests check oneDNN against, and the kernels of the
 * "ref" backend. Not fast; correct. */
#ifndef DDP_REF_OPS_H
#define DDP_REF_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "common/mix64.h"
#include "gpud/dropout_key.h"

/* y[n,oc,oh,ow] = bias[oc] + sum x[n,ic,ih,iw] * w[oc,ic,kh,kw]; zero padding.
 * bias may be NULL. oh/ow must be the floor-mode output size. */
void ref_conv2d(const float *x, int n, int ic, int ih, int iw, const float *w,
                const float *bias, int oc, int kh, int kw, int sh, int sw, int ph, int pw,
                float *y, int oh, int ow);

/* Eval-mode BatchNorm2d in place: (x - mean) / sqrt(var + eps) * gamma + beta. */
void ref_batchnorm(float *x, int n, int c, int hw, const float *gamma, const float *beta,
                   const float *mean, const float *var, float eps);

void ref_relu(float *x, size_t count);
/* y = a + b (y may alias a or b). */
void ref_add(const float *a, const float *b, float *y, size_t count);

/* MaxPool2d / AvgPool2d, floor mode. count_include_pad as in PyTorch. */
void ref_maxpool2d(const float *x, int n, int c, int ih, int iw, int kh, int kw, int sh,
                   int sw, int ph, int pw, float *y, int oh, int ow);
void ref_avgpool2d(const float *x, int n, int c, int ih, int iw, int kh, int kw, int sh,
                   int sw, int ph, int pw, int count_include_pad, float *y, int oh, int ow);

/* y[n,out] = bias[out] + sum_i x[n,i] * w[out,i]; bias may be NULL. */
void ref_linear(const float *x, int n, int in, const float *w, const float *bias, int out,
                float *y);

/* ------------------------------------------------------------ backward
 * Gradients of the ops above (and training-mode BatchNorm), NCHW, double
 * accumulators; outputs are overwritten. NULL outputs are skipped. */

/* gx[n,ic,ih,iw] from gy[n,oc,oh,ow] */
void ref_conv2d_bwd_data(const float *gy, int n, int ic, int ih, int iw, const float *w,
                         int oc, int kh, int kw, int sh, int sw, int ph, int pw, float *gx,
                         int oh, int ow);
/* gw[oc,ic,kh,kw] and gb[oc] (either may be NULL) */
void ref_conv2d_bwd_weights(const float *x, int n, int ic, int ih, int iw, const float *gy,
                            int oc, int kh, int kw, int sh, int sw, int ph, int pw,
                            float *gw, float *gb, int oh, int ow);

/* Training-mode BatchNorm2d: batch mean and BIASED variance per channel
 * (out), y = (x - mean) / sqrt(var + eps) * gamma + beta. */
void ref_bn_train_fwd(const float *x, int n, int c, int hw, const float *gamma,
                      const float *beta, float eps, float *mean, float *var, float *y);
/* Eval-mode BatchNorm2d out of place. */
void ref_bn_eval_fwd(const float *x, int n, int c, int hw, const float *gamma,
                     const float *beta, const float *mean, const float *var, float eps,
                     float *y);
/* training: mean/var are the batch statistics (gx through them too);
 * else the running statistics (constants). */
void ref_bn_bwd(const float *x, const float *gy, int n, int c, int hw, const float *gamma,
                const float *mean, const float *var, float eps, int training, float *gx,
                float *ggamma, float *gbeta);

/* gx = gy where y > 0, else 0 */
void ref_relu_bwd(const float *y, const float *gy, float *gx, size_t count);
/* Gradient to the first maximum of each window (PyTorch's choice). */
void ref_maxpool2d_bwd(const float *x, const float *gy, int n, int c, int ih, int iw, int kh,
                       int kw, int sh, int sw, int ph, int pw, float *gx, int oh, int ow);
void ref_avgpool2d_bwd(const float *gy, int n, int c, int ih, int iw, int kh, int kw, int sh,
                       int sw, int ph, int pw, int count_include_pad, float *gx, int oh,
                       int ow);
void ref_linear_bwd(const float *x, const float *gy, int n, int in, const float *w, int out,
                    float *gx, float *gw, float *gb);

/* Dropout's keep decision for element idx (logical c*h*w index) of the
 * sample whose key is ref_dropout_key(seed, step, sample id, op) =
 * dropout_op_key(dropout_sample_key(seed, step, id), op) (gpud/dropout_key.h:
 * the kernels get the sample keys and mix in their op). Shared by every
 * CPU backend so masks agree bit for bit. */
uint64_t ref_dropout_key(uint64_t seed, uint64_t step, int64_t id, uint32_t op);
int ref_dropout_keep(uint64_t key, uint64_t idx, float p);
/* The same decision in two halves, for kernels that draw many masks over
 * the same indices: ref_dropout_keep(key, idx, p) ==
 * (ref_dropout_bits(key, ref_dropout_index(idx)) >= ref_dropout_threshold(p)). */
uint64_t ref_dropout_threshold(float p);

static inline uint64_t ref_dropout_index(uint64_t idx) { return dropout_mix(idx); }
static inline uint64_t ref_dropout_bits(uint64_t key, uint64_t index_mix)
{
    return dropout_mix(key ^ index_mix) >> 40;   /* 24 uniform bits */
}

/* Softmax cross-entropy per sample with label smoothing eps (PyTorch's
 * CrossEntropyLoss(label_smoothing=eps, reduction='none')), in double. */
void ref_ce_fwd(const float *logits, const int32_t *labels, int n, int k, float eps,
                float *loss);
/* glogits = dloss[i] * (softmax - ((1 - eps) onehot + eps / k)) */
void ref_ce_bwd(const float *logits, const int32_t *labels, int n, int k, float eps,
                const float *dloss, float *glogits);

#endif
