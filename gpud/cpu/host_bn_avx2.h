/* host_bn_avx2 — the channel blocks of training BatchNorm's host loops
 * (host_kernels.c red_rows and apply_rows) in AVX2 intrinsics, on x86-64
 * CPUs that have AVX2. GCC 12 lowers the generic vector code's float to
 * double conversions (__builtin_convertvector) in halves, through the stack
 * where registers run out, so widening cost more than the arithmetic. The
 * operations are the same lane by lane (exact widenings, each double product
 * and sum rounded alone, no fused multiply-add), so are the bits.
 *
 * Blocks of 16 channels [0, 16 nblk) of rows [r0, r1) of c channels (NHWC),
 * each channel adding its rows in order into acc (as red_rows). */
#ifndef DDP_HOST_BN_AVX2_H
#define DDP_HOST_BN_AVX2_H

#include <stddef.h>

/* 1 where this CPU runs the functions below (else they must not be
 * called); DDPIPE_HOST_SIMD=generic says 0 (tests compare the two). */
int hbx_available(void);
/* acc[ch] += x */
void hbx_sum(const float *x, size_t r0, size_t r1, size_t c, int nblk, double *acc);
/* acc[ch] += (x - center[ch])^2 */
void hbx_sq(const float *x, const float *center, size_t r0, size_t r1, size_t c, int nblk,
            double *acc);
/* dy' = gy, or +0 where y <= 0 when relu, times gscale (float): acc0[ch]
 * += dy', acc1[ch] += dy' (x - center[ch]) */
void hbx_grad(const float *x, const float *y, const float *gy, const float *center, int relu,
              float gscale, size_t r0, size_t r1, size_t c, int nblk, double *acc0,
              double *acc1);
/* Whole rows [r0, r1): gx = scale dy' + a (x - centre) + b in double, wide
 * = [centre, scale, a, b] widened (4c doubles), as apply_rows. */
void hbx_apply(float *gx, const float *x, const float *y, const float *gy, size_t r0, size_t r1,
               int c, int relu, float gscale, const double *wide);

#endif
