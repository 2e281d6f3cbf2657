/* backend_impl — what an implementation of backend.h provides. Not for
 * model code. The engine (backend_train.c: builders and shape checks, the
 * forward and the backward; tape_compile.c: plans and buffers;
 * graph_plan.c: the inference plan) calls an implementation only through
 * its table (bk_ops_t) and its ONE kernel table (bk_kernels_t), for
 * training and inference alike: an inference graph is the same kind of ops,
 * rewritten (conv with BN folded and post-ops, add with a ReLU), planned
 * with g->infer set so that the backend may pick its own activation
 * layouts (.layout) and keep weights in its own layout until
 * g->params_version moves. Kernels report failures with bk_ctx_fail
 * (graph_ctx.h, graph_error.c).
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
#include "gpud/backend_caps.h"
#include "gpud/graph_ctx.h"
#include "gpud/half.h"


/* ---------------------------------------------------------- training */

/* Post-operations of a fused convolution (graph_plan.c), applied in order
 * after conv + bias. RELU: max(0, y). SUM: y + the residual. torchvision's
 * BasicBlock = {SUM, RELU}; the seed WideResNet = {RELU, SUM}. */
typedef enum { BK_PO_RELU = 1, BK_PO_SUM = 2 } bk_postop_t;

#define BK_MAX_POST 4
typedef struct {
    int n;
    bk_postop_t op[BK_MAX_POST];
} bk_post_t;

/* An op's compiled state for fixed shapes (primitives, workspaces). */
typedef struct bk_plan {
    void (*destroy)(struct bk_plan *p);
} bk_plan_t;

/* Training-mode BatchNorm kept on the device (bk_kernels_t.bn_train_fwd /
 * bn_train_bwd): every vector is PARAMETER MEMORY. */
typedef struct {
    double count;                  /* values per channel: n * h * w (>= 1) */
    float eps, momentum;
    int relu;                      /* the op's output is relu(bn(x)) */
    const float *gamma, *beta;
    float *stat;                   /* [mean, var] of 2c floats: forward OUT, backward IN */
    float *running_mean, *running_var;   /* forward: moved in place */
    float *ggamma, *gbeta;         /* backward OUT; NULL: not wanted (frozen) */
    const void *res;               /* forward: y = relu(bn(x) + res) as bn_add_relu
                                    * computes it (the tape's fusion), or NULL */
    void *gres;                    /* backward, with relu (y: the block end's ReLU
                                    * output, gy its gradient; the tape's fusion):
                                    * dy' also stored here as relu_bwd stores it (+0
                                    * where y <= 0), in the buffer's type, and the
                                    * gx pass reads it from here; NULL: not stored */
    const void *gy2;               /* backward, with gres: the last term of gy's
                                    * tensor's gradient, not yet added (the tape's
                                    * fusion): dy' is then relu_bwd of gy + gy2 added
                                    * and rounded as acc does it (gy is left as it
                                    * was); NULL: gy is whole */
} bk_bn_train_t;

/* The kernels of every graph (gpud/backend_train.c). Buffers (void *)
 * are the backend's activation memory in the backend's layout. Parameters
 * (float *: weights, biases, gamma/beta, mean/var and their gradients) are
 * PARAMETER MEMORY in PyTorch layout: views into the model's arenas, or
 * the tape's own per-channel vectors in the same kind of memory (training
 * BatchNorm's batch mean/var, an inference op's folded weights:
 * tape_mem.c) — host arrays where backend_arena_ops(be) is host memory,
 * device addresses on cuda. A kernel reads them at every call (they change
 * between steps) except an inference graph's plans (g->infer, see
 * conv_plan). The per-channel centres and coefficients of chan_sums,
 * chan_axpb and bn_grad_* and their double sums are HOST arrays (the host
 * computes and all-reduces them). Shapes are NCHW logical dims. Kernels OVERWRITE their
 * outputs; the tape accumulates where a tensor feeds several ops.
 * int-returning kernels give 0, or -1 after bk_ctx_fail(g, ...). A NULL
 * gradient output means "not needed". */
typedef struct bk_kernels {
    void *(*alloc)(bk_ctx_t *g, size_t count);     /* zeroed floats */
    void (*release)(backend_t *be, void *buf);
    /* layout: the buffer's (see .layout); 0 the backend's default */
    int (*write)(bk_ctx_t *g, void *dst, const float *nchw, const int shape[4], int layout);
    int (*read)(bk_ctx_t *g, const void *src, float *nchw, const int shape[4], int layout);
    /* optional: uint8 NCHW pixels through lut (shape[1] x 256 floats: the
     * value of each byte per channel) straight into dst, the batch's input
     * in its layout (no float copy of the batch first): the values write
     * would store from those floats. 1: not for this layout or precision
     * (the caller writes floats). NULL: always write from floats. */
    int (*write_u8)(bk_ctx_t *g, void *dst, const uint8_t *px, const float *lut,
                    const int shape[4], int layout);
    /* element-wise (layout-agnostic), count elements */
    void (*zero)(backend_t *be, void *y, size_t count);
    void (*copy)(backend_t *be, void *y, const void *x, size_t count);
    /* y = a + b, then max(0, y) when relu */
    void (*add)(backend_t *be, void *y, const void *a, const void *b, size_t count, int relu);
    void (*acc)(backend_t *be, void *y, const void *x, size_t count);   /* y += x */
    /* y (n, cy, h, w) channels [off, off + cx) <-> x (n, cx, h, w):
     * to_y: y part = x (forward); else x = y part (backward of concat). */
    void (*concat)(backend_t *be, void *y, int cy, void *x, const int xshape[4], int off,
                   int to_y);
    /* (n,c,h,w) -> (n,c*h*w,1,1) in NCHW order; backward: the inverse */
    void (*flatten)(backend_t *be, void *y, const void *x, const int xshape[4], int backward);
    /* y = x * mask / (1 - p); sample i's mask from dropout_op_key(keys[i],
     * op) and (c, h, w) (gpud/dropout_key.h: keys[i] is the sample key of
     * (seed, step, id i); the graph's copy (put), host memory on a backend
     * without it; NULL when p = 0, a copy). The same call with x = dy,
     * y = dx is the backward. */
    void (*dropout)(backend_t *be, void *y, const void *x, const int shape[4], float p,
                    uint32_t op, const uint64_t *keys);
    /* logits (n, k): per-sample loss (n); backward: glogits = dloss[i] *
     * (softmax - smoothed one-hot). labels: already checked; the
     * graph's copy put in backend memory (put), host memory without it. */
    void (*ce_fwd)(backend_t *be, const void *logits, const int32_t *labels, int n, int k,
                   float eps, void *loss);
    void (*ce_bwd)(backend_t *be, const void *logits, const int32_t *labels, int n, int k,
                   float eps, const void *dloss, void *glogits);
    /* Optional: bytes of host memory src into dst, a buffer of alloc's. The
     * engine puts each graph's step inputs there once a step, before the
     * pass: its labels (what ce_fwd / ce_bwd read) and dropout's sample
     * keys, so that no kernel call of the step copies from the host (a
     * recorded training pass replays reading them in place:
     * tape_capture.c); each graph has its own (a bitwise step sets every
     * chunk's graph before it runs any). 0, or -1 after bk_ctx_fail. NULL:
     * the kernels read the host's copies. */
    int (*put)(bk_ctx_t *g, void *dst, const void *src, size_t bytes);
    /* Optional (bk_read_topk): each of n rows' top-k of c logits in x (a
     * graph buffer of the default layout), model_topk_ce's order, into
     * HOST memory out (n * k). 0; 1: not for this buffer; -1 after
     * bk_ctx_fail. NULL: the caller reads x and ranks on the host. */
    int (*topk)(bk_ctx_t *g, const void *x, int n, int c, int k, int32_t *out);

    /* post NULL: a training plan (forward and backward). Else the fused
     * conv of an inference graph (graph_plan.c, forward only, eval mode):
     * conv + bias, then post->op[] in order; the plan may assume the
     * weights and bias it is given stay the same while g->params_version
     * does (graph_plan.c bumps it when it refolds them). */
    bk_plan_t *(*conv_plan)(bk_ctx_t *g, const bk_conv_t *p, const bk_post_t *post,
                            const int in[4], const int out[4]);
    /* res: with a BK_PO_SUM post-op, the residual; it is y's own buffer
     * (the sum accumulates in place). Else NULL. */
    int (*conv_fwd)(bk_ctx_t *g, bk_plan_t *p, const void *x, const float *w,
                    const float *b, const void *res, void *y);
    int (*conv_bwd)(bk_ctx_t *g, bk_plan_t *p, const void *x, const float *w,
                    const void *gy, void *gx, float *gw, float *gb);
    /* Optional, for --precision bf16|fp16 training: 1 where the plan's conv
     * casts the fp32 weights it is given to the 16-bit format itself, as
     * round_half_param rounds them, and its weight gradient comes out as
     * 16-bit values (no bias): the engine then gives it the master weights
     * and keeps no rounded copy, and rounds neither (two launches a conv a
     * step fewer). NULL or 0: the engine's rounded copy (tape_forward.c). */
    int (*conv_casts_weights)(const bk_plan_t *p);
    /* training: mean/var OUT (batch mean, biased variance); else IN.
     * relu: the output is relu(bn(x)); backward gets that y (the mask).
     * bn_bwd's y is NULL where the plan has no ReLU and the tape did not
     * store the output (a training graph's BatchNorm + add + ReLU fusion,
     * set to eval): read y only for the ReLU. */
    bk_plan_t *(*bn_plan)(bk_ctx_t *g, const int in[4], float eps, int relu);
    int (*bn_fwd)(bk_ctx_t *g, bk_plan_t *p, int training, const void *x,
                  const float *gamma, const float *beta, float *mean, float *var, void *y);
    int (*bn_bwd)(bk_ctx_t *g, bk_plan_t *p, int training, const void *x, const void *y,
                  const void *gy, const float *gamma, const float *mean, const float *var,
                  void *gx, float *ggamma, float *gbeta);
    /* Optional: the residual block's tail in the normalising pass (the
     * tape's forward fusion, tape_fuse.c), y = relu(bn(x) + res): bn_fwd's
     * eval-mode normalising of x with the given statistics (a plan made
     * with relu 0), the value bn_fwd would store, then summed with res and
     * clipped as add with relu would: the bits of bn_fwd then add, in one
     * pass. A backend that gives it takes bk_bn_train_t.res in
     * bn_train_fwd alike. NULL: the tape runs them apart. */
    int (*bn_add_relu)(bk_ctx_t *g, bk_plan_t *p, const void *x, const float *gamma,
                       const float *beta, const float *mean, const float *var, const void *res,
                       void *y);
    /* Optional: a BatchNorm with its own ReLU and the dropout after it in
     * the normalising pass (the tape's forward fusion, tape_fuse.c),
     * y = dropout(relu(bn(x))) of shape (NCHW dims), with the dropout's
     * probability, op index and sample keys (as the dropout kernel takes
     * them; p = 0 with keys NULL: no mask): bn_fwd's eval-mode value with the given statistics
     * and its ReLU, then the dropout kernel's arithmetic, the bits of the
     * two ops in one pass. Only where bn_grad_sums and bn_grad_apply take
     * gscale (the fused op's backward reads the dropout's output and
     * gradient). NULL: the tape runs them apart. */
    int (*bn_relu_drop)(bk_ctx_t *g, bk_plan_t *p, const void *x, const int shape[4],
                        const float *gamma, const float *beta, const float *mean,
                        const float *var, float drop_p, uint32_t op, const uint64_t *keys,
                        void *y);
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
     * relu (y: the op's output, else +0), times gscale in float: 1, or a
     * fused dropout's 1 / (1 - p) (bn_relu_drop: y and gy are then the
     * dropout's, whose backward that product is). out[0, c) = sum dy',
     * out[c, 2c) = sum dy' * (x - center[c]). A backend without
     * bn_relu_drop is called with gscale 1 only. */
    void (*bn_grad_sums)(backend_t *be, const void *x, const void *y, const void *gy,
                         const int shape[4], int relu, float gscale, const float *center,
                         double *out);
    /* Optional, with bn_grad_sums: gx = scale[c] * dy' + a[c] * (x - center[c]) + b[c]. */
    void (*bn_grad_apply)(backend_t *be, void *gx, const void *x, const void *y, const void *gy,
                          const int shape[4], int relu, float gscale, const float *center,
                          const float *scale, const float *a, const float *b);
    /* Optional, both or neither: training-mode BatchNorm without the host,
     * for backends whose parameter memory is device memory (the cuda
     * backend; tape_bn.c takes this path when no SyncBatchNorm all-reduce
     * and no bitwise chunking needs the sums on the host). The host path's
     * arithmetic bit for bit (gpud/bn_math.h) on the same channel sums:
     * forward chan_sums(x) -> mean, chan_sums(x, mean) -> var (t->stat),
     * y = the eval-mode kernel with them, the running stats moved;
     * backward bn_grad_sums(x, y, gy, mean) -> [sum dy', sum dy' xhat],
     * gamma/beta gradients (when t->ggamma), then gx (when gx) as
     * bn_grad_apply. p is bn_plan's. Backward takes t->gres and t->gy2
     * (the tape's fusions, bk_bn_train_t). */
    int (*bn_train_fwd)(bk_ctx_t *g, bk_plan_t *p, const void *x, const int shape[4],
                        const bk_bn_train_t *t, void *y);
    int (*bn_train_bwd)(bk_ctx_t *g, bk_plan_t *p, const void *x, const void *y,
                        const void *gy, const int shape[4], const bk_bn_train_t *t, void *gx);
    bk_plan_t *(*relu_plan)(bk_ctx_t *g, const int in[4]);
    int (*relu_fwd)(bk_ctx_t *g, bk_plan_t *p, const void *x, void *y);
    int (*relu_bwd)(bk_ctx_t *g, bk_plan_t *p, const void *y, const void *gy, void *gx);
    bk_plan_t *(*pool_plan)(bk_ctx_t *g, const bk_pool_t *pp, const int in[4],
                            const int out[4]);
    int (*pool_fwd)(bk_ctx_t *g, bk_plan_t *p, const void *x, void *y);
    int (*pool_bwd)(bk_ctx_t *g, bk_plan_t *p, const void *x, const void *gy, void *gx);
    /* x (n, c, h, w) flattened in NCHW order; weight [out, c*h*w] */
    bk_plan_t *(*linear_plan)(bk_ctx_t *g, const int in[4], int out, int has_bias);
    int (*linear_fwd)(bk_ctx_t *g, bk_plan_t *p, const void *x, const float *w,
                      const float *b, void *y);
    int (*linear_bwd)(bk_ctx_t *g, bk_plan_t *p, const void *x, const float *w,
                      const void *gy, void *gx, float *gw, float *gb);
    /* --precision bf16|fp16 (gpud/bf16.h, gpud/fp16.h): round count floats
     * of a buffer to fmt in place. NULL: the backend cannot run either
     * (backend_set_precision refuses). */
    void (*round_half)(backend_t *be, bk_half_t fmt, void *y, size_t count);
    /* The same on a device arena: dst = src rounded to fmt, count floats of
     * PARAMETER MEMORY (dst may be src): the rounded copy of a conv's or
     * linear's weights each forward, their gradients after the backward.
     * NULL: training in bf16/fp16 needs host arenas (the tape rounds on the
     * host; backend_set_precision refuses it otherwise). */
    void (*round_half_param)(backend_t *be, bk_half_t fmt, float *dst, const float *src,
                             size_t count);
    /* Optional: backend_bf16_native's probe (NULL: no native bf16). With
     * precision BK_BF16_NATIVE the conv and linear plans are native. */
    int (*bf16_native)(const char **isa);
    /* Optional: the layout of an activation of shape s in an inference
     * graph (g->infer), a code of the backend's own, 0 its default; it
     * holds numel(s) floats. A function of the shape alone, so that the
     * plans of an op and of its readers agree without asking each other.
     * NULL: every buffer has the default layout. */
    int (*layout)(backend_t *be, const int s[4]);
} bk_kernels_t;

/* What a backend can do (bk_ops_t.caps): backend_caps.h's BK_CAN_* (its
 * BK_CAPS_<NAME>), and the engine's own flags below. */
enum {
    /* --precision bf16 inference runs on the inference graph (docs/BF16.md
     * "bf16 inference plan"): the plan hands the fused ops bf16-rounded
     * weights and biases, and every op's output is rounded to bf16. Without
     * it, bf16 inference runs the recorded ops. */
    BK_CAP_FUSED_BF16 = 1u << 8,
    /* bk_ops_t.train16 takes bf16 graphs, fp16 graphs (each format its own
     * flag: a backend may store one in 16 bits and not the other). */
    BK_CAP_ACT16_BF16 = 1u << 9,
    BK_CAP_ACT16_FP16 = 1u << 10,
    /* --precision fp16 inference runs on the inference graph as bf16's does
     * (BK_CAP_FUSED_BF16, fp16 values in bf16's place; docs/FP16.md "The
     * inference plan"). Without it, fp16 inference runs the recorded ops. */
    BK_CAP_FUSED_FP16 = 1u << 11,
};

/* Optional: an inference graph's forward recorded once and replayed (CUDA
 * graphs; the engine's tape_capture.c decides when). The backend queues the
 * kernels' work between capture_begin and capture_end instead of running
 * it; every address and scalar the kernels were given is baked in, so the
 * engine replays only while they stay the same (the graph's buffers,
 * plans and parameter memory are fixed once compiled; inputs are written
 * and outputs read outside the forward). */
typedef struct bk_capture bk_capture_t;   /* the backend's recorded forward */
typedef struct bk_graph_ops {
    /* Start recording. 0; 1: the backend chooses not to (a switch, why
     * says); -1: it cannot (why). Nothing is recording unless 0. */
    int (*capture_begin)(backend_t *be, char *why, size_t len);
    /* Stop recording. ok 0: an op failed while recording (the recording is
     * dropped). The recorded forward, or NULL with why; either way nothing
     * is recording any more and errors raised while recording are cleared
     * from the backend (the engine runs the ops again, unrecorded). */
    bk_capture_t *(*capture_end)(backend_t *be, int ok, char *why, size_t len);
    /* Queue the recorded forward. 0; 1: stale (memory it uses moved; release
     * it and record again); -1: the launch failed (why; the error cleared,
     * nothing queued). */
    int (*replay)(backend_t *be, bk_capture_t *c, char *why, size_t len);
    void (*release)(backend_t *be, bk_capture_t *c);
} bk_graph_ops_t;

/* Optional: the device time of each op (tape_timer.c), for a profile. */
typedef struct bk_timer bk_timer_t;
typedef struct bk_timer_ops {
    /* NULL: the backend does not time (its switch is off, or it failed:
     * logged). *every: print a summary every that many forwards (0: at
     * the graph's end only). */
    bk_timer_t *(*create)(backend_t *be, int *every);
    /* A new sequence of intervals starts at the work queued from now. */
    void (*begin)(bk_timer_t *t);
    /* The work queued since the previous mark (or begin) is slot's. */
    void (*mark)(bk_timer_t *t, int slot);
    /* Wait for the marked work, add each interval's milliseconds to
     * ms[slot] (slot < nslot) and forget the sequence. 0, or -1 (the
     * timer gave up: logged). */
    int (*take)(bk_timer_t *t, double *ms, int nslot);
    void (*destroy)(bk_timer_t *t);
} bk_timer_ops_t;

/* Optional: image files decoded on the device (backend_decode). */
typedef struct bk_decode_ops {
    int (*ready)(backend_t *be, char *err, size_t errlen);
    int (*batch)(backend_t *be, const bk_decode_batch_t *b, const uint8_t **out, char *err,
                 size_t errlen);
    /* backend_decode_host: 0 where px is not the last batch's */
    int (*host)(backend_t *be, const uint8_t *px, size_t bytes, char *err, size_t errlen);
} bk_decode_ops_t;

typedef struct bk_ops {
    const char *name;
    void (*destroy)(backend_t *be);
    const struct bk_kernels *train;   /* the kernels (NULL: none: nothing runs) */
    /* Optional: the kernels of a --precision bf16|fp16 graph on the tape
     * whose activations and activation gradients are 16-bit buffers (the
     * graph's bf16 or fp16 values, 2 bytes each; alloc counts 16-bit
     * elements), chosen at compile (tape_compile.c; DDPIPE_HALF_ACTIVATIONS=0
     * keeps train's fp32 buffers). Each kernel stores its outputs rounded
     * (round_half is the identity there), so the numbers are those of the
     * fp32 buffers with the engine's rounding points. Exceptions, fp32
     * buffers of train's: a cross-entropy's loss (ce_fwd writes it) and its
     * gradient (ce_bwd reads it), the labels and dropout keys put, and
     * parameter memory as everywhere. release and put are train's. Used for
     * the formats caps names (BK_CAP_ACT16_*); NULL: 16-bit graphs keep fp32
     * buffers. */
    const struct bk_kernels *train16;
    unsigned caps;                    /* BK_CAP_* */
    /* Optional: adds the bytes the kernels copied between host and device
     * memory since the last call to *t, by purpose, and zeroes the
     * backend's counters (backend_traffic_take). NULL: the kernels work
     * in host memory and copy nothing of their own. */
    void (*traffic)(backend_t *be, struct bk_traffic *t);
    const bk_graph_ops_t *graphs;     /* optional (NULL: every forward runs op by op) */
    const bk_timer_ops_t *timer;      /* optional (NULL: no device timing) */
    const bk_decode_ops_t *decode;    /* optional (NULL: --decode gpu is refused) */
} bk_ops_t;

/* Every implementation's backend starts with this. */
struct backend {
    const bk_ops_t *ops;
    int threads;
    bk_precision_t precision;   /* backend_set_precision */
    char precision_name[64];    /* backend_precision_name */
    const struct bk_arena_ops *arena;   /* the model's arenas (backend_arena.h); NULL: host */
};

/* graph_fold.c. Eval-mode BatchNorm folded into the preceding conv, in
 * place: w [oc, per_oc] scaled by s = gamma / sqrt(var + eps) per output
 * channel, bias = (bias - mean) * s + beta, in double, rounded once per
 * value. */
/* The inference plan's 16-bit copies of a fused conv's or linear's folded
 * weights w [nw] and bias [oc] (may be NULL), in place: each rounded to
 * fmt, as autocast casts a layer's. fp16 ends at 65504: a BatchNorm folded
 * into its conv can take the bias past it, (bias - mean) * s + beta with a
 * large running mean and a small variance, where autocast's own
 * BatchNorm, in fp32 after a conv whose output is near the mean, does not
 * overflow; such a bias stays its fp32 value (the fused conv adds it in
 * fp32). -1 when a weight rounds to an infinity (a finite one: the fold's
 * scale is past the format), the arrays then not to be used. */
int bk_fold_round16(bk_half_t fmt, float *w, size_t nw, float *bias, int oc);
void bk_bn_fold(float *w, float *bias, int oc, size_t per_oc, const float *gamma,
                const float *beta, const float *mean, const float *var, float eps);

/* Constructors of the implementations (threads already resolved, >= 1). */
backend_t *cpu_backend_new(int threads, char *err, size_t errlen);
backend_t *ref_backend_new(int threads, char *err, size_t errlen);
/* ref_device.c: the ref kernels over an emulated device arena (tests). */
backend_t *ref_device_backend_new(int threads, char *err, size_t errlen);

#endif
