/* slot — one (epoch, phase) being counted: its plan, exact tally, clock,
 * learning rate and per-rank work. An eval job has one slot; a training
 * job keeps the current epoch's train and validation slots side by side
 * (validation may start before the last train result is in).
 *
 * The slot completes when results + failed reach the plan's n - skip
 * (skip: samples of a resumed train epoch trained before the resume).
 * Its clock runs from slot_new (or slot_restart_clock) to the moment it
 * completed, so the metric's wall_s is the epoch's time even when the
 * metric is published later.
 */
#ifndef DDP_REDUCERD_SLOT_H
#define DDP_REDUCERD_SLOT_H

#include <stdbool.h>
#include <stdint.h>

#include "proto/event.h"
#include "proto/messages.h"
#include "reducerd/tally.h"

typedef struct slot slot_t;

/* Takes the plan's arrays (class_names, paths: *plan is zeroed). world:
 * ranks whose throughput is tracked (RESULT rank 0..world-1). NULL (and
 * logged) on a bad plan shape or out of memory; *plan is then left as is. */
slot_t *slot_new(ddp_plan_t *plan, bool keep_predictions, uint32_t world, double now_s);
void slot_destroy(slot_t **self_p);

const ddp_plan_t *slot_plan(const slot_t *self);
/* Probability metrics on (tally_enable_probs); mode "topk" or "all": the
 * probabilities kept per sample for the predictions. 0 or -1 (logged). */
int slot_enable_probs(slot_t *self, const char *mode);
const tally_t *slot_tally(const slot_t *self);
/* Samples the slot waits for: n - skip. */
uint64_t slot_expected(const slot_t *self);
uint64_t slot_accounted(const slot_t *self);
bool slot_complete(const slot_t *self);
/* Distinct failed ids counted so far. */
uint64_t slot_failed(const slot_t *self);
/* The epoch's clock starts again at now_s (training: the gang formed after
 * the plan arrived). No effect once complete. */
void slot_restart_clock(slot_t *self, double now_s);

/* Counts a RESULT's samples. *invalid / *dup: samples refused as invalid
 * (tally_add_result -1) or already counted. The rank's work (n, compute_s)
 * and the step's lr/step are kept for the metric. */
void slot_add_result(slot_t *self, const ddp_result_t *res, double now_s, uint64_t *invalid,
                     uint64_t *dup);
/* A sample that could not be loaded: tally_add_failed's return; the first
 * report of an id keeps "path\treason" for the failed events. */
int slot_add_failed(slot_t *self, const ddp_failed_t *f, double now_s);
/* "path\treason" of a failed id, or NULL. */
const char *slot_fail_reason(const slot_t *self, uint64_t id);

/* Highest RESULT step seen; false when none carried one. */
bool slot_last_step(const slot_t *self, uint64_t *step);

/* The metric of the slot as of now_s: tally counts, class names, lr,
 * wall_s (to completion, or to now_s while counting), images_per_sec =
 * samples / wall_s, first_result_s (the epoch's start to the first RESULT
 * that counted a sample) and steady_images_per_sec (the samples after that
 * result / the seconds after it; 0 until a second result counts) and, with
 * per_rank, rank_images_per_sec (each rank's
 * samples / its compute seconds; 0 for a rank without results). Arrays are
 * borrowed from the slot (valid until its next add or destroy); workers
 * and final are left for the caller. */
void slot_fill_metric(const slot_t *self, double now_s, bool per_rank, ev_metric_t *out);

#endif
