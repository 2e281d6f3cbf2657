/* xsum_f32 — the per-element arithmetic of xsum_add_f32 and xsum_get_f32
 * (common/xsum.h), written once for the host (common/xsum.c) and the
 * device (bitwise training's sums in device memory,
 * gpud/cuda/cuda_xsum_kernels.cu), so that both make the same limbs from
 * the same floats and round them to the same bits. Plain inline
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

/* ------------------------------------------------ reading: one rounding */

__extension__ typedef __int128 xsum_i128;
__extension__ typedef unsigned __int128 xsum_u128;

/* The bit length of u != 0, without a branch on which half holds it (a
 * gradient's elements fall on either side at random). */
static inline XSUM_HD int xsum_bitlen128(xsum_u128 u)
{
    uint64_t hi = (uint64_t)(u >> 64), lo = (uint64_t)u;
#ifdef __CUDA_ARCH__
    int lh = 128 - __clzll((long long)(hi | 1)), ll = 64 - __clzll((long long)(lo | 1));
#else
    int lh = 128 - __builtin_clzll(hi | 1), ll = 64 - __builtin_clzll(lo | 1);
#endif
    return hi ? lh : ll;
}

/* v * 2^e rounded once to prec significant bits (to nearest, ties to even),
 * no bit below 2^emin (the subnormals), as the bits of an IEEE value with
 * prec - 1 mantissa bits and emin its smallest subnormal, sign apart:
 * with q the kept bits (2^(prec-1) <= q <= 2^prec for a normal result, q <
 * 2^(prec-1) for a subnormal) and lsb >= emin the position of q's lowest,
 * the bits are ((lsb - emin) << (prec - 1)) + q: a normal's exponent field
 * lsb - emin + 1 and its hidden bit's 2^(prec-1) add up to that, a rounded
 * q = 2^prec carries into the exponent, and a subnormal (lsb = emin) is q
 * itself. At or above inf_bits: an infinity. No libm: ldexp here cost more
 * than the rest of a read. */
static inline XSUM_HD uint64_t xsum_round_bits(xsum_i128 v, int e, int prec, int emin,
                                               uint64_t inf_bits, uint64_t *sign)
{
    *sign = v < 0;
    if (v == 0)
        return 0;
    xsum_u128 u = v < 0 ? -(xsum_u128)v : (xsum_u128)v;
    int h = xsum_bitlen128(u);
    int lsb = e + h - prec;   /* the lowest bit kept */
    if (lsb < emin)
        lsb = emin;
    if (lsb > e) {
        int s = lsb - e;      /* bits dropped: 1 .. */
        xsum_u128 q = 0, rem = 0, half = 1;
        if (s <= h) {         /* else all below half of the lowest bit kept */
            q = u >> s;
            rem = u - (q << s);
            half = (xsum_u128)1 << (s - 1);
        }
        q += (rem > half) | ((rem == half) & (q & 1));   /* no branch: random */
        u = q;
    } else {
        /* the value fits prec bits as it is (h <= prec); bits below lsb
         * are zero: shift up to lsb = e's place (e - lsb >= 0) */
        u <<= e - lsb;
    }
    if (lsb - emin >= 2048)   /* far past any exponent: an infinity */
        return inf_bits;
    uint64_t bits = ((uint64_t)(lsb - emin) << (prec - 1)) + (uint64_t)u;
    return bits >= inf_bits ? inf_bits : bits;
}

/* An element's window (limbs L, |limb| < 2^63) as one integer under 2^124,
 * and the power of two it is scaled by in a segment whose top is top. */
static inline XSUM_HD xsum_i128 xsum_window(const int64_t *L)
{
    return (xsum_i128)L[0] * ((xsum_i128)1 << (2 * XSUM_BITS)) +
           (xsum_i128)L[1] * ((xsum_i128)1 << XSUM_BITS) + (xsum_i128)L[2];
}

static inline XSUM_HD int xsum_window_exp(int32_t top)
{
    return (top - (XSUM_LIMBS - 1)) * XSUM_BITS + XSUM_BASE;
}

/* An element's sum as float bits, rounded once: NaN for a non-finite
 * segment, +0 for an empty one (xsum_get_f32's per element). */
static inline XSUM_HD uint32_t xsum_bits_f32(const int64_t *L, int32_t top)
{
    if (top == XSUM_NONFINITE)
        return 0x7fc00000u;
    if (top == XSUM_EMPTY)
        return 0;
    uint64_t sign, b = xsum_round_bits(xsum_window(L), xsum_window_exp(top), 24, -149,
                                       0x7f800000u, &sign);
    return (uint32_t)b | (uint32_t)sign << 31;
}

#endif
