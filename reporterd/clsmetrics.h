/* clsmetrics — per-class precision/recall/F1 from a confusion matrix,
 * computed the way sklearn.metrics.precision_recall_fscore_support does with
 * labels=range(nc) and zero_division=0 (the default "warn" behaviour without
 * the warning), down to the floating-point operations: p = tp/pred,
 * r = tp/true, f1 = (2p)r/(p+r) (0 when p+r == 0); macro = mean, weighted =
 * average weighted by support, both summed with numpy's pairwise summation,
 * so the doubles are bit-identical to sklearn's. */
#ifndef DDP_CLSMETRICS_H
#define DDP_CLSMETRICS_H

#include <stdbool.h>
#include <stdint.h>

#include "common/confusion.h"

typedef struct {
    double precision, recall, f1;
    uint64_t support;   /* true samples of the class (row sum) */
    uint64_t predicted; /* samples predicted as the class (column sum) */
    uint64_t tp;
} cls_class_t;

typedef struct {
    double precision, recall, f1;
} cls_avg_t;

typedef struct {
    uint32_t nc;
    cls_class_t *per_class; /* nc, owned */
    uint64_t total;         /* sum of supports: samples in the confusion */
    cls_avg_t micro, macro, weighted;
    /* sklearn prints "accuracy" instead of "micro avg" unless some class has
     * neither support nor predictions (it is then outside unique_labels). */
    bool micro_is_accuracy;
} clsmetrics_t;

/* cells: the confusion matrix's ncells nonzero cells (common/confusion.h),
 * every class < nc; only row sums, column sums and the diagonal are read,
 * so the cost is O(ncells + nc). 0, or -1 (out of memory, nc 0). */
int clsmetrics_compute(const ev_cell_t *cells, uint64_t ncells, uint32_t nc,
                       clsmetrics_t *out);
/* The same with labels=range(nl) (nl <= nc): classes nl.. are outside the
 * report (sklearn's classification_report(labels=...)): their row and
 * column still count in the labelled classes' support and predictions,
 * the averages and per_class cover the nl labelled ones (out->nc = nl). */
int clsmetrics_compute_labels(const ev_cell_t *cells, uint64_t ncells, uint32_t nc,
                              uint32_t nl, clsmetrics_t *out);
void clsmetrics_clear(clsmetrics_t *self);

/* numpy's pairwise sum (np.add.reduce of a contiguous float64 array). */
double clsmetrics_pairwise_sum(const double *a, uint64_t n);

#endif
