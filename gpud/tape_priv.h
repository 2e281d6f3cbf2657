/* tape_priv — the structures of the graph engine (the tape), shared by its
 * files and nothing else:
 *
 *   backend_train.c  the tape: builders (shape checks), forward, backward
 *   tape_compile.c   the compile step: kernel plans and buffers
 *
 * Building records ops and shapes only; bk_tgraph_compile (run by the first
 * write, forward or read) makes the kernel plans and the buffers. */
#ifndef DDP_TAPE_PRIV_H
#define DDP_TAPE_PRIV_H

#include <stddef.h>
#include <stdint.h>

#include "gpud/backend_impl.h"

struct bk_tvar {
    int n, c, h, w;
    int id;             /* index in the graph's var list */
    void *val, *grad;   /* tape buffers, made by the compile step */
    int needs_grad;     /* some parameter or requires_grad input upstream */
    int grad_set;       /* during backward: grad holds a value */
    int is_input;
    int producer;       /* op index, -1 for inputs */
};

typedef enum {
    TO_CONV, TO_BN, TO_RELU, TO_POOL, TO_FLATTEN, TO_LINEAR, TO_ADD, TO_CONCAT, TO_DROPOUT,
    TO_CE
} top_kind_t;

#define MAX_IN 64   /* concat inputs (DenseNet blocks have up to 32+1) */

typedef struct {
    top_kind_t kind;
    char name[128];
    bk_tvar_t *in[MAX_IN];
    int nin;
    bk_tvar_t *out;
    bk_plan_t *plan;
    bk_tconv_t conv;
    bk_tbn_t bn;
    bk_pool_t pool;
    float *save_mean, *save_var;    /* BN: batch statistics of the last forward */
    float *sync;                    /* training BN scratch: 5c + 1 floats */
    double *sync_d;                 /* 2c per-channel sums */
    double sync_count;              /* global sample count of the last forward */
    float p;                        /* dropout probability, CE smoothing */
    int lin_out;
    float *w, *gw, *b, *gb;         /* linear */
} top_t;

struct bk_tgraph {
    bk_graph_t base;
    const bk_tkernels_t *k; /* NULL: a description graph (no backend) */
    int training;
    int no_dropout;
    int forward_only;       /* no gradient buffers, no backward (inference) */
    int compiled;           /* the tape's plans and buffers exist */
    bk_tvar_t **v;
    size_t nv, capv;
    top_t *ops;
    size_t nops, capops;
    void *tmp;              /* gradient temporary, the largest tensor */
    size_t tmp_count;
    int32_t *labels;        /* n of the first CE op */
    int label_n;
    int have_labels;
    uint64_t seed, step;
    int64_t *ids;
    int ids_n;
    int batch;                      /* n of the first input */
    bk_allreduce_fn allreduce;      /* SyncBatchNorm; NULL: local statistics */
    void *allreduce_ctx;
    int profile;                    /* DDPIPE_TRAIN_PROFILE set: time op kinds */
    double prof[2][TO_CE + 1];      /* [backward][kind] seconds */
};

static inline size_t numel(const bk_tvar_t *t)
{
    return (size_t)t->n * t->c * t->h * t->w;
}

static inline void shape_of(const bk_tvar_t *t, int s[4])
{
    s[0] = t->n;
    s[1] = t->c;
    s[2] = t->h;
    s[3] = t->w;
}

/* tape_compile.c: every op's kernel plan and every var's buffers, 0 or -1
 * after bk_fail (what was made is still released by tape_release). */
int tape_compile(bk_tgraph_t *g);
/* Release them (plans, buffers, BN scratch). */
void tape_release(bk_tgraph_t *g);

#endif
