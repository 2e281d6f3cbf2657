#include "gpud/chunk_sizes.h"

#include "common/errbuf.h"

#include <inttypes.h>

int chunk_sizes_from_pos(const uint32_t *pos, const uint8_t *failed, uint32_t n, int chunk,
                         uint64_t limit, int *sizes, char *err, size_t errlen)
{
    if (chunk < 1) {
        err_set(err, errlen, "chunk %d, want >= 1", chunk);
        return -1;
    }
    int k = 0;
    uint32_t cur = 0;   /* the chunk sizes[k - 1] counts */
    for (uint32_t i = 0; i < n; i++) {
        if (i && pos[i] <= pos[i - 1]) {
            err_set(err, errlen, "'pos' is not strictly increasing at %" PRIu32 " (%" PRIu32
                    " after %" PRIu32 ")", i, pos[i], pos[i - 1]);
            return -1;
        }
        if (pos[i] >= limit) {
            err_set(err, errlen, "'pos' %" PRIu32 " at %" PRIu32 " is past the rank's list "
                    "(at most %" PRIu64 " samples)", pos[i], i, limit);
            return -1;
        }
        if (failed && failed[i])
            continue;
        uint32_t c = pos[i] / (uint32_t)chunk;
        if (k == 0 || c != cur) {   /* increasing pos: a new chunk */
            cur = c;
            sizes[k++] = 0;
        }
        sizes[k - 1]++;
    }
    return k;
}
