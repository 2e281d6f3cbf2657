/* class_report — classification_report.txt in the exact text layout of
 * sklearn.metrics.classification_report(y_true, y_pred,
 * labels=range(nc), target_names=names, digits=2), rebuilt from the
 * confusion matrix: per-class rows, then "accuracy" (or "micro avg" when a
 * class has neither support nor predictions, as sklearn does), "macro avg"
 * and "weighted avg". The name column is as wide as the longest name in
 * code points (at least len("weighted avg")). */
#ifndef DDP_CLASS_REPORT_H
#define DDP_CLASS_REPORT_H

#include <stddef.h>
#include <stdint.h>

#include "common/confusion.h"

/* names: nc UTF-8 strings, or NULL for "0", "1", ... (sklearn's default).
 * Returns the text (caller frees) or NULL when out of memory / nc == 0. */
char *class_report_text(const ev_cell_t *cells, uint64_t ncells, uint32_t nc,
                        char *const *names);

/* labels=range(nl), nl <= nc (clsmetrics_compute_labels): the report of a
 * dataset holding some of the model's classes. */
char *class_report_text_labels(const ev_cell_t *cells, uint64_t ncells, uint32_t nc,
                               uint32_t nl, char *const *names);

/* Atomically write the report (labels=range(nl); nl 0: all nc) to path.
 * 0 or -1 with a reason. */
int class_report_write(const char *path, const ev_cell_t *cells, uint64_t ncells, uint32_t nc,
                       uint32_t nl, char *const *names, char *err, size_t errlen);

#endif
