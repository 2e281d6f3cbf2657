/* trainer — the training side of one gpud rank (docs/TRAINING.md steps 2,
 * 5, 7): the optimizer and learning-rate schedule over a model opened for
 * training, the rank-0 broadcasts, one data-parallel step (train step,
 * all-reduce of the model's gradient arena in place, in buckets that are
 * ranges of it; optimizer step over the arenas), and checkpoints. The
 * protocol (BATCH/RESULT/CREDIT/EPOCH) is train.c's. The model's arenas
 * (gpud/backend_arena.h) must be host memory (device-resident ones: issue
 * 30); --verbose logs each step's host<->backend bytes.
 *
 *   trainer_t *t = trainer_new(model, &cfg, err, len);
 *   trainer_broadcast(t, ar, TRAINER_ALL, timeout_ms, err, len);   // rank 0's start
 *   per train batch:
 *       trainer_forward_backward(t, &in, loss, logits, err, len);
 *       ... RESULT ...
 *       trainer_reduce(t, ar, timeout_ms, err, len);
 *       trainer_unscale(t, err, len);     // fp16: 1 = this step is skipped
 *       trainer_apply(t, epoch, global_count);
 *   after an epoch's train batches:
 *       trainer_broadcast(t, ar, TRAINER_BN_BUFFERS, ...); model_sync_eval(...)
 *   trainer_save(t, path, &info, err, len);  trainer_destroy(&t);
 *
 * Every rank must make the same calls in the same order: the broadcasts and
 * trainer_reduce are collective operations on the ring.
 */
#ifndef DDP_GPUD_TRAINER_H
#define DDP_GPUD_TRAINER_H

#include <stddef.h>
#include <stdint.h>

#include "gpud/backend_arena.h"
#include "gpud/checkpoint.h"
#include "gpud/loss_scale.h"
#include "gpud/ring.h"
#include "gpud/model.h"
#include "gpud/optim/lr_sched.h"
#include "gpud/optim/optim.h"

#define TRAINER_MAX_PREFIXES 16

typedef struct {
    optim_cfg_t optim;            /* kind and hyper-parameters (PyTorch's meaning) */
    double lr;                    /* base learning rate */
    int no_decay_bn_bias;         /* 1: biases and BatchNorm weights in the wd = 0 group */
    int has_main;                 /* 0: --lr-schedule none */
    lr_phase_t main;              /* LR_STEP or LR_COSINE when has_main */
    int warmup_epochs;            /* 0: none */
    double warmup_start_factor;   /* 0: LinearLR's default 1/3 */
    float label_smoothing;
    uint64_t seed;                /* dropout stream; checkpoint's ckpt.seed */
    int chunk;                    /* --chunk: > 0 bitwise training (chunks of this many
                                   * samples, exact sums); 0 off */
    double loss_scale;            /* > 0: fp16 training's dynamic loss scaling from this
                                   * scale (loss_scale.h: a power of two); 0 off */
    int64_t loss_scale_interval;  /* finite steps before the scale doubles (>= 1) */
    const char *freeze[TRAINER_MAX_PREFIXES];      /* model_freeze prefixes */
    int n_freeze;
    const char *freeze_bn[TRAINER_MAX_PREFIXES];   /* model_freeze_bn prefixes */
    int n_freeze_bn;
} trainer_cfg_t;

typedef struct trainer trainer_t;

/* Applies the freezes, registers every parameter that has a gradient with a
 * new optimizer (in model_param_at order) and builds the schedule. The model
 * must be opened with train = 1 and outlive the trainer. NULL with the
 * reason in err. */
trainer_t *trainer_new(model_t *model, const trainer_cfg_t *cfg, char *err, size_t errlen);
void trainer_destroy(trainer_t **t);

/* lr(e): lr_sched_set_epoch(e) then lr_sched_lr — a pure function of e. */
double trainer_lr(trainer_t *t, int epoch);
const optim_t *trainer_optim(const trainer_t *t);
/* Trainable (optimized) floats: the size of the all-reduced gradient. */
size_t trainer_grad_floats(const trainer_t *t);

typedef enum {
    TRAINER_ALL = 0,              /* every parameter and buffer */
    TRAINER_BN_BUFFERS = 1        /* running_mean / running_var only */
} trainer_set_t;

/* Every rank ends with rank 0's values: one allreduce_sum of the params
 * arena (TRAINER_BN_BUFFERS: its buffers part), rank 0 in place, the
 * others contributing zeros from a stage (x + 0 + ... = x exactly; a
 * failure leaves every rank's values as they were). Collective. 0, or -1
 * with the reason in err. */
int trainer_broadcast(trainer_t *t, allreduce_t *ar, trainer_set_t which, int timeout_ms,
                      char *err, size_t errlen);

typedef struct {
    const uint8_t *pixels;        /* n * c * h * w bytes (may be NULL when n == 0) */
    int n, c, h, w;
    const float *mean, *std;      /* normalisation, both NULL: plain ToTensor */
    const int32_t *labels;        /* n */
    const uint64_t *ids;          /* n dataset ids (dropout stream) */
    uint32_t global_count;        /* samples of the whole global step */
    uint64_t step;                /* absolute step S */
    const int *chunk_sizes;       /* cfg.chunk: model_step_t.chunk_sizes (NULL: by count) */
    int n_chunks;
    int32_t *topk;                /* out, n * k: model_step_t.topk (NULL: not wanted) */
    int k;
    /* called while the step runs (begun, its outputs not yet read): where
     * the caller may stage the next step's batch (model_train_stage_u8);
     * not called while gradient buckets go over the host ring on their own
     * thread (trainer_set_overlap: its cancel callback reads the caller's
     * state meanwhile). NULL: none */
    void (*ahead)(void *ctx);
    void *ahead_ctx;
} trainer_batch_t;

/* model_train_step_u8 on this rank's shard: gradients (sum / global_count)
 * in the model; loss (n) and logits (n * classes) may be NULL, b->topk gets
 * the top-k ids (ranked on the device where the backend can). n = 0 runs
 * the step too (zero gradients, sync-BN calls). The BN buffers are saved
 * first, so trainer_restore can undo a step that could not be completed.
 * 0, or -1 with the reason in err. */
int trainer_forward_backward(trainer_t *t, const trainer_batch_t *b, float *loss, float *logits,
                             char *err, size_t errlen);
/* Sum every optimized gradient over the ranks: gpud/buckets.h's buckets of
 * the grads arena (optimizer order), in place, the bytes of one all-reduce
 * of it (a failure leaves the arena partly summed: the step is redone).
 * Collective. With overlap set, the buckets of a non-empty shard were
 * started during trainer_forward_backward and are finished here. */
int trainer_reduce(trainer_t *t, allreduce_t *ar, int timeout_ms, char *err, size_t errlen);
/* A sum of n floats of the grads arena's own memory (device memory on
 * cuda) over the ranks, in place: gpud/collective.h's NCCL path. */
typedef int (*trainer_sum_fn)(void *ctx, float *base, size_t n, int timeout_ms, char *err,
                              size_t errlen);
typedef struct {
    /* the whole grads arena in one call, after backward */
    trainer_sum_fn sum;
    /* Optional, both or neither (gpud/bucket_issue.h): queue one gradient
     * bucket's sum behind the kernels queued so far on the device stream
     * `after` (bk_arena_stream of the grads arena) without waiting; wait:
     * every queued sum done. */
    int (*enqueue)(void *ctx, float *base, size_t n, void *after, int timeout_ms, char *err,
                   size_t errlen);
    int (*wait)(void *ctx, int timeout_ms, char *err, size_t errlen);
    /* Optional, both or neither: bitwise training's exact sums where they
     * are made (the grads arena's ops xsum_reduce, backend_arena.h's
     * bk_xsum_coll_t): the in-place max of n uint32 and sum of n int64 of
     * device memory. */
    bk_max_u32_fn max_u32;
    bk_sum_i64_fn sum_i64;
} trainer_dsum_t;
/* ops set: the gradients are summed where they live, never through the
 * host mirror: with enqueue and trainer_set_overlap's ring of W > 1, in
 * buckets queued while backward runs (each when its gradients are final,
 * in bucket order on every rank; the pass may still be recorded, in
 * segments that end where a bucket goes: gpud/tape_pass.c) and waited for
 * in trainer_reduce; else the whole arena in
 * one sum call in trainer_reduce. NULL: the ring, as before. The caller
 * sets it per generation (ops must outlive it). */
void trainer_set_device_sum(trainer_t *t, const trainer_dsum_t *ops, void *ctx);
/* From the next trainer_forward_backward on, all-reduce gradient buckets
 * over ar while backward runs (DDP's overlap), on a thread of their own:
 * between trainer_forward_backward and trainer_reduce the caller must not
 * use ar nor anything ar's cancel callback reads. Not with SyncBatchNorm
 * (its all-reduces run on the same ring during backward). ar NULL: off.
 * 0, or -1 (the model is not opened for training). */
int trainer_set_overlap(trainer_t *t, allreduce_t *ar, int timeout_ms);
/* docs/TRAINING.md "Non-finite values": after trainer_reduce, every summed
 * gradient finite (the same sums on every rank, so every rank agrees);
 * after trainer_apply, every parameter and BatchNorm buffer finite. 0, or
 * -1 with the tensor and its first non-finite element in err. */
int trainer_check_grads(const trainer_t *t, char *err, size_t errlen);
int trainer_check_params(const trainer_t *t, char *err, size_t errlen);
/* fp16 training (cfg.loss_scale > 0), after trainer_reduce: 1 when a summed
 * gradient is inf or NaN (the step is skipped: trainer_apply takes no
 * optimizer step and halves the scale; every rank sees the same sums), 0
 * after the gradients were divided by the step's scale, -1 with the reason
 * in err (a scan or a kernel failed). 0 at once without loss scaling. */
int trainer_unscale(trainer_t *t, char *err, size_t errlen);
/* The loss scaler (loss_scale.h), NULL without loss scaling. */
const loss_scale_t *trainer_loss_scale(const trainer_t *t);
/* 1 when trainer_unscale found this step's gradients not finite (it will
 * be skipped), else 0. */
int trainer_step_skipped(const trainer_t *t);
/* optim_step at lr(epoch), unless global_count == 0 (nothing was loaded:
 * PyTorch would not step on an empty batch either) or trainer_unscale
 * found a non-finite gradient (GradScaler's skipped step); then the loss
 * scaler's update. Returns the lr used. */
double trainer_apply(trainer_t *t, int epoch, uint32_t global_count);
/* Undo the buffer updates (running stats, num_batches_tracked) of the last
 * trainer_forward_backward: the model is again at the last completed step. */
void trainer_restore(trainer_t *t);

/* Checkpoint of the model (every tensor, num_batches_tracked as I64) and
 * the optimizer; info's counters as docs/TRAINING.md says. */
int trainer_save(trainer_t *t, const char *path, const ckpt_info_t *info, char *err,
                 size_t errlen);
/* All or nothing; info receives the counters (ckpt_info_clear it). */
int trainer_load(trainer_t *t, const char *path, ckpt_info_t *info, char *err, size_t errlen);
/* The same with the checkpoint in memory (a joiner's state, docs/ELASTIC.md):
 * path NULL saves into *image (malloc'd, *len bytes); image NULL loads the
 * file `what`, else the image (`what` names it in errors). */
int trainer_save_to(trainer_t *t, const char *path, uint8_t **image, size_t *len,
                    const ckpt_info_t *info, char *err, size_t errlen);
int trainer_load_from(trainer_t *t, const char *what, const void *image, size_t len,
                      ckpt_info_t *info, char *err, size_t errlen);
/* The model tensors only, as a plain safetensors weights file (loads with
 * model_new / `ddpipe eval --weights`). */
int trainer_save_weights(trainer_t *t, const char *path, char *err, size_t errlen);

#endif
