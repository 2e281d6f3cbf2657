/* summary — summary.json of a run: the final metric of the job.
 *
 * Keys, in this order: epoch, phase ("eval"|"train"), planned (N of the
 * plan), samples (samples WITH a result, each counted once), failed
 * (samples that could not be loaded; not in any denominator),
 * duplicates_ignored, correct_top1, correct_top5, top1 = correct_top1 /
 * samples, top5 = correct_top5 / samples, loss = loss_sum / samples (mean
 * cross-entropy; top1/top5/loss are null when samples is 0), macro_f1,
 * weighted_f1, per_class [{name, precision, recall, f1, support}] (sklearn's
 * precision_recall_fscore_support over labels=range(nc), zero_division=0,
 * bit-identical doubles), failed_files [{index, path, reason}] sorted by
 * index, then workers, images_per_sec, wall_seconds, first_result_seconds
 * (the epoch's start to its first result: workers starting, models loading,
 * plans; null without one) and steady_images_per_sec (the samples after
 * the first result / the seconds after it; null with fewer than two
 * results).
 *
 * Determinism: every key before "workers" is byte-identical for identical
 * counts (integers as integers, doubles in the shortest text that reads back
 * exactly, fixed layout: common/json.h's JSON_STYLE_LINES). The last five keys, each on its own line, depend
 * on the run (worker count and timing) and are the only ones that differ
 * between runs; tests strip those five lines.
 *
 * A training run adds one more key after them, "training" (the metric above
 * is then the last validation): {epochs_run (epochs with a train row, a
 * resumed run's earlier ones included), last_epoch, stopped_early (stopped
 * by the target before --epochs), stop_reason (reducerd's decision text;
 * with "stopped", rank 0's message; else null), best_val_top1 and best_val_epoch (null without validation; the
 * first epoch of the best), final_train_loss, final_train_top1 (of the last
 * train row), total_seconds (sum of every row's epoch_seconds: train and
 * validation phases of all epochs), ranks_lost, ranks_joined, steps_redone
 * (elastic training, docs/ELASTIC.md: from the membership events),
 * world_size (the ranks of the last membership generation; null when no
 * membership event came), checkpoint_failures (1 when the job stopped
 * because rank 0 could not write a checkpoint or the final weights, else
 * 0), checkpoint_error (rank 0's message then, naming the file, the error
 * and the last good checkpoint; else null), last_good_checkpoint (the run
 * directory's checkpoint.safetensors when it exists — written whole or not
 * at all — else null), stopped (null, or what stopped the job before its
 * end: "checkpoint-failed", "non-finite"; stop_reason then names the file
 * and error, or the step and tensor), loss_scale (--precision fp16: the
 * loss scale of the last train step; null without loss scaling),
 * skipped_steps (--precision fp16: the steps skipped because their
 * gradients were not finite, docs/FP16.md; 0 otherwise)}.
 */
#ifndef DDP_SUMMARY_H
#define DDP_SUMMARY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/event.h"

typedef struct {
    uint64_t index;
    const char *path;   /* NULL: unknown (written as null) */
    const char *reason; /* NULL: unknown (written as null) */
} summary_failed_t;

/* The "training" object (see above); NaN doubles print as null. */
typedef struct {
    uint32_t epochs_run;
    uint32_t last_epoch;
    bool stopped_early;
    const char *stop_reason;    /* NULL: null */
    double best_val_top1;       /* NaN: no validation */
    uint32_t best_val_epoch;
    double final_train_loss;
    double final_train_top1;
    double total_seconds;
    uint32_t ranks_lost;
    uint32_t ranks_joined;
    uint32_t steps_redone;
    int32_t world_size;         /* < 0: null */
    uint32_t checkpoint_failures;
    const char *checkpoint_error;      /* NULL: null */
    const char *last_good_checkpoint;  /* NULL: null */
    const char *stopped;               /* NULL: null; "checkpoint-failed", "non-finite" */
    double loss_scale;          /* --precision fp16: the last step's loss scale; 0: null
                                 * (no loss scaling) */
    uint64_t skipped_steps;     /* --precision fp16: steps skipped for non-finite
                                 * gradients (0 without fp16) */
} summary_training_t;

/* The JSON text (caller frees), NULL when out of memory. m->class_names
 * may be NULL (names "0".."nc-1"); m->cells its ncells confusion cells.
 * training: NULL for an eval run (no "training" key). */
char *summary_json(const ev_metric_t *m, const summary_failed_t *failed, size_t n_failed,
                   const summary_training_t *training);

/* Atomically write summary_json() to path. 0 or -1 with a reason. */
int summary_write(const char *path, const ev_metric_t *m, const summary_failed_t *failed,
                  size_t n_failed, const summary_training_t *training, char *err, size_t errlen);

/* "eval", "train" or "phase<N>". */
const char *summary_phase_name(uint8_t phase);

#endif
