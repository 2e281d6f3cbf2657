/* trand — the tests' reproducible random floats in [-1, 1): xorshift64 on a
 * state the caller owns, so each test's stream is its own and fixed. */
#ifndef DDP_TEST_TRAND_H
#define DDP_TEST_TRAND_H

#include <stdint.h>

static inline float trand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (float)((double)(*s >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

#endif
