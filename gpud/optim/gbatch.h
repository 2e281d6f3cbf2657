/* gbatch — the global-batch gradient of data-parallel training.
 *
 * The loss of a step is the mean over the GLOBAL batch of G samples,
 * L = (1/G) sum_i l_i, split over W workers with n_r samples each
 * (sum_r n_r = G; a shard may be uneven or empty). Worker r computes
 *
 *     g_r = (1/G) * sum_{i in shard r} dl_i/dw
 *
 * and the all-reduce SUMS: sum_r g_r = dL/dw, the gradient of the whole
 * global batch, on every rank, whatever the split. Averaging per-rank means
 * instead ((1/W) sum_r mean_r) weighs the samples of a small shard more —
 * the DistributedSampler/DDP inexactness ddpipe avoids — and a worker with
 * no samples would divide 0 by 0.
 *
 * Use: backward with the loss scaled by gbatch_loss_scale(G) (the seed of
 * the backward pass, dL/dl_i), or backward of the per-sample SUM followed by
 * gbatch_scale_grad(g, n, n_local, G); then all-reduce (sum) and step.
 * An empty shard contributes exact zeros (gbatch_scale_grad zeroes g).
 */
#ifndef DDP_GBATCH_H
#define DDP_GBATCH_H

#include <stddef.h>
#include <stdint.h>

/* dL/dl_i = 1/G as float, as PyTorch's mean reduction seeds its backward;
 * 0 when G <= 0 (no samples anywhere: no update). */
float gbatch_loss_scale(int64_t global_count);

/* g (n floats) holds the sum over this worker's n_local samples of the
 * per-sample gradient; turn it into this worker's share g / G of the
 * global-batch mean. n_local == 0: g is set to zeros (its content is not
 * read: an empty shard's buffer may be stale). Returns 0, or -1 with the
 * reason in err when the counts are inconsistent (n_local < 0, G <= 0,
 * n_local > G). */
int gbatch_scale_grad(float *g, size_t n, int64_t n_local, int64_t global_count, char *err,
                      size_t errlen);

/* dst += src (the all-reduce's sum, on one rank's view). */
void gbatch_accumulate(float *dst, const float *src, size_t n);

#endif
