/* tape_priv — the structures of the graph engine (the tape), shared by its
 * files and nothing else:
 *
 *   backend_train.c  the tape: builders (shape checks), forward, backward
 *   tape_compile.c   the compile step: kernel plans and buffers
 *   graph_plan.c     the inference plan: a forward-only eval-mode tape run
 *                    as the backend's fused program (bk_prog, backend.h)
 *   graph_fold.c     BatchNorm folded into the preceding convolution
 *
 * Building records ops and shapes only; bk_graph_compile (run by the first
 * write, forward or read) chooses how the graph runs: the fused program
 * when graph_plan.c can express it, else the tape's own kernels. */
#ifndef DDP_TAPE_PRIV_H
#define DDP_TAPE_PRIV_H

#include <stddef.h>
#include <stdint.h>

#include "gpud/backend_impl.h"

struct bk_tensor {
    int n, c, h, w;
    int id;             /* index in the graph's var list */
    void *val, *grad;   /* tape buffers, made by the compile step */
    bk_ptensor_t *ft;    /* its tensor in the fused program (NULL: fused away) */
    int needs_grad;     /* some parameter or requires_grad input upstream */
    int grad_set;       /* during backward: grad holds a value */
    int is_input;
    int producer;       /* op index, -1 for inputs */
    int keep;           /* its value is read after the forward (tape_compile.c) */
    int pooled;         /* val is a shared buffer of the graph's pool */
};

typedef enum {
    TO_CONV, TO_BN, TO_RELU, TO_POOL, TO_FLATTEN, TO_LINEAR, TO_ADD, TO_CONCAT, TO_DROPOUT,
    TO_CE
} top_kind_t;

#define MAX_IN 64   /* concat inputs (DenseNet blocks have up to 32+1) */

typedef struct {
    top_kind_t kind;
    char name[128];
    bk_tensor_t *in[MAX_IN];
    int nin;
    bk_tensor_t *out;
    bk_plan_t *plan;
    bk_conv_t conv;
    bk_bn_t bn;
    bk_pool_t pool;
    float *save_mean, *save_var;    /* BN: batch statistics of the last forward */
    float *sync;                    /* training BN backward scratch: 5c floats */
    double *sync_d;                 /* 2c + 1 per-channel sums (and the count), all-reduced */
    double sync_count;              /* global sample count of the last forward */
    float p;                        /* dropout probability, CE smoothing */
    int lin_out;
    float *w, *gw, *b, *gb;         /* linear */
    float *w16, *b16;               /* bf16: conv/linear weights rounded (each forward) */
} top_t;

struct bk_graph {
    bk_prog_t base;
    const bk_kernels_t *k; /* NULL: a description graph (no backend) */
    int training;
    int no_dropout;
    int forward_only;       /* no gradient buffers, no backward (inference) */
    int bf16;               /* --precision bf16: PyTorch's autocast rounding (compile) */
    int compiled;           /* the tape's plans and buffers exist */
    bk_prog_t *fused;      /* the fused program (graph_plan.c), or NULL */
    int fused_stale;        /* bk_graph_reload: re-fold at the next forward */
    bk_tensor_t **v;
    size_t nv, capv;
    top_t *ops;
    size_t nops, capops;
    void *tmp;              /* gradient temporary, the largest tensor */
    size_t tmp_count;
    void **pool;            /* buffers shared by activations nobody reads later */
    size_t *pool_count;     /* their sizes (floats) */
    size_t npool;
    size_t bytes;           /* the tape's activation buffers (bk_graph_bytes) */
    int32_t *labels;        /* n of the first CE op */
    int label_n;
    int have_labels;
    uint64_t seed, step;
    int64_t *ids;
    int ids_n;
    int batch;                      /* n of the first input */
    bk_allreduce_fn allreduce;      /* SyncBatchNorm; NULL: local statistics */
    void *allreduce_ctx;
    bk_grad_ready_fn grad_ready;    /* parameter gradients as they become final */
    void *grad_ready_ctx;
    int profile;                    /* DDPIPE_TRAIN_PROFILE set: time op kinds */
    double prof[2][TO_CE + 1];      /* [backward][kind] seconds */
};

static inline size_t numel(const bk_tensor_t *t)
{
    return (size_t)t->n * t->c * t->h * t->w;
}

static inline void shape_of(const bk_tensor_t *t, int s[4])
{
    s[0] = t->n;
    s[1] = t->c;
    s[2] = t->h;
    s[3] = t->w;
}

/* tape_compile.c: every op's kernel plan and every var's buffers, 0 or -1
 * after bk_prog_fail (what was made is still released by tape_release). */
int tape_compile(bk_graph_t *g);
/* Release them (plans, buffers, BN scratch). */
void tape_release(bk_graph_t *g);

/* graph_plan.c. Build g->fused from g's ops: 1 when built (a summary in
 * why), 0 when some op has no fused form (which, in why; nothing changed),
 * -1 after bk_prog_fail. For a forward-only eval-mode graph with a backend. */
int plan_fused_build(bk_graph_t *g, char *why, size_t len);
/* Destroy g->fused and forget every var's fused tensor. */
void plan_fused_drop(bk_graph_t *g);
/* Replace the fused program, keeping the inputs written to it: refold 1
 * rebuilds it from the bound parameters (bk_graph_reload), 0 compiles the
 * tape instead (the graph was switched to training mode). 0 or -1. */
int plan_fused_replace(bk_graph_t *g, int refold);


#endif
