/* ref_ops — plain C reference implementations of every backend op, on
 * NCHW float arrays (llm.c style: obvious loops, double accumulators). They
 * are the oracle the unit tests check oneDNN against, and the kernels of the
 * "ref" backend. Not fast; correct. */
#ifndef DDP_REF_OPS_H
#define DDP_REF_OPS_H

#include <stddef.h>

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

#endif
