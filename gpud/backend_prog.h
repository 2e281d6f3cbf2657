/* backend_prog — the backend's fused inference program: the instructions
 * the inference plan (graph_plan.c) compiles a forward-only eval-mode graph
 * into. Private to the engine, the backends and their tests; models use
 * bk_graph (backend.h).
 *
 * A program is a sequence of fused ops compiled for FIXED shapes
 * (micro-batch, channels, height, width); it owns its tensors (activations
 * in whatever layout the backend prefers: oneDNN's blocked nChw16c on CPU,
 * NCHW/NHWC on a GPU), the weights reordered for its primitives, and a
 * shared workspace. Building validates shapes and creates every primitive
 * once; running only executes them.
 *
 *   bk_prog_t *g = bk_prog_new(be);
 *   bk_ptensor_t *x = bk_prog_input(g, 8, 3, 224, 224);
 *   bk_ptensor_t *y = bk_prog_conv2d(g, x, &conv, NULL);  ... more ops ...
 *   if (bk_prog_error(g)) -> message;  (the first failure sticks; later
 *                            builder calls return NULL and do nothing)
 *   bk_prog_write(g, x, host_nchw); bk_prog_run(g); bk_prog_read(g, y, host_out);
 *
 * BatchNorm has no instruction: the plan folds it into the preceding
 * convolution's weights and bias (graph_fold.c). */
#ifndef DDP_BACKEND_PROG_H
#define DDP_BACKEND_PROG_H

#include <stddef.h>
#include <stdint.h>

#include "gpud/backend.h"

typedef struct bk_prog bk_prog_t;
typedef struct bk_ptensor bk_ptensor_t;

/* Post-operations of a convolution, applied in order after conv + bias.
 * RELU: max(0, y). SUM: y + residual (the residual tensor of bk_prog_conv2d).
 * torchvision BasicBlock = {SUM, RELU}; the seed WideResNet = {RELU, SUM}. */
typedef enum { BK_PO_RELU = 1, BK_PO_SUM = 2 } bk_postop_t;
#define BK_MAX_POST 4

typedef struct {
    int ic, oc, kh, kw;
    int stride_h, stride_w;
    int pad_h, pad_w;          /* symmetric, as PyTorch's padding=(ph, pw) */
    const float *weight;       /* [oc, ic, kh, kw], PyTorch layout; copied */
    const float *bias;         /* [oc] or NULL; copied */
    int n_post;
    bk_postop_t post[BK_MAX_POST];
} bk_pconv_t;

bk_prog_t *bk_prog_new(backend_t *be);
void bk_prog_destroy(bk_prog_t **g);
/* The first error of the graph ("conv layer3.0.conv1: ..."), or NULL. */
const char *bk_prog_error(const bk_prog_t *g);
/* Name the next op for error messages and profiles (copied). */
void bk_prog_set_name(bk_prog_t *g, const char *name);
/* Record the first failure of g as "NAME: message" (later ones are
 * dropped). Returns NULL so that builders can `return bk_prog_fail(...)`. */
void *bk_prog_fail(bk_prog_t *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Builders. Each returns a new tensor owned by the graph, or NULL once the
 * graph has failed (any NULL argument fails the graph too). */
bk_ptensor_t *bk_prog_input(bk_prog_t *g, int n, int c, int h, int w);
/* residual: required iff post contains BK_PO_SUM, same shape as the output.
 * It is CONSUMED: the backend may accumulate into its storage in place, so
 * the caller must not use it again. */
bk_ptensor_t *bk_prog_conv2d(bk_prog_t *g, bk_ptensor_t *x, const bk_pconv_t *p, bk_ptensor_t *residual);
bk_ptensor_t *bk_prog_pool2d(bk_prog_t *g, bk_ptensor_t *x, const bk_pool_t *p);
/* AdaptiveAvgPool2d((1,1)). */
bk_ptensor_t *bk_prog_global_avg_pool(bk_prog_t *g, bk_ptensor_t *x);
/* Flatten + Linear: weight [out, c*h*w] (PyTorch layout, copied), bias
 * [out] or NULL. Output shape (n, out, 1, 1). */
bk_ptensor_t *bk_prog_linear(bk_prog_t *g, bk_ptensor_t *x, int out, const float *weight,
                       const float *bias);
bk_ptensor_t *bk_prog_relu(bk_prog_t *g, bk_ptensor_t *x);
/* a + b (same shape), then ReLU if relu != 0. */
bk_ptensor_t *bk_prog_add(bk_prog_t *g, bk_ptensor_t *a, bk_ptensor_t *b, int relu);

/* Shape of a tensor. */
void bk_ptensor_dims(const bk_ptensor_t *t, int *n, int *c, int *h, int *w);

/* Execution. Host buffers are plain NCHW float (n*c*h*w values). Only input
 * tensors can be written; any tensor can be read after bk_prog_run (tests inspect
 * intermediates; what a consumed residual holds is unspecified). Each
 * returns 0 or -1 with the reason in bk_prog_error. A graph is used by one
 * thread at a time. */
int bk_prog_write(bk_prog_t *g, bk_ptensor_t *t, const float *src);
int bk_prog_run(bk_prog_t *g);
int bk_prog_read(bk_prog_t *g, bk_ptensor_t *t, float *dst);

/* graph_fold.c. Eval-mode BatchNorm folded into the preceding conv, in
 * place: w [oc, per_oc] scaled by s = gamma / sqrt(var + eps) per output
 * channel, bias = (bias - mean) * s + beta, in double, rounded once per
 * value. */
void bk_bn_fold(float *w, float *bias, int oc, size_t per_oc, const float *gamma,
                const float *beta, const float *mean, const float *var, float eps);

#endif
