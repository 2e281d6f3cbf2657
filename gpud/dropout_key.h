/* dropout_key — the keys of dropout's mask stream (bk_dropout). The mask
 * of element (c, h, w) of a sample depends only on (seed, step, the
 * sample's dataset id, the op's index, c, h, w), never on the batch's
 * composition or on which rank holds the sample. The key splits in two:
 *
 *   sample key  dropout_sample_key(seed, step, id): one per sample and step,
 *               computed by the engine (bk_set_step) and handed to the
 *               kernels as an array, so no kernel takes the step or the ids
 *               from the host (a recorded training pass replays with the
 *               step's keys written before it: tape_capture.c);
 *   op key      dropout_op_key(sample key, op): mixed in by the kernel.
 *
 * ref_ops.c's ref_dropout_key(seed, step, id, op) is their composition,
 * and the cuda kernel mixes the same way (cuda_kernels.cu), so every
 * backend draws the same mask bit for bit. ref_mix64 = mix64(z + golden). */
#ifndef DDP_DROPOUT_KEY_H
#define DDP_DROPOUT_KEY_H

#include <stdint.h>

#include "common/mix64.h"

static inline uint64_t dropout_mix(uint64_t z)
{
    return mix64(z + MIX64_GOLDEN);
}

static inline uint64_t dropout_sample_key(uint64_t seed, uint64_t step, int64_t id)
{
    return dropout_mix(dropout_mix(dropout_mix(seed) ^ step) ^ (uint64_t)id);
}

static inline uint64_t dropout_op_key(uint64_t sample_key, uint32_t op)
{
    return dropout_mix(sample_key ^ op);
}

#endif
