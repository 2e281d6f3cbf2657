/* bn_math — training BatchNorm's per-channel arithmetic, written once for
 * the host (tape_bn.c, the ref-device backend) and the device (the cuda
 * backend's kernels), so that BatchNorm computed on the device gives the
 * bits the host path gives from the same channel sums. Plain C11 and CUDA:
 * under nvcc the functions are __host__ __device__ and every double
 * product and sum is an explicitly rounded intrinsic, because nvcc would
 * otherwise contract a * b + c into one fused multiply-add (one rounding
 * instead of two) where gcc in ISO C mode does not. */
#ifndef DDP_BN_MATH_H
#define DDP_BN_MATH_H

#include <math.h>

#ifdef __CUDACC__
#define BNM_FN __host__ __device__ static inline
#else
#define BNM_FN static inline
#endif

#ifdef __CUDA_ARCH__
#define BNM_MUL(a, b) __dmul_rn((a), (b))
#define BNM_ADD(a, b) __dadd_rn((a), (b))
#define BNM_DIV(a, b) __ddiv_rn((a), (b))
#define BNM_SQRT(a) __dsqrt_rn(a)
#else
#define BNM_MUL(a, b) ((a) * (b))
#define BNM_ADD(a, b) ((a) + (b))
#define BNM_DIV(a, b) ((a) / (b))
#define BNM_SQRT(a) sqrt(a)
#endif

/* A batch mean or biased variance from its double sum over count values. */
BNM_FN float bnm_stat(double sum, double count)
{
    return (float)BNM_DIV(sum, count);
}

/* PyTorch's running-stat update r = (1 - m) r + m s scale (scale: 1 for
 * the mean, count / (count - 1) for the variance). */
BNM_FN float bnm_running(float r, double s, double m, double scale)
{
    return (float)BNM_ADD(BNM_MUL(1.0 - m, (double)r), BNM_MUL(BNM_MUL(m, s), scale));
}

/* The unbiased variance's factor for count values. */
BNM_FN double bnm_unbias(double count)
{
    return count > 1.0 ? BNM_DIV(count, count - 1.0) : 1.0;
}

/* sqrt(var + eps) of a channel. */
BNM_FN double bnm_std(float var, float eps)
{
    return BNM_SQRT(BNM_ADD((double)var, (double)eps));
}

/* The input gradient's per-channel coefficients from the (global) sums
 * sdy = sum dy', sdyxh = sum dy' * xhat over count values:
 *     gx = scale dy' + a (x - mean) + b,
 * scale = gamma / std, a = -scale / std * sdyxh / count,
 * b = -scale * sdy / count. */
BNM_FN void bnm_coeffs(float gamma, float var, float eps, double sdy, double sdyxh,
                       double count, float *scale, float *a, float *b)
{
    double rstd = BNM_DIV(1.0, bnm_std(var, eps));
    double k = BNM_MUL((double)gamma, rstd);
    *scale = (float)k;
    *a = (float)BNM_DIV(BNM_MUL(BNM_MUL(-k, rstd), sdyxh), count);
    *b = (float)BNM_DIV(BNM_MUL(-k, sdy), count);
}

#endif
