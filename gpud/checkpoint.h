/* checkpoint — training checkpoints as safetensors files.
 *
 *   ckpt_tensor_t model[] = {{"fc.weight", ST_F32, 2, {10, 640}, w}, ...};
 *   ckpt_info_t info = {.epoch = 3, .step = 1407, .seed = 42, .arch = "wideresnet",
 *                       .rng = rng_bytes, .rng_len = sizeof rng_bytes};
 *   ckpt_save("run/ckpt.safetensors", model, n, optim, &info, err, sizeof err);
 *   ...
 *   ckpt_info_t got = {0};
 *   ckpt_load("run/ckpt.safetensors", model, n, optim, &got, err, sizeof err);
 *   ... use got.epoch, got.rng ...; ckpt_info_clear(&got);
 *
 * File contents:
 *   <state_dict name>              model tensors (F32, or I64 such as
 *                                  BatchNorm's num_batches_tracked)
 *   optim.<param>.<state>          optimizer state (optim.h lists the names)
 *   ckpt.rng_state                 U8 [n], opaque RNG state (absent if empty)
 *   ckpt.sampler_state             U8 [n], opaque sampler state (absent if empty)
 *   __metadata__: format=ddpipe-checkpoint, ckpt.version=1, ckpt.epoch,
 *   ckpt.step, ckpt.seed, ckpt.streak, ckpt.global_batch,
 *   ckpt.steps_per_epoch, ckpt.chunk (decimal), arch (if set), optim.kind and the
 *   optimizer's hyper-parameters.
 * The model tensors keep PyTorch's names, so scripts/export_torchvision.py
 * --reverse turns a checkpoint into a state_dict (and its optimizer state
 * into an optimizer state_dict with --optimizer-out).
 *
 * Saving writes PATH.tmp.XXXXXX in the same directory, fsyncs it, renames
 * it over PATH and fsyncs the directory: a crash leaves the old checkpoint
 * or the new one, never half a file.
 *
 * Loading is all or nothing: every model tensor must be in the file with
 * the same dtype and shape, every other tensor of the file must be a model
 * tensor, optimizer state or ckpt.*, the optimizer state must match the
 * optimizer (optim_load_state), every F32 value must be finite (finite.h)
 * — otherwise an error naming the tensor (and the first non-finite
 * element) and nothing is changed. A truncated or corrupt file is an error naming the
 * file and what is wrong.
 */
#ifndef DDP_CHECKPOINT_H
#define DDP_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "common/safetensors.h"
#include "gpud/optim/optim.h"

typedef struct {
    const char *name;             /* state_dict name */
    st_dtype_t dtype;             /* ST_F32 or ST_I64 */
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    void *data;                   /* save: read from; load: written to */
} ckpt_tensor_t;

typedef struct {
    int64_t epoch;                /* epochs completed */
    int64_t step;                 /* optimizer steps completed */
    uint64_t seed;                /* the job's seed */
    char arch[64];                /* model architecture, "" if unknown */
    uint8_t *rng;                 /* save: read (rng_len bytes); load: malloc'd copy or NULL */
    size_t rng_len;
    uint8_t *sampler;             /* the same for the sampler's state */
    size_t sampler_len;
    /* training-through-the-pipeline state (docs/TRAINING.md); saved always,
     * 0 when loading a checkpoint written before they existed */
    int64_t streak;               /* epochs in a row at the target accuracy */
    int64_t global_batch;         /* G: samples per optimizer step */
    int64_t steps_per_epoch;      /* ceil(N / G) */
    int64_t chunk;                /* --chunk (bitwise training), 0 off; saved always, 0
                                   * when loading a checkpoint without it */
    /* fp16 training's loss scaler (loss_scale.h), GradScaler's state_dict:
     * saved when loss_scale > 0, all 0 when loading a checkpoint without */
    double loss_scale;            /* the scale of the next step (a power of two) */
    int64_t loss_scale_tracker;   /* finite steps in a row since it changed */
    int64_t skipped_steps;        /* steps skipped for non-finite gradients */
} ckpt_info_t;

#define CKPT_FORMAT "ddpipe-checkpoint"
#define CKPT_VERSION 1

/* optim NULL: no optimizer state. Returns 0, or -1 with the reason in err. */
int ckpt_save(const char *path, const ckpt_tensor_t *model, size_t n_model, const optim_t *optim,
              const ckpt_info_t *info, char *err, size_t errlen);

/* Fill the model tensors (and the optimizer state, unless optim is NULL:
 * then optim.* tensors are ignored) from path; info (may be NULL) receives
 * the counters, arch and copies of the RNG/sampler state — release them
 * with ckpt_info_clear (info is overwritten on success, not freed first). Returns 0, or -1 with the reason in err and
 * nothing changed. */
int ckpt_load(const char *path, const ckpt_tensor_t *model, size_t n_model, optim_t *optim,
              ckpt_info_t *info, char *err, size_t errlen);

/* The same checkpoint as bytes in memory (a joiner's state, docs/ELASTIC.md):
 * *image malloc'd (the caller frees it), *len its size; loaded back by
 * ckpt_load_image with the same checks as a file (what: its name in errors). */
int ckpt_save_image(uint8_t **image, size_t *len, const ckpt_tensor_t *model, size_t n_model,
                    const optim_t *optim, const ckpt_info_t *info, char *err, size_t errlen);
int ckpt_load_image(const void *image, size_t len, const char *what, const ckpt_tensor_t *model,
                    size_t n_model, optim_t *optim, ckpt_info_t *info, char *err, size_t errlen);

/* Free what ckpt_load allocated in info and zero it. */
void ckpt_info_clear(ckpt_info_t *info);

#endif
