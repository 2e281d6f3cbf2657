/* gbatch — scale a worker's summed gradient into its share of the
 * global-batch mean (see gbatch.h). */
#include "gpud/optim/gbatch.h"
#include "common/errbuf.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

float gbatch_loss_scale(int64_t global_count)
{
    return global_count > 0 ? 1.0f / (float)global_count : 0.0f;
}

int gbatch_scale_grad(float *g, size_t n, int64_t n_local, int64_t global_count, char *err,
                      size_t errlen)
{
    if (n_local < 0 || global_count <= 0 || n_local > global_count) {
        if (err && errlen)
            err_set(err, errlen, "global-batch gradient: %" PRId64 " local samples of a global "
                     "batch of %" PRId64 " (need 0 <= local <= global, global > 0)", n_local,
                     global_count);
        return -1;
    }
    if (n_local == 0) {
        memset(g, 0, n * sizeof *g);
        return 0;
    }
    /* Divide (not multiply by a rounded reciprocal): the mean rounds once. */
    const float G = (float)global_count;
    for (size_t i = 0; i < n; i++)
        g[i] = g[i] / G;
    return 0;
}

void gbatch_accumulate(float *dst, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] += src[i];
}
