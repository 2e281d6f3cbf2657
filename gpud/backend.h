/* backend — the compute engine interface gpud's models are written against.
 *
 * One graph engine: bk_graph (below). A model describes itself once, as
 * graph ops binding its parameters (gpud/models). Training runs the graph's
 * forward plan and its backward plan; inference is a forward-only,
 * eval-mode graph, which the engine rewrites into FUSED ops of the same
 * graph when every op has a fused form (BatchNorm folded into its conv,
 * ReLU and the residual sum as conv post-ops: gpud/graph_plan.c), else runs
 * as recorded. Either way every op runs on the backend's one kernel table
 * (gpud/backend_impl.h).
 *
 * A backend owns the device-side state: engine, stream, thread pool.
 * Implementations: "cpu" (oneDNN, gpud/cpu/dnnl_*.c),
 * "ref" (plain C loops, gpud/cpu/ref_backend.c, ref_train.c — the oracle of
 * the unit tests), "ref-device" (ref's kernels over an emulated device
 * arena, gpud/cpu/ref_device.c: tests) and "cuda" (gpud/cuda); each
 * provides the private tables of gpud/backend_impl.h.
 */
#ifndef DDP_BACKEND_H
#define DDP_BACKEND_H

#include <stddef.h>
#include <stdint.h>

typedef struct backend backend_t;

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

/* --precision. bf16: PyTorch's CPU autocast numbers (docs/BF16.md):
 * convolutions and linear layers on bf16 inputs and weights with fp32
 * accumulation, every activation and activation gradient rounded to bf16;
 * BatchNorm statistics, the loss, the optimizer and the master weights
 * fp32. BK_BF16_EMULATED: computed by the fp32 kernels on bf16 values held
 * in fp32. BK_BF16_NATIVE: the cpu backend's convolutions and linear layers
 * run oneDNN's bf16 primitives (bf16 src/weights/diff_dst, fp32 outputs);
 * the same numbers up to the order of fp32 sums. BK_FP16: PyTorch's CUDA
 * autocast in float16 (docs/FP16.md): the same rounding points with fp16
 * values (gpud/fp16.h), computed by the fp32 kernels (exact on TF32 tensor
 * cores: an fp16 operand is a TF32 value); training scales the loss
 * (gpud/loss_scale.h). */
typedef enum { BK_FP32 = 0, BK_BF16_EMULATED, BK_BF16_NATIVE, BK_FP16 } bk_precision_t;
/* precision "fp32", "bf16" or "fp16", before the first graph is made. bf16 is
 * native where the backend's probe finds bf16 instructions (avx512_bf16,
 * amx), else emulated; the environment variable DDPIPE_BF16=native|emulated
 * forces one (native where the CPU cannot: an error). 0, or -1 with the
 * reason in err (an unknown name; bf16 or fp16 on a backend without it). */
int backend_set_precision(backend_t *be, const char *precision, char *err, size_t errlen);
bk_precision_t backend_precision(const backend_t *be);
/* "fp32", "bf16 (emulated)", "bf16 (native: amx)" (avx512_bf16, ...) or
 * "fp16 (fp32 kernels)". */
const char *backend_precision_name(const backend_t *be);
/* The backend's native bf16 kernels on this machine: 0 none; 1 oneDNN
 * creates bf16 primitives but the CPU has no bf16 instructions
 * (avx512_core: it emulates them, slower than fp32); 2 avx512_bf16 without
 * AMX on an Intel CPU (bf16 dot products, yet oneDNN's bf16 kernels
 * measured slower than its fp32 ones: docs/BF16.md "Which one"); 3 fast:
 * AMX, avx512_bf16 on an AMD CPU, or cuda's tensor cores. Unset
 * DDPIPE_BF16 runs native at 3 only. isa (may be NULL): a name
 * for messages. Probed once per process. */
int backend_bf16_native(const backend_t *be, const char **isa);
const char *backend_name(const backend_t *be);
int backend_threads(const backend_t *be);

/* ------------------------------------------------------------------------
 * Tape graphs: THE graph of the engine. Forward in training or eval mode,
 * backward; or forward only (inference).
 *
 * A tape graph records unfused ops for fixed shapes. Builders only record
 * ops and check shapes; bk_graph_compile (the first write, forward or
 * read) makes the plan: for training, the tape's kernel plans and every
 * activation and its gradient; for a forward-only eval-mode graph, the
 * inference plan's fused ops when every op has a fused form (then only
 * their outputs have buffers, in the layouts the backend picks, and ops
 * fused away cannot be read), else the recorded ops. Parameters are BOUND, not
 * copied: an op keeps the caller's host arrays (PyTorch layout) for the
 * weights and for their gradients, reads the weights at every forward (so
 * an optimizer may update them in place between steps) and OVERWRITES the
 * gradient arrays at every backward. A NULL gradient array freezes that
 * parameter (no gradient computed). Each array is bound to one op. (The
 * fused ops of an inference graph may keep them folded or reordered: see
 * bk_graph_reload.)
 *
 *   bk_graph_t *g = bk_graph_new(be);
 *   bk_tensor_t *x = bk_input(g, n, 3, 64, 64, 0);
 *   bk_tensor_t *y = bk_conv2d(g, x, &conv);  ... bk_batchnorm, bk_relu ...
 *   bk_tensor_t *l = bk_softmax_ce(g, logits, 0.1f);    per-sample losses
 *   bk_write(g, x, host); bk_set_labels(g, labels);
 *   bk_forward(g); bk_backward(g, l, dl);   dl = 1/global_batch each
 *
 * Activations live in the backend's memory and layout; bk_write/read
 * move plain NCHW float. Errors stick as with graphs (bk_graph_error).
 * Implementations provide kernels (backend_impl.h, bk_kernels_t); the
 * engine itself (gpud/backend_train.c, tape_compile.c, graph_plan.c) is
 * shared.
 * ------------------------------------------------------------------------ */
typedef struct bk_graph bk_graph_t;
typedef struct bk_tensor bk_tensor_t;

typedef struct {
    int ic, oc, kh, kw, stride_h, stride_w, pad_h, pad_w;
    float *weight, *grad_weight;   /* [oc, ic, kh, kw]; grad NULL: frozen */
    float *bias, *grad_bias;       /* [oc] or NULL (no bias) */
} bk_conv_t;

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
} bk_bn_t;

/* be NULL: a DESCRIPTION graph. Builders check shapes and bind parameters
 * exactly as with a backend (so a model can list and check its parameters,
 * name and shape, without one), but nothing is planned or allocated, and
 * write, forward, backward and read fail. */
bk_graph_t *bk_graph_new(backend_t *be);
void bk_graph_destroy(bk_graph_t **g);
/* Plan every op and allocate its buffers, for the ops recorded so far;
 * builders fail afterwards. The first bk_write, bk_forward, bk_read
 * or bk_empty_step compiles implicitly; calling it first only moves the
 * cost (and an out-of-memory error) to a known place. 0, or -1 with the
 * reason in bk_graph_error. */
int bk_graph_compile(bk_graph_t *g);
/* 1 when the forward runs the inference plan's fused ops (a forward-only
 * graph compiled in eval mode whose every op has a fused form; see the
 * --verbose line "graph: inference plan"), 0 before compiling, on the
 * recorded ops, or in training mode. */
int bk_graph_fused(const bk_graph_t *g);
/* The fused ops hold a snapshot of the bound parameters (BatchNorm folded
 * into the conv weights, the weights in the backend's layout, when
 * compiled). Call this after changing them (an optimizer step, a checkpoint
 * load): the next bk_forward re-reads them (re-folds), keeping the written
 * inputs. On the recorded ops, which read them at every forward, it does
 * nothing. */
void bk_graph_reload(bk_graph_t *g);
const char *bk_graph_error(const bk_graph_t *g);
void bk_graph_set_name(bk_graph_t *g, const char *name);
/* Fail g with "NAME: message" (first failure sticks); returns NULL. */
void *bk_fail(bk_graph_t *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* 1 (default): BN uses batch statistics and updates running stats,
 * dropout drops. 0: eval behaviour. May change between runs. */
void bk_graph_set_training(bk_graph_t *g, int training);
/* Before the first builder: a graph that only runs forward (inference): no
 * gradient buffers are allocated and bk_backward fails. In eval mode at
 * compile it is the inference plan above; switched to training mode later,
 * it gives the fused ops up for the recorded ones at its next forward. */
void bk_graph_set_forward_only(bk_graph_t *g);
/* Keep t's value readable after bk_forward (before the compile). The tape
 * keeps what backward needs, the inputs and the graph's outputs; every
 * other activation (a frozen prefix's, a forward-only graph's) shares
 * buffers with others once its last reader ran, and bk_read of it fails.
 * 0, or -1 (compiled already, or t not of g). */
int bk_keep(bk_graph_t *g, bk_tensor_t *t);
/* Bytes of the tape's activation buffers (values, gradients, the gradient
 * temporary) once compiled; 0 before, or when the graph runs fused. */
size_t bk_graph_bytes(const bk_graph_t *g);
/* Residual block ends whose ReLU backward the BatchNorm's backward does
 * while it runs on the device (gpud/tape_fuse.c), in a compiled training
 * graph; 0 otherwise. */
int bk_graph_bwd_fusions(const bk_graph_t *g);
/* Of those, the ones that also add the last term of the ReLU's output
 * gradient as they read it (the next block's first conv's, left in the
 * gradient temporary: no acc pass). */
int bk_graph_grad_folds(const bk_graph_t *g);
/* What one training step (bk_forward, bk_backward from loss) of g copies
 * between host and device memory besides its batch and outputs, run on be
 * (g may be a description graph) whose arenas are device memory (cuda;
 * tape_copies.c): only training-mode BatchNorm's per-channel vectors, and
 * only where the host computes them: host_sums (SyncBatchNorm's
 * all-reduce or bitwise chunking is set), or a backend without
 * BatchNorm on the device (backend_bn_on_device). bn_kernels: what the
 * kernels copy (centres and coefficients up, double sums down); bn_tape:
 * what the tape copies (tape_bn_copy_plan: its statistics put, the running
 * stats read and written, gamma read, gamma/beta gradients put). Bytes;
 * independent of the batch size. Zero on a NULL graph or loss. */
typedef struct bk_copy_plan {
    uint64_t bn_kernels;
    uint64_t bn_tape;
} bk_copy_plan_t;
void bk_graph_copy_plan(const bk_graph_t *g, const bk_tensor_t *loss, const backend_t *be,
                        int host_sums, bk_copy_plan_t *p);
/* 1: be's training BatchNorm keeps its per-channel work on the device
 * (parameter memory is device memory and the kernels do it: cuda,
 * ref-device) wherever no SyncBatchNorm or bitwise chunking sums it on the
 * host. */
int backend_bn_on_device(const backend_t *be);
/* 1: be ranks a training graph's logits where they are (bk_read_topk:
 * every backend here; on cuda only n * k ids leave the device); 0: they
 * are read and ranked on the host. */
int backend_ranks_topk(const backend_t *be);
/* --decode gpu (docs/CUDA.md "Decoding on the GPU"): a --wire jpeg
 * batch's files decoded and transformed by the device (cuda: nvJPEG, then
 * resize_region's resize and crop in kernels), the uint8 CHW batch back in
 * host memory for the usual input path. */
/* Where a sample comes from: the box (x, y, w, h) of its decoded image,
 * resized to rw x rh, of which the batch's h x w window at (wx, wy) (may
 * reach outside it: zero padding) is the sample, mirrored left-right when
 * flip. The eval transform: the whole image, Resize, the center crop. A
 * training sample: RandomResizedCrop's box resized to the sample, and the
 * flip (common/image/augment.h). */
typedef struct {
    int x, y, w, h;
    int rw, rh;
    int wx, wy;
    int flip;
} bk_decode_place_t;
typedef struct bk_decode_batch {
    const uint8_t *files;      /* n files back to back */
    const uint32_t *sizes;     /* their sizes, summing to the files' bytes */
    int n;
    int resize, crop_h, crop_w, channels;   /* common/image's transform_t (no DCT scaling) */
    int h, w;                  /* each sample channels x h x w */
    int threads;               /* host threads for the files the device cannot decode */
    /* optional: sample i's place, given its decoded size (0, or -1 with a
     * reason: the sample fails); NULL: the transform above */
    int (*place)(void *ctx, int i, int src_w, int src_h, bk_decode_place_t *p, char *why,
                 size_t why_len);
    void *place_ctx;
    int compact;               /* 1: the samples that decode packed to the front, in order */
    uint8_t *failed;           /* out: n flags */
    char *why;                 /* out: n reasons, why_len bytes each */
    size_t why_len;
} bk_decode_batch_t;
/* The eval transform's place (b's resize and center crop) of an image of
 * src_w x src_h: what a decoder does without b->place, and a training
 * batch's place without the random crop (its flip left 0). 0, or -1 with
 * a reason. */
int backend_decode_eval_place(const bk_decode_batch_t *b, int src_w, int src_h,
                              bk_decode_place_t *p, char *why, size_t why_len);
/* 0 when be decodes on its device now (cuda with nvJPEG loaded), else -1
 * with what is missing and what to do. */
int backend_decode_ready(backend_t *be, char *err, size_t errlen);
/* The batch's samples into *out (n x channels x h x w uint8, owned by be,
 * valid until its next decode; the bytes stay on the device, *out their
 * name on the host: bk_write_u8 reads them in place, and a reader on the
 * host calls backend_decode_host first): each file the device's JPEG decoder takes
 * decoded there, any other (not a 3-component or gray JPEG, or refused by it) by
 * common/image on the host; a sample that fails gets failed[i] = 1, its
 * reason and zero pixels (with compact: the live samples first, in order,
 * then zeros). Returns how many failed, or -1 with err (the device
 * failed, or be cannot decode). */
int backend_decode(backend_t *be, const bk_decode_batch_t *b, const uint8_t **out, char *err,
                   size_t errlen);
/* [px, px + bytes) readable on the host: where it lies in be's last decoded
 * batch, that batch is copied back from the device now (once a batch);
 * anything else is left as it is. 0, or -1 with err. */
int backend_decode_host(backend_t *be, const uint8_t *px, size_t bytes, char *err,
                        size_t errlen);
/* 0: dropout is the identity even in training mode (parity tests). */
void bk_graph_set_dropout(bk_graph_t *g, int enabled);
/* 1: a dropout op of g draws a mask as g is set now (training, dropout
 * enabled, p > 0): its step needs the sample keys (bk_set_step). */
int bk_graph_drops(const bk_graph_t *g);

/* SyncBatchNorm. fn sums n doubles element-wise over every rank of the
 * job, in place (the result is the same on every rank); 0, or -1 with the
 * reason in err. Doubles: each rank's sums are double, so W ranks agree
 * with one rank holding the whole batch up to double rounding. With fn set, every training-mode BatchNorm op of g normalises
 * with the statistics of the union of all ranks' samples, as PyTorch's
 * SyncBatchNorm: forward all-reduces [sum x (c), count] for the mean, then
 * sum (x - mean)^2 (c) for the biased variance (no E[x^2] - mean^2
 * cancellation); running_var gets the unbiased variance of the global
 * count; backward all-reduces [sum dy (c), sum dy*xhat (c)] for the input
 * gradient. gamma/beta gradients stay this rank's own sums (the caller
 * all-reduces parameter gradients, as DDP). Eval-mode BN ops (bk_bn_t.eval
 * or a graph in eval mode) do not sync. Every rank must make the same calls
 * in the same order: fn runs 2 times per training BN op in bk_forward and
 * once per BN op reached by bk_backward, so every rank needs the same
 * graph structure (shapes may differ in n). fn NULL: off (default). */
typedef int (*bk_allreduce_fn)(void *ctx, double *data, size_t n, char *err, size_t errlen);
void bk_graph_set_allreduce(bk_graph_t *g, bk_allreduce_fn fn, void *ctx);

/* Called by bk_backward with each parameter gradient array (conv, BN and
 * linear weight and bias gradients) as soon as it is final, in backward
 * order: what lets DDP-style buckets all-reduce early (gpud/buckets.h).
 * fn NULL: off (default). */
typedef void (*bk_grad_ready_fn)(void *ctx, const float *grad);
void bk_graph_set_grad_ready(bk_graph_t *g, bk_grad_ready_fn fn, void *ctx);
/* The same in two halves, with which a training pass may still be recorded
 * and replayed (gpud/tape_pass.c; fn above forbids it, as it may copy and
 * wait): mark(ctx, grad) for each parameter gradient as it is final, in
 * backward order, is host bookkeeping only (it may run while the pass's
 * kernels are being recorded, or after a replay queued them) and returns 1
 * when the owner has device work to queue behind the gradients marked so
 * far; flush(ctx) then runs, outside any recording, once those gradients'
 * kernels are queued on the backend's stream. A recorded pass ends its
 * segment at such an op (learned from the op-by-op pass before it), so
 * flush's work overlaps the rest of backward as op by op. Not with
 * bk_graph_set_grad_ready's fn (which is called instead). mark NULL: off. */
typedef int (*bk_grad_mark_fn)(void *ctx, const float *grad);
typedef void (*bk_grad_flush_fn)(void *ctx);
void bk_graph_set_grad_queue(bk_graph_t *g, bk_grad_mark_fn mark, bk_grad_flush_fn flush,
                             void *ctx);

/* Where g counts the bytes its own host code copies to and from parameter
 * memory that is not host memory (backend_impl.h; a cuda step's training
 * BatchNorm vectors in t->bn, an inference plan's fold in t->params).
 * NULL: not counted (default). */
struct bk_traffic;
void bk_graph_set_traffic(bk_graph_t *g, struct bk_traffic *t);

/* requires_grad: compute the gradient of the input too (tests). */
bk_tensor_t *bk_input(bk_graph_t *g, int n, int c, int h, int w, int requires_grad);
bk_tensor_t *bk_conv2d(bk_graph_t *g, bk_tensor_t *x, const bk_conv_t *p);
bk_tensor_t *bk_batchnorm(bk_graph_t *g, bk_tensor_t *x, const bk_bn_t *p);
bk_tensor_t *bk_relu(bk_graph_t *g, bk_tensor_t *x);
bk_tensor_t *bk_pool2d(bk_graph_t *g, bk_tensor_t *x, const bk_pool_t *p);
bk_tensor_t *bk_global_avg_pool(bk_graph_t *g, bk_tensor_t *x);
/* (n, c, h, w) -> (n, c*h*w, 1, 1) in PyTorch's flatten order. */
bk_tensor_t *bk_flatten(bk_graph_t *g, bk_tensor_t *x);
/* y = x.flatten(1) @ weight^T + bias; weight [out, c*h*w]. */
bk_tensor_t *bk_linear(bk_graph_t *g, bk_tensor_t *x, int out, float *weight,
                       float *grad_weight, float *bias, float *grad_bias);
bk_tensor_t *bk_add(bk_graph_t *g, bk_tensor_t *a, bk_tensor_t *b);
/* torch.cat(xs, dim=1). */
bk_tensor_t *bk_concat(bk_graph_t *g, int k, bk_tensor_t *const *xs);
/* Inverted dropout with probability p. The mask of element (c, h, w) of a
 * sample depends only on (seed, step, sample id, op index, c, h, w) —
 * see bk_set_step — never on the batch's composition. */
bk_tensor_t *bk_dropout(bk_graph_t *g, bk_tensor_t *x, float p);
/* Per-sample softmax cross-entropy of logits (n, k, 1, 1) against the
 * labels of bk_set_labels, with label smoothing eps as PyTorch's
 * CrossEntropyLoss(label_smoothing=eps, reduction='none'). Output (n,1,1,1). */
bk_tensor_t *bk_softmax_ce(bk_graph_t *g, bk_tensor_t *logits, float label_smoothing);

/* Execution. Host buffers are NCHW float. */
int bk_write(bk_graph_t *g, bk_tensor_t *x, const float *src);
/* The same from uint8 NCHW pixels through lut (c x 256 floats: each byte's
 * value per channel), with no float copy of the batch on the way when the
 * backend can (1: it cannot, use bk_write). 0, 1 or -1. */
int bk_write_u8(bk_graph_t *g, bk_tensor_t *x, const uint8_t *px, const float *lut);
/* Before the host reads bytes that may be a device decoder's batch
 * (backend_decode_host on g's backend): 0, or -1 with g failed and why. */
int bk_u8_on_host(bk_graph_t *g, const uint8_t *px, size_t bytes);
/* n labels in 0..k-1 for every softmax_ce op (copied). */
int bk_set_labels(bk_graph_t *g, const int32_t *labels);
/* Dropout stream: ids[i] is the dataset id of sample i of the first input
 * (n values, copied; NULL: 0..n-1). */
int bk_set_step(bk_graph_t *g, uint64_t seed, uint64_t step, const int64_t *ids);
int bk_forward(bk_graph_t *g);
/* Backpropagate dy (the objective's gradient w.r.t. y, NCHW; NULL: ones)
 * through every op recorded before y; writes the bound parameter
 * gradients and, for inputs made with requires_grad, the input gradient. */
int bk_backward(bk_graph_t *g, bk_tensor_t *y, const float *dy);
/* bk_forward then bk_backward(g, y, dy) (dy required) of a training graph,
 * as one pass that the backend may record once and replay at later steps
 * of the same graph (tape_pass.c; CUDA graphs: docs/CUDA.md): the same
 * results, bit for bit, as the two calls. The input, labels and step must
 * be set before it, as for bk_forward. */
int bk_forward_backward(bk_graph_t *g, bk_tensor_t *y, const float *dy);
/* The forward + backward(y) of a rank that holds no samples this step,
 * for SyncBatchNorm: makes exactly the all-reduce calls bk_forward +
 * bk_backward(g, y, ...) would make, contributing zeros, and updates the
 * running stats of training-mode BN ops with the global statistics (so
 * every rank keeps the same buffers). Runs no kernel and writes no
 * gradient array (the caller zeroes them). Without an all-reduce hook it
 * does nothing. */
int bk_empty_step(bk_graph_t *g, bk_tensor_t *y);

/* ---- bitwise training (docs/TRAINING.md "Bitwise training"): a rank's
 * samples run as chunks of a fixed size, one graph per chunk (each built
 * for its chunk's samples, all of one structure and bound to the same
 * parameters), op by op over the chunks, so that a sample's arithmetic
 * never depends on how many ranks share the step, and every sum over
 * samples is exact (common/xsum.h), over the chunks and over the ranks.
 *
 * fn sums an xsum over every rank of the job, exactly and in place (the
 * same limbs on every rank; NULL: one rank). sync 1: training-mode
 * BatchNorm normalises with the statistics of all chunks of all ranks
 * (SyncBatchNorm; fn runs twice per BN op forward, once per BN op reached
 * backward); 0: each chunk with its own ("ghost batch norm"; fn is not
 * called), and the running stats move once per step towards the mean over
 * all chunks of the step of their statistics: bk_chunks_running_sums, summed
 * over the ranks by the caller, then bk_chunks_running. Every rank makes
 * the same fn calls in the same order. Set on every chunk graph. */
struct xsum;
typedef int (*bk_xreduce_fn)(void *ctx, struct xsum *x, char *err, size_t errlen);
void bk_graph_set_exact(bk_graph_t *g, bk_xreduce_fn fn, void *ctx, int sync);
/* The forward of n >= 1 chunk graphs (inputs, labels and steps set on
 * each); a training-mode BN op's running stats are updated once. */
int bk_chunks_forward(bk_graph_t **g, int n);
/* Their backward from y[j] (each graph's loss) with seed gradients dy[j]:
 * each op's parameter gradients are written by one chunk after another
 * into the bound arrays, the grad-ready hook called after each chunk's
 * (the caller accumulates them: they are overwritten by the next). */
int bk_chunks_backward(bk_graph_t **g, int n, bk_tensor_t **y, const float *const *dy);
/* A rank without samples this step: g describes the ops (a chunk graph,
 * not run); makes exactly the fn calls the ranks with chunks make,
 * contributing zeros, and updates the running stats as they do. */
int bk_chunks_empty(bk_graph_t *g, bk_tensor_t *y);
/* Ghost batch norm: the running stats' exact sums of the last
 * bk_chunks_forward / bk_chunks_empty, on the graph passed there first (g[0]):
 * the caller sums them over the ranks in place, then bk_chunks_running moves
 * every running stat once. NULL: nothing to sum (SyncBatchNorm, which moved
 * them in the forward, or no training BatchNorm). */
struct xsum *bk_chunks_running_sums(bk_graph_t *g);
int bk_chunks_running(bk_graph_t *g);

int bk_read(bk_graph_t *g, bk_tensor_t *x, float *dst);
/* Each sample's top-k class ids of x (n, c, 1, 1), best first in
 * model_topk_ce's order (gpud/topk_rank.h: torch.topk's, ties to the lower
 * class, a NaN first), ranked by the backend where x is, so that n * k ids
 * cross instead of n * c logits (a training step's RESULT needs only
 * these). 0; 1: the backend cannot (bk_read x and rank it on the host);
 * -1 failed. */
int bk_read_topk(bk_graph_t *g, bk_tensor_t *x, int k, int32_t *topk);
int bk_read_grad(bk_graph_t *g, bk_tensor_t *x, float *dst);
void bk_tensor_dims(const bk_tensor_t *t, int *n, int *c, int *h, int *w);

#endif
