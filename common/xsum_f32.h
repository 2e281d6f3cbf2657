/* xsum_f32 — the per-element arithmetic of xsum_add_f32 (common/xsum.h),
 * written once for the host (common/xsum.c) and the device (bitwise
 * training's sums in device memory, gpud/cuda/cuda_xsum_kernels.cu), so
 * that both make the same limbs from the same floats. Plain inline
 * functions over one element's XSUM_LIMBS limbs (limb 0 the top bin's).
 *
 * Positions: bin b holds the absolute bit positions [30 b + XSUM_BASE,
 * 30 b + XSUM_BASE + 30). XSUM_BASE = -1080 puts the smallest double bit
 * (2^-1074) in bin 0 and the largest (2^1023) in bin 70, so a bin index is
 * never negative and fits the int32 tops with room. */
#ifndef DDP_COMMON_XSUM_F32_H
#define DDP_COMMON_XSUM_F32_H

#include <stdint.h>

#include "common/xsum.h"

#ifdef __CUDACC__
#define XSUM_HD __host__ __device__
#else
#define XSUM_HD
#endif

#define XSUM_BASE (-1080)                       /* absolute position of bin 0's lowest bit */
#define XSUM_MASK ((UINT64_C(1) << XSUM_BITS) - 1)

/* The bin of absolute bit position p (p >= -1074: always >= 0). */
static inline XSUM_HD int32_t xsum_bin_of(int p)
{
    return (int32_t)((p - XSUM_BASE) / XSUM_BITS);
}

/* The top a vector of floats asks for, from amax, the largest of its
 * elements' magnitude bits (|x| orders like its bits as an integer):
 * XSUM_EMPTY for all zeros, XSUM_NONFINITE for an infinity or a NaN, else
 * the bin of the largest magnitude's leading bit (2^(ex - 127) for a
 * normal; mantissa bit i of a subnormal is 2^(i - 149)). */
static inline XSUM_HD int32_t xsum_top_f32(uint32_t amax)
{
    if (amax >= 0x7f800000u)
        return XSUM_NONFINITE;
    if (amax == 0)
        return XSUM_EMPTY;
    uint32_t ex = amax >> 23;
#ifdef __CUDA_ARCH__
    int lead = 31 - __clz((int)amax);
#else
    int lead = 31 - __builtin_clz(amax);
#endif
    return xsum_bin_of(ex ? (int)ex - 127 : lead - 149);
}

/* One element's window moved up by d >= 1 bins: the limbs shift down, the
 * lowest d dropped (exactly what adding the later, larger values first
 * would have kept). */
static inline XSUM_HD void xsum_shift(int64_t *L, int d)
{
    for (int k = XSUM_LIMBS - 1; k >= 0; k--)
        L[k] = k >= d ? L[k - d] : 0;
}

/* The sign of a value (0 or -1) applied to a slice: s ^ sign - sign. */
static inline XSUM_HD int64_t xsum_signed_slice(uint64_t s, int64_t sign)
{
    return ((int64_t)s ^ sign) - sign;
}

/* The float of bits b added to an element's limbs L in a window whose top
 * bin is top (>= the float's own: the caller raised it first). A value's
 * slices are its magnitude's, the sign applied to each, so it is truncated
 * toward zero at the window's bottom whatever its sign. */
static inline XSUM_HD void xsum_add_bits_f32(int64_t *L, int32_t top, uint32_t b)
{
    uint32_t e = (b >> 23) & 0xffu;
    uint64_t m = (b & 0x7fffffu) | (e ? 0x800000u : 0);
    /* the mantissa's lowest bit sits at e - 150 (a subnormal's at -149, as
     * for e = 1); q: that position from XSUM_BASE, in [931, 1185] */
    int q = (int)(e ? e : 1) - 150 - XSUM_BASE;
    int b0 = q / XSUM_BITS, r = q - b0 * XSUM_BITS;
    uint64_t M = m << r;   /* <= 53 bits: two slices, bins b0 and b0 + 1 */
    int64_t sign = -(int64_t)(b >> 31);
    int64_t lo = xsum_signed_slice(M & XSUM_MASK, sign);
    int64_t hi = xsum_signed_slice(M >> XSUM_BITS, sign);
    /* limb k holds bin top - k; k0 = the limb of bin b0 (negative only for
     * a zero in a segment whose top is below any float's bin). Selects, not
     * branches: the exponents of gradients are random. */
    int k0 = top - b0;
    L[0] += (k0 == 0 ? lo : 0) + (k0 == 1 ? hi : 0);
    L[1] += (k0 == 1 ? lo : 0) + (k0 == 2 ? hi : 0);
    L[2] += (k0 == 2 ? lo : 0) + (k0 == 3 ? hi : 0);
}

#endif
