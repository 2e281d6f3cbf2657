/* bf16 — round-to-nearest-even to bfloat16, as torch's CPU tensor conversion. */
#include "gpud/bf16.h"

#include <stdint.h>
#include <string.h>

#include "gpud/simd_clones.h"

/* 8 lanes at a time in GCC vector types: a default -O2 build did not
 * vectorise a scalar loop (7 GB/s against 18 with AVX2). */
typedef uint32_t v8u __attribute__((vector_size(32)));

/* Round the bits of 8 floats in place, branch-free: a NaN (exponent all
 * ones, a mantissa bit set) becomes 0xffff0000, a select on a lane mask.
 * A macro, not a function: a vector-typed argument would change the ABI of
 * the baseline build (-Wpsabi). */
#define ROUND8(u)                                                                  \
    do {                                                                           \
        v8u rounded_ = ((u) + 0x7fffu + (((u) >> 16) & 1u)) & 0xffff0000u;         \
        v8u nan_ = (v8u)(((u) & 0x7fffffffu) > 0x7f800000u); /* ones where NaN */  \
        (u) = (rounded_ & ~nan_) | (0xffff0000u & nan_);                           \
    } while (0)

SIMD_CLONES void bf16_round(float *y, const float *x, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        v8u u;
        memcpy(&u, x + i, sizeof u);
        ROUND8(u);
        memcpy(y + i, &u, sizeof u);
    }
    if (i < n) {   /* the last n % 8 in a zero-padded vector: the same formula */
        v8u u = {0};
        memcpy(&u, x + i, (n - i) * sizeof *x);
        ROUND8(u);
        memcpy(y + i, &u, (n - i) * sizeof *y);
    }
}
