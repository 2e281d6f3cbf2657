/* cuda_infer — the cuda backend's --precision bf16 and fp16 inference plan
 * (graph_plan.c's fused ops) on tensor cores, docs/CUDA.md "bf16 eval on
 * tensor cores": every activation buffer of such a graph is 16-bit NHWC
 * (layout CU_LAYOUT_BF16_NHWC, 2 bytes an element, bf16 or fp16 by the
 * backend's precision: cuinf_fp16). A tape graph in bf16 or fp16 (training,
 * DDPIPE_BF16_EVAL=tape, DDPIPE_FP16_EVAL=tape, an op without a fused form)
 * runs the 16-bit training table instead (docs/CUDA.md "bf16 training"; or
 * with DDPIPE_HALF_ACTIVATIONS=0 cuda_train.c's fp32 kernels with the
 * engine's rounding points). cuda_train.c's table entries call these when
 * cuinf_graph(g) (or, without a graph, cuinf_buf); nothing here calls back
 * into cuda_train.c. */
#ifndef DDP_CUDA_INFER_H
#define DDP_CUDA_INFER_H

#include <stddef.h>

#include "gpud/backend_impl.h"

/* The layout code of the plan's 16-bit NHWC buffers (bk_kernels_t.layout;
 * bf16 or fp16 by the precision). */
#define CU_LAYOUT_BF16_NHWC 1

/* 1 when the backend runs bf16 or fp16 (backend_set_precision), else 0. */
static inline int cuinf_on(const backend_t *be)
{
    return be->precision == BK_BF16_NATIVE || be->precision == BK_BF16_EMULATED ||
           be->precision == BK_FP16;
}

/* 1 when the plan's 16-bit values are fp16 (--precision fp16), 0 bf16 */
static inline int cuinf_fp16(const backend_t *be)
{
    return be->precision == BK_FP16;
}

/* 1 when graph g runs as the 16-bit inference plan: an inference graph in
 * bf16 or fp16. A tape graph in bf16 or fp16 (training, an eval that does
 * not run the plan) runs cuda_train16.c's 16-bit table instead. */
static inline int cuinf_graph(const bk_ctx_t *g)
{
    return cuinf_on(g->be) && g->infer;
}

/* 1 when p is (inside) a 16-bit inference buffer of cuinf_alloc; cuinf_forget
 * drops one that is released. */
int cuinf_buf(const backend_t *be, const void *p);
void cuinf_forget(backend_t *be, const void *p);

/* bk_kernels_t entries of the 16-bit plan (see backend_impl.h for each one's contract). */
int cuinf_layout(backend_t *be, const int s[4]);
void *cuinf_alloc(bk_ctx_t *g, size_t count);
int cuinf_write(bk_ctx_t *g, int fp16, void *dst, const float *nchw, const int s[4]);
int cuinf_read(bk_ctx_t *g, int fp16, const void *src, float *nchw, const int s[4]);
/* Bytes of count elements of activation buffer p (zero, copy). */
size_t cuinf_bytes(const backend_t *be, const void *p, size_t count);
void cuinf_add(backend_t *be, void *y, const void *a, const void *b, size_t count, int relu);
void cuinf_flatten(backend_t *be, void *y, const void *x, const int xs[4], int backward);
/* round_half: the identity on a 16-bit buffer of the inference plan (each
 * kernel rounds what it stores); an fp32 buffer is rounded to fmt in place */
void cuinf_round(backend_t *be, bk_half_t fmt, void *y, size_t count);
/* round_half_param: dst = src rounded to fmt (parameter memory) */
void cuinf_round_param(backend_t *be, bk_half_t fmt, float *dst, const float *src,
                       size_t count);
/* bf16_native: 2, isa "cuda tensor cores" (bf16 on cuda is native only) */
int cuinf_native(const char **isa);

/* A stride-2 convolution of an image (4 channels or fewer) runs in
 * space-to-depth form (ckb_s2d: 2x2 pixel blocks as channels, the kernel
 * halved, stride 1): ResNet's 7x7/2 stem over 3 (padded 8) channels ran at
 * a tenth of an H200's tensor-core rate. DDPIPE_CUDA_S2D=0 (read at plan
 * time) keeps the plain form. */
bk_plan_t *cuinf_conv_plan(bk_ctx_t *g, const bk_conv_t *c, const bk_post_t *post,
                           const int in[4], const int out[4]);
/* convolutions planned in space-to-depth form since the process started
 * (this plan's and, noted by cuinf_s2d_note, the 16-bit training table's) */
unsigned long cuinf_s2d_count(void);
void cuinf_s2d_note(void);
/* convolutions the plan planned since the process started, in fp16 (1) or
 * bf16 (0): the tests' proof that an eval ran the plan */
unsigned long cuinf_conv_plans(int fp16);
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
/* Any other kernel of a 16-bit plan's graph (a backward, BatchNorm, concat, ...):
 * fails g with the fp32 advice. Returns -1 (NULL for plans). */
int cuinf_refuse(bk_ctx_t *g, const char *what);

#endif
