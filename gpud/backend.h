/* backend — the compute engine interface gpud's models are written against.
 *
 * A backend owns the device-side state: engine, stream, thread pool. A
 * graph is a sequence of fused ops compiled for FIXED shapes (micro-batch,
 * channels, height, width); it owns its tensors (activations in whatever
 * layout the backend prefers: oneDNN's blocked nChw16c on CPU, NCHW/NHWC on
 * a GPU), the weights reordered for its primitives, and a shared workspace.
 * Building a graph validates shapes and creates every primitive once; running
 * it only executes them, so a graph is built once per input shape and cached.
 *
 *   backend_t *be = backend_new("cpu", 2, err, sizeof err);
 *   bk_graph_t *g = bk_graph_new(be);
 *   bk_tensor_t *x = bk_input(g, 8, 3, 224, 224);
 *   bk_tensor_t *y = bk_conv2d(g, x, &conv, NULL);  ... more ops ...
 *   if (bk_graph_error(g)) -> message;  (the first failure sticks; later
 *                            builder calls return NULL and do nothing)
 *   bk_write(g, x, host_nchw); bk_run(g); bk_read(g, y, host_out);
 *
 * Batch-norm (eval) has no op of its own: models fold it into the preceding
 * convolution's weights and bias at load time (see models/layers.h).
 *
 * Implementations: "cpu" (oneDNN, gpud/cpu/dnnl_backend.c) and "ref"
 * (plain C loops, gpud/cpu/ref_backend.c — the oracle of the unit tests).
 * A CUDA backend implements the same private table (gpud/backend_impl.h).
 */
#ifndef DDP_BACKEND_H
#define DDP_BACKEND_H

#include <stddef.h>

typedef struct backend backend_t;
typedef struct bk_graph bk_graph_t;
typedef struct bk_tensor bk_tensor_t;

/* Post-operations of a convolution, applied in order after conv + bias.
 * RELU: max(0, y). SUM: y + residual (the residual tensor of bk_conv2d).
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
} bk_conv_t;

typedef enum {
    BK_POOL_MAX,               /* padding never wins (PyTorch's -inf padding) */
    BK_POOL_AVG,               /* count_include_pad=True (PyTorch's default) */
    BK_POOL_AVG_EXCLUDE_PAD    /* count_include_pad=False */
} bk_pool_alg_t;

typedef struct {
    bk_pool_alg_t alg;
    int kh, kw, stride_h, stride_w, pad_h, pad_w;   /* floor mode output size */
} bk_pool_t;

/* name: "cpu" (oneDNN) or "ref" (plain C). threads: worker threads of the
 * compute engine, 0 = all cores. NULL on error (message in err). */
backend_t *backend_new(const char *name, int threads, char *err, size_t errlen);
void backend_destroy(backend_t **be);
const char *backend_name(const backend_t *be);
int backend_threads(const backend_t *be);

bk_graph_t *bk_graph_new(backend_t *be);
void bk_graph_destroy(bk_graph_t **g);
/* The first error of the graph ("conv layer3.0.conv1: ..."), or NULL. */
const char *bk_graph_error(const bk_graph_t *g);
/* Name the next op for error messages and profiles (copied). */
void bk_set_name(bk_graph_t *g, const char *name);
/* Record the first failure of g as "NAME: message" (later ones are
 * dropped). Returns NULL so that builders can `return bk_fail(...)`. */
void *bk_fail(bk_graph_t *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Builders. Each returns a new tensor owned by the graph, or NULL once the
 * graph has failed (any NULL argument fails the graph too). */
bk_tensor_t *bk_input(bk_graph_t *g, int n, int c, int h, int w);
/* residual: required iff post contains BK_PO_SUM, same shape as the output.
 * It is CONSUMED: the backend may accumulate into its storage in place, so
 * the caller must not use it again. */
bk_tensor_t *bk_conv2d(bk_graph_t *g, bk_tensor_t *x, const bk_conv_t *p, bk_tensor_t *residual);
bk_tensor_t *bk_pool2d(bk_graph_t *g, bk_tensor_t *x, const bk_pool_t *p);
/* AdaptiveAvgPool2d((1,1)). */
bk_tensor_t *bk_global_avg_pool(bk_graph_t *g, bk_tensor_t *x);
/* Flatten + Linear: weight [out, c*h*w] (PyTorch layout, copied), bias
 * [out] or NULL. Output shape (n, out, 1, 1). */
bk_tensor_t *bk_linear(bk_graph_t *g, bk_tensor_t *x, int out, const float *weight,
                       const float *bias);
bk_tensor_t *bk_relu(bk_graph_t *g, bk_tensor_t *x);
/* a + b (same shape), then ReLU if relu != 0. */
bk_tensor_t *bk_add(bk_graph_t *g, bk_tensor_t *a, bk_tensor_t *b, int relu);

/* Shape of a tensor. */
void bk_tensor_dims(const bk_tensor_t *t, int *n, int *c, int *h, int *w);

/* Execution. Host buffers are plain NCHW float (n*c*h*w values). Only input
 * tensors can be written; any tensor can be read after bk_run (tests inspect
 * intermediates; what a consumed residual holds is unspecified). Each
 * returns 0 or -1 with the reason in bk_graph_error. A graph is used by one
 * thread at a time. */
int bk_write(bk_graph_t *g, bk_tensor_t *t, const float *src);
int bk_run(bk_graph_t *g);
int bk_read(bk_graph_t *g, bk_tensor_t *t, float *dst);

#endif
