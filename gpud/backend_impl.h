/* backend_impl — what an implementation of backend.h provides. Not for
 * model code. The generic layer (backend.c) validates arguments and
 * computes output shapes; an implementation only creates and runs
 * primitives for shapes that are already known to be valid, and reports a
 * failure with bk_prog_fail (graph_error.c, the sticky error).
 *
 * One engine, two tables per backend: the tape (backend_train.c,
 * tape_compile.c) runs training — the forward plan, then the backward plan
 * — on the unfused kernels of bk_kernels_t; the inference plan
 * (graph_plan.c) runs a forward-only eval-mode tape as a fused program on
 * the eval ops of bk_ops_t (conv with BN folded in and post-ops, pool,
 * linear, relu, add), through backend.c's checked builders.
 *
 * Imports point one way: backend_select.c (backend_new) -> the
 * implementations (cpu/, cuda/) -> graph_error.c; backend.c,
 * backend_train.c, tape_compile.c and graph_plan.c reach an implementation
 * only through its tables. */
#ifndef DDP_BACKEND_IMPL_H
#define DDP_BACKEND_IMPL_H

#include <stdarg.h>
#include <stdint.h>

#include "gpud/backend.h"
#include "gpud/backend_arena.h"
#include "gpud/backend_prog.h"

/* Every implementation's tensor starts with this. */
struct bk_ptensor {
    int n, c, h, w;
    int is_input;
    int consumed;   /* a residual that an op accumulated into */
};

/* Every implementation's graph starts with this. */
struct bk_prog {
    backend_t *be;
    int failed;
    char name[128];     /* current op name, for messages */
    char err[640];
};

/* ---------------------------------------------------------- training */

/* An op's compiled state for fixed shapes (primitives, workspaces). */
typedef struct bk_plan {
    void (*destroy)(struct bk_plan *p);
} bk_plan_t;

/* Kernels of the tape (gpud/backend_train.c): training, and inference
 * that has no fused form. Buffers (void *) are the backend's activation
 * memory in the backend's layout; parameters (float *) are host arrays in
 * PyTorch layout, read at every call (they change between steps). Shapes are NCHW logical dims. Kernels
 * OVERWRITE their outputs; the tape accumulates where a tensor feeds
 * several ops. int-returning kernels give 0, or -1 after bk_prog_fail(g, ...).
 * A NULL gradient output means "not needed". */
typedef struct bk_kernels {
    void *(*alloc)(bk_prog_t *g, size_t count);     /* zeroed floats */
    void (*release)(backend_t *be, void *buf);
    int (*write)(bk_prog_t *g, void *dst, const float *nchw, const int shape[4]);
    int (*read)(bk_prog_t *g, const void *src, float *nchw, const int shape[4]);
    /* optional: uint8 NCHW pixels through lut (shape[1] x 256 floats: the
     * value of each byte per channel) straight into dst, the batch's input
     * (no float copy of the batch first). NULL: write from floats. */
    int (*write_u8)(bk_prog_t *g, void *dst, const uint8_t *px, const float *lut,
                    const int shape[4]);
    /* element-wise (layout-agnostic), count elements */
    void (*zero)(backend_t *be, void *y, size_t count);
    void (*copy)(backend_t *be, void *y, const void *x, size_t count);
    void (*add)(backend_t *be, void *y, const void *a, const void *b, size_t count);
    void (*acc)(backend_t *be, void *y, const void *x, size_t count);   /* y += x */
    /* y (n, cy, h, w) channels [off, off + cx) <-> x (n, cx, h, w):
     * to_y: y part = x (forward); else x = y part (backward of concat). */
    void (*concat)(backend_t *be, void *y, int cy, void *x, const int xshape[4], int off,
                   int to_y);
    /* (n,c,h,w) -> (n,c*h*w,1,1) in NCHW order; backward: the inverse */
    void (*flatten)(backend_t *be, void *y, const void *x, const int xshape[4], int backward);
    /* y = x * mask / (1 - p); mask from (seed, step, ids[i], op, c, h, w).
     * The same call with x = dy, y = dx is the backward. */
    void (*dropout)(backend_t *be, void *y, const void *x, const int shape[4], float p,
                    uint64_t seed, uint64_t step, uint32_t op, const int64_t *ids);
    /* logits (n, k): per-sample loss (n); backward: glogits = dloss[i] *
     * (softmax - smoothed one-hot). labels: host, already checked. */
    void (*ce_fwd)(backend_t *be, const void *logits, const int32_t *labels, int n, int k,
                   float eps, void *loss);
    void (*ce_bwd)(backend_t *be, const void *logits, const int32_t *labels, int n, int k,
                   float eps, const void *dloss, void *glogits);

    bk_plan_t *(*conv_plan)(bk_prog_t *g, const bk_conv_t *p, const int in[4],
                            const int out[4]);
    int (*conv_fwd)(bk_prog_t *g, bk_plan_t *p, const void *x, const float *w,
                    const float *b, void *y);
    int (*conv_bwd)(bk_prog_t *g, bk_plan_t *p, const void *x, const float *w,
                    const void *gy, void *gx, float *gw, float *gb);
    /* training: mean/var OUT (batch mean, biased variance); else IN.
     * relu: the output is relu(bn(x)); backward gets that y (the mask). */
    bk_plan_t *(*bn_plan)(bk_prog_t *g, const int in[4], float eps, int relu);
    int (*bn_fwd)(bk_prog_t *g, bk_plan_t *p, int training, const void *x,
                  const float *gamma, const float *beta, float *mean, float *var, void *y);
    int (*bn_bwd)(bk_prog_t *g, bk_plan_t *p, int training, const void *x, const void *y,
                  const void *gy, const float *gamma, const float *mean, const float *var,
                  void *gx, float *ggamma, float *gbeta);
    /* Training-mode BatchNorm: the tape computes the batch statistics itself
     * (two passes, double sums), so that the W ranks of SyncBatchNorm and
     * one rank with the whole batch agree to float rounding; the normalising
     * and the gradient's g * dy part are the eval-mode kernels (bn_fwd /
     * bn_bwd with training = 0).
     * out[c] = sum over (n, h, w) of x (center NULL) or of (x - center[c])^2. */
    void (*chan_sums)(backend_t *be, const void *x, const int shape[4], const float *center,
                      double *out);
    /* y += a[c] * (x - center[c]) + b[c]: the gradient's batch-mean terms. */
    void (*chan_axpb)(backend_t *be, void *y, const void *x, const int shape[4],
                      const float *center, const float *a, const float *b);
    /* Optional (NULL: bn_bwd's eval-mode sums and chan_axpb are used), for
     * sums of better than float accuracy. dy' = gy, or gy where y > 0 when
     * relu (y: the op's output). out[0, c) = sum dy', out[c, 2c) =
     * sum dy' * (x - center[c]). */
    void (*bn_grad_sums)(backend_t *be, const void *x, const void *y, const void *gy,
                         const int shape[4], int relu, const float *center, double *out);
    /* Optional, with bn_grad_sums: gx = scale[c] * dy' + a[c] * (x - center[c]) + b[c]. */
    void (*bn_grad_apply)(backend_t *be, void *gx, const void *x, const void *y, const void *gy,
                          const int shape[4], int relu, const float *center,
                          const float *scale, const float *a, const float *b);
    bk_plan_t *(*relu_plan)(bk_prog_t *g, const int in[4]);
    int (*relu_fwd)(bk_prog_t *g, bk_plan_t *p, const void *x, void *y);
    int (*relu_bwd)(bk_prog_t *g, bk_plan_t *p, const void *y, const void *gy, void *gx);
    bk_plan_t *(*pool_plan)(bk_prog_t *g, const bk_pool_t *pp, const int in[4],
                            const int out[4]);
    int (*pool_fwd)(bk_prog_t *g, bk_plan_t *p, const void *x, void *y);
    int (*pool_bwd)(bk_prog_t *g, bk_plan_t *p, const void *x, const void *gy, void *gx);
    /* x (n, c, h, w) flattened in NCHW order; weight [out, c*h*w] */
    bk_plan_t *(*linear_plan)(bk_prog_t *g, const int in[4], int out, int has_bias);
    int (*linear_fwd)(bk_prog_t *g, bk_plan_t *p, const void *x, const float *w,
                      const float *b, void *y);
    int (*linear_bwd)(bk_prog_t *g, bk_plan_t *p, const void *x, const float *w,
                      const void *gy, void *gx, float *gw, float *gb);
    /* --precision bf16 (gpud/bf16.h): round count floats of a buffer to bf16
     * in place. NULL: the backend cannot run bf16 (backend_set_precision
     * refuses). */
    void (*round_bf16)(backend_t *be, void *y, size_t count);
    /* Optional: backend_bf16_native's probe (NULL: no native bf16). With
     * precision BK_BF16_NATIVE the conv and linear plans are native. */
    int (*bf16_native)(const char **isa);
} bk_kernels_t;

typedef struct bk_ops {
    const char *name;
    void (*destroy)(backend_t *be);
    bk_prog_t *(*graph_new)(backend_t *be);
    void (*graph_destroy)(bk_prog_t *g);
    /* Builders get validated arguments and the output shape in `out`
     * (n, c, h, w); they return a tensor of that shape or NULL after
     * bk_prog_fail. */
    bk_ptensor_t *(*input)(bk_prog_t *g, const int out[4]);
    bk_ptensor_t *(*conv2d)(bk_prog_t *g, bk_ptensor_t *x, const bk_pconv_t *p,
                           bk_ptensor_t *residual, const int out[4]);
    bk_ptensor_t *(*pool2d)(bk_prog_t *g, bk_ptensor_t *x, const bk_pool_t *p,
                           const int out[4]);
    bk_ptensor_t *(*linear)(bk_prog_t *g, bk_ptensor_t *x, const float *weight,
                           const float *bias, const int out[4]);
    bk_ptensor_t *(*relu)(bk_prog_t *g, bk_ptensor_t *x, const int out[4]);
    bk_ptensor_t *(*add)(bk_prog_t *g, bk_ptensor_t *a, bk_ptensor_t *b, int relu,
                        const int out[4]);
    int (*write)(bk_prog_t *g, bk_ptensor_t *t, const float *src);
    int (*run)(bk_prog_t *g);
    int (*read)(bk_prog_t *g, bk_ptensor_t *t, float *dst);
    const struct bk_kernels *train;   /* NULL: no training support */
    /* 1: the program runs --precision bf16 itself (docs/BF16.md "bf16
     * inference plan"): the plan hands it bf16-rounded weights and biases,
     * and every op's output is bf16 (native bf16 memories, or fp32 ones
     * rounded after each op). 0: bf16 inference runs on the tape. */
    int prog_bf16;
} bk_ops_t;

/* Every implementation's backend starts with this. */
struct backend {
    const bk_ops_t *ops;
    int threads;
    bk_precision_t precision;   /* backend_set_precision */
    char precision_name[64];    /* backend_precision_name */
    const struct bk_arena_ops *arena;   /* the model's arenas (backend_arena.h); NULL: host */
};

/* Constructors of the implementations (threads already resolved, >= 1). */
backend_t *cpu_backend_new(int threads, char *err, size_t errlen);
backend_t *ref_backend_new(int threads, char *err, size_t errlen);

#endif
