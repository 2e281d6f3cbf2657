#include "common/image/resize.h"
#include "common/errbuf.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Pillow: 8 bits for the result, 2 for overflow, the rest for precision. */
#define PRECISION_BITS (32 - 8 - 2)
#define MAX_DIM 65535

void resize_shorter_side(int w, int h, int size, int *out_w, int *out_h)
{
    int s = w <= h ? w : h, l = w <= h ? h : w;
    /* Python's int(size * long / short): a correctly rounded double
     * division, truncated; the same in C for these magnitudes */
    int nl = (int)((double)size * l / s);
    *out_w = w <= h ? size : nl;
    *out_h = w <= h ? nl : size;
}

/* Filter taps of output pixels [first, first + count) along one axis. */
typedef struct {
    int ksize;
    int *lo;      /* first source index of each output pixel */
    int *n;       /* number of taps */
    int32_t *k;   /* count x ksize fixed-point weights */
    int fixed;    /* every n == ksize (see taps_pad) */
} taps_t;

static void taps_free(taps_t *t)
{
    free(t->lo);
    free(t->n);
    free(t->k);
    memset(t, 0, sizeof *t);
}

static double triangle(double x)
{
    x = x < 0 ? -x : x;
    return x < 1.0 ? 1.0 - x : 0.0;
}

/* Pillow's precompute_coeffs + normalize_coeffs_8bpc, step for step. */
static int taps_compute(int in_size, int out_size, int first, int count, taps_t *t)
{
    double scale = (double)in_size / out_size, filterscale = scale < 1.0 ? 1.0 : scale;
    double support = 1.0 * filterscale;
    memset(t, 0, sizeof *t);
    t->ksize = (int)ceil(support) * 2 + 1;
    t->lo = malloc((size_t)count * sizeof *t->lo);
    t->n = malloc((size_t)count * sizeof *t->n);
    t->k = calloc((size_t)count * t->ksize, sizeof *t->k);
    double *w = malloc((size_t)t->ksize * sizeof *w);
    if (!t->lo || !t->n || !t->k || !w) {
        free(w);
        taps_free(t);
        return -1;
    }
    for (int i = 0; i < count; i++) {
        int xx = first + i;
        double center = (xx + 0.5) * scale, ww = 0.0, ss = 1.0 / filterscale;
        int xmin = (int)(center - support + 0.5), xmax = (int)(center + support + 0.5);
        xmin = xmin < 0 ? 0 : xmin;
        xmax = (xmax > in_size ? in_size : xmax) - xmin;
        for (int x = 0; x < xmax; x++) {
            w[x] = triangle((x + xmin - center + 0.5) * ss);
            ww += w[x];
        }
        int32_t *k = t->k + (size_t)i * t->ksize;
        for (int x = 0; x < xmax; x++) {
            double v = ww != 0.0 ? w[x] / ww : w[x];
            k[x] = (int32_t)(v < 0 ? -0.5 + v * (1 << PRECISION_BITS)
                                   : 0.5 + v * (1 << PRECISION_BITS));
        }
        t->lo[i] = xmin;
        t->n[i] = xmax;
    }
    free(w);
    return 0;
}

static inline uint8_t clip8(int32_t v)
{
    v >>= PRECISION_BITS;
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* Gives every output pixel exactly ksize taps (zero weights added, window
 * moved inside the source), so the inner loops have a fixed length. Adding
 * zero terms leaves every sum, hence every pixel, unchanged. */
static void taps_pad(taps_t *t, int in_size, int count)
{
    if (in_size < t->ksize)
        return;
    for (int i = 0; i < count; i++) {
        int32_t *k = t->k + (size_t)i * t->ksize;
        int lo = t->lo[i] < in_size - t->ksize ? t->lo[i] : in_size - t->ksize;
        int shift = t->lo[i] - lo;
        memmove(k + shift, k, (size_t)t->n[i] * sizeof *k);
        for (int j = 0; j < shift; j++)
            k[j] = 0;
        for (int j = shift + t->n[i]; j < t->ksize; j++)
            k[j] = 0;
        t->lo[i] = lo;
        t->n[i] = t->ksize;
    }
    t->fixed = 1;
}

#define HALF (1 << (PRECISION_BITS - 1))

/* Portable loops: fixed tap counts (after taps_pad) let the compiler unroll. */
static void row_h_c(const uint8_t *in, uint8_t *out, const taps_t *t, int cols, int c)
{
    for (int x = 0; x < cols; x++) {
        const int32_t *k = t->k + (size_t)x * t->ksize;
        const int n = t->n[x];
        const uint8_t *p = in + (size_t)t->lo[x] * c;
        if (c == 1) {
            int32_t s = HALF;
            for (int j = 0; j < n; j++)
                s += p[j] * k[j];
            out[x] = clip8(s);
            continue;
        }
        int32_t s0 = HALF, s1 = HALF, s2 = HALF;
        for (int j = 0; j < n; j++, p += 3) {
            s0 += p[0] * k[j];
            s1 += p[1] * k[j];
            s2 += p[2] * k[j];
        }
        out[3 * x] = clip8(s0);
        out[3 * x + 1] = clip8(s1);
        out[3 * x + 2] = clip8(s2);
    }
}

static void row_v_c(const uint8_t *base, size_t stride, const int32_t *k, int n, size_t x,
                    size_t len, uint8_t *row)
{
    for (; x < len; x++) {
        int32_t s = HALF;
        for (int j = 0; j < n; j++)
            s += base[(size_t)j * stride + x] * k[j];
        row[x] = clip8(s);
    }
}

/* AVX2 versions, chosen at run time: the same integer arithmetic (32-bit
 * products and sums, shift, saturate to 0..255), so the same pixels. */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define RESIZE_AVX2 1

static atomic_int simd_allowed = 1;

static int have_avx2(void)
{
    /* __builtin_cpu_supports reads a table libgcc fills at start-up */
    return atomic_load_explicit(&simd_allowed, memory_order_relaxed) &&
           __builtin_cpu_supports("avx2");
}

/* Two output pixels per vector: lanes 0-3 the RGB(+1 spare) of pixel x,
 * lanes 4-7 of pixel x + 1. KK holds each pair's taps as 8 lanes. Reads one
 * byte past each pixel's last tap, so IN needs a byte of slack. */
__attribute__((target("avx2"))) static int row_h_rgb_avx2(const uint8_t *in, uint8_t *out,
                                                          const taps_t *t, const int32_t *kk,
                                                          int cols)
{
    const int K = t->ksize;
    int x = 0;
    for (; x + 2 <= cols; x += 2) {
        const uint8_t *p0 = in + (size_t)t->lo[x] * 3, *p1 = in + (size_t)t->lo[x + 1] * 3;
        const int32_t *kp = kk + (size_t)(x / 2) * K * 8;
        __m256i acc = _mm256_set1_epi32(HALF);
        for (int j = 0; j < K; j++) {
            int32_t a, b;
            memcpy(&a, p0 + 3 * j, 4);
            memcpy(&b, p1 + 3 * j, 4);
            __m256i v = _mm256_cvtepu8_epi32(_mm_set_epi32(0, 0, b, a));
            __m256i w = _mm256_loadu_si256((const __m256i *)(kp + 8 * j));
            acc = _mm256_add_epi32(acc, _mm256_mullo_epi32(v, w));
        }
        acc = _mm256_srai_epi32(acc, PRECISION_BITS);
        __m128i s16 = _mm_packs_epi32(_mm256_castsi256_si128(acc),
                                      _mm256_extracti128_si256(acc, 1));
        uint8_t px[16];
        _mm_storeu_si128((__m128i *)px, _mm_packus_epi16(s16, s16));
        memcpy(out + 3 * x, px, 3);
        memcpy(out + 3 * x + 3, px + 4, 3);
    }
    return x;
}

/* Eight values per vector, sixteen per step. */
__attribute__((target("avx2"))) static size_t row_v_avx2(const uint8_t *base, size_t stride,
                                                         const int32_t *k, int n, size_t len,
                                                         uint8_t *row)
{
    size_t x = 0;
    for (; x + 16 <= len; x += 16) {
        __m256i a0 = _mm256_set1_epi32(HALF), a1 = a0;
        for (int j = 0; j < n; j++) {
            const uint8_t *r = base + (size_t)j * stride + x;
            __m256i kj = _mm256_set1_epi32(k[j]);
            __m256i v0 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)r));
            __m256i v1 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(r + 8)));
            a0 = _mm256_add_epi32(a0, _mm256_mullo_epi32(v0, kj));
            a1 = _mm256_add_epi32(a1, _mm256_mullo_epi32(v1, kj));
        }
        a0 = _mm256_srai_epi32(a0, PRECISION_BITS);
        a1 = _mm256_srai_epi32(a1, PRECISION_BITS);
        __m128i s0 = _mm_packs_epi32(_mm256_castsi256_si128(a0), _mm256_extracti128_si256(a0, 1));
        __m128i s1 = _mm_packs_epi32(_mm256_castsi256_si128(a1), _mm256_extracti128_si256(a1, 1));
        _mm_storeu_si128((__m128i *)(row + x), _mm_packus_epi16(s0, s1));
    }
    return x;
}
#endif

/* Pair-interleaved taps for row_h_rgb_avx2; NULL when not used. */
static int32_t *taps_pairs(const taps_t *t, int cols)
{
#ifdef RESIZE_AVX2
    if (!t->fixed || !have_avx2())
        return NULL;
    int32_t *kk = malloc((size_t)(cols / 2 + 1) * t->ksize * 8 * sizeof *kk);
    for (int x = 0; kk && x + 2 <= cols; x += 2)
        for (int j = 0; j < t->ksize; j++)
            for (int l = 0; l < 8; l++)
                kk[((size_t)(x / 2) * t->ksize + j) * 8 + l] =
                    t->k[(size_t)(x + l / 4) * t->ksize + j];
    return kk;
#else
    (void)t;
    (void)cols;
    return NULL;
#endif
}

static void row_h(const uint8_t *in, uint8_t *out, const taps_t *t, const int32_t *kk, int cols,
                  int c)
{
    int x = 0;
#ifdef RESIZE_AVX2
    if (kk && c == 3)
        x = row_h_rgb_avx2(in, out, t, kk, cols);
#else
    (void)kk;
#endif
    if (x < cols) {
        taps_t rest = *t;
        rest.lo += x;
        rest.n += x;
        rest.k += (size_t)x * t->ksize;
        row_h_c(in, out + (size_t)x * c, &rest, cols - x, c);
    }
}

/* Horizontal pass over ROWS rows of SRC's buffer starting at row y0: dst
 * row r gets the columns described by T (indices into SRC's buffer),
 * interleaved with C channels. */
static int pass_h(const image_t *src, int y0, int rows, const taps_t *t, int cols, uint8_t *dst)
{
    const int c = src->c;
    const size_t stride = (size_t)src->w * c;
    uint8_t *last = NULL;
    int32_t *kk = c == 3 ? taps_pairs(t, cols) : NULL;
    for (int r = 0; r < rows; r++) {
        const uint8_t *in = src->px + (size_t)(y0 + r) * stride;
        if (c == 3 && y0 + r == src->h - 1) {
            /* the RGB loop reads a byte past its last tap: give the image's
             * final row that byte */
            if (!(last = calloc(stride + 4, 1))) {
                free(kk);
                return -1;
            }
            memcpy(last, in, stride);
            in = last;
        }
        row_h(in, dst + (size_t)r * cols * c, t, kk, cols, c);
    }
    free(kk);
    free(last);
    return 0;
}

/* Writes one finished row of LEN interleaved values (cols x c) into the
 * output window at row Y, column X, interleaved or planar. */
/* RGB to three planes in one pass (the planes and the row never overlap). */
#ifdef RESIZE_AVX2
/* 16 pixels (48 bytes) at a time: each plane's 16 bytes gathered from the
 * three 16-byte loads with byte shuffles (-1: a zero, filled by another). */
__attribute__((target("avx2"))) static int split_rgb_avx2(uint8_t *r, uint8_t *g, uint8_t *b,
                                                          const uint8_t *row, int cols)
{
#define M(...) _mm_setr_epi8(__VA_ARGS__)
    const __m128i r0 = M(0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1),
                  r1 = M(-1, -1, -1, -1, -1, -1, 2, 5, 8, 11, 14, -1, -1, -1, -1, -1),
                  r2 = M(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 1, 4, 7, 10, 13),
                  g0 = M(1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1),
                  g1 = M(-1, -1, -1, -1, -1, 0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1),
                  g2 = M(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 2, 5, 8, 11, 14),
                  b0 = M(2, 5, 8, 11, 14, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1),
                  b1 = M(-1, -1, -1, -1, -1, 1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1),
                  b2 = M(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 3, 6, 9, 12, 15);
#undef M
    int i = 0;
    for (; i + 16 <= cols; i += 16) {
        const uint8_t *p = row + 3 * i;
        __m128i a = _mm_loadu_si128((const __m128i *)p),
                m = _mm_loadu_si128((const __m128i *)(p + 16)),
                z = _mm_loadu_si128((const __m128i *)(p + 32));
        __m128i vr = _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(a, r0), _mm_shuffle_epi8(m, r1)),
                                  _mm_shuffle_epi8(z, r2));
        __m128i vg = _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(a, g0), _mm_shuffle_epi8(m, g1)),
                                  _mm_shuffle_epi8(z, g2));
        __m128i vb = _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(a, b0), _mm_shuffle_epi8(m, b1)),
                                  _mm_shuffle_epi8(z, b2));
        _mm_storeu_si128((__m128i *)(r + i), vr);
        _mm_storeu_si128((__m128i *)(g + i), vg);
        _mm_storeu_si128((__m128i *)(b + i), vb);
    }
    return i;
}
#endif

static void split_rgb(uint8_t *restrict r, uint8_t *restrict g, uint8_t *restrict b,
                      const uint8_t *restrict row, int cols)
{
    int i = 0;
#ifdef RESIZE_AVX2
    if (have_avx2())
        i = split_rgb_avx2(r, g, b, row, cols);
#endif
    for (; i < cols; i++) {
        r[i] = row[3 * i];
        g[i] = row[3 * i + 1];
        b[i] = row[3 * i + 2];
    }
}

static void put_row(uint8_t *out, const resize_window_t *win, int c, int planar, int y, int x,
                    const uint8_t *row, int cols)
{
    if (!planar) {
        memcpy(out + ((size_t)y * win->w + x) * c, row, (size_t)cols * c);
        return;
    }
    size_t plane = (size_t)win->w * win->h;
    if (c == 3) {
        uint8_t *r = out + (size_t)y * win->w + x;
        split_rgb(r, r + plane, r + 2 * plane, row, cols);
        return;
    }
    for (int ch = 0; ch < c; ch++) {
        uint8_t *o = out + ch * plane + (size_t)y * win->w + x;
        for (int i = 0; i < cols; i++)
            o[i] = row[i * c + ch];
    }
}

/* Vertical pass for output row i: source row y lives at
 * IN + (y - in_y0) * STRIDE; LEN values of each are filtered into ROW. */
static void pass_v(const uint8_t *in, size_t stride, int in_y0, size_t len, const taps_t *tv,
                   int i, uint8_t *row)
{
    const int32_t *k = tv->k + (size_t)i * tv->ksize;
    const uint8_t *base = in + (size_t)(tv->lo[i] - in_y0) * stride;
    size_t x = 0;
#ifdef RESIZE_AVX2
    if (have_avx2())
        x = row_v_avx2(base, stride, k, tv->n[i], len, row);
#endif
    row_v_c(base, stride, k, tv->n[i], x, len, row);
}

typedef struct {
    int x0, x1, y0, y1; /* clipped window in dst coordinates */
} span_t;

/* Rows [*y0, *y1) of the source that the vertical taps read. */
static void taps_span(const taps_t *t, int count, int *y0, int *y1)
{
    *y0 = t->lo[0];
    *y1 = t->lo[0] + t->n[0];
    for (int i = 1; i < count; i++) {
        *y0 = t->lo[i] < *y0 ? t->lo[i] : *y0;
        *y1 = t->lo[i] + t->n[i] > *y1 ? t->lo[i] + t->n[i] : *y1;
    }
}

/* The horizontal pass's output (a few hundred KB per image) lives in a
 * per-thread buffer reused across calls, so the heap does not grow and
 * shrink with every image; one grown past TMP_KEEP_MAX is not kept. */
#define TMP_KEEP_MAX ((size_t)16 << 20)

typedef struct {
    uint8_t *p;
    size_t cap;
} tmpbuf_t;

static pthread_key_t tmp_key;
static pthread_once_t tmp_once = PTHREAD_ONCE_INIT;
static int tmp_key_ok;

static void tmp_free(void *arg)
{
    tmpbuf_t *t = arg;
    free(t->p);
    free(t);
}

static void tmp_init(void)
{
    tmp_key_ok = pthread_key_create(&tmp_key, tmp_free) == 0;
}

static tmpbuf_t *tmp_slot(void)
{
    if (pthread_once(&tmp_once, tmp_init) != 0 || !tmp_key_ok)
        return NULL;
    tmpbuf_t *t = pthread_getspecific(tmp_key);
    if (!t && (t = calloc(1, sizeof *t)) && pthread_setspecific(tmp_key, t) != 0) {
        free(t);
        t = NULL;
    }
    return t;
}

/* N bytes of scratch: the thread's buffer (*owned = 0) or, when that
 * cannot be had or would be too large to keep, a fresh one (*owned = 1). */
static uint8_t *tmp_get(size_t n, int *owned)
{
    tmpbuf_t *t = n <= TMP_KEEP_MAX ? tmp_slot() : NULL;
    *owned = !t;
    if (!t)
        return malloc(n);
    if (n > t->cap) {
        uint8_t *p = malloc(n);
        if (!p)
            return NULL;
        free(t->p);
        t->p = p;
        t->cap = n;
    }
    return t->p;
}

/* Where SRC's pixels lie in the image being resized: SRC holds the
 * rectangle at (x, y) of a full_w x full_h image (all of it: 0, 0, src->w,
 * src->h). */
typedef struct {
    int x, y, full_w, full_h;
} placement_t;

/* The taps of both passes over the clipped window SP; a pass whose size
 * does not change has none (need_* = 0). */
typedef struct {
    int need_h, need_v;
    taps_t th, tv;
} plan_t;

static void plan_free(plan_t *p)
{
    taps_free(&p->th);
    taps_free(&p->tv);
}

static int plan_make(int full_w, int full_h, int dst_w, int dst_h, const span_t *sp, plan_t *p)
{
    memset(p, 0, sizeof *p);
    p->need_h = dst_w != full_w;
    p->need_v = dst_h != full_h;
    const int cols = sp->x1 - sp->x0, rows = sp->y1 - sp->y0;
    if (p->need_v) {
        if (taps_compute(full_h, dst_h, sp->y0, rows, &p->tv) != 0)
            return -1;
        taps_pad(&p->tv, full_h, rows);
    }
    if (p->need_h) {
        if (taps_compute(full_w, dst_w, sp->x0, cols, &p->th) != 0) {
            plan_free(p);
            return -1;
        }
        taps_pad(&p->th, full_w, cols);
    }
    return 0;
}

/* The source rectangle [*x0, *x1) x [*y0, *y1) that P reads (padded zero
 * taps included: they are read, with weight 0). */
static void plan_source(const plan_t *p, const span_t *sp, int *x0, int *x1, int *y0, int *y1)
{
    *x0 = sp->x0;
    *x1 = sp->x1;
    *y0 = sp->y0;
    *y1 = sp->y1;
    if (p->need_h)
        taps_span(&p->th, sp->x1 - sp->x0, x0, x1);
    if (p->need_v)
        taps_span(&p->tv, sp->y1 - sp->y0, y0, y1);
}

static int resize_window(const image_t *src, const placement_t *pl, int dst_w, int dst_h,
                         const resize_window_t *win, const span_t *sp, uint8_t *out, int planar)
{
    const int c = src->c, cols = sp->x1 - sp->x0, rows = sp->y1 - sp->y0;
    plan_t p;
    uint8_t *tmp = NULL, *row = NULL;
    int rc = -1, sx0, sx1, sy0, sy1, tmp_owned = 0;
    if (plan_make(pl->full_w, pl->full_h, dst_w, dst_h, sp, &p) != 0)
        return -1;
    plan_source(&p, sp, &sx0, &sx1, &sy0, &sy1);
    if (sx0 < pl->x || sy0 < pl->y || sx1 > pl->x + src->w || sy1 > pl->y + src->h) {
        rc = -2; /* the caller's rectangle does not cover what the filter reads */
        goto done;
    }
    size_t len = (size_t)cols * c;
    if (p.need_h) {
        for (int i = 0; i < cols; i++)
            p.th.lo[i] -= pl->x; /* full-image columns to buffer columns */
        if (!(tmp = tmp_get((size_t)(sy1 - sy0) * len, &tmp_owned)) ||
            pass_h(src, sy0 - pl->y, sy1 - sy0, &p.th, cols, tmp) != 0)
            goto done;
    }
    /* without a horizontal pass the rows are read straight from the source */
    const uint8_t *mid = tmp ? tmp : src->px;
    size_t stride = tmp ? len : (size_t)src->w * c;
    int mid_y0 = tmp ? sy0 : pl->y;
    size_t xoff = tmp ? 0 : (size_t)(sp->x0 - pl->x) * c;
    if (!(row = malloc(len)))
        goto done;
    for (int i = 0; i < rows; i++) {
        const uint8_t *r = row;
        if (p.need_v)
            pass_v(mid + xoff, stride, mid_y0, len, &p.tv, i, row);
        else
            r = mid + (size_t)(sp->y0 + i - mid_y0) * stride + xoff;
        put_row(out, win, c, planar, sp->y0 + i - win->y, sp->x0 - win->x, r, cols);
    }
    rc = 0;
done:
    plan_free(&p);
    if (tmp_owned)
        free(tmp);
    free(row);
    return rc;
}

static int bad_args(int dst_w, int dst_h, const resize_window_t *win, char *err, size_t errlen)
{
    if (dst_w <= 0 || dst_h <= 0 || dst_w > MAX_DIM || dst_h > MAX_DIM || win->w <= 0 ||
        win->h <= 0 || win->w > MAX_DIM || win->h > MAX_DIM) {
        err_set(err, errlen, "bad resize to %dx%d (window %dx%d)", dst_w, dst_h, win->w, win->h);
        return 1;
    }
    return 0;
}

static span_t clip_window(const resize_window_t *win, int dst_w, int dst_h)
{
    return (span_t){win->x < 0 ? 0 : win->x, win->x + win->w > dst_w ? dst_w : win->x + win->w,
                    win->y < 0 ? 0 : win->y, win->y + win->h > dst_h ? dst_h : win->y + win->h};
}

/* 1 (with a reason) when a src_w x src_h source cannot be resized to
 * dst_w x dst_h keeping WIN */
static int bad_sizes(int src_w, int src_h, int dst_w, int dst_h, const resize_window_t *win,
                     char *err, size_t errlen)
{
    if (src_w > 0 && src_h > 0 && src_w <= MAX_DIM && src_h <= MAX_DIM &&
        !bad_args(dst_w, dst_h, win, err, errlen))
        return 0;
    err_set(err, errlen, "bad resize of %dx%d to %dx%d (window %dx%d)", src_w, src_h, dst_w,
             dst_h, win->w, win->h);
    return 1;
}

int resize_source_rect(int src_w, int src_h, int dst_w, int dst_h, const resize_window_t *win,
                       resize_window_t *rect, char *err, size_t errlen)
{
    *rect = (resize_window_t){0, 0, 0, 0};
    if (bad_sizes(src_w, src_h, dst_w, dst_h, win, err, errlen))
        return -1;
    span_t sp = clip_window(win, dst_w, dst_h);
    if (sp.x0 >= sp.x1 || sp.y0 >= sp.y1)
        return 0; /* all padding: no source pixel is read */
    plan_t p;
    if (plan_make(src_w, src_h, dst_w, dst_h, &sp, &p) != 0) {
        err_set(err, errlen, "out of memory planning a resize to %dx%d", dst_w, dst_h);
        return -1;
    }
    int x0, x1, y0, y1;
    plan_source(&p, &sp, &x0, &x1, &y0, &y1);
    plan_free(&p);
    *rect = (resize_window_t){x0, y0, x1 - x0, y1 - y0};
    return 0;
}

void resize_taps_free(resize_taps_t *t)
{
    free(t->h.lo);
    free(t->h.k);
    free(t->v.lo);
    free(t->v.k);
    memset(t, 0, sizeof *t);
}

/* One axis's table from its taps T over [first, first + count) (need: the
 * axis is resized; else the identity). Taps that were not padded to a
 * fixed length (a source shorter than the filter) are placed at their
 * source index in a row as long as the source: the added terms are zero. */
static int axis_table(const taps_t *t, int need, int in_size, int first, int count,
                      resize_axis_t *a)
{
    int ks = !need ? 1 : t->fixed ? t->ksize : in_size;
    a->count = count;
    a->ksize = ks;
    a->lo = malloc((size_t)count * sizeof *a->lo);
    a->k = calloc((size_t)count * ks, sizeof *a->k);
    if (!a->lo || !a->k)
        return -1;
    for (int i = 0; i < count; i++) {
        int32_t *k = a->k + (size_t)i * ks;
        const int32_t *tk = need ? t->k + (size_t)i * t->ksize : NULL;
        if (!need) {
            a->lo[i] = first + i;
            k[0] = 1 << PRECISION_BITS;   /* (p << 22 + half) >> 22 == p */
        } else if (t->fixed) {
            a->lo[i] = t->lo[i];
            memcpy(k, tk, (size_t)ks * sizeof *k);
        } else {
            a->lo[i] = 0;
            memcpy(k + t->lo[i], tk, (size_t)t->n[i] * sizeof *k);
        }
    }
    return 0;
}

int resize_taps(int src_w, int src_h, int dst_w, int dst_h, const resize_window_t *win,
                resize_taps_t *t, char *err, size_t errlen)
{
    memset(t, 0, sizeof *t);
    if (bad_sizes(src_w, src_h, dst_w, dst_h, win, err, errlen))
        return -1;
    span_t sp = clip_window(win, dst_w, dst_h);
    *t = (resize_taps_t){.x0 = sp.x0, .x1 = sp.x1, .y0 = sp.y0, .y1 = sp.y1};
    if (sp.x0 >= sp.x1 || sp.y0 >= sp.y1) {
        t->x1 = t->x0;   /* all padding */
        return 0;
    }
    plan_t p;
    if (plan_make(src_w, src_h, dst_w, dst_h, &sp, &p) != 0) {
        err_set(err, errlen, "out of memory planning a resize to %dx%d", dst_w, dst_h);
        return -1;
    }
    int rc = axis_table(&p.th, p.need_h, src_w, sp.x0, sp.x1 - sp.x0, &t->h) |
             axis_table(&p.tv, p.need_v, src_h, sp.y0, sp.y1 - sp.y0, &t->v);
    plan_free(&p);
    if (rc != 0) {
        resize_taps_free(t);
        err_set(err, errlen, "out of memory planning a resize to %dx%d", dst_w, dst_h);
        return -1;
    }
    t->sy0 = t->v.lo[0];
    t->sy1 = t->v.lo[0] + t->v.ksize;
    for (int i = 1; i < t->v.count; i++) {
        t->sy0 = t->v.lo[i] < t->sy0 ? t->v.lo[i] : t->sy0;
        t->sy1 = t->v.lo[i] + t->v.ksize > t->sy1 ? t->v.lo[i] + t->v.ksize : t->sy1;
    }
    return 0;
}

int resize_region_at(const image_t *src, int src_x, int src_y, int full_w, int full_h,
                     int dst_w, int dst_h, const resize_window_t *win, uint8_t *out, int planar,
                     char *err, size_t errlen)
{
    if (!src || bad_args(dst_w, dst_h, win, err, errlen))
        return -1;
    if (src_x < 0 || src_y < 0 || full_w > MAX_DIM || full_h > MAX_DIM ||
        src_x + src->w > full_w || src_y + src->h > full_h) {
        err_set(err, errlen, "source part %dx%d at (%d, %d) is not inside a %dx%d image",
                 src->w, src->h, src_x, src_y, full_w, full_h);
        return -1;
    }
    span_t sp = clip_window(win, dst_w, dst_h);
    /* zero padding of a crop larger than the image (torchvision pads with 0) */
    if (sp.x0 != win->x || sp.y0 != win->y || sp.x1 != win->x + win->w ||
        sp.y1 != win->y + win->h)
        memset(out, 0, (size_t)win->w * win->h * src->c);
    if (sp.x0 >= sp.x1 || sp.y0 >= sp.y1)
        return 0;
    placement_t pl = {src_x, src_y, full_w, full_h};
    int rc = resize_window(src, &pl, dst_w, dst_h, win, &sp, out, planar);
    if (rc == -2)
        err_set(err, errlen, "source part %dx%d at (%d, %d) misses pixels the resize of %dx%d "
                 "to %dx%d reads (use resize_source_rect)", src->w, src->h, src_x, src_y,
                 full_w, full_h, dst_w, dst_h);
    else if (rc != 0)
        err_set(err, errlen, "out of memory resizing %dx%d to %dx%d", full_w, full_h, dst_w,
                 dst_h);
    return rc == 0 ? 0 : -1;
}

int resize_region(const image_t *src, int dst_w, int dst_h, const resize_window_t *win,
                  uint8_t *out, int planar, char *err, size_t errlen)
{
    if (!src) {
        err_set(err, errlen, "no image to resize");
        return -1;
    }
    return resize_region_at(src, 0, 0, src->w, src->h, dst_w, dst_h, win, out, planar, err,
                            errlen);
}

int resize_use_simd(int on)
{
#ifdef RESIZE_AVX2
    atomic_store(&simd_allowed, on);
    return have_avx2();
#else
    (void)on;
    return 0;
#endif
}

image_t *resize_image(const image_t *src, int dst_w, int dst_h, char *err, size_t errlen)
{
    image_t *img = image_new(dst_w, dst_h, src ? src->c : 1);
    if (!img) {
        err_set(err, errlen, "cannot allocate a %dx%d image", dst_w, dst_h);
        return NULL;
    }
    resize_window_t win = {0, 0, dst_w, dst_h};
    if (resize_region(src, dst_w, dst_h, &win, img->px, 0, err, errlen) != 0)
        image_destroy(&img);
    return img;
}
