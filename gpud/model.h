/* model — the classifier gpud runs: architecture + weights + backend.
 *
 *   model_opts_t o = {.arch = "resnet18"};
 *   model_t *m = model_new(&o, "cpu", "resnet18.safetensors", err, sizeof err);
 *   model_forward_u8(m, pixels, n, 3, 224, 224, imagenet_mean, imagenet_std,
 *                    logits, err, sizeof err);
 *   model_topk_ce(logits, n, model_num_classes(m), labels, 5, topk, loss);
 *   model_destroy(&m);
 *
 * Weights are safetensors files with PyTorch state_dict names. Every tensor
 * the architecture needs must be present with the right shape, and every
 * tensor in the file must be used (BatchNorm's num_batches_tracked may be
 * absent); otherwise model_new fails naming the tensor and both shapes.
 *
 * EXACTNESS: the logits of a sample depend only on that sample, the weights
 * and the micro-batch size — not on n, on the other samples of the call,
 * on the sample's position, or on the thread count. The network always runs
 * on fixed micro-batches (n is split; the last one is zero-filled and its
 * extra outputs dropped), so every worker of a job must use the same
 * micro_batch (leave it 0).
 *
 * A model_t is used by one thread at a time. model_priv.h lists the files
 * that implement it.
 */
#ifndef DDP_MODEL_H
#define DDP_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "gpud/backend.h"
#include "gpud/model_opts.h"

typedef struct model model_t;

/* weights_path NULL with o->init = 1: no file, the architecture's initial
 * weights drawn from o->init_seed (training from scratch; num_classes 0
 * then means the constructor's default, 10 for wideresnet, 1000 else). */
model_t *model_new(const model_opts_t *o, const char *backend /* "cpu" | "ref" */,
                   const char *weights_path, char *err, size_t errlen);
void model_destroy(model_t **m);

int model_in_channels(const model_t *m);
int model_num_classes(const model_t *m);
/* Natural input size in *h, *w (resnet18 224x224, wideresnet 28x28).
 * Returns 0 if other sizes are accepted too (resnet18: adaptive pooling),
 * 1 if the model needs exactly that size (wideresnet: AvgPool2d(7) must
 * leave 1x1 for the fc). */
int model_input_hw(const model_t *m, int *h, int *w);
const char *model_arch(const model_t *m);
int model_micro_batch(const model_t *m);
/* The backend m runs on (owned by m): for what gpud asks of it besides
 * the model, --decode gpu's backend_decode. */
backend_t *model_backend(model_t *m);
/* "fp32" or "bf16 (emulated)" (backend.h, --precision). */
const char *model_precision(const model_t *m);

/* pixels: n samples of uint8 CHW (c, h, w); x = (p/255 - mean[c]) / std[c]
 * computed in float exactly as torchvision's ToTensor + Normalize
 * (mean/std NULL: plain ToTensor). logits: n * num_classes floats.
 * Returns 0, or -1 with the reason in err. */
int model_forward_u8(model_t *m, const uint8_t *pixels, int n, int c, int h, int w,
                     const float *mean, const float *std, float *logits, char *err,
                     size_t errlen);
/* The same as a pipeline (docs/CUDA.md "The input path"): begin queues
 * every micro-batch and reads all but the last one's logits (on cuda the
 * device is still running it when begin returns); end reads the last one.
 * In between, model_eval_stage_u8 may copy the next batch's first
 * micro-batch into the graph in flight (the same shape; 1 staged, 0 not,
 * -1 failed): the host's copy overlaps the device's work, and a begin with
 * that batch (the same pixels, n, shape and mean/std, unchanged meanwhile)
 * does not write it again. Any other call on m ends a pending begin first;
 * logits must stay valid until end. model_forward_u8 is begin + end. */
int model_eval_begin_u8(model_t *m, const uint8_t *pixels, int n, int c, int h, int w,
                        const float *mean, const float *std, float *logits, char *err,
                        size_t errlen);
int model_eval_stage_u8(model_t *m, const uint8_t *pixels, int n, int c, int h, int w,
                        const float *mean, const float *std, char *err, size_t errlen);
int model_eval_end(model_t *m, char *err, size_t errlen);
/* 0 where DDPIPE_EVAL_OVERLAP=0: an eval call's micro-batches, and gpud's
 * eval batches, each written, run and read in turn. */
int model_eval_overlap(void);
/* x: NCHW float, already normalised. */
int model_forward_f32(model_t *m, const float *x, int n, int c, int h, int w, float *logits,
                      char *err, size_t errlen);

/* Per-sample top-k class ids (best first; ties: lower class id first; NaN
 * ranks last; ids past num_classes are -1) and cross-entropy
 * (log-sum-exp - logit[label], in double; label < 0 or >= num_classes: NAN).
 * topk: n*k, loss: n; either may be NULL. */
/* Per-sample softmax as torch.softmax(logits, 1) (fp32 result; max
 * subtracted, exp and sum in double), quantized to q = round(p * 10^4)
 * (common/scorehist.h prob_quantize): n*num_classes values 0..10000. A row
 * with a NaN logit or an infinite maximum has no probabilities: all 0. */
void model_softmax_q(const float *logits, int n, int num_classes, uint16_t *q);
void model_topk_ce(const float *logits, int n, int num_classes, const int32_t *labels, int k,
                   int32_t *topk, float *loss);

/* ------------------------------------------------------------ training
 *
 * A model opened with opts.train = 1 keeps every tensor of its weights
 * file, unfolded, by state_dict name ("layer1.0.conv1.weight", ...,
 * "layer1.0.bn1.running_var"; num_batches_tracked: model_i64_at). A train
 * step runs the network in training mode (BatchNorm on the batch's
 * statistics, updating running_mean/var in place with momentum 0.1 and the
 * unbiased variance, as PyTorch; dropout on) and backward, and leaves in
 * each parameter's `grad` the gradient of
 *
 *     sum over the n samples of CE(logits_i, label_i) / global_batch
 *
 * so that the sum of the workers' gradients is exactly the global batch's
 * mean gradient, whatever the split (n = 0 gives zero gradients). Weights
 * are updated by the caller in place in `value` (an optimizer holds the
 * value/grad pointers: they stay valid until model_destroy; a gradient's
 * until the freezes change), and the next step uses them. Values and
 * gradients are views into the model's two arenas (gpud/backend_arena.h):
 * model_params_arena holds every value (trainable ones in model_param_at
 * order, then the BatchNorm buffers; each 64-byte aligned),
 * model_grads_arena every gradient in model_param_at order, without gaps.
 * Training steps do not micro-batch: BatchNorm sees the whole n (one
 * compiled graph per input shape, rebuilt when it changes).
 *
 *   for (int i = 0; i < model_param_count(m); i++) {
 *       model_param_t p; model_param_at(m, i, &p);
 *       if (p.grad) optim_add_param(opt, p.name, p.value, p.grad, p.numel);
 *   }
 *   model_step_t s = {.global_batch = G, .seed = seed, .step = step, .ids = ids};
 *   model_train_step_u8(m, px, n, c, h, w, mean, std, labels, &s, loss, NULL, err, len);
 *   optim_step(opt);
 *   model_sync_eval(m, err, len);   before model_forward_* sees the new weights
 */
typedef struct {
    const char *name;    /* state_dict name */
    float *value;        /* live values, PyTorch layout; update in place */
    float *grad;         /* gradient of the last step; NULL: buffer (running stats) */
    size_t offset;       /* value = model_params_arena base + offset */
    size_t grad_offset;  /* grad = model_grads_arena base + grad_offset (grad set) */
    size_t numel;
    int ndim;
    int64_t shape[4];
    int walk;            /* the order the model's layers bind it in (0 first, forward's
                          * order, the same in every process of the model): backward
                          * makes gradients final roughly in reverse; -1 unused */
} model_param_t;

/* 0 unless the model was opened with train = 1. */
int model_param_count(const model_t *m);
/* 0, or -1 when i is out of range / the name is unknown. */
int model_param_at(const model_t *m, int i, model_param_t *p);
int model_param_find(const model_t *m, const char *name, model_param_t *p);
/* What a parameter's name says it is: a BatchNorm's running_mean or
 * running_var; a BatchNorm's weight ("x.weight" where "x.running_mean"
 * exists); a bias ("....bias"). 1 or 0. */
int model_param_is_bn_buffer(const char *name);
int model_param_is_bn_weight(const model_t *m, const char *name);
int model_param_is_bias(const char *name);

/* The arenas (train = 1, else NULL) and where the BatchNorm buffers start
 * in the params arena ([model_buffers_offset, floats)). */
struct bk_arena;
const struct bk_arena *model_params_arena(const model_t *m);
const struct bk_arena *model_grads_arena(const model_t *m);
size_t model_buffers_offset(const model_t *m);

/* Bytes moved between host and backend memory since model_new
 * (backend_arena.h's bk_traffic_t): a training step adds its batch and
 * outputs, arena copies (checkpoints, the ring's host mirror, a fold on a
 * device arena) add params, training BatchNorm's vectors on a device arena
 * (the tape's copies and the kernels', backend_traffic_take; planned by
 * model_copy_plan) add bn. */
struct bk_traffic;
const struct bk_traffic *model_traffic(const model_t *m);
/* What one model_train_step_u8 of n samples of (c, h, w) moves as planned
 * (u8 1: the backend takes the pixels as bytes; loss/logits: read back;
 * topk_k > 0: model_step_t.topk asked for, k ids a sample where the
 * backend ranks them, else the logits; 8 bytes a sample of dropout keys
 * where the model's training graph draws a mask), params 0 (the arenas are the
 * memory the backend computes in; on a device arena training BatchNorm's
 * vectors cross too: model_copy_plan). */
void model_step_plan(const model_t *m, int n, int c, int h, int w, int u8, int loss,
                     int logits, int topk_k, struct bk_traffic *t);
/* The BatchNorm bytes one such step copies on a backend whose arenas are
 * device memory (cuda, ref-device; backend.h's bk_graph_copy_plan) for the
 * model's training graph on n samples of (c, h, w): what model_traffic's bn
 * counts (bn_kernels + bn_tape on cuda; bn_tape on ref-device, whose
 * kernels are the host's). 0, or -1 with the reason in err. */
struct bk_copy_plan;
int model_copy_plan(const model_t *m, int n, int c, int h, int w, struct bk_copy_plan *p,
                    char *err, size_t errlen);

typedef struct {
    int global_batch;       /* >= n: the loss and gradients are sums / global_batch */
    float label_smoothing;  /* CrossEntropyLoss(label_smoothing=...) */
    float loss_scale;       /* > 0: the loss's gradient times it (fp16 training's
                             * scale, loss_scale.h: a power of two); 0: 1 */
    uint64_t seed, step;    /* dropout stream (with the sample ids) */
    const int64_t *ids;     /* dataset ids of the n samples; NULL: 0..n-1 */
    int no_dropout;         /* 1: dropout is the identity (parity tests) */
    int chunk;              /* > 0: bitwise mode (docs/TRAINING.md "Bitwise training"):
                             * the n samples run as chunks of this many (the last may
                             * be short), sums exact (common/xsum.h); 0: one batch */
    /* bitwise mode: the sizes of the consecutive chunks of the n samples
     * (n_chunks of them, each 0..chunk, summing to n; a 0 is a chunk whose
     * samples all failed to load, skipped as on any worker count), so a
     * sample's chunk is fixed by its place in the step, not by how many
     * before it failed. NULL: every chunk chunk samples, the last short */
    const int *chunk_sizes;
    int n_chunks;
    /* Optional: each sample's top-k class ids (n * k, 1 <= k <= classes;
     * model_topk_ce's order), what a step's RESULT carries. Ranked where the
     * logits are when the backend can (backend_ranks_topk: only n * k ids
     * leave the device), else from the logits read to the host (the
     * caller's logits when it asks for them too). NULL: not wanted. */
    int32_t *topk;
    int k;
} model_step_t;

/* One training step on n samples (uint8 CHW pixels normalised as in
 * model_forward_u8). labels: n classes. loss (n per-sample cross-entropy
 * values, label smoothing included) and logits (n * classes) may be NULL;
 * s->topk, when set, gets the top-k ids.
 * Returns 0, or -1 with the reason in err. */
int model_train_step_u8(model_t *m, const uint8_t *pixels, int n, int c, int h, int w,
                        const float *mean, const float *std, const int32_t *labels,
                        const model_step_t *s, float *loss, float *logits, char *err,
                        size_t errlen);
/* The same as a pipeline (docs/CUDA.md "The input path"): begin queues the
 * step (its outputs, and s->topk, are written by end; on cuda the device
 * is still running it when begin returns); model_train_stage_u8 may then
 * write the next step's batch into the training graph (the same n and
 * shape; 1 staged, 0 not, -1 failed): the host's copy overlaps the
 * device's work, and a begin with that batch (the same pixels, n, shape
 * and mean/std, unchanged meanwhile) does not write it again. end must
 * come before any other call on m but a stage. A caller that will not run
 * the batch it staged calls model_train_unstage before its memory may
 * hold another (model_traffic counts a staged batch's bytes at the step
 * that reads it, or where it is forgotten). model_train_step_u8 is begin +
 * end. A bitwise step
 * (s->chunk) or an empty shard runs whole in begin; nothing is staged
 * into it. */
int model_train_begin_u8(model_t *m, const uint8_t *pixels, int n, int c, int h, int w,
                         const float *mean, const float *std, const int32_t *labels,
                         const model_step_t *s, float *loss, float *logits, char *err,
                         size_t errlen);
int model_train_stage_u8(model_t *m, const uint8_t *pixels, int n, int c, int h, int w,
                         const float *mean, const float *std, char *err, size_t errlen);
int model_train_end(model_t *m, char *err, size_t errlen);
void model_train_unstage(model_t *m);
/* 0 where DDPIPE_TRAIN_OVERLAP=0: gpud's training steps take their batch
 * in turn (read at each call). */
int model_train_overlap(void);
int model_train_step_f32(model_t *m, const float *x, int n, int c, int h, int w,
                         const int32_t *labels, const model_step_t *s, float *loss,
                         float *logits, char *err, size_t errlen);

/* BatchNorm's num_batches_tracked, PyTorch's I64 scalar buffer (shape [])
 * "<bn>.num_batches_tracked", one per BatchNorm layer in state_dict order;
 * kept apart from model_param_* (those are all F32). Valued from the
 * weights file (0 when absent); +1 per model_train_step_* (n = 0 included,
 * so that it counts the job's steps, the same on every rank) in each
 * BatchNorm that trains (not in eval mode by model_freeze_bn). value is
 * live and writable (checkpoint load). A checkpoint saves each as
 *   (ckpt_tensor_t){.name = p.name, .dtype = ST_I64, .ndim = 0, .data = p.value}
 * 0 unless opened with train = 1. */
typedef struct {
    const char *name;
    int64_t *value;
    size_t numel;        /* 1 */
    int ndim;            /* 0: a scalar */
} model_i64_t;

int model_i64_count(const model_t *m);
/* 0, or -1 when i is out of range. */
int model_i64_at(const model_t *m, int i, model_i64_t *p);

/* SyncBatchNorm: fn sums n floats element-wise over all ranks, in place
 * (identical result on every rank), returning 0 or -1 with the reason in
 * err. With it set, every training-mode BatchNorm normalises with the
 * statistics of the union of all ranks' samples (PyTorch's SyncBatchNorm:
 * batch mean and biased variance over the global count, running_var with
 * the unbiased variance of the global count, backward with the all-reduced
 * sum(dy) and sum(dy*xhat); each rank's gamma/beta gradients stay its own
 * share, summed with the other gradients by the caller's all-reduce). fn
 * runs from inside model_train_step_*: twice per training BatchNorm in the
 * forward, once per BatchNorm in the backward, the same calls in the same
 * order on every rank — also on a rank whose shard is empty (n = 0: it
 * contributes zeros, gets zero gradients and the same running stats).
 * BatchNorm layers in eval mode (model_freeze_bn) do not sync. Every rank
 * must use the same architecture, freezes and label smoothing. A failing fn
 * fails the step (the error names it). Returns 0, or -1 when the model was
 * not opened for training. */
typedef int (*model_allreduce_fn)(void *ctx, double *data, size_t n, char *err, size_t errlen);
int model_set_sync_bn(model_t *m, model_allreduce_fn fn, void *ctx);  /* NULL fn: off */
/* fn(ctx, grad) during each train step's backward, with a parameter's
 * gradient array (model_param_t.grad) as soon as it is final (the
 * trainer's gradient buckets). NULL fn: off. -1 when not opened for
 * training. */
typedef void (*model_grad_ready_fn)(void *ctx, const float *grad);
int model_set_grad_ready(model_t *m, model_grad_ready_fn fn, void *ctx);
/* The same in two halves, with which the step's pass may still be recorded
 * as a CUDA graph (backend.h bk_graph_set_grad_queue): mark(ctx, grad) host
 * bookkeeping only, 1 when flush(ctx) has device work to queue behind the
 * gradients marked so far; flush runs once their kernels are queued. Not
 * with model_set_grad_ready's fn. NULL mark: off. -1 when not opened for
 * training. */
typedef int (*model_grad_mark_fn)(void *ctx, const float *grad);
typedef void (*model_grad_flush_fn)(void *ctx);
int model_set_grad_queue(model_t *m, model_grad_mark_fn mark, model_grad_flush_fn flush,
                         void *ctx);
/* Bitwise training (model_step_t.chunk, docs/TRAINING.md "Bitwise
 * training"): fn sums an xsum exactly over every rank, in place (NULL: one
 * rank); sync_bn 1: BatchNorm with the statistics of the whole step
 * (SyncBatchNorm), 0: of each chunk (ghost batch norm). With chunks the
 * grad-ready hook gets each parameter gradient once per chunk (the next
 * chunk overwrites it): the caller sums them. -1 when not opened for
 * training. */
struct xsum;
typedef int (*model_xreduce_fn)(void *ctx, struct xsum *x, char *err, size_t errlen);
int model_set_exact(model_t *m, model_xreduce_fn fn, void *ctx, int sync_bn);
/* Bitwise training without SyncBatchNorm (ghost batch norm): after a
 * train step, the exact sums the running stats move by (NULL: none, e.g.
 * with SyncBatchNorm), which the caller sums over every rank in place
 * (with the gradients: one collective for both); then model_running_apply
 * moves the running stats once. Every rank calls both once per step. 0, or
 * -1 with the reason in err. */
struct xsum *model_running_sums(model_t *m);
int model_running_apply(model_t *m, char *err, size_t errlen);

/* Freeze (1) or unfreeze (0) every trainable parameter whose name starts
 * with prefix ("" = all): a frozen parameter gets no gradient (its grad
 * reads NULL in model_param_*, so optimizers skip it) and its layer skips
 * the weight-gradient work — transfer learning with a frozen backbone.
 * BatchNorm layers keep training-mode statistics (see model_freeze_bn).
 * The gradient arena is laid out again (gradients of the unfrozen
 * parameters only, model_grads_arena). Returns the number of parameters
 * changed, or -1 when not opened for training or out of memory. */
int model_freeze(model_t *m, const char *prefix, int frozen);

/* BatchNorm layers whose state_dict prefix starts with prefix ("" = all)
 * run in eval mode (1) or normally (0) in training steps: eval mode
 * normalises with running_mean/var and does not update them, as
 * `module.eval()` on a frozen backbone in PyTorch (the DenseNet seed:
 * model_freeze(m, "features.", 1) + model_freeze_bn(m, "features.", 1)).
 * Gradients still flow through such a BN to earlier trainable layers.
 * Returns the number of BatchNorm layers changed, or -1 when not opened
 * for training. */
int model_freeze_bn(model_t *m, const char *prefix, int frozen);

/* Tell the inference graphs that the parameters (and running stats)
 * changed, so that model_forward_* uses the trained weights. */
int model_sync_eval(model_t *m, char *err, size_t errlen);

/* ------------------------------------------------- the architectures
 *
 * What gpud implements, for `gpud --list-models` and `ddpipe models`: the
 * card of architecture i (0..), counted from its own description walked
 * with default options (no weights file), so the numbers cannot drift from
 * the network that runs. params is what torchvision's
 * sum(p.numel() for p in model.parameters()) gives; buffers the
 * BatchNorm running statistics (num_batches_tracked not counted). */
typedef struct {
    const char *name;
    int64_t params, buffers;
    int in_channels, num_classes;   /* the constructor's defaults */
    int h, w;                       /* natural input size */
    int hw_fixed;                   /* 1: only that size (wideresnet) */
} model_card_t;

/* 0, 1 when i is past the last architecture, -1 with err set. */
int model_card(int i, model_card_t *card, char *err, size_t errlen);

#endif
