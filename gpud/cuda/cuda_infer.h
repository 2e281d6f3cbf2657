/* cuda_infer — the cuda backend's --precision bf16: the inference plan
 * (graph_plan.c's fused ops) on tensor cores, docs/CUDA.md "bf16 eval on
 * tensor cores". With bf16, every activation buffer of the backend is bf16
 * NHWC (layout CU_LAYOUT_BF16_NHWC, 2 bytes an element) and only inference
 * graphs (g->infer) run: a tape graph (training, DDPIPE_BF16_EVAL=tape, an
 * op without a fused form) is refused at its first buffer with a message
 * saying to use fp32. cuda_train.c's table entries call these when
 * cuinf_on(be); nothing here calls back into cuda_train.c. */
#ifndef DDP_CUDA_INFER_H
#define DDP_CUDA_INFER_H

#include <stddef.h>

#include "gpud/backend_impl.h"

/* The layout code of bf16 NHWC buffers (bk_kernels_t.layout). */
#define CU_LAYOUT_BF16_NHWC 1

/* 1 when the backend runs bf16 (backend_set_precision), else 0. */
static inline int cuinf_on(const backend_t *be)
{
    return be->precision != BK_FP32;
}

/* bk_kernels_t entries in bf16 (see backend_impl.h for each one's contract). */
int cuinf_layout(backend_t *be, const int s[4]);
void *cuinf_alloc(bk_ctx_t *g, size_t count);
int cuinf_write(bk_ctx_t *g, void *dst, const float *nchw, const int s[4]);
int cuinf_read(bk_ctx_t *g, const void *src, float *nchw, const int s[4]);
/* Bytes of count elements of an activation buffer (zero, copy). */
size_t cuinf_bytes(const backend_t *be, size_t count);
void cuinf_add(backend_t *be, void *y, const void *a, const void *b, size_t count, int relu);
void cuinf_flatten(backend_t *be, void *y, const void *x, const int xs[4], int backward);
/* round_bf16: the identity (every bf16 buffer holds bf16 values: each
 * kernel rounds what it stores) */
void cuinf_round(backend_t *be, void *y, size_t count);
/* bf16_native: 2, isa "cuda tensor cores" (bf16 on cuda is native only) */
int cuinf_native(const char **isa);

bk_plan_t *cuinf_conv_plan(bk_ctx_t *g, const bk_conv_t *c, const bk_post_t *post,
                           const int in[4], const int out[4]);
int cuinf_conv_fwd(bk_ctx_t *g, bk_plan_t *p, const void *x, const float *w, const float *b,
                   const void *res, void *y);
bk_plan_t *cuinf_relu_plan(bk_ctx_t *g, const int in[4]);
int cuinf_relu_fwd(bk_ctx_t *g, bk_plan_t *p, const void *x, void *y);
bk_plan_t *cuinf_pool_plan(bk_ctx_t *g, const bk_pool_t *pp, const int in[4],
                           const int out[4]);
int cuinf_pool_fwd(bk_ctx_t *g, bk_plan_t *p, const void *x, void *y);
bk_plan_t *cuinf_linear_plan(bk_ctx_t *g, const int in[4], int out, int has_bias);
int cuinf_linear_fwd(bk_ctx_t *g, bk_plan_t *p, const void *x, const float *w, const float *b,
                     void *y);
/* Any other kernel of a bf16 graph (a backward, BatchNorm, concat, ...):
 * fails g with the fp32 advice. Returns -1 (NULL for plans). */
int cuinf_refuse(bk_ctx_t *g, const char *what);

#endif
