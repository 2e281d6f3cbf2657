/* model_priv — what the model's files share: the model object and the
 * input staging both the forward and the train step use. Not for code
 * outside gpud/model*.c.
 *
 *   model.c          the architecture table, model_new/destroy, what a model is
 *   model_input.c    uint8 pixels to normalised floats, input checks
 *   model_forward.c  inference: eval graphs per input shape, micro-batches
 *   model_topk.c     per-sample top-k and cross-entropy of logits
 *   model_params.c   the parameters: access, BatchNorm counters, freezing,
 *                    SyncBatchNorm, model_sync_eval
 *   model_train.c    one training step: the training graph, forward, backward
 *   model_chunks.c   one bitwise training step: a graph per chunk
 *
 * All sit on backend.h (bk_graph: every graph is the architecture's one
 * description, models/layers.h) and models/layers.h. */
#ifndef DDP_MODEL_PRIV_H
#define DDP_MODEL_PRIV_H

#include <stddef.h>
#include <stdint.h>

#include "common/safetensors.h"
#include "gpud/backend.h"
#include "gpud/model.h"
#include "gpud/models/layers.h"

#define GRAPH_CACHE 4   /* input shapes kept compiled at once */

/* PyTorch's num_batches_tracked of one BatchNorm (model_i64_at). */
typedef struct {
    char name[160];     /* "<bn>.num_batches_tracked" */
    int64_t value;
    size_t rm;          /* pstore index of the BN's running_mean (bn_eval) */
} bn_count_t;

/* The forward-only, eval-mode graph of one input shape. */
typedef struct {
    int c, h, w;
    bk_graph_t *g;
    bk_tensor_t *in, *out;
    unsigned long last_used;
} eval_slot_t;

/* The pipelined eval: the micro-batch whose logits are still to be read
 * (slot NULL: none). */
typedef struct {
    eval_slot_t *slot;
    float *logits;      /* the caller's, for its k samples */
    int k;
    char failed[256];   /* "": none; else a settled read's error, for the next end */
} eval_pend_t;

/* A batch written ahead into a graph's input while the work before it
 * runs (px NULL: none; model_staged_match). */
typedef struct {
    const uint8_t *px;
    int n, c, h, w, norm;
    float mean[64], std[64];
    /* training (model_train.c): the graph it went into (m->t_build) and
     * the bytes it moved, counted by the step that reads it */
    unsigned long build;
    uint64_t bytes;
} staged_input_t;

/* A training step begun and not ended (model_train_begin_u8): what its end
 * reads (on = 0: none). */
typedef struct {
    int on, n;
    float *loss, *logits;
    int32_t *topk;
    int k;
} train_pend_t;

/* Bitwise training: the graph of one chunk (model_chunks.c). */
typedef struct {
    bk_graph_t *g;
    bk_tensor_t *in, *logits, *loss;
    int n;              /* its samples */
} chunk_slot_t;

struct model {
    const arch_t *arch;
    arch_info_t info;   /* the architecture's configuration (resolve) */
    backend_t *be;
    int mb;
    eval_slot_t cache[GRAPH_CACHE];
    unsigned long tick;
    float *in_buf;      /* mb * c * h * w of the current shape */
    size_t in_cap;
    uint8_t *in_u8;     /* a short last micro-batch's pixels, padded (model_forward_u8) */
    size_t in_u8_cap;
    float *out_buf;     /* mb * num_classes */
    eval_pend_t pend;   /* the pipelined eval (model_eval_begin_u8 .. model_eval_end) */
    staged_input_t staged;   /* the next eval batch's first micro-batch */
    model_opts_t opts;  /* as given (arch name not kept) */
    pstore_t *ps;       /* the parameters (gradient arrays when train = 1) */
    bk_graph_t *tg;    /* training graph of the last shape */
    bk_tensor_t *t_in, *t_logits, *t_loss;
    int tn, tc, th, tw;
    float t_eps;
    unsigned long t_build;     /* +1 each time the training graph is built */
    staged_input_t t_staged;   /* the next step's batch, in t_in */
    train_pend_t t_pend;
    float *t_x, *t_dl;  /* input and loss-gradient staging */
    float *t_lg;        /* logits read to rank them on the host (model_step_t.topk) */
    size_t t_lg_cap;
    size_t t_cap;
    model_allreduce_fn sync_fn;   /* SyncBatchNorm hook, NULL: off */
    void *sync_ctx;
    model_grad_ready_fn ready_fn; /* gradient buckets' hook, NULL: off */
    void *ready_ctx;
    model_grad_mark_fn mark_fn;   /* ... or in two halves (model_set_grad_queue) */
    model_grad_flush_fn flush_fn;
    void *queue_ctx;
    chunk_slot_t *cs;   /* bitwise training: a graph per chunk of the step */
    int ncs;
    int cs_c, cs_h, cs_w;   /* the sample shape and label smoothing they were built for */
    float cs_eps;
    model_xreduce_fn x_fn;  /* their exact all-reduce (model_set_exact), NULL: one rank */
    void *x_ctx;
    int x_sync;             /* their BatchNorm: global statistics */
    bn_count_t *nbt;    /* num_batches_tracked of each BatchNorm (train = 1) */
    int n_nbt;
    bk_traffic_t traffic;   /* host<->backend bytes so far (model_traffic) */
};

/* ---- model_input.c */

/* Fills rows [0, k) of dst from samples [first, first + k). */
typedef void (*model_fill_fn)(const void *src, int first, int k, float *dst);

/* uint8 CHW samples and their normalisation table (model_fill_u8). */
typedef struct {
    const uint8_t *px;
    int c, hw;
    const float *lut;   /* c x 256: the normalised value of each byte */
    int threads;
} model_u8_src_t;

/* float samples already normalised (model_fill_f32). */
typedef struct {
    const float *x;
    size_t per;
} model_f32_src_t;

void model_fill_u8(const void *src, int first, int k, float *dst);
void model_fill_f32(const void *src, int first, int k, float *dst);
/* The c x 256 table of model_fill_u8 after checking the arguments (mean
 * and std both given and usable, or both NULL: plain ToTensor; 1..64
 * channels); NULL with the reason in err. Every uint8 entry point's. */
float *model_u8_table(const model_t *m, int c, const float *mean, const float *std, char *err,
                      size_t errlen);
/* n samples of (c, h, w) are what the architecture takes; -1 (err set). */
int model_check_input(const model_t *m, int n, int c, int h, int w, char *err, size_t errlen);
/* Whether (px, n, shape, normalisation) is what t holds. */
int model_staged_match(const staged_input_t *t, const uint8_t *px, int n, int c, int h, int w,
                       const float *mean, const float *std);
/* t records (px, n, shape, normalisation) as staged (c <= 64). */
void model_staged_set(staged_input_t *t, const uint8_t *px, int n, int c, int h, int w,
                      const float *mean, const float *std);
/* A train step's staging: m->t_x for nx samples of (c, h, w) (the batch,
 * or one chunk of a bitwise step) and m->t_dl for n loss gradients. 0, or
 * -1 (err set). */
int model_train_staging(model_t *m, int nx, int n, int c, int h, int w, char *err,
                        size_t errlen);

/* ---- model_forward.c */

/* A pipelined eval's pending logits read (model_eval_end) and anything
 * staged forgotten, before other work on m: a read that fails is logged
 * and kept, and the begin's end returns it. */
void model_eval_settle(model_t *m);
/* Destroy the cached eval graphs (settled first). */
void model_eval_drop(model_t *m);
/* The cached eval graphs fold the (changed) parameters again at their next
 * forward (model_sync_eval). */
void model_eval_reload(model_t *m);

/* ---- model_params.c */

/* The parameters of the weights file (checked against the description) or,
 * without one and with o->init, the initial ones; m->info resolved. */
int model_params_open(model_t *m, const model_opts_t *o, const char *weights_path, char *err,
                      size_t errlen);

/* A train step happened: +1 in every BatchNorm that trains. */
void model_counts_step(model_t *m);

/* ---- model_chunks.c */

/* model_train_step_* with s->chunk > 0: the n samples as chunks (the
 * caller counts the step in num_batches_tracked). */
int model_chunks_step(model_t *m, model_fill_fn fill, const void *ctx,
                      const model_u8_src_t *u8, int n, int c, int h, int w,
                      const int32_t *labels, const model_step_t *s, float *loss,
                      float *logits, char *err, size_t errlen);
/* Destroy the chunk graphs (the model closes, or its parameters moved). */
void model_chunks_drop(model_t *m);

/* ---- model_train.c */

/* The bytes of one training step's inputs and outputs (model_step_plan),
 * u8: the pixels go as bytes with their c x 256 table; outs: 4-byte values
 * a sample read back besides its loss (logits, or top-k ids); ids: the
 * dropout sample keys go up too (8 bytes a sample). */
void model_step_bytes(int n, int c, int h, int w, int u8, int ids, int loss, int outs,
                      bk_traffic_t *t);

#endif
