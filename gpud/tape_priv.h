/* tape_priv — the structures of the graph engine (the tape), shared by its
 * files and nothing else:
 *
 *   backend_train.c  the tape: builders (shape checks), compile, writes, reads
 *   tape_forward.c   the forward
 *   tape_backward.c  the backward
 *   tape_bn.c        training-mode BatchNorm (SyncBatchNorm's all-reduces)
 *   tape_chunks.c    bitwise training: chunk graphs run op by op
 *   tape_bn_chunks.c bitwise training's BatchNorm: exact sums over chunks
 *   tape_mem.c       the tape's parameter memory (host or device, as the arenas)
 *   tape_compile.c   the compile step: kernel plans and buffers
 *   tape_capture.c   an inference forward recorded once, replayed (CUDA graphs)
 *   tape_timer.c     the ops' device time by kind (DDPIPE_CUDA_PROFILE)
 *   graph_plan.c     the inference plan: a forward-only eval-mode tape
 *                    rewritten into fused ops (fops) of the same kind
 *   graph_fold.c     BatchNorm folded into the preceding convolution
 *   graph_error.c    the sticky error (bk_fail, bk_ctx_fail)
 *
 * Building records ops and shapes only; bk_graph_compile (run by the first
 * write, forward or read) chooses which ops run: the inference graph when
 * graph_plan.c can express it, else the recorded ones; either way on the
 * backend's one kernel table (bk_kernels_t). */
#ifndef DDP_TAPE_PRIV_H
#define DDP_TAPE_PRIV_H

#include <stddef.h>
#include <stdint.h>

#include "gpud/backend_impl.h"

struct bk_tensor {
    int n, c, h, w;
    int id;             /* index in the graph's var list */
    void *val, *grad;   /* tape buffers, made by the compile step */
    int layout;         /* val's layout (bk_kernels_t.layout), 0 the default */
    bk_tensor_t *alias; /* inference graph: the var holding its value (a dropout's
                         * or flatten's output: its input's), or NULL */
    int shares;         /* val is another var's buffer (a residual summed into) */
    int consumed;       /* inference graph: a residual that a fused conv summed into */
    int needs_grad;     /* some parameter or requires_grad input upstream */
    int grad_set;       /* during backward: grad holds a value */
    int is_input;
    int producer;       /* op index, -1 for inputs */
    int keep;           /* its value is read after the forward (tape_compile.c) */
    int pooled;         /* val is a shared buffer of the graph's pool */
    int f32;            /* a 16-bit-activation graph's fp32 var (the loss): its
                         * buffers are k32's (tape_kv) */
    int grad_shared;    /* grad is the buffer of the gradient of the add it alone
                         * feeds (tape_compile.c share_add_grads): the add's
                         * backward passes it on without a copy */
    int user_keep;      /* bk_keep asked for it (keep is also the compile's mark) */
    int no_val;         /* its value is never stored: the op making it was fused
                         * into its reader's forward (tape_fuse.c); val stays NULL */
    int grad_left;      /* during backward: the last term of its gradient was left
                         * in the graph's temporary for the BatchNorm whose fused
                         * ReLU made it to add (tape_fuse.c, top_t.grad_fold) */
};

typedef enum {
    TO_CONV, TO_BN, TO_RELU, TO_POOL, TO_FLATTEN, TO_LINEAR, TO_ADD, TO_CONCAT, TO_DROPOUT,
    TO_CE
} top_kind_t;

#define MAX_IN 64   /* concat inputs (DenseNet blocks have up to 32+1) */

typedef struct top {
    top_kind_t kind;
    char name[128];
    bk_tensor_t *in[MAX_IN];
    int nin;
    bk_tensor_t *out;
    bk_plan_t *plan;
    bk_conv_t conv;
    bk_bn_t bn;
    bk_pool_t pool;
    float *save_mean, *save_var;    /* BN: batch statistics of the last forward (host) */
    float *stat;                    /* BN on a device arena: parameter memory of 4c floats,
                                     * [mean, var] as the kernels get them, [ggamma,
                                     * gbeta] of bn_bwd's sums; NULL on host arenas (the
                                     * kernels take save_mean / save_var) */
    float *sync;                    /* training BN backward scratch: 5c floats */
    double *sync_d;                 /* 2c + 1 per-channel sums (and the count), all-reduced */
    double sync_count;              /* global sample count of the last forward */
    float p;                        /* dropout probability, CE smoothing */
    int lin_out;
    float *w, *gw, *b, *gb;         /* linear */
    float *w16, *b16;               /* bf16: conv/linear weights rounded (each forward) */
    /* An inference graph's fused op (graph_plan.c): */
    bk_post_t post;                 /* conv: post-ops; add: {RELU} or none */
    int bn_op;                      /* conv: the tape op of the folded BatchNorm, or -1 */
    int xrun_seg;                   /* ghost BN in bitwise training: its first segment
                                     * of the graph's xrun */
    float *fw, *fb;                 /* conv/linear: the weights it runs with when they
                                     * are not the bound ones (BN folded, bf16 rounded),
                                     * parameter memory (tape_mem.c); NULL: the bound
                                     * arrays */
    /* A training graph's forward fusion (tape_fuse.c): */
    bk_tensor_t *fwd_out;           /* the tensor this op's forward writes instead of
                                     * out (out->no_val), or NULL */
    bk_tensor_t *fwd_res;           /* BN: the residual its forward sums in before the
                                     * ReLU (bk_kernels_t.bn_add_relu), or NULL */
    int fwd_skip;                   /* its forward ran inside an earlier op's */
    struct top *fwd_drop;           /* BN: the dropout whose mask its forward applies
                                     * (bk_kernels_t.bn_relu_drop; fwd_out is the
                                     * dropout's output), or NULL. The dropout's
                                     * backward is then the BN's (tape_backward.c) */
    /* ... and its backward fusion (tape_fuse_bwd), taken while the BN runs on
     * the device (bn_on_device): */
    struct top *bwd_relu;           /* BN with fwd_res: the block end's ReLU whose
                                     * backward its own does (bk_bn_train_t.gres), or NULL */
    int bwd_fused;                  /* ReLU: its backward is done there */
    struct top *grad_fold;          /* the BatchNorm (with bwd_relu) whose ReLU made this
                                     * op's input, whose gradient's last term this op's
                                     * backward writes: when not the first term (the
                                     * temporary), it is left there for that BatchNorm,
                                     * the next backward, to add as it reads (its sums
                                     * pass, bk_bn_train_t.gy2) instead of an acc pass;
                                     * or NULL */
    int cut_after;                  /* the grad queue's mark of its gradients said 1 in
                                     * the last pass that marked them: a recorded pass
                                     * ends a segment after it (tape_pass.c) */
} top_t;

/* tape_capture.c's state machine of an inference graph's forward:
 * NEW (not run yet) -> WARM (ran once op by op: plans, buffers, scratch
 * and algorithms settled) -> LIVE (recorded; later forwards replay it),
 * or OFF (not capturable, switched off, or a capture/replay failed: op by
 * op from then on). A stale recording (LIVE) is recorded again; after a
 * refold (params_version moved) the graph is WARM again: one forward op
 * by op, then a new recording. */
typedef enum { CAP_NEW, CAP_WARM, CAP_LIVE, CAP_OFF } tape_cap_state_t;
enum { TAPE_MAX_SEGS = 64 };
typedef struct {
    tape_cap_state_t state;
    int pass;                       /* a training graph's whole pass (forward and
                                     * backward, bk_forward_backward), not an
                                     * inference forward */
    bk_capture_t *seg[TAPE_MAX_SEGS];   /* LIVE: the backend's recording, in segments:
                                     * one, or a training pass with a grad queue cut
                                     * where its flushes go (tape_pass.c) */
    int seg_end[TAPE_MAX_SEGS];     /* the last backward op of segment k (0: the end) */
    int nseg;
    int defer;                      /* recording a pass: tape_backward_op leaves the
                                     * grad queue's marks to tape_pass.c */
    int capped;                     /* the recording has TAPE_MAX_SEGS segments and
                                     * later flushes inside the last: not stale */
    unsigned version;               /* base.params_version of the last op-by-op
                                     * forward (WARM) or of the recording (LIVE) */
    unsigned long captures, replays;
} tape_cap_t;

/* tape_timer.c: device time per op kind, [backward][kind] milliseconds;
 * [backward][TAPE_TIMER_GAP] the device's time between ops (waiting for
 * the host to queue the next one). */
#define TAPE_TIMER_GAP (TO_CE + 1)
typedef struct {
    bk_timer_t *t;                  /* NULL: not timing */
    int tried;                      /* the backend was asked (once) */
    int every;                      /* a summary every that many forwards (0: at the end) */
    unsigned long passes[2];        /* forwards, backwards timed */
    double ms[2][TAPE_TIMER_GAP + 1];
} tape_timer_t;

struct bk_graph {
    bk_ctx_t base;
    const bk_kernels_t *k; /* the activations' kernels: the backend's train, or its
                            * train16 (store16); NULL: a description graph */
    const bk_kernels_t *k32; /* the backend's train: fp32 buffers (the loss, labels,
                              * dropout keys) and parameter memory's rounding */
    int store16;            /* activations are 16-bit buffers (bk_ops_t.train16) */
    int training;
    int no_dropout;
    int forward_only;       /* no gradient buffers, no backward (inference) */
    int half;               /* --precision bf16|fp16: autocast's rounding (compile) */
    bk_half_t half_fmt;     /* to which 16-bit float (with half) */
    int compiled;           /* the tape's plans and buffers exist */
    top_t *fops;            /* the inference graph (graph_plan.c): the ops that run
                             * in place of ops[], or NULL */
    size_t nfops;
    int fused_stale;        /* bk_graph_reload: re-fold at the next forward */
    bk_tensor_t **v;
    size_t nv, capv;
    top_t *ops;
    size_t nops, capops;
    void *tmp;              /* gradient temporary, the largest tensor */
    size_t tmp_count;
    void *dy;               /* bk_forward_backward: the loss gradient, staged in the
                             * backend's memory before the pass (dy_count floats) */
    size_t dy_count;
    void **pool;            /* buffers shared by activations nobody reads later */
    size_t *pool_count;     /* their sizes (elements: floats, or 16-bit ones) */
    size_t npool;
    size_t bytes;           /* the tape's activation buffers (bk_graph_bytes) */
    int32_t *labels;        /* n of the first CE op */
    const int32_t *labels_k; /* what the CE kernels read: labels, or labels_buf */
    void *labels_buf;       /* backend memory (alloc) the labels are put in (bk_kernels_t.put) */
    int label_n;
    int have_labels;
    uint64_t seed, step;
    int64_t *ids;
    int ids_n;
    uint64_t *keys;                 /* dropout's sample keys of the step (dropout_key.h) */
    const uint64_t *keys_k;         /* what the dropout kernels read: keys, or keys_buf */
    void *keys_buf;                 /* backend memory (alloc, 2 floats a key) they are put in */
    int keys_n;
    int keys_stale;                 /* bk_set_step since keys were made */
    int batch;                      /* n of the first input */
    bk_allreduce_fn allreduce;      /* SyncBatchNorm; NULL: local statistics */
    void *allreduce_ctx;
    int exact;                      /* bk_graph_set_exact: a chunk of bitwise training */
    int exact_sync;                 /* its BatchNorm: global statistics (else per chunk) */
    bk_xreduce_fn xreduce;          /* its exact sums over the ranks; NULL: one rank */
    struct xsum *xrun;              /* ghost BatchNorm's running-stat sums of the step,
                                     * on the first chunk's graph: 3 segments per
                                     * training BN op (means, unbiased variances, the
                                     * chunk count; top_t.xrun_seg), summed by the
                                     * caller (bk_chunks_running_sums) */
    void *xreduce_ctx;
    bk_grad_ready_fn grad_ready;    /* parameter gradients as they become final */
    void *grad_ready_ctx;
    bk_grad_mark_fn grad_mark;      /* ... or in two halves (bk_graph_set_grad_queue) */
    bk_grad_flush_fn grad_flush;
    void *grad_queue_ctx;
    bk_traffic_t *traffic;          /* bk_graph_set_traffic; NULL: not counted */
    int profile;                    /* DDPIPE_TRAIN_PROFILE set: time op kinds */
    double prof[2][TO_CE + 1];      /* [backward][kind] seconds */
    tape_cap_t cap;                 /* the forward's capture (tape_capture.c) */
    tape_timer_t timer;             /* the ops' device time (tape_timer.c) */
};

static inline size_t numel(const bk_tensor_t *t)
{
    return (size_t)t->n * t->c * t->h * t->w;
}

/* The kernels of t's buffers, and the bytes of one of its elements. */
static inline const bk_kernels_t *tape_kv(const bk_graph_t *g, const bk_tensor_t *t)
{
    return t->f32 ? g->k32 : g->k;
}

/* The bytes of an activation's element: 2 in a 16-bit graph, else a float's. */
static inline size_t tape_act_esize(const bk_graph_t *g)
{
    return g->store16 ? 2 : sizeof(float);
}

static inline size_t tape_esize(const bk_graph_t *g, const bk_tensor_t *t)
{
    return t->f32 ? sizeof(float) : tape_act_esize(g);
}

static inline void shape_of(const bk_tensor_t *t, int s[4])
{
    s[0] = t->n;
    s[1] = t->c;
    s[2] = t->h;
    s[3] = t->w;
}

/* tape_compile.c: every op's kernel plan and every var's buffers, 0 or -1
 * after bk_ctx_fail (what was made is still released by tape_release). */
int tape_compile(bk_graph_t *g);
/* Release them (plans, buffers, BN scratch). */
void tape_release(bk_graph_t *g);

/* graph_plan.c. For a forward-only eval-mode graph with a backend: the
 * inference graph g->fops (conv with BN folded and post-ops, add + ReLU,
 * ...), the folded weights included; 1 when built (a summary in why), 0
 * when some op has no fused form (which, in why; nothing changed), -1
 * after bk_fail. The compile step (tape_compile) then plans g->fops. */
int plan_fused_build(bk_graph_t *g, char *why, size_t len);
/* Fold the bound parameters into the fused ops again (bk_graph_reload).
 * 0, or -1 after bk_ctx_fail (a device copy failed). */
int plan_refold(bk_graph_t *g);
/* Free g->fops and forget the vars' inference roles (after tape_release). */
void plan_fused_drop(bk_graph_t *g);
/* The graph was switched to training mode: drop the inference graph and
 * compile the tape, keeping the inputs written. 0 or -1. */
int plan_fused_leave(bk_graph_t *g);
/* backend_train.c: compiled, and ready for a forward in the current mode:
 * the fused ops re-folded after bk_graph_reload, or given up for the
 * recorded ops when the graph was switched to training mode. 0 or -1. */
int tape_ready(bk_graph_t *g);
/* tape_compile.c: how many op inputs read each var, reads[v] by any op and
 * reads[nv + v] by adds (what the fusions and the gradient sharing decide
 * by); NULL when out of memory. The caller frees it. */
int *tape_reads_new(const bk_graph_t *g);
/* tape_fuse.c: a training graph's forward fusions, marked before its
 * buffers are planned (fwd_out, fwd_skip, no_val); uses: tape_reads_new's.
 * tape_fuse_clear undoes them (tape_release). */
void tape_fuse(bk_graph_t *g, const int *uses);
/* After the gradient buffers are shared (tape_compile.c share_add_grads):
 * the residual block end's ReLU backward inside its BatchNorm's. */
void tape_fuse_bwd(bk_graph_t *g);
void tape_fuse_clear(bk_graph_t *g);
/* DDPIPE_TRAIN_FUSE is not 0: the fusions, and the add's gradient shared
 * with a shortcut read elsewhere too (tape_compile.c share_add_grads). */
int tape_fuse_enabled(void);
/* tape_forward.c: the ops of one forward, in order (run_ops); 0 or -1. */
int tape_forward_ops(bk_graph_t *g);
/* backend_train.c: the step's dropout sample keys where the kernels read
 * them (made at first use after bk_set_step); NULL after bk_ctx_fail.
 * _ready makes them now when an op of g drops (before a recorded pass,
 * whose replay reads them in place). 0 or -1. */
const uint64_t *tape_dropout_keys(bk_graph_t *g);
int tape_dropout_keys_ready(bk_graph_t *g);
/* tape_forward.c: op i of the forward (bf16 rounding, profile, timer
 * included); 0 or -1. */
int tape_forward_op(bk_graph_t *g, size_t i);
/* tape_backward.c: bk_backward in parts, for tape_chunks.c: the seed
 * gradient dy written into y (checks, compile), op i's backward (its
 * parameter gradients handed to the grad-ready hook), and that hook call. */
int tape_backward_begin(bk_graph_t *g, bk_tensor_t *y, const float *dy);
/* y->grad holds the seed of a backward: every other gradient unset, the
 * seed rounded where the graph runs 16-bit and y's not the loss, y's set
 * (tape_backward_begin writes it from the host, tape_pass.c copies it). */
void tape_backward_seeded(bk_graph_t *g, bk_tensor_t *y);
int tape_backward_op(bk_graph_t *g, int i);
/* Where x's gradient goes (its buffer the first time, else the temporary;
 * NULL: none needed), and after writing it there: summed in, x marked. */
void *tape_grad_dst(bk_graph_t *g, bk_tensor_t *x);
void tape_grad_commit(bk_graph_t *g, bk_tensor_t *x);
void tape_grads_ready(bk_graph_t *g, const top_t *o);
/* o's gradients to the grad queue's mark (bk_graph_set_grad_queue): 1 when
 * one of them said its owner has work to flush (kept in o->cut_after). */
int tape_grads_mark(bk_graph_t *g, top_t *o);

/* tape_bn.c: a training-mode BatchNorm op's forward (batch statistics over
 * every rank, running stats updated) and backward (x NULL: an empty rank). */
int tape_bn_fwd(bk_graph_t *g, top_t *o, const bk_tensor_t *x, bk_tensor_t *y);
int tape_bn_bwd(bk_graph_t *g, top_t *o, const bk_tensor_t *x, const bk_tensor_t *y,
                void *gx);
/* tape_bn.c's parts, shared with tape_bn_chunks.c (bitwise training):
 * the op's scratch (sync, sync_d); per-channel sums of x (minus center when
 * given; x NULL: zeros) into sync_d[0, c); the local batch statistics of x
 * (sums through the SyncBatchNorm hook when set), returning the count;
 * save_mean/save_var copied to the kernels' parameter memory (o->stat);
 * y = the eval-mode kernel with those statistics; the running stats
 * updated from save_mean/save_var over count samples (tape_bn_move: towards
 * given means and variances, the update both use); backward: the local
 * [sum dy', sum dy' xhat] into sync_d[0, 2c) (and gx = gamma dy' without
 * bn_grad_sums), those sums as this op's gamma/beta gradients, and the
 * input gradient from sync_d's (global) sums and o->sync_count. */
int tape_bn_scratch(bk_graph_t *g, top_t *o);
void tape_bn_sums(bk_graph_t *g, top_t *o, const bk_tensor_t *x, const float *center);
double tape_bn_stats(bk_graph_t *g, top_t *o, const bk_tensor_t *x);
int tape_bn_put_stats(bk_graph_t *g, top_t *o);
int tape_bn_normalize(bk_graph_t *g, top_t *o, const bk_tensor_t *x, bk_tensor_t *y);
int tape_bn_running(bk_graph_t *g, top_t *o, size_t count);
int tape_bn_move(bk_graph_t *g, top_t *o, const double *mean, const double *var,
                 double var_scale);
int tape_bn_grad_local(bk_graph_t *g, top_t *o, const bk_tensor_t *x, const bk_tensor_t *y,
                       void *gx);
int tape_bn_param_grads(bk_graph_t *g, top_t *o);
int tape_bn_dx(bk_graph_t *g, top_t *o, const bk_tensor_t *x, const bk_tensor_t *y, void *gx);
/* tape_bn_chunks.c: training BatchNorm op i over the n chunk graphs of a
 * bitwise step (bk_chunks_forward / bk_chunks_backward); n = 0: a rank
 * without samples, g[0] only describing the ops (its exact sums are
 * zeros). 0 or -1 (the failure on g[0]'s context). */
int tape_bn_chunks_fwd(bk_graph_t **g, int n, size_t i);
/* A failure of chunk j's graph reported on g[0] (whose error the caller
 * reads); returns -1. */
static inline int tape_chunk_fail(bk_graph_t **g, int j)
{
    if (j > 0 && !g[0]->base.failed)
        bk_ctx_fail(&g[0]->base, "chunk %d: %s", j,
                    bk_graph_error(g[j]) ? bk_graph_error(g[j]) : "backend failure");
    return -1;
}
int tape_bn_chunks_bwd(bk_graph_t **g, int n, int i);
/* Ghost BatchNorm: g's xrun (built on first use, else zeroed) for a step;
 * then, once the caller summed it, every training BN op's running stats
 * moved once. 0 or -1. */
int tape_bn_chunks_xrun(bk_graph_t *g);
int tape_bn_chunks_running(bk_graph_t *g);

/* The bytes tape_bn_fwd (and, backward, tape_bn_bwd) of op o copy between
 * the host and a device arena in one training step of a full batch (the
 * backend has bn_grad_sums; tape_copies.c sums them). */
uint64_t tape_bn_copy_plan(const bk_graph_t *g, const top_t *o, int backward);

/* tape_mem.c: the memory the tape hands the kernels as parameters
 * (backend_impl.h), of the kind backend_arena_ops(be) allocates, and the
 * only way its host code reads or writes parameter memory. */
int tape_pmem_host(const bk_graph_t *g);   /* 1: host memory (views are plain arrays) */
/* n zeroed floats; NULL after bk_ctx_fail. */
float *tape_pmem_new(bk_graph_t *g, size_t n);
void tape_pmem_free(bk_graph_t *g, float *p);
/* Counters for the copies: training BatchNorm's vectors (bn) or other
 * parameter reads (params); NULL when the graph counts nothing. */
uint64_t *tape_count_bn(bk_graph_t *g);
uint64_t *tape_count_params(bk_graph_t *g);
/* host[0, n) = pm[0, n), counted; 0, or -1 after bk_ctx_fail. */
int tape_pmem_get(bk_graph_t *g, float *host, const float *pm, size_t n, uint64_t *count);
/* pm[0, n) = host[0, n), counted; 0, or -1 after bk_ctx_fail. */
int tape_pmem_put(bk_graph_t *g, float *pm, const float *host, size_t n, uint64_t *count);
/* pm as host floats: pm itself on host memory, else its n floats read into
 * stage (counted); NULL after bk_ctx_fail. */
float *tape_pmem_view(bk_graph_t *g, float *pm, float *stage, size_t n, uint64_t *count);
/* bf16/fp16: dst = src rounded to the graph's half_fmt (n floats of
 * parameter memory; dst may be src): on the host, or the backend's
 * round_half_param on a device arena. 0, or -1 after bk_ctx_fail. */
int tape_pmem_round(bk_graph_t *g, float *dst, const float *src, size_t n);

/* bf16/fp16: count floats of an activation (or its gradient) rounded to
 * the graph's half_fmt in place, on the backend. */
static inline void tape_round(bk_graph_t *g, void *y, size_t count)
{
    g->k->round_half(g->base.be, g->half_fmt, y, count);
}
/* After the host changed a view: written back when it was a stage. */
int tape_pmem_commit(bk_graph_t *g, float *pm, const float *view, size_t n, uint64_t *count);

/* A BN op normalises with batch statistics only in a training graph and
 * when not frozen in eval mode (bk_bn_t.eval). */
static inline int bn_training(const bk_graph_t *g, const top_t *o)
{
    return g->training && !o->bn.eval;
}

/* A training BatchNorm op runs on the device (the backend's bn_train_fwd /
 * bn_train_bwd, no host vectors) where the arenas are device memory and
 * neither SyncBatchNorm's all-reduce nor bitwise chunking (both sum on the
 * host) is set; else tape_bn.c's host path. */
static inline int bn_on_device(const bk_graph_t *g)
{
    return g->k && backend_bn_on_device(g->base.be) && !g->allreduce && !g->exact;
}
/* The tensor op o's forward writes: its output, or where a forward fusion
 * sends it (tape_fuse.c). */
static inline bk_tensor_t *op_dst(const top_t *o)
{
    return o->fwd_out ? o->fwd_out : o->out;
}

/* Dropout's probability in this mode (eval, or disabled: the identity). */
static inline float drop_p(const bk_graph_t *g, const top_t *o)
{
    return g->training && !g->no_dropout ? o->p : 0.0f;
}

/* An op kind's name (profiles). */
static inline const char *top_kind_name(top_kind_t k)
{
    static const char *const names[] = {"conv", "bn",     "relu",   "pool",    "flatten",
                                        "linear", "add",  "concat", "dropout", "ce"};
    return names[k];
}

/* tape_capture.c: bk_forward's recording and replay (bk_graph_ops_t).
 * tape_capture_before: TC_RUN (run the ops), TC_RECORDING (run them: they
 * are recorded; then tape_capture_after) or TC_DONE (replayed). */
enum { TC_RUN, TC_RECORDING, TC_DONE };
int tape_capture_before(bk_graph_t *g);
/* After the recorded ops (rc: what they returned): 0, the recording was
 * replayed (the forward is queued); 1, it was given up (logged once):
 * run the ops again, op by op. */
int tape_capture_after(bk_graph_t *g, int rc);
/* Release the recording (tape_release: the buffers it uses go away). */
void tape_capture_drop(bk_graph_t *g);
/* Recording a training pass in segments (tape_pass.c): the segment recorded
 * so far ends after backward op `op`: it is kept and replayed (queued). 0;
 * 1, it was not queued (its ops must run again, op by op) and the
 * recording is given up (logged once). tape_capture_resume then begins the
 * next segment's recording: 0; 1, given up (the rest runs op by op). */
int tape_capture_cut(bk_graph_t *g, int op);
int tape_capture_resume(bk_graph_t *g);
/* Replay segment k > 0 of a live recording: 0, or -1 (the pass failed, the
 * recording is given up). */
int tape_capture_replay_seg(bk_graph_t *g, int k);

/* tape_timer.c: the device time of every op by kind (bk_timer_ops_t),
 * around bk_forward's (backward 0) and bk_backward's (1) ops. */
void tape_timer_begin(bk_graph_t *g, int backward);
/* Whether the backend times g's ops (its timer made on the first ask). */
int tape_timer_on(bk_graph_t *g);
void tape_timer_mark(bk_graph_t *g, top_kind_t kind);
/* Before an op: the interval since the last op's mark is a gap, not the
 * op's (an op's interval is then its own work alone). */
void tape_timer_start(bk_graph_t *g);
void tape_timer_end(bk_graph_t *g, int backward);
/* The summary line (if anything was timed) and the timer freed. */
void tape_timer_report(bk_graph_t *g);

/* The ops the forward runs: the inference graph's, or the tape's. */
static inline top_t *run_ops(const bk_graph_t *g, size_t *n)
{
    *n = g->fops ? g->nfops : g->nops;
    return g->fops ? g->fops : g->ops;
}

#endif
