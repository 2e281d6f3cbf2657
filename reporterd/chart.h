/* chart — the classification figures of an eval, drawn with cairo:
 *
 *   confusion.png/svg   confusion-matrix heat map: cell colour = fraction
 *                       of the true class (row-normalised, so rare classes
 *                       read as well as common ones), the count printed in
 *                       each cell while cells are big enough, a colour bar
 *   f1.png/svg          per-class F1 as horizontal bars with their values,
 *                       precision and recall as markers, macro F1 as a
 *                       dashed line
 *   chart_values_write  a few values as labelled vertical bars: the loss and
 *                       accuracy of a report with a single epoch (an eval),
 *                       where a line plot over epochs would be one point
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

#include "common/confusion.h"

#define CHART_MAX_NAME 24
/* Most classes a confusion heat map draws: it holds the dense matrix and an
 * nc x nc image (8 + 4 bytes a cell: 12 MB at 1,000); past it a heat map
 * is unreadable anyway, and rundir writes no confusion.png/svg (the
 * classification report and summary.json keep every class). */
#define CHART_CONFUSION_MAX 1000u

typedef struct {
    const char *title;         /* e.g. "Confusion matrix (eval, epoch 0)" */
    const ev_cell_t *cells;    /* the confusion matrix's nonzero cells */
    uint64_t ncells;
    uint32_t nc;
    char *const *names;        /* nc, or NULL for "0".."nc-1" */
    uint32_t nl;               /* F1 bars of classes 0..nl-1 (present.h); 0: all nc */
} chart_classes_t;

/* Heat map of the confusion matrix as PNG (pixels) and SVG (points) at the
 * given paths (either may be NULL to skip it). 0, or -1 with a reason
 * (also when nc > CHART_CONFUSION_MAX). */
int chart_confusion_write(const chart_classes_t *c, const char *png, const char *svg,
                          char *err, size_t errlen);

/* Per-class F1 bars (sklearn's precision_recall_fscore_support numbers,
 * clsmetrics.h). 0, or -1 with a reason. */
int chart_f1_write(const chart_classes_t *c, const char *png, const char *svg, char *err,
                   size_t errlen);

#define CHART_MAX_VALUES 8

typedef struct {
    const char *title, *ylabel;
    size_t n;                  /* 1..CHART_MAX_VALUES bars */
    const char *const *names;  /* n labels under the bars */
    const double *values;      /* n; a non-finite value is labelled "n/a", no bar */
    double ymax;               /* > 0: the axis goes to this (accuracy: 1); 0: auto */
    int decimals;              /* of the value printed on each bar */
} chart_values_t;

/* Bars in plot.c's series colours (tab10), each with its value printed.
 * 0, or -1 with a reason. */
int chart_values_write(const chart_values_t *v, const char *png, const char *svg, char *err,
                       size_t errlen);

#endif
