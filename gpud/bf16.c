/* bf16 — round-to-nearest-even to bfloat16, as torch's CPU tensor conversion. */
#include "gpud/bf16.h"

#include <stdint.h>
#include <string.h>

/* Branch-free so the loop vectorizes: the NaN case is a select. */
static inline uint32_t round_bits(uint32_t u)
{
    uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    return (u & 0x7fffffffu) > 0x7f800000u ? 0xffff0000u : rounded;
}

void bf16_round(float *y, const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], sizeof u);
        u = round_bits(u);
        memcpy(&y[i], &u, sizeof u);
    }
}
