/* chart — the classification figures of an eval, drawn with cairo:
 *
 *   confusion.png/svg   confusion-matrix heat map: cell colour = fraction
 *                       of the true class (row-normalised, so rare classes
 *                       read as well as common ones), the count printed in
 *                       each cell while cells are big enough, a colour bar
 *   f1.png/svg          per-class F1 as horizontal bars with their values,
 *                       precision and recall as markers, macro F1 as a
 *                       dashed line
 *
 * Class names longer than CHART_MAX_NAME code points are shortened with
 * "…"; with too many classes for labels (cells or bars under ~9 px) the
 * names are left out rather than overprinted. Files are written to a
 * temporary name and renamed into place (common/atomic_file.h). Text uses
 * "DejaVu Sans", as plot.h.
 */
#ifndef DDP_CHART_H
#define DDP_CHART_H

#include <stddef.h>
#include <stdint.h>

#define CHART_MAX_NAME 24

typedef struct {
    const char *title;         /* e.g. "Confusion matrix (eval, epoch 0)" */
    const uint64_t *confusion; /* nc*nc, [true*nc + pred] */
    uint32_t nc;
    char *const *names;        /* nc, or NULL for "0".."nc-1" */
    uint32_t nl;               /* F1 bars of classes 0..nl-1 (present.h); 0: all nc */
} chart_classes_t;

/* Heat map of the confusion matrix as PNG (pixels) and SVG (points) at the
 * given paths (either may be NULL to skip it). 0, or -1 with a reason. */
int chart_confusion_write(const chart_classes_t *c, const char *png, const char *svg,
                          char *err, size_t errlen);

/* Per-class F1 bars (sklearn's precision_recall_fscore_support numbers,
 * clsmetrics.h). 0, or -1 with a reason. */
int chart_f1_write(const chart_classes_t *c, const char *png, const char *svg, char *err,
                   size_t errlen);

#endif
