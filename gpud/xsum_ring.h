/* xsum_ring — common/xsum.h's exact sums across the gpud ranks of a job,
 * over the gradient ring (gpud/ring.h): the result of every rank is the
 * bytes one process would get adding all the ranks' values, whatever the
 * number of ranks and however the values were split over them (issue 31).
 *
 * Two ring operations: a max all-reduce of the segments' tops (so every
 * rank moves each segment to the same window: the one the largest value of
 * any rank sets, XSUM_NONFINITE winning), then, after xsum_align, a sum
 * all-reduce of the int64 limbs. Integer sums do not depend on the order,
 * so the ring's fixed order of additions no longer matters.
 */
#ifndef DDP_GPUD_XSUM_RING_H
#define DDP_GPUD_XSUM_RING_H

#include "common/xsum.h"
#include "gpud/ring.h"

#include <stddef.h>
#include <stdint.h>

/* In place: x becomes the sum over all ranks (same segments on every rank).
 * World 1 (or ar NULL): nothing to do. 0, or -1 with the reason in err (the ring's, see
 * allreduce_failure; x is then partly reduced and must be discarded). */
int xsum_allreduce(xsum_t *x, allreduce_t *ar, int timeout_ms, char *err, size_t errlen);

/* The payload of one xsum_allreduce: the arrays all-reduced, 4 bytes per
 * segment top plus 8 * XSUM_LIMBS = 24 bytes per element (6 times a float
 * all-reduce of the same elements). A ring rank sends about 2 (W - 1) / W
 * times that: xsum_allreduce_sent has the exact figure. */
uint64_t xsum_allreduce_bytes(const xsum_t *x);
/* The bytes this rank of ar's ring sends per xsum_allreduce, chunk headers
 * included (0 for a ring of one): for each of the two operations every
 * chunk of the array (allreduce_chunk_offset's split) but two, each once,
 * with a 32-byte header for each of its 2 (W - 1) chunks. */
uint64_t xsum_allreduce_sent(const xsum_t *x, const allreduce_t *ar);

#endif
