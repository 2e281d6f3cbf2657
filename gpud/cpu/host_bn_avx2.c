/* host_bn_avx2 — see host_bn_avx2.h. */
#include "gpud/cpu/host_bn_avx2.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2")))

/* 0 not asked yet, 1 no, 2 yes: asked once, not at every chunk of a hot
 * loop (a relaxed atomic: threads that race ask the same question). */
static _Atomic int s_avx2;

int hbx_available(void)
{
    int v = atomic_load_explicit(&s_avx2, memory_order_relaxed);
    if (!v) {
        const char *e = getenv("DDPIPE_HOST_SIMD");
        v = __builtin_cpu_supports("avx2") && !(e && strcmp(e, "generic") == 0) ? 2 : 1;
        atomic_store_explicit(&s_avx2, v, memory_order_relaxed);
    }
    return v == 2;
}

/* 4 floats widened (exact) */
#define W4(p) _mm256_cvtps_pd(_mm_loadu_ps(p))

AVX2 void hbx_sum(const float *x, size_t r0, size_t r1, size_t c, int nblk, double *acc)
{
    for (int b = 0; b < nblk; b++) {
        const float *xb = x + 16 * (size_t)b;
        double *a = acc + 16 * (size_t)b;
        __m256d s0 = _mm256_loadu_pd(a), s1 = _mm256_loadu_pd(a + 4);
        __m256d s2 = _mm256_loadu_pd(a + 8), s3 = _mm256_loadu_pd(a + 12);
        for (size_t row = r0; row < r1; row++) {
            const float *p = xb + row * c;
            s0 = _mm256_add_pd(s0, W4(p));
            s1 = _mm256_add_pd(s1, W4(p + 4));
            s2 = _mm256_add_pd(s2, W4(p + 8));
            s3 = _mm256_add_pd(s3, W4(p + 12));
        }
        _mm256_storeu_pd(a, s0);
        _mm256_storeu_pd(a + 4, s1);
        _mm256_storeu_pd(a + 8, s2);
        _mm256_storeu_pd(a + 12, s3);
    }
}

AVX2 void hbx_sq(const float *x, const float *center, size_t r0, size_t r1, size_t c, int nblk,
                 double *acc)
{
    for (int b = 0; b < nblk; b++) {
        const float *xb = x + 16 * (size_t)b, *cb = center + 16 * (size_t)b;
        double *a = acc + 16 * (size_t)b;
        const __m256d c0 = W4(cb), c1 = W4(cb + 4), c2 = W4(cb + 8), c3 = W4(cb + 12);
        __m256d s0 = _mm256_loadu_pd(a), s1 = _mm256_loadu_pd(a + 4);
        __m256d s2 = _mm256_loadu_pd(a + 8), s3 = _mm256_loadu_pd(a + 12);
        for (size_t row = r0; row < r1; row++) {
            const float *p = xb + row * c;
            __m256d d0 = _mm256_sub_pd(W4(p), c0), d1 = _mm256_sub_pd(W4(p + 4), c1);
            __m256d d2 = _mm256_sub_pd(W4(p + 8), c2), d3 = _mm256_sub_pd(W4(p + 12), c3);
            s0 = _mm256_add_pd(s0, _mm256_mul_pd(d0, d0));
            s1 = _mm256_add_pd(s1, _mm256_mul_pd(d1, d1));
            s2 = _mm256_add_pd(s2, _mm256_mul_pd(d2, d2));
            s3 = _mm256_add_pd(s3, _mm256_mul_pd(d3, d3));
        }
        _mm256_storeu_pd(a, s0);
        _mm256_storeu_pd(a + 4, s1);
        _mm256_storeu_pd(a + 8, s2);
        _mm256_storeu_pd(a + 12, s3);
    }
}

/* 4 channels at off + 4i: dy' masked by y > 0 (a NaN y masks) and times
 * gscale, then the two sums */
#define GRAD4(i)                                                                    \
    do {                                                                            \
        __m128 g = _mm_loadu_ps(gy + off + 4 * (i));                                \
        if (relu)                                                                   \
            g = _mm_and_ps(g, _mm_cmp_ps(_mm_loadu_ps(y + off + 4 * (i)), zero,     \
                                         _CMP_GT_OQ));                              \
        g = _mm_mul_ps(g, gs);                                                      \
        __m256d gd = _mm256_cvtps_pd(g);                                            \
        s##i = _mm256_add_pd(s##i, gd);                                             \
        t##i = _mm256_add_pd(t##i, _mm256_mul_pd(gd, _mm256_sub_pd(W4(x + off + 4 * (i)), \
                                                                   c##i)));         \
    } while (0)

AVX2 void hbx_grad(const float *x0, const float *y0, const float *gy0, const float *center,
                   int relu, float gscale, size_t r0, size_t r1, size_t c, int nblk,
                   double *acc0, double *acc1)
{
    const __m128 zero = _mm_setzero_ps(), gs = _mm_set1_ps(gscale);
    for (int b = 0; b < nblk; b++) {
        size_t o = 16 * (size_t)b;
        const float *x = x0 + o, *y = relu ? y0 + o : NULL, *gy = gy0 + o, *cb = center + o;
        const __m256d c0 = W4(cb), c1 = W4(cb + 4), c2 = W4(cb + 8), c3 = W4(cb + 12);
        __m256d s0 = _mm256_loadu_pd(acc0 + o), s1 = _mm256_loadu_pd(acc0 + o + 4);
        __m256d s2 = _mm256_loadu_pd(acc0 + o + 8), s3 = _mm256_loadu_pd(acc0 + o + 12);
        __m256d t0 = _mm256_loadu_pd(acc1 + o), t1 = _mm256_loadu_pd(acc1 + o + 4);
        __m256d t2 = _mm256_loadu_pd(acc1 + o + 8), t3 = _mm256_loadu_pd(acc1 + o + 12);
        for (size_t row = r0; row < r1; row++) {
            size_t off = row * c;
            GRAD4(0);
            GRAD4(1);
            GRAD4(2);
            GRAD4(3);
        }
        _mm256_storeu_pd(acc0 + o, s0);
        _mm256_storeu_pd(acc0 + o + 4, s1);
        _mm256_storeu_pd(acc0 + o + 8, s2);
        _mm256_storeu_pd(acc0 + o + 12, s3);
        _mm256_storeu_pd(acc1 + o, t0);
        _mm256_storeu_pd(acc1 + o + 4, t1);
        _mm256_storeu_pd(acc1 + o + 8, t2);
        _mm256_storeu_pd(acc1 + o + 12, t3);
    }
}

AVX2 void hbx_apply(float *gx, const float *x, const float *y, const float *gy, size_t r0,
                    size_t r1, int c, int relu, float gscale, const double *wide)
{
    const double *dc = wide, *ds = wide + c, *da = wide + 2 * c, *db = wide + 3 * c;
    const __m128 zero = _mm_setzero_ps(), gs = _mm_set1_ps(gscale);
    for (size_t row = r0; row < r1; row++) {
        size_t off = row * (size_t)c;
        int j = 0;
        for (; j + 4 <= c; j += 4) {
            __m128 g = _mm_loadu_ps(gy + off + j);
            if (relu)
                g = _mm_and_ps(g, _mm_cmp_ps(_mm_loadu_ps(y + off + j), zero, _CMP_GT_OQ));
            g = _mm_mul_ps(g, gs);
            __m256d r = _mm256_add_pd(
                _mm256_add_pd(_mm256_mul_pd(_mm256_loadu_pd(ds + j), _mm256_cvtps_pd(g)),
                              _mm256_mul_pd(_mm256_loadu_pd(da + j),
                                            _mm256_sub_pd(W4(x + off + j),
                                                          _mm256_loadu_pd(dc + j)))),
                _mm256_loadu_pd(db + j));
            _mm_storeu_ps(gx + off + j, _mm256_cvtpd_ps(r));
        }
        for (; j < c; j++) {   /* the same expression, one channel */
            double g = (!relu || y[off + j] > 0.0f ? gy[off + j] : 0.0f) * gscale;
            gx[off + j] = (float)(ds[j] * g + da[j] * ((double)x[off + j] - dc[j]) + db[j]);
        }
    }
}

#else   /* not x86-64: the generic code runs */

int hbx_available(void)
{
    return 0;
}

void hbx_sum(const float *x, size_t r0, size_t r1, size_t c, int nblk, double *acc)
{
    (void)x, (void)r0, (void)r1, (void)c, (void)nblk, (void)acc;
}

void hbx_sq(const float *x, const float *center, size_t r0, size_t r1, size_t c, int nblk,
            double *acc)
{
    (void)x, (void)center, (void)r0, (void)r1, (void)c, (void)nblk, (void)acc;
}

void hbx_grad(const float *x, const float *y, const float *gy, const float *center, int relu,
              float gscale, size_t r0, size_t r1, size_t c, int nblk, double *acc0,
              double *acc1)
{
    (void)x, (void)y, (void)gy, (void)center, (void)relu, (void)gscale, (void)r0, (void)r1;
    (void)c;
    (void)nblk, (void)acc0, (void)acc1;
}

void hbx_apply(float *gx, const float *x, const float *y, const float *gy, size_t r0, size_t r1,
               int c, int relu, float gscale, const double *wide)
{
    (void)gx, (void)x, (void)y, (void)gy, (void)r0, (void)r1, (void)c, (void)relu;
    (void)gscale, (void)wide;
}
#endif
