/* simd_clones — build a hot loop for AVX-512, AVX2 and baseline x86-64,
 * the one to run picked at load time (GCC's target_clones), so a default
 * (-O2, baseline ISA) build still runs it at the machine's vector width.
 *
 * Only for loops whose bits do not depend on the vector width: lane-wise
 * work, or reductions that keep each lane's order. Contraction into FMA
 * stays off, as one rounding instead of two would change bits. Not under
 * ThreadSanitizer: GCC instruments the clones' ifunc resolver with
 * __tsan_func_entry, which ld.so runs while relocating gpud, before libtsan
 * is set up (SIGSEGV before main); the baseline build gives the same bits. */
#ifndef DDP_SIMD_CLONES_H
#define DDP_SIMD_CLONES_H

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && \
    !defined(__SANITIZE_THREAD__)
#define SIMD_CLONES \
    __attribute__((target_clones("avx512f", "avx2", "default"), optimize("fp-contract=off")))
/* The same for a loop that calls fmaf: its 256-bit build is "fma" (AVX
 * with the FMA unit, fmaf inlined), picked by the CPU's FMA feature bit;
 * the baseline's calls libm's (the same bits). Not "arch=haswell": GCC
 * dispatches an arch= clone by CPU model (__cpu_model's subtype, Haswell
 * alone), so every other AVX2 CPU, AMD's included, ran the baseline's
 * libm calls. A loop mixing 16- and 32-bit values may vectorise at 256
 * bits, where the "avx512f" clone has no FMA: see dnnl_train16.c's
 * bn_rows. */
#define SIMD_CLONES_FMA \
    __attribute__((target_clones("avx512f", "fma", "default"), optimize("fp-contract=off")))
#else
#define SIMD_CLONES
#define SIMD_CLONES_FMA
#endif

#endif
