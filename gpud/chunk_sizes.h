/* chunk_sizes — bitwise training (--chunk N, docs/TRAINING.md): the chunks
 * of a rank's shard from its samples' places in the step.
 *
 * loaderd gives each rank whole chunks of the step (sampler_shard_chunked)
 * and sends each sample's index in the rank's list ('pos', proto/messages.h);
 * the rank's list starts at a chunk boundary, so sample i is in local chunk
 * pos[i] / N whatever W is. A sample that failed (at loaderd: absent from
 * the batch; at gpud, --wire jpeg: flagged) leaves a hole in its chunk
 * instead of moving the cut of every later chunk, so the chunks the model
 * runs, and the weights, do not depend on the worker count. */
#ifndef DDP_GPUD_CHUNK_SIZES_H
#define DDP_GPUD_CHUNK_SIZES_H

#include <stddef.h>
#include <stdint.h>

/* The sizes of the non-empty chunks of the n samples at POS (strictly
 * increasing, each < limit), those flagged in FAILED (NULL: none) left out,
 * in order, into sizes (room for n): the model_step_t.chunk_sizes of the
 * samples kept, in the batch's order. Chunks whose samples all failed are
 * not listed (they contribute nothing, as on any worker count). Returns
 * their count (0 when every sample failed or n is 0), or -1 with the reason
 * in err when pos is not increasing, reaches limit, or chunk < 1. */
int chunk_sizes_from_pos(const uint32_t *pos, const uint8_t *failed, uint32_t n, int chunk,
                         uint64_t limit, int *sizes, char *err, size_t errlen);

#endif
