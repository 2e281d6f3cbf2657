/* half_bits — a float as the 16 bits of a bf16 or fp16 value, and back:
 * how a 16-bit activation buffer (bk_ops_t.train16) stores what the fp32
 * path holds in a float. Packing rounds as gpud/bf16.c and fp16_math.h do
 * (so pack(x) unpacks to exactly the float bf16_round / fp16_round1 give);
 * unpacking is exact. Host and device (nvcc) alike. */
#ifndef DDP_HALF_BITS_H
#define DDP_HALF_BITS_H

#include <stdint.h>

#include "gpud/fp16_math.h"

/* bf16: the high 16 bits of the rounded float (ties to even; every NaN
 * becomes 0xffff, as bf16_round's 0xffff0000). Branch-free (the NaN's
 * all-ones mask ORed in), so that loops calling it vectorise. */
F16M_FN uint16_t bf16_pack(float x)
{
    uint32_t u = f16m_bits(x);
    uint32_t nan = 0u - (uint32_t)((u & 0x7fffffffu) > 0x7f800000u);
    return (uint16_t)(((u + 0x7fffu + ((u >> 16) & 1u)) >> 16) | nan);
}

F16M_FN float bf16_unpack(uint16_t h)
{
    return f16m_float((uint32_t)h << 16);
}

/* fp16: IEEE binary16 of fp16_round1(x) (overflow to inf, subnormals
 * kept, a NaN stays a quiet NaN). */
F16M_FN uint16_t fp16_pack(float x)
{
    uint32_t u = f16m_bits(fp16_round1(x)), s = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a > 0x7f800000u)
        return (uint16_t)(s | 0x7e00u | ((a >> 13) & 0x3ffu));
    if (a == 0x7f800000u)
        return (uint16_t)(s | 0x7c00u);
    if (a >= 0x38800000u)   /* normal: exponent rebiased from 127 to 15 */
        return (uint16_t)(s | (((a >> 23) - 112u) << 10) | ((a >> 13) & 0x3ffu));
    /* subnormal (or zero): k * 2^-24, k < 1024, exact after the rounding */
    return (uint16_t)(s | (uint32_t)(f16m_float(a) * 0x1p24f));
}

F16M_FN float fp16_unpack(uint16_t h)
{
    uint32_t s = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 31u)
        return f16m_float(s | 0x7f800000u | (m << 13));
    if (e == 0u)
        return f16m_float(s | f16m_bits((float)m * 0x1p-24f));
    return f16m_float(s | ((e + 112u) << 23) | (m << 13));
}

#endif
