/* backend — the compute engine interface gpud's models are written against.
 *
 * One graph engine: the tape (bk_tgraph, the second half of this file). A
 * model describes itself once, as tape ops. Training runs the tape's
 * forward plan and its backward plan; inference is a forward-only,
 * eval-mode tape, which the engine runs as the backend's FUSED program when
 * every op has a fused form (BatchNorm folded into its conv, ReLU and the
 * residual sum as conv post-ops: gpud/graph_plan.c). The eval builders
 * below (bk_graph, bk_conv2d ...) are that fused program's instruction set;
 * the engine calls them, models need not.
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
 * Batch-norm (eval) has no op of its own: the inference plan folds it into
 * the preceding convolution's weights and bias (graph_fold.c).
 *
 * Implementations: "cpu" (oneDNN, gpud/cpu/dnnl_backend.c) and "ref"
 * (plain C loops, gpud/cpu/ref_backend.c — the oracle of the unit tests).
 * A CUDA backend implements the same private table (gpud/backend_impl.h).
 */
#ifndef DDP_BACKEND_H
#define DDP_BACKEND_H

#include <stddef.h>
#include <stdint.h>

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

/* ------------------------------------------------------------------------
 * Tape graphs: THE graph of the engine. Forward in training or eval mode,
 * backward; or forward only (inference).
 *
 * A tape graph records unfused ops for fixed shapes. Builders only record
 * ops and check shapes; bk_tgraph_compile (the first write, forward or
 * read) makes the plan: for training, the tape's kernel plans and every
 * activation and its gradient; for a forward-only eval-mode graph, the
 * backend's fused program when every op has a fused form (then no tape
 * buffer exists and ops fused away cannot be read), else the tape's
 * forward. Parameters are BOUND, not
 * copied: an op keeps the caller's host arrays (PyTorch layout) for the
 * weights and for their gradients, reads the weights at every forward (so
 * an optimizer may update them in place between steps) and OVERWRITES the
 * gradient arrays at every backward. A NULL gradient array freezes that
 * parameter (no gradient computed). Each array is bound to one op. (A
 * fused program reads them when it is built: see bk_tgraph_reload.)
 *
 *   bk_tgraph_t *g = bk_tgraph_new(be);
 *   bk_tvar_t *x = bk_t_input(g, n, 3, 64, 64, 0);
 *   bk_tvar_t *y = bk_t_conv2d(g, x, &conv);  ... bk_t_batchnorm, bk_t_relu ...
 *   bk_tvar_t *l = bk_t_softmax_ce(g, logits, 0.1f);    per-sample losses
 *   bk_t_write(g, x, host); bk_t_set_labels(g, labels);
 *   bk_t_forward(g); bk_t_backward(g, l, dl);   dl = 1/global_batch each
 *
 * Activations live in the backend's memory and layout; bk_t_write/read
 * move plain NCHW float. Errors stick as with graphs (bk_tgraph_error).
 * Implementations provide kernels (backend_impl.h, bk_tkernels_t); the
 * engine itself (gpud/backend_train.c, tape_compile.c, graph_plan.c) is
 * shared.
 * ------------------------------------------------------------------------ */
typedef struct bk_tgraph bk_tgraph_t;
typedef struct bk_tvar bk_tvar_t;

typedef struct {
    int ic, oc, kh, kw, stride_h, stride_w, pad_h, pad_w;
    float *weight, *grad_weight;   /* [oc, ic, kh, kw]; grad NULL: frozen */
    float *bias, *grad_bias;       /* [oc] or NULL (no bias) */
} bk_tconv_t;

/* BatchNorm2d. Training mode: normalise with the batch statistics and
 * update running_mean/var in place as PyTorch does (momentum, UNBIASED
 * variance n/(n-1) for running_var). Eval mode: use the running stats
 * (frozen BN still passes gradients to its input, gamma and beta). */
typedef struct {
    int c;
    float *weight, *grad_weight;   /* gamma [c]; grad NULL: frozen */
    float *bias, *grad_bias;       /* beta [c] */
    float *running_mean, *running_var;   /* [c], updated in training mode */
    float momentum, eps;           /* PyTorch defaults 0.1, 1e-5 */
    int relu;                      /* 1: output relu(bn(x)), fused (one op) */
    int eval;                      /* 1: eval mode even in a training graph (a
                                    * frozen BN: running stats used, not
                                    * updated, as module.eval() in PyTorch) */
    float *num_batches;            /* NULL, or PyTorch's num_batches_tracked:
                                    * +1 per training-mode forward */
} bk_tbn_t;

/* be NULL: a DESCRIPTION graph. Builders check shapes and bind parameters
 * exactly as with a backend (so a model can list and check its parameters,
 * name and shape, without one), but nothing is planned or allocated, and
 * write, forward, backward and read fail. */
bk_tgraph_t *bk_tgraph_new(backend_t *be);
void bk_tgraph_destroy(bk_tgraph_t **g);
/* Plan every op and allocate its buffers, for the ops recorded so far;
 * builders fail afterwards. The first bk_t_write, bk_t_forward, bk_t_read
 * or bk_t_empty_step compiles implicitly; calling it first only moves the
 * cost (and an out-of-memory error) to a known place. 0, or -1 with the
 * reason in bk_tgraph_error. */
int bk_tgraph_compile(bk_tgraph_t *g);
/* 1 when the forward runs as the backend's fused program (a forward-only
 * graph compiled in eval mode whose every op has a fused form; see the
 * --verbose line "graph: inference plan"), 0 before compiling, on the tape,
 * or in training mode. */
int bk_tgraph_fused(const bk_tgraph_t *g);
/* A fused program holds a snapshot of the bound parameters (BatchNorm
 * folded into the conv weights when it was built). Call this after
 * changing them (an optimizer step, a checkpoint load): the next
 * bk_t_forward re-reads them (re-folds), keeping the written inputs. On the
 * tape, which reads them at every forward, it does nothing. */
void bk_tgraph_reload(bk_tgraph_t *g);
const char *bk_tgraph_error(const bk_tgraph_t *g);
void bk_tgraph_set_name(bk_tgraph_t *g, const char *name);
/* Fail g with "NAME: message" (first failure sticks); returns NULL. */
void *bk_tfail(bk_tgraph_t *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* 1 (default): BN uses batch statistics and updates running stats,
 * dropout drops. 0: eval behaviour. May change between runs. */
void bk_tgraph_set_training(bk_tgraph_t *g, int training);
/* Before the first builder: a graph that only runs forward (inference): no
 * gradient buffers are allocated and bk_t_backward fails. In eval mode at
 * compile it is the inference plan above; switched to training mode later,
 * it gives the fused program up for the tape at its next forward. */
void bk_tgraph_set_forward_only(bk_tgraph_t *g);
/* 0: dropout is the identity even in training mode (parity tests). */
void bk_tgraph_set_dropout(bk_tgraph_t *g, int enabled);

/* SyncBatchNorm. fn sums n floats element-wise over every rank of the job,
 * in place (the result is the same on every rank); 0, or -1 with the reason
 * in err. With fn set, every training-mode BatchNorm op of g normalises
 * with the statistics of the union of all ranks' samples, as PyTorch's
 * SyncBatchNorm: forward all-reduces [sum x (c), count] for the mean, then
 * sum (x - mean)^2 (c) for the biased variance (no E[x^2] - mean^2
 * cancellation); running_var gets the unbiased variance of the global
 * count; backward all-reduces [sum dy (c), sum dy*xhat (c)] for the input
 * gradient. gamma/beta gradients stay this rank's own sums (the caller
 * all-reduces parameter gradients, as DDP). Eval-mode BN ops (bk_tbn_t.eval
 * or a graph in eval mode) do not sync. Every rank must make the same calls
 * in the same order: fn runs 2 times per training BN op in bk_t_forward and
 * once per BN op reached by bk_t_backward, so every rank needs the same
 * graph structure (shapes may differ in n). fn NULL: off (default). */
typedef int (*bk_allreduce_fn)(void *ctx, float *data, size_t n, char *err, size_t errlen);
void bk_tgraph_set_allreduce(bk_tgraph_t *g, bk_allreduce_fn fn, void *ctx);

/* requires_grad: compute the gradient of the input too (tests). */
bk_tvar_t *bk_t_input(bk_tgraph_t *g, int n, int c, int h, int w, int requires_grad);
bk_tvar_t *bk_t_conv2d(bk_tgraph_t *g, bk_tvar_t *x, const bk_tconv_t *p);
bk_tvar_t *bk_t_batchnorm(bk_tgraph_t *g, bk_tvar_t *x, const bk_tbn_t *p);
bk_tvar_t *bk_t_relu(bk_tgraph_t *g, bk_tvar_t *x);
bk_tvar_t *bk_t_pool2d(bk_tgraph_t *g, bk_tvar_t *x, const bk_pool_t *p);
bk_tvar_t *bk_t_global_avg_pool(bk_tgraph_t *g, bk_tvar_t *x);
/* (n, c, h, w) -> (n, c*h*w, 1, 1) in PyTorch's flatten order. */
bk_tvar_t *bk_t_flatten(bk_tgraph_t *g, bk_tvar_t *x);
/* y = x.flatten(1) @ weight^T + bias; weight [out, c*h*w]. */
bk_tvar_t *bk_t_linear(bk_tgraph_t *g, bk_tvar_t *x, int out, float *weight,
                       float *grad_weight, float *bias, float *grad_bias);
bk_tvar_t *bk_t_add(bk_tgraph_t *g, bk_tvar_t *a, bk_tvar_t *b);
/* torch.cat(xs, dim=1). */
bk_tvar_t *bk_t_concat(bk_tgraph_t *g, int k, bk_tvar_t *const *xs);
/* Inverted dropout with probability p. The mask of element (c, h, w) of a
 * sample depends only on (seed, step, sample id, op index, c, h, w) —
 * see bk_t_set_step — never on the batch's composition. */
bk_tvar_t *bk_t_dropout(bk_tgraph_t *g, bk_tvar_t *x, float p);
/* Per-sample softmax cross-entropy of logits (n, k, 1, 1) against the
 * labels of bk_t_set_labels, with label smoothing eps as PyTorch's
 * CrossEntropyLoss(label_smoothing=eps, reduction='none'). Output (n,1,1,1). */
bk_tvar_t *bk_t_softmax_ce(bk_tgraph_t *g, bk_tvar_t *logits, float label_smoothing);

/* Execution. Host buffers are NCHW float. */
int bk_t_write(bk_tgraph_t *g, bk_tvar_t *x, const float *src);
/* n labels in 0..k-1 for every softmax_ce op (copied). */
int bk_t_set_labels(bk_tgraph_t *g, const int32_t *labels);
/* Dropout stream: ids[i] is the dataset id of sample i of the first input
 * (n values, copied; NULL: 0..n-1). */
int bk_t_set_step(bk_tgraph_t *g, uint64_t seed, uint64_t step, const int64_t *ids);
int bk_t_forward(bk_tgraph_t *g);
/* Backpropagate dy (the objective's gradient w.r.t. y, NCHW; NULL: ones)
 * through every op recorded before y; writes the bound parameter
 * gradients and, for inputs made with requires_grad, the input gradient. */
int bk_t_backward(bk_tgraph_t *g, bk_tvar_t *y, const float *dy);
/* The forward + backward(y) of a rank that holds no samples this step,
 * for SyncBatchNorm: makes exactly the all-reduce calls bk_t_forward +
 * bk_t_backward(g, y, ...) would make, contributing zeros, and updates the
 * running stats of training-mode BN ops with the global statistics (so
 * every rank keeps the same buffers). Runs no kernel and writes no
 * gradient array (the caller zeroes them). Without an all-reduce hook it
 * does nothing. */
int bk_t_empty_step(bk_tgraph_t *g, bk_tvar_t *y);
int bk_t_read(bk_tgraph_t *g, bk_tvar_t *x, float *dst);
int bk_t_read_grad(bk_tgraph_t *g, bk_tvar_t *x, float *dst);
void bk_tvar_dims(const bk_tvar_t *t, int *n, int *c, int *h, int *w);

#endif
