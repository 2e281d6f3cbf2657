/* mix64 — splitmix64's finaliser: a bijection of 64-bit words with full
 * avalanche. One definition for every stream and hash built on it (the
 * sampler's RNG, gpud's init and dropout streams, the confusion counter's
 * hash), so they cannot drift apart. MIX64_GOLDEN is splitmix64's step. */
#ifndef DDP_MIX64_H
#define DDP_MIX64_H

#include <stdint.h>

#define MIX64_GOLDEN 0x9e3779b97f4a7c15ULL

/* callable from CUDA kernels too (dropout's mask: gpud/dropout_key.h) */
#ifdef __CUDACC__
#define MIX64_FN __host__ __device__ static inline
#else
#define MIX64_FN static inline
#endif

MIX64_FN uint64_t mix64(uint64_t z)
{
    z ^= z >> 30;
    z *= 0xbf58476d1ce4e5b9ULL;
    z ^= z >> 27;
    z *= 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

#endif
