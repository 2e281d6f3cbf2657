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
 * ref_ops.c's ref_dropout_key(seed, step, id, op) is their composition.
 * dropout_mix (mix64 after splitmix64's step) is also the mask's index and
 * bits hash; the host kernels and the cuda kernel (cuda_kernels.cu) call
 * these same functions, so every backend draws the same mask bit for bit. */
#ifndef DDP_DROPOUT_KEY_H
#define DDP_DROPOUT_KEY_H

#include <stdint.h>

#include "common/mix64.h"

MIX64_FN uint64_t dropout_mix(uint64_t z)
{
    return mix64(z + MIX64_GOLDEN);
}

MIX64_FN uint64_t dropout_sample_key(uint64_t seed, uint64_t step, int64_t id)
{
    return dropout_mix(dropout_mix(dropout_mix(seed) ^ step) ^ (uint64_t)id);
}

MIX64_FN uint64_t dropout_op_key(uint64_t sample_key, uint32_t op)
{
    return dropout_mix(sample_key ^ op);
}

#endif
