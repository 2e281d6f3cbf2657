/* probcharts — the figures of an eval's probabilities (--predictions
 * probs|all), drawn with plot.h from the metric's exact counts:
 *
 *   reliability.png/svg  reliability diagram: per calibration bin (15 over
 *                        [0, 1) and confidence 1.0) the accuracy against
 *                        the mean confidence, and the diagonal of perfect
 *                        calibration; the title carries the ECE
 *   roc_worst.png/svg    ROC curves (FPR, TPR) of the classes with the
 *                        lowest average precision (at most 3), with AUC
 *   pr_worst.png/svg     their precision-recall curves, with AP
 *
 * Curve points are the distinct-threshold points sklearn's roc_curve /
 * precision_recall_curve give (common/scorehist.h). stem_dir: the run
 * directory; files are written atomically. 0, or -1 with a reason.
 */
#ifndef DDP_PROBCHARTS_H
#define DDP_PROBCHARTS_H

#include <stddef.h>

#include "proto/event.h"

int probcharts_write(const ev_metric_t *m, const char *dir, int width, int height, char *err,
                     size_t errlen);

#endif
