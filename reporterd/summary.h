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
 * index, then workers, images_per_sec, wall_seconds.
 *
 * Determinism: every key before "workers" is byte-identical for identical
 * counts (integers as integers, doubles in the shortest text that reads back
 * exactly, fixed layout). The last three keys, each on its own line, depend
 * on the run (worker count and timing) and are the only ones that differ
 * between runs; tests strip those three lines.
 */
#ifndef DDP_SUMMARY_H
#define DDP_SUMMARY_H

#include <stddef.h>
#include <stdint.h>

#include "proto/event.h"

typedef struct {
    uint64_t index;
    const char *path;   /* NULL: unknown (written as null) */
    const char *reason; /* NULL: unknown (written as null) */
} summary_failed_t;

/* The JSON text (caller frees), NULL when out of memory. m->class_names
 * may be NULL (names "0".."nc-1"); m->confusion must hold nc*nc counts. */
char *summary_json(const ev_metric_t *m, const summary_failed_t *failed, size_t n_failed);

/* Atomically write summary_json() to path. 0 or -1 with a reason. */
int summary_write(const char *path, const ev_metric_t *m, const summary_failed_t *failed,
                  size_t n_failed, char *why, size_t whylen);

/* "eval", "train" or "phase<N>". */
const char *summary_phase_name(uint8_t phase);

#endif
