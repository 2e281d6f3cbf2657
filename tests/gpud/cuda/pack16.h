/* pack16 — a float as the 16 bits of the format a check runs in (fp16 or
 * bf16, gpud/half_bits.h), and back: the emulator checks' inputs and
 * formulas (test_cuemu.c, bn16_checks.c). */
#ifndef DDP_TEST_PACK16_H
#define DDP_TEST_PACK16_H

#include <stdint.h>

#include "gpud/half_bits.h"

static inline uint16_t pack16(int fp16, float v)
{
    return fp16 ? fp16_pack(v) : bf16_pack(v);
}

static inline float unpack16(int fp16, uint16_t h)
{
    return fp16 ? fp16_unpack(h) : bf16_unpack(h);
}

#endif
