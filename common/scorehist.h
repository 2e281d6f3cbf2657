/* scorehist — exact ranking metrics of quantized scores from histograms.
 *
 * A score quantized to q / PROB_RES (q = 0..PROB_RES) falls in bin q. For
 * one class (one-vs-rest) pos[q] counts the samples of that class whose
 * score is q, neg[q] the other samples. Every distinct printed score is one
 * bin, so the thresholds sklearn's roc_curve / precision_recall_curve take
 * (the distinct scores, descending) are the non-empty bins from PROB_RES
 * down to 0, and the metrics below equal sklearn's on the printed values:
 *
 *   ROC-AUC: trapezoid over the (FPR, TPR) points of those thresholds, from
 *            (0, 0) (roc_auc_score; ties count half, as the trapezoid does).
 *   AP:      sum_n (R_n - R_{n-1}) P_n over those thresholds, R_0 = 0
 *            (average_precision_score).
 *
 * Both are NaN when the class has no positive or no negative sample (sklearn
 * refuses ROC-AUC then; AP without positives is undefined).
 * Memory is the caller's: (PROB_RES + 1) counts per array, whatever the
 * number of samples. Plain functions over arrays.
 */
#ifndef DDP_SCOREHIST_H
#define DDP_SCOREHIST_H

#include <stddef.h>
#include <stdint.h>

/* Probabilities travel and print with 4 decimals: q = round(p * 10^4). */
#define PROB_DECIMALS 4
#define PROB_RES 10000u
#define PROB_BINS (PROB_RES + 1u)
/* Calibration bins (TorchMetrics' MulticlassCalibrationError n_bins=15). */
#define CALIB_BINS 15u

/* round-half-away of p * PROB_RES into 0..PROB_RES; NaN -> 0. */
uint16_t prob_quantize(float p);

double scorehist_roc_auc(const uint32_t *pos, const uint32_t *neg, size_t bins);
double scorehist_ap(const uint32_t *pos, const uint32_t *neg, size_t bins);

/* The curve points, threshold by threshold from the top: for each
 * non-empty bin (descending) fn(tp, fp, P, N, q, arg), tp/fp cumulative.
 * Returns the number of points. */
typedef void (*scorehist_point_fn)(uint64_t tp, uint64_t fp, uint64_t p, uint64_t n, uint32_t q,
                                   void *arg);
size_t scorehist_walk(const uint32_t *pos, const uint32_t *neg, size_t bins,
                      scorehist_point_fn fn, void *arg);

/* Calibration bin of a quantized confidence: floor(15 q / PROB_RES), and 15
 * for q == PROB_RES (confidence 1.0), as torch.bucketize(conf,
 * linspace(0, 1, 16), right=True) - 1 in TorchMetrics. 16 bins. */
uint32_t calib_bin(uint32_t q);
/* ECE (norm l1): sum_b |correct_b - conf_b| / n, conf_b = qsum_b / PROB_RES:
 * exact from integer counts. count, correct, qsum: CALIB_BINS + 1 entries.
 * NaN when no sample. */
double calib_ece(const uint64_t *count, const uint64_t *correct, const uint64_t *qsum);

#endif
