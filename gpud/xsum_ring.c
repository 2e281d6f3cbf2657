#include "gpud/xsum_ring.h"

#include "common/errbuf.h"

#include <stdlib.h>
#include <string.h>

/* The ring's chunk header (gpud/ring.c's chunk_hdr_t: op, step, chunk,
 * count, gen, kind). */
#define XSUM_RING_HDR 32

int xsum_allreduce(xsum_t *x, allreduce_t *ar, int timeout_ms, char *err, size_t errlen)
{
    if (!ar || allreduce_world(ar) <= 1)   /* one rank: x is the sum already */
        return 0;
    int nseg = xsum_segments(x);
    /* xsum_tops is x's own array (const): reduce a copy */
    int32_t *tops = malloc((size_t)nseg * sizeof *tops);
    if (!tops) {
        err_set(err, errlen, "xsum_allreduce: out of memory for %d segment tops", nseg);
        return -1;
    }
    memcpy(tops, xsum_tops(x), (size_t)nseg * sizeof *tops);
    int rc = allreduce_max_i32(ar, tops, (size_t)nseg, timeout_ms, err, errlen);
    if (rc == 0) {
        xsum_align(x, tops);
        rc = allreduce_sum_i64(ar, xsum_limbs(x), xsum_count(x) * XSUM_LIMBS, timeout_ms, err,
                               errlen);
    }
    free(tops);
    return rc;
}

uint64_t xsum_allreduce_bytes(const xsum_t *x)
{
    return (uint64_t)xsum_segments(x) * sizeof(int32_t) +
           (uint64_t)xsum_count(x) * XSUM_LIMBS * sizeof(int64_t);
}

/* Bytes rank r of W sends in one ring all-reduce of n values of w bytes
 * (gpud/ring.c): the reduce-scatter sends every chunk but r + 1, the
 * all-gather every chunk but r + 2 (mod W; chunk sizes by
 * allreduce_chunk_offset), each chunk with its header. */
static uint64_t ring_sent(size_t n, size_t w, int r, int W)
{
    int c1 = (r + 1) % W, c2 = (r + 2) % W;
    size_t n1 = allreduce_chunk_offset(n, W, c1 + 1) - allreduce_chunk_offset(n, W, c1);
    size_t n2 = allreduce_chunk_offset(n, W, c2 + 1) - allreduce_chunk_offset(n, W, c2);
    return (uint64_t)(2 * n - n1 - n2) * w + 2 * (uint64_t)(W - 1) * XSUM_RING_HDR;
}

uint64_t xsum_allreduce_sent(const xsum_t *x, const allreduce_t *ar)
{
    int W = allreduce_world(ar), r = allreduce_rank(ar);
    if (W <= 1 || r < 0)
        return 0;
    return ring_sent((size_t)xsum_segments(x), sizeof(int32_t), r, W) +
           ring_sent(xsum_count(x) * XSUM_LIMBS, sizeof(int64_t), r, W);
}
