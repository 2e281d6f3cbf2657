/* confusion — a confusion matrix kept as its nonzero cells, so that its
 * memory grows with the samples counted, never with classes^2 (a dense
 * matrix of ImageNet-21k's 21,841 classes is 3.8 GB of uint64).
 *
 * Two forms: confusion_t, the counter reducerd's tally adds one sample at a
 * time to (an open-addressing hash of (true, pred) -> count, 16 bytes a
 * slot, at most half full), and ev_cell_t arrays sorted by (truth, pred)
 * with every count > 0 and no cell twice: what the metric event carries
 * (PROTOCOL.md "confusion_cells") and reporterd reads. Per-class
 * precision/recall/F1 need only the row sums, column sums and diagonal,
 * which a walk over the cells gives. */
#ifndef DDP_CONFUSION_H
#define DDP_CONFUSION_H

#include <stddef.h>
#include <stdint.h>

/* One nonzero cell: `count` samples of class `truth` predicted as `pred`.
 * 16 bytes, the wire layout of one entry (little-endian, as every bin). */
typedef struct {
    uint32_t truth;
    uint32_t pred;
    uint64_t count;
} ev_cell_t;

_Static_assert(sizeof(ev_cell_t) == 16, "ev_cell_t travels as 16 bytes");

typedef struct confusion confusion_t;

confusion_t *confusion_new(void);
void confusion_destroy(confusion_t **self_p);
/* One more sample of (truth, pred). 0, or -1 out of memory (nothing added). */
int confusion_add(confusion_t *self, uint32_t truth, uint32_t pred);
/* The nonzero cells, sorted: *cells borrows a buffer of self rewritten on
 * every call (valid until the next add, cells or destroy). 0, or -1 out of
 * memory (*cells NULL, *n 0). */
int confusion_cells(confusion_t *self, const ev_cell_t **cells, uint64_t *n);

/* Sorts cells by (truth, pred) and merges equal ones (summing counts),
 * dropping zero counts; *n becomes the cells left. */
void confusion_normalize(ev_cell_t *cells, uint64_t *n);
/* 0 when cells is sorted, strictly increasing, every count > 0 and both
 * classes < nc; else -1 with the first offending cell in err. */
int confusion_check(const ev_cell_t *cells, uint64_t n, uint32_t nc, char *err, size_t errlen);
/* The count of (truth, pred): binary search, 0 when absent. */
uint64_t confusion_at(const ev_cell_t *cells, uint64_t n, uint32_t truth, uint32_t pred);
/* The cells of a dense nc x nc matrix ([true*nc + pred]); malloc'ed (free
 * it), *n its length. NULL out of memory. For tests and small tools. */
ev_cell_t *confusion_from_dense(const uint64_t *dense, uint32_t nc, uint64_t *n);

#endif
