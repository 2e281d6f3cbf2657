/* xsum — exact, order-independent sums of floats and doubles (issue 31's
 * bitwise training): every value is cut at FIXED absolute bit positions
 * into 30-bit slices, and each slice is added into a 64-bit integer limb of
 * its position. Integer addition is associative, so any order, any split
 * into partial sums (chunks, ranks, a ring) and any merge give the same
 * limbs, and so the same result bytes.
 *
 * A segment (a tensor, a BatchNorm's channel vector) keeps XSUM_LIMBS limbs
 * per element below one top position shared by the segment: the position
 * of the largest slice seen so far in any of its elements. A larger value
 * moves the top up and drops the lowest limbs — exactly what would have
 * been dropped had that value come first (the slices' positions are
 * absolute), so the kept window, and the result, depend only on the
 * multiset of values added. Bits below the window (over 60 bits under the
 * segment's largest magnitude) are truncated toward zero, deterministically.
 * A limb holds < 2^30 per addition: 2^33 additions per element before
 * overflow (the caller's steps add a few thousand).
 *
 *   size_t len[2] = {c, 1};
 *   xsum_t *x = xsum_new(len, 2);
 *   per contribution: xsum_add_f64(x, 0, sums); ...
 *   (across ranks: gpud/xsum_ring.h's xsum_allreduce)
 *   xsum_get_f64(x, 0, out);
 *
 * Non-finite input marks its segment XSUM_NONFINITE: its results are NaN
 * (callers' finiteness checks then stop the job, as for a float sum).
 */
#ifndef DDP_COMMON_XSUM_H
#define DDP_COMMON_XSUM_H

#include <stddef.h>
#include <stdint.h>

#define XSUM_LIMBS 3            /* limbs kept per element (90 bits) */
#define XSUM_BITS 30            /* bits per slice */
#define XSUM_EMPTY (-1)         /* a segment's top before any nonzero value */
#define XSUM_NONFINITE INT32_MAX /* a segment that got a NaN or an infinity */

typedef struct xsum xsum_t;

/* nseg >= 1 segments of len[s] >= 0 elements; all zero. NULL when out of
 * memory (or nseg < 1). */
xsum_t *xsum_new(const size_t *len, int nseg);
void xsum_destroy(xsum_t **self);
/* Every segment back to zero (XSUM_EMPTY). */
void xsum_clear(xsum_t *self);

int xsum_segments(const xsum_t *self);
size_t xsum_len(const xsum_t *self, int seg);
/* Elements of all segments (the limb array is XSUM_LIMBS times this). */
size_t xsum_count(const xsum_t *self);

/* Segment seg += x[0, len) element-wise. */
void xsum_add_f32(xsum_t *self, int seg, const float *x);
void xsum_add_f64(xsum_t *self, int seg, const double *x);

/* The sums, each rounded once from the exact limbs: to nearest, ties to
 * even, subnormal and overflowing (infinite) results included. NaN for an
 * XSUM_NONFINITE segment, 0 for an empty one (and +0 for a sum that
 * cancels to zero). */
void xsum_get_f32(const xsum_t *self, int seg, float *out);
void xsum_get_f64(const xsum_t *self, int seg, double *out);

/* For an all-reduce (gpud/xsum_ring.c): the segments' tops (nseg int32:
 * XSUM_EMPTY, a bin index >= 0, or XSUM_NONFINITE); xsum_align moves every
 * segment to tops[s] (>= its own: the element-wise max over the ranks),
 * after which the limbs of all ranks are summed as plain int64 (the limbs
 * array: element e's limb k at [e * XSUM_LIMBS + k], k = 0 the highest). */
const int32_t *xsum_tops(const xsum_t *self);
/* The tops set as they are (a copy of sums made elsewhere with the same
 * arithmetic, gpud/cuda/cuda_xsum.h, whose limbs are written into
 * xsum_limbs): nothing else changes. */
void xsum_set_tops(xsum_t *self, const int32_t *tops);
void xsum_align(xsum_t *self, const int32_t *tops);
int64_t *xsum_limbs(xsum_t *self);

#endif
