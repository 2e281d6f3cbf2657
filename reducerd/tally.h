/* tally — exact per-(epoch, phase) counts of per-sample results.
 *
 * Every sample id of the plan (0..n-1) is accounted for at most once, either
 * as a result (label, top-k, loss) or as failed (could not be loaded); a
 * second report for the same id is ignored and counted in `duplicates`, so a
 * re-sent batch changes nothing. Counts are integers; the loss sum is a
 * double sum over ids in id order, computed when the metric is filled, so it
 * is the same bytes whatever order results arrived in (floating-point
 * addition is not associative: summing in arrival order would make the
 * metric depend on the number of workers).
 *
 * Memory: n/8 bytes of bitmap + 4 bytes of loss per sample, plus, with
 * keep_predictions, 1 + 4 + 4k bytes per sample (status, label, top-k) for
 * predictions.csv; and the confusion matrix's nonzero cells (common/confusion.h:
 * at most one per result, 32 bytes each at worst), never classes^2.
 * With probabilities (tally_enable_probs): reducerd/curves.h's histograms
 * (80 KiB per class, any number of samples), 16 calibration bins, and with
 * keep_predictions 2*nprob bytes per sample for the CSV's probabilities.
 */
#ifndef DDP_TALLY_H
#define DDP_TALLY_H

#include <stdbool.h>
#include <stdint.h>

#include "proto/event.h"
#include "proto/messages.h"

/* The confusion matrix is sparse: any class count a plan may carry. */
#define TALLY_MAX_CLASSES DDP_MAX_CLASSES
#define TALLY_MAX_K 5

/* Per-sample status in predictions (ev_predictions_t.status). */
#define TALLY_MISSING 0 /* nothing received yet */
#define TALLY_RESULT 1
#define TALLY_FAILED 2

typedef struct tally tally_t;

/* n: samples in the plan; k: top-k carried per sample, 1..min(num_classes,
 * TALLY_MAX_K) — the k gpud sends (k > num_classes is refused).
 * Returns NULL (and logs why) on bad arguments or out of memory. */
tally_t *tally_new(uint32_t epoch, uint8_t phase, uint64_t n, uint32_t num_classes, uint32_t k,
                   bool keep_predictions);
void tally_destroy(tally_t **self_p);

/* 0: counted; 1: duplicate (id already has a result or failed; ignored and
 * counted in duplicates); -1: invalid (id >= n, label outside [0, nc), a
 * top-k class outside [0, nc), k different from the tally's k, loss negative
 * or -inf). An invalid result changes nothing, not even duplicates. A NaN or
 * +inf loss is counted (the sample is a result; the loss sum becomes NaN or
 * inf) and in nonfinite_loss. */
int tally_add_result(tally_t *self, uint64_t id, int32_t label, const int32_t *topk, uint32_t k,
                     float loss);
/* Probability metrics on (eval with --predictions probs|all): every result
 * must then carry the quantized probabilities of all classes
 * (tally_add_result_probs). keep: probabilities kept per sample for the
 * predictions (0, k: those of the top-k, or num_classes). -1 (logged): too
 * many classes or samples for the histograms, or out of memory. */
int tally_enable_probs(tally_t *self, uint32_t keep);
/* tally_add_result with q: num_classes quantized probabilities (nq of
 * them; nq must be num_classes when probabilities are on, else q is
 * ignored). Invalid (-1) also when probabilities are on and q is missing. */
int tally_add_result_probs(tally_t *self, uint64_t id, int32_t label, const int32_t *topk,
                           uint32_t k, float loss, const uint16_t *q, uint32_t nq);
/* A sample that could not be loaded. Same return convention (-1: id >= n). */
int tally_add_failed(tally_t *self, uint64_t id);
/* The same, with its label when the loader knows it (>= 0; -1 unknown):
 * predictions.csv prints it on the failed row. */
int tally_add_failed_label(tally_t *self, uint64_t id, int32_t label);

uint32_t tally_epoch(const tally_t *self);
uint8_t tally_phase(const tally_t *self);
uint64_t tally_planned(const tally_t *self);
/* Results + failed: ids accounted for. */
uint64_t tally_accounted(const tally_t *self);
bool tally_complete(const tally_t *self);

/* Overwrites *out entirely: epoch, phase, planned, samples, failed,
 * correct_top1, correct_top5, duplicates, loss_sum, nonfinite_loss, num_classes,
 * ncells and cells (NULL out of memory, logged), and with probabilities has_probs, ece, calib, auc, ap and the
 * curves of the (up to EVENT_MAX_CURVES) classes with the lowest AP.
 * out->cells (and the probability arrays) borrow the tally's memory (valid until the next add or
 * destroy); class_names, workers, wall_s, images_per_sec, lr and final are
 * zero/NULL for the caller to set. O(n) (the id-order loss sum). */
void tally_fill_metric(const tally_t *self, ev_metric_t *out);

/* Entries [first, first+n) of the epoch, borrowed from the tally. status is
 * TALLY_RESULT, TALLY_FAILED or TALLY_MISSING; labels of failed/missing
 * entries are -1 and their top-k -1, loss 0. paths is NULL (the tally has
 * none; the caller may point it at the plan's paths + first).
 * Returns 0, or -1 when the tally keeps no predictions or the range is
 * outside [0, planned). */
int tally_fill_predictions(const tally_t *self, uint64_t first, uint64_t n, ev_predictions_t *out);

#endif
