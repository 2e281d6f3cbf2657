/* fp16_math — one float rounded to IEEE binary16 (fp16, --precision fp16:
 * docs/FP16.md), written once for the host (gpud/fp16.c) and the device
 * (the cuda backend's rounding kernel) so both give the same bits.
 *
 * The result is a float holding an fp16 value: round to nearest, ties to
 * even, as torch's x.to(torch.float16). fp16 has 10 mantissa bits and a
 * 5-bit exponent: its largest finite value is 65504, so |x| >= 65520 (the
 * tie above it, which rounds to even, 65536) becomes +-inf; below 2^-14 its
 * values are subnormal, multiples of 2^-24, and smaller ones round to
 * +-0. A NaN stays a NaN (the quiet NaN 0x7fc00000, its sign kept). Integer
 * arithmetic on the bits, except one multiplication by a power of two,
 * which is exact: no rounding mode or contraction can change the result. */
#ifndef DDP_FP16_MATH_H
#define DDP_FP16_MATH_H

#include <stdint.h>

#ifdef __CUDACC__
#define F16M_FN __host__ __device__ static inline
#else
#include <string.h>
#define F16M_FN static inline
#endif

F16M_FN uint32_t f16m_bits(float f)
{
#ifdef __CUDA_ARCH__
    return __float_as_uint(f);
#else
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
#endif
}

F16M_FN float f16m_float(uint32_t u)
{
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
#endif
}

F16M_FN float fp16_round1(float x)
{
    uint32_t u = f16m_bits(x), s = u & 0x80000000u, a = u & 0x7fffffffu;
    if (a > 0x7f800000u)                  /* NaN */
        return f16m_float(s | 0x7fc00000u);
    if (a >= 0x477ff000u)                 /* >= 65520 (and inf): inf */
        return f16m_float(s | 0x7f800000u);
    if (a >= 0x38800000u)                 /* >= 2^-14: drop 13 of float's 23 bits */
        return f16m_float(s | ((a + 0xfffu + ((a >> 13) & 1u)) & 0xffffe000u));
    /* subnormal fp16: k * 2^-24. A float of biased exponent e >= 1 is
     * M * 2^(e - 150) (M its 24-bit significand), so k = M * 2^(e - 126)
     * rounded: M shifted right by d = 126 - e >= 14, ties to even; past
     * d = 24 even the largest M is below half a step (float subnormals,
     * e = 0, too). */
    uint32_t e = a >> 23, d = 126u - e;
    if (e == 0 || d > 24u)
        return f16m_float(s);
    uint32_t m = (a & 0x7fffffu) | 0x800000u;
    uint32_t k = (m + (1u << (d - 1)) - 1u + ((m >> d) & 1u)) >> d;
    return f16m_float(s | f16m_bits((float)k * 0x1p-24f));   /* k <= 1024: exact */
}

#endif
