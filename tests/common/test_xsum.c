/* common/xsum: exact, order-independent sums (issue 31).
 *
 *   reference: random floats and doubles (wide and narrow exponent ranges,
 *              signs, cancellation, zeros and -0, subnormals) against a
 *              big-integer sum of the same values truncated at the window
 *              xsum keeps, rounded correctly to nearest even here: bitwise;
 *              narrow ranges also against the untruncated exact sum;
 *   order:     the same multiset in random permutations (per element too,
 *              so the vectors' maxima and the top's path differ), split
 *              into 1..8 partial xsums merged by the all-reduce protocol
 *              (max of the tops, xsum_align, limbs added): bitwise equal;
 *   first/last: a value 2^70 times larger first or last: the same bytes;
 *   nonfinite: NaN and infinities make their segment (only) NaN, through a
 *              merge too;
 *   empty:     no values, or only zeros: 0;
 *   overflow and subnormal results: infinity, and one correct rounding.
 */
#include "common/xsum.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(c)                                                                                \
    do {                                                                                        \
        if (!(c)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c);              \
            exit(1);                                                                            \
        }                                                                                       \
    } while (0)

/* ---- random numbers ---------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15u;

static uint64_t rnd(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

static int rnd_int(int lo, int hi)   /* [lo, hi] */
{
    return lo + (int)(rnd() % (uint64_t)(hi - lo + 1));
}

static float f32_of(uint32_t b)
{
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

static double f64_of(uint64_t b)
{
    double d;
    memcpy(&d, &b, sizeof d);
    return d;
}

/* A float with a biased exponent in [elo, ehi] (0: subnormal), random
 * mantissa and sign; 1 in 16 is +0 or -0. */
static float rnd_f32(int elo, int ehi)
{
    if (rnd() % 16 == 0)
        return rnd() % 2 ? 0.0f : -0.0f;
    uint32_t b = (uint32_t)rnd_int(elo, ehi) << 23 | (uint32_t)(rnd() & 0x7fffff) |
                 (uint32_t)(rnd() & 1) << 31;
    return f32_of(b);
}

static double rnd_f64(int elo, int ehi)
{
    if (rnd() % 16 == 0)
        return rnd() % 2 ? 0.0 : -0.0;
    uint64_t b = (uint64_t)rnd_int(elo, ehi) << 52 | (rnd() & ((UINT64_C(1) << 52) - 1)) |
                 (rnd() & 1) << 63;
    return f64_of(b);
}

/* ---- the reference: a two's-complement big integer --------------------- */

#define NW 40                 /* 2560 bits */
#define LOWPOS (-1152)        /* absolute position of bit 0 */

typedef struct { uint64_t w[NW]; } big_t;

/* big += (neg ? -1 : 1) * m * 2^shift (shift: bit index, >= 0) */
static void big_add(big_t *a, uint64_t m, int shift, int neg)
{
    CHECK(shift >= 0 && shift / 64 + 2 < NW);
    int w = shift / 64, b = shift % 64;
    uint64_t part[2] = {m << b, b ? m >> (64 - b) : 0};
    if (!neg) {
        uint64_t carry = 0;
        for (int i = w; i < NW; i++) {
            uint64_t add = (i - w < 2 ? part[i - w] : 0);
            uint64_t s = a->w[i] + add;
            uint64_t c1 = s < add;
            uint64_t s2 = s + carry;
            carry = c1 | (s2 < s);
            a->w[i] = s2;
            if (i - w >= 1 && !carry)
                break;
        }
    } else {
        uint64_t borrow = 0;
        for (int i = w; i < NW; i++) {
            uint64_t sub = (i - w < 2 ? part[i - w] : 0);
            uint64_t d = a->w[i] - sub;
            uint64_t b1 = a->w[i] < sub;
            uint64_t d2 = d - borrow;
            borrow = b1 | (d < borrow);
            a->w[i] = d2;
            if (i - w >= 1 && !borrow)
                break;
        }
    }
}

static int big_bit(const big_t *a, int i)
{
    return (int)(a->w[i / 64] >> (i % 64) & 1);
}

/* The bin (as xsum.c numbers them: 30-bit bins from 2^-1080) of |x|'s
 * leading bit, from frexp rather than the bits. */
static int bin_of(double x)
{
    int k;
    frexp(fabs(x), &k);   /* |x| = f 2^k, f in [0.5, 1): leading bit 2^(k-1) */
    return (k - 1 + 1080) / 30;
}

/* Adds x truncated toward zero at absolute position lo (the window's
 * bottom; LOWPOS or below: no truncation). */
static void big_add_value(big_t *a, double x, int lo)
{
    if (x == 0)
        return;
    int k;
    double f = frexp(fabs(x), &k);
    uint64_t m = (uint64_t)ldexp(f, 53);   /* |x| = m 2^(k - 53), exact */
    int e = k - 53;
    if (e < lo) {
        m = lo - e >= 64 ? 0 : m >> (lo - e);
        e = lo;
    }
    if (m)
        big_add(a, m, e - LOWPOS, x < 0);
}

/* The big integer rounded once to prec bits, none below 2^emin: to
 * nearest, ties to even; infinity past the double range (prec 24 then
 * (float) is exact: a float, or >= 2^128). */
static double big_round(const big_t *in, int prec, int emin)
{
    big_t a = *in;
    int neg = (int)(a.w[NW - 1] >> 63);
    if (neg) {   /* two's complement negation */
        uint64_t carry = 1;
        for (int i = 0; i < NW; i++) {
            a.w[i] = ~a.w[i] + carry;
            carry = carry && a.w[i] == 0;
        }
    }
    int hb = -1;
    for (int i = NW * 64 - 1; i >= 0; i--)
        if (big_bit(&a, i)) {
            hb = i;
            break;
        }
    if (hb < 0)
        return 0.0;
    int lsbpos = hb + LOWPOS - prec + 1;
    if (lsbpos < emin)
        lsbpos = emin;
    int lsb = lsbpos - LOWPOS;
    CHECK(lsb >= 1);
    uint64_t mant = 0;
    for (int i = hb; i >= lsb; i--)
        mant = mant << 1 | (uint64_t)big_bit(&a, i);
    int half = big_bit(&a, lsb - 1), sticky = 0;
    for (int i = lsb - 2; i >= 0 && !sticky; i--)
        sticky = big_bit(&a, i);
    if (half && (sticky || (mant & 1)))
        mant++;
    double r = ldexp((double)mant, lsbpos);
    return neg ? -r : r;
}

/* ---- helpers ------------------------------------------------------------ */

/* nvec vectors of len values (double storage; float tests hold floats). */
typedef struct {
    int nvec;
    size_t len;
    double *v;   /* v[j * len + i] */
} vecs_t;

static vecs_t vecs_new(int nvec, size_t len)
{
    vecs_t s = {nvec, len, calloc((size_t)nvec * len + 1, sizeof(double))};
    CHECK(s.v);
    return s;
}

static void add_vec(xsum_t *x, int seg, const double *v, size_t len, int f32)
{
    if (f32) {
        float *f = malloc(len * sizeof *f + 1);
        CHECK(f);
        for (size_t i = 0; i < len; i++)
            f[i] = (float)v[i];
        xsum_add_f32(x, seg, f);
        free(f);
    } else {
        xsum_add_f64(x, seg, v);
    }
}

/* The reference for segment values s (all vectors): per element, exactly
 * the sum of the values truncated at the final window's bottom. */
static void reference(const vecs_t *s, float *r32, double *r64, int truncate)
{
    double amax = 0;
    for (size_t k = 0; k < (size_t)s->nvec * s->len; k++)
        amax = fmax(amax, fabs(s->v[k]));
    int lo = amax > 0 && truncate ? (bin_of(amax) - (XSUM_LIMBS - 1)) * 30 - 1080 : LOWPOS;
    for (size_t i = 0; i < s->len; i++) {
        big_t a;
        memset(&a, 0, sizeof a);
        for (int j = 0; j < s->nvec; j++)
            big_add_value(&a, s->v[(size_t)j * s->len + i], lo);
        r32[i] = (float)big_round(&a, 24, -149);
        r64[i] = big_round(&a, 53, -1074);
    }
}

static int same32(const float *a, const float *b, size_t n)
{
    return memcmp(a, b, n * sizeof *a) == 0;
}

static int same64(const double *a, const double *b, size_t n)
{
    return memcmp(a, b, n * sizeof *a) == 0;
}

static void expect_ref(xsum_t *x, int seg, const vecs_t *s, int untruncated_too)
{
    size_t n = s->len;
    float *g32 = calloc(n + 1, sizeof *g32), *r32 = calloc(n + 1, sizeof *r32);
    double *g64 = calloc(n + 1, sizeof *g64), *r64 = calloc(n + 1, sizeof *r64);
    CHECK(g32 && r32 && g64 && r64);
    xsum_get_f32(x, seg, g32);
    xsum_get_f64(x, seg, g64);
    reference(s, r32, r64, 1);
    for (size_t i = 0; i < n; i++)
        if (memcmp(&g32[i], &r32[i], sizeof *g32) || memcmp(&g64[i], &r64[i], sizeof *g64)) {
            fprintf(stderr, "element %zu: xsum %a %a, reference %a %a\n", i, (double)g32[i],
                    g64[i], (double)r32[i], r64[i]);
            CHECK(0);
        }
    if (untruncated_too) {   /* the window lost nothing */
        reference(s, r32, r64, 0);
        CHECK(same32(g32, r32, n) && same64(g64, r64, n));
    }
    free(g32), free(r32), free(g64), free(r64);
}

/* Merges parts[1..P) into parts[0] as an all-reduce does. */
static void merge(xsum_t **parts, int P)
{
    int nseg = xsum_segments(parts[0]);
    int32_t tops[8];
    CHECK(nseg <= 8);
    for (int s = 0; s < nseg; s++) {
        tops[s] = XSUM_EMPTY;
        for (int p = 0; p < P; p++)
            tops[s] = xsum_tops(parts[p])[s] > tops[s] ? xsum_tops(parts[p])[s] : tops[s];
    }
    for (int p = 0; p < P; p++)
        xsum_align(parts[p], tops);
    int64_t *l0 = xsum_limbs(parts[0]);
    for (int p = 1; p < P; p++) {
        const int64_t *l = xsum_limbs(parts[p]);
        for (size_t k = 0; k < xsum_count(parts[0]) * XSUM_LIMBS; k++)
            l0[k] = (int64_t)((uint64_t)l0[k] + (uint64_t)l[k]);
    }
    for (int s = 0; s < nseg; s++)
        CHECK(xsum_tops(parts[0])[s] == tops[s]);
}

/* ---- the tests ---------------------------------------------------------- */

enum { NSEG = 3 };
static const size_t LEN[NSEG] = {67, 1, 0};

/* Fills a segment's vectors by mode: 0 wide floats (all exponents,
 * subnormals), 1 narrow floats, 2 cancellation (pairs x, -x and small
 * remainders), 3 subnormal floats, 4 wide doubles, 5 narrow doubles. */
static void fill(vecs_t *s, int mode)
{
    for (int j = 0; j < s->nvec; j++)
        for (size_t i = 0; i < s->len; i++) {
            double *v = &s->v[(size_t)j * s->len + i];
            switch (mode) {
            case 0: *v = rnd_f32(0, 254); break;
            case 1: *v = rnd_f32(120, 135); break;
            case 2:
                if (j % 3 == 1)
                    *v = -s->v[(size_t)(j - 1) * s->len + i];
                else
                    *v = j % 3 == 0 ? rnd_f32(140, 150) : rnd_f32(100, 110);
                break;
            case 3: *v = rnd_f32(0, 1); break;
            case 4: *v = rnd_f64(0, 2046); break;
            default: *v = rnd_f64(1000, 1040); break;
            }
        }
}

static void test_reference(void)
{
    for (int mode = 0; mode < 6; mode++) {
        int f32 = mode < 4, narrow = mode == 1 || mode == 3 || mode == 5;
        for (int trial = 0; trial < 20; trial++) {
            xsum_t *x = xsum_new(LEN, NSEG);
            CHECK(x);
            vecs_t s[NSEG];
            for (int g = 0; g < NSEG; g++) {
                s[g] = vecs_new(rnd_int(1, 40), LEN[g]);
                fill(&s[g], mode);
            }
            /* interleaved over the segments, as a step adds its tensors */
            for (int j = 0; j < 40; j++)
                for (int g = 0; g < NSEG; g++)
                    if (j < s[g].nvec)
                        add_vec(x, g, &s[g].v[(size_t)j * s[g].len], s[g].len, f32);
            for (int g = 0; g < NSEG; g++) {
                expect_ref(x, g, &s[g], narrow);
                free(s[g].v);
            }
            xsum_destroy(&x);
            CHECK(!x);
        }
    }
    printf("reference: 6 modes x 20 trials bitwise equal to the big-integer sum\n");
}

/* The multiset of s as vectors of a new order: element i's values permuted
 * on their own, so the vectors (and their maxima) differ. */
static vecs_t permuted(const vecs_t *s)
{
    vecs_t t = vecs_new(s->nvec, s->len);
    int *perm = malloc((size_t)s->nvec * sizeof *perm);
    CHECK(perm);
    for (size_t i = 0; i < s->len; i++) {
        for (int j = 0; j < s->nvec; j++)
            perm[j] = j;
        for (int j = s->nvec - 1; j > 0; j--) {
            int k = rnd_int(0, j), tmp = perm[j];
            perm[j] = perm[k], perm[k] = tmp;
        }
        for (int j = 0; j < s->nvec; j++)
            t.v[(size_t)j * s->len + i] = s->v[(size_t)perm[j] * s->len + i];
    }
    free(perm);
    return t;
}

static void test_order(void)
{
    static const size_t len[NSEG] = {101, 7, 1};
    int checked = 0;
    for (int mode = 0; mode < 6; mode++) {
        int f32 = mode < 4;
        vecs_t s[NSEG];
        for (int g = 0; g < NSEG; g++) {
            s[g] = vecs_new(48, len[g]);
            fill(&s[g], mode);
        }
        xsum_t *one = xsum_new(len, NSEG);
        CHECK(one);
        for (int g = 0; g < NSEG; g++)
            for (int j = 0; j < s[g].nvec; j++)
                add_vec(one, g, &s[g].v[(size_t)j * len[g]], len[g], f32);
        float want32[101], got32[101];
        double want64[101], got64[101];
        for (int P = 1; P <= 8; P++) {
            for (int trial = 0; trial < 3; trial++) {
                xsum_t *parts[8];
                for (int p = 0; p < P; p++)
                    CHECK((parts[p] = xsum_new(len, NSEG)) != NULL);
                for (int g = 0; g < NSEG; g++) {
                    vecs_t t = permuted(&s[g]);
                    for (int j = 0; j < t.nvec; j++)   /* a random part each (some empty) */
                        add_vec(parts[rnd_int(0, P - 1)], g, &t.v[(size_t)j * len[g]], len[g],
                                f32);
                    free(t.v);
                }
                merge(parts, P);
                for (int g = 0; g < NSEG; g++) {
                    xsum_get_f32(one, g, want32);
                    xsum_get_f64(one, g, want64);
                    xsum_get_f32(parts[0], g, got32);
                    xsum_get_f64(parts[0], g, got64);
                    CHECK(same32(want32, got32, len[g]) && same64(want64, got64, len[g]));
                    checked++;
                }
                for (int p = 0; p < P; p++)
                    xsum_destroy(&parts[p]);
            }
        }
        for (int g = 0; g < NSEG; g++) {
            expect_ref(one, g, &s[g], 0);
            free(s[g].v);
        }
        xsum_destroy(&one);
    }
    printf("order: %d permuted, partitioned (1..8 parts) and merged segments bitwise equal\n",
           checked);
}

static void test_first_last(void)
{
    size_t len[1] = {64};
    vecs_t s = vecs_new(30, 64);
    fill(&s, 1);
    for (size_t i = 0; i < 64; i++)   /* vector 0: 2^70 times larger */
        s.v[i] = ldexp(s.v[i] == 0 ? 1.0 : s.v[i], 70);
    for (int f32 = 0; f32 < 2; f32++) {
        xsum_t *a = xsum_new(len, 1), *b = xsum_new(len, 1);
        CHECK(a && b);
        for (int j = 0; j < 30; j++)
            add_vec(a, 0, &s.v[(size_t)j * 64], 64, f32);
        for (int j = 29; j >= 0; j--)
            add_vec(b, 0, &s.v[(size_t)j * 64], 64, f32);
        float a32[64], b32[64];
        double a64[64], b64[64];
        xsum_get_f32(a, 0, a32), xsum_get_f32(b, 0, b32);
        xsum_get_f64(a, 0, a64), xsum_get_f64(b, 0, b64);
        CHECK(same32(a32, b32, 64) && same64(a64, b64, 64));
        CHECK(xsum_tops(a)[0] == xsum_tops(b)[0]);
        expect_ref(a, 0, &s, 0);
        /* and the small values did count: not the large one alone */
        int differs = 0;
        for (size_t i = 0; i < 64; i++)
            differs |= a64[i] != s.v[i];
        CHECK(differs);
        xsum_destroy(&a), xsum_destroy(&b);
    }
    free(s.v);
    printf("first/last: a 2^70 larger vector first or last gives the same bytes\n");
}

static void test_nonfinite(void)
{
    size_t len[3] = {5, 5, 5};
    float ok[5] = {1, 2, 3, 4, 5}, bad[5] = {1, NAN, 3, 4, 5};
    double dinf[5] = {1, 2, -INFINITY, 4, 5};
    xsum_t *x = xsum_new(len, 3);
    CHECK(x);
    xsum_add_f32(x, 0, ok);
    xsum_add_f32(x, 1, bad);
    xsum_add_f32(x, 1, ok);   /* after: still NaN */
    xsum_add_f32(x, 2, ok);
    xsum_add_f64(x, 2, dinf);
    CHECK(xsum_tops(x)[1] == XSUM_NONFINITE && xsum_tops(x)[2] == XSUM_NONFINITE);
    float o[5];
    double d[5];
    xsum_get_f32(x, 0, o);
    for (int i = 0; i < 5; i++)
        CHECK(o[i] == ok[i]);
    for (int g = 1; g < 3; g++) {
        xsum_get_f32(x, g, o);
        xsum_get_f64(x, g, d);
        for (int i = 0; i < 5; i++)
            CHECK(isnan(o[i]) && isnan(d[i]));
    }
    /* through a merge: one part's infinity makes the merged segment NaN */
    xsum_t *y = xsum_new(len, 3);
    CHECK(y);
    float inf[5] = {INFINITY, 0, 0, 0, 0};
    xsum_add_f32(y, 0, inf);
    xsum_t *parts[2] = {y, x};
    merge(parts, 2);
    for (int g = 0; g < 3; g++) {
        xsum_get_f32(y, g, o);
        for (int i = 0; i < 5; i++)
            CHECK(isnan(o[i]));
    }
    xsum_clear(y);   /* clear: finite again */
    xsum_add_f32(y, 1, ok);
    xsum_get_f32(y, 1, o);
    CHECK(same32(o, ok, 5));
    xsum_destroy(&x), xsum_destroy(&y);
    printf("nonfinite: NaN and infinities make their segment NaN, through a merge too\n");
}

static void test_empty(void)
{
    size_t len[3] = {4, 0, 4};
    xsum_t *x = xsum_new(len, 3);
    CHECK(x && xsum_count(x) == 8 && xsum_len(x, 1) == 0 && xsum_segments(x) == 3);
    float z[4] = {0.0f, -0.0f, 0.0f, -0.0f}, o[4] = {1, 1, 1, 1};
    double d[4] = {1, 1, 1, 1};
    xsum_add_f32(x, 2, z);   /* only zeros: still empty */
    xsum_add_f32(x, 1, NULL);
    CHECK(xsum_tops(x)[0] == XSUM_EMPTY && xsum_tops(x)[2] == XSUM_EMPTY);
    for (int g = 0; g < 3; g += 2) {
        xsum_get_f32(x, g, o);
        xsum_get_f64(x, g, d);
        for (int i = 0; i < 4; i++) {
            uint32_t b;
            memcpy(&b, &o[i], sizeof b);
            CHECK(b == 0 && d[i] == 0 && !signbit(d[i]));
        }
    }
    /* a sum that cancels: +0 */
    float a[4] = {1.5f, -3, 1e-30f, 7}, na[4] = {-1.5f, 3, -1e-30f, -7};
    xsum_add_f32(x, 0, a);
    xsum_add_f32(x, 0, na);
    xsum_get_f32(x, 0, o);
    for (int i = 0; i < 4; i++)
        CHECK(o[i] == 0 && !signbit(o[i]));
    size_t bad = 1;
    CHECK(xsum_new(&bad, 0) == NULL);
    xsum_destroy(&x);
    xsum_destroy(&x);   /* NULL: nothing */
    printf("empty: no values, only zeros, cancelling values: +0\n");
}

static void test_extremes(void)
{
    size_t len[2] = {3, 3};
    xsum_t *x = xsum_new(len, 2);
    CHECK(x);
    /* overflow: DBL_MAX twice is infinite as a double, FLT_MAX twice as a
     * float; 1 next to DBL_MAX is far below the window: truncated away */
    double dmax[3] = {1.7976931348623157e308, -1.7976931348623157e308, 1};
    double fmax_[3] = {3.4028234663852886e38, -3.4028234663852886e38, 3.4028234663852886e38 / 2};
    xsum_add_f64(x, 0, dmax);
    xsum_add_f64(x, 0, dmax);
    xsum_add_f64(x, 1, fmax_);
    xsum_add_f64(x, 1, fmax_);
    double d[3];
    float f[3];
    xsum_get_f64(x, 0, d);
    CHECK(d[0] == INFINITY && d[1] == -INFINITY && d[2] == 0);
    xsum_get_f64(x, 1, d);
    xsum_get_f32(x, 1, f);
    CHECK(d[0] == 2 * 3.4028234663852886e38 && f[0] == INFINITY && f[1] == -INFINITY &&
          f[2] == 3.4028234663852886e38f);
    /* subnormal results, rounded once: 2^-150 + 2^-200 is past half of the
     * smallest float (2^-149; rounding to 24 bits first would make it the
     * tie 2^-150, then 0); 2^-150 alone is a tie: to even, 0; -2^-150 - 2^-151
     * rounds to -2^-149 */
    xsum_clear(x);
    double a[3] = {ldexp(1, -150), ldexp(1, -150), -ldexp(1, -150)};
    double b[3] = {ldexp(1, -200), 0, -ldexp(1, -151)};
    xsum_add_f64(x, 0, a);
    xsum_add_f64(x, 0, b);
    xsum_get_f32(x, 0, f);
    CHECK(f[0] == ldexpf(1, -149) && f[1] == 0 && f[2] == -ldexpf(1, -149));
    /* the same for doubles: 2^-1075 + 2^-1100 rounds up to 2^-1074 */
    double c[3] = {ldexp(1, -1074), ldexp(1, -1074) / 2 * 0, -ldexp(1, -1074)};
    double e[3] = {ldexp(1, -1074), ldexp(1, -1074), -ldexp(1, -1074)};
    xsum_add_f64(x, 1, c);
    xsum_add_f64(x, 1, e);
    xsum_get_f64(x, 1, d);
    CHECK(d[0] == ldexp(1, -1073) && d[1] == ldexp(1, -1074) && d[2] == -ldexp(1, -1073));
    /* a float sum that is subnormal through cancellation (the smallest
     * normal less the largest subnormal) */
    xsum_clear(x);
    float g[3] = {ldexpf(1, -126), ldexpf(1, -149), 3 * ldexpf(1, -140)};
    float h[3] = {-f32_of(0x007fffff), ldexpf(1, -148), -3 * ldexpf(1, -140)};
    xsum_add_f32(x, 0, g);
    xsum_add_f32(x, 0, h);
    xsum_get_f32(x, 0, f);
    CHECK(f[0] == ldexpf(1, -149) && f[1] == 3 * ldexpf(1, -149) && f[2] == 0);
    /* the window is the segment's: 2^-149 and 2^-148 next to a 3 are
     * truncated away */
    float g1[3] = {ldexpf(1, -149), 3, 0}, h1[3] = {ldexpf(1, -148), 0, 0};
    xsum_add_f32(x, 1, g1);
    xsum_add_f32(x, 1, h1);
    xsum_get_f32(x, 1, f);
    CHECK(f[0] == 0 && f[1] == 3 && f[2] == 0);
    xsum_destroy(&x);
    printf("extremes: overflow to infinity, subnormal results rounded once\n");
}

int main(void)
{
    test_reference();
    test_order();
    test_first_last();
    test_nonfinite();
    test_empty();
    test_extremes();
    printf("test_xsum: all passed\n");
    return 0;
}
