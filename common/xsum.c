/* xsum — exact, order-independent sums (xsum.h).
 *
 * Positions (xsum_f32.h): bin b holds the absolute bit positions
 * [30 b + XSUM_BASE, 30 b + XSUM_BASE + 30), a slice of a value being its
 * bits there, as an integer. A segment keeps, per element, the limbs of
 * bins top, top - 1, top - 2 (limb 0 = top). Limbs are never normalised
 * (no carry from one to the next): each is the plain sum of its bin's
 * slices, which is what makes dropping a whole limb when the top moves up
 * exactly what adding the later values first would have given.
 *
 * A value's slices are its magnitude's, with the sign applied to each, so a
 * value is truncated toward zero at the window's bottom, whatever its sign:
 * the same for every order.
 *
 * Reading rounds the exact window, limb0 * 2^60 + limb1 * 2^30 + limb2
 * (|limb| < 2^63, so under 2^124: an __int128), scaled by the window's
 * position, once and correctly (to nearest, ties to even) in integers:
 * subnormal and overflowing results included, with no libgcc conversion
 * whose rounding of a subnormal result would be a second one.
 */
#include "common/xsum.h"
#include "common/xsum_f32.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>


struct xsum {
    int nseg;
    size_t *len;          /* elements per segment */
    size_t *off;          /* first element of each segment */
    size_t count;         /* all elements */
    int32_t *tops;        /* per segment: XSUM_EMPTY, a bin, XSUM_NONFINITE */
    int64_t *limbs;       /* count * XSUM_LIMBS */
};

xsum_t *xsum_new(const size_t *len, int nseg)
{
    if (nseg < 1 || !len)
        return NULL;
    xsum_t *x = calloc(1, sizeof *x);
    if (!x)
        return NULL;
    x->nseg = nseg;
    x->len = calloc((size_t)nseg, sizeof *x->len);
    x->off = calloc((size_t)nseg, sizeof *x->off);
    x->tops = calloc((size_t)nseg, sizeof *x->tops);
    if (!x->len || !x->off || !x->tops) {
        xsum_destroy(&x);
        return NULL;
    }
    for (int s = 0; s < nseg; s++) {
        x->len[s] = len[s];
        x->off[s] = x->count;
        if (len[s] > (SIZE_MAX / sizeof(int64_t) / XSUM_LIMBS) - x->count) {
            xsum_destroy(&x);   /* the limb array's size would overflow */
            return NULL;
        }
        x->count += len[s];
    }
    /* at least one limb, so an all-empty xsum is no NULL allocation */
    x->limbs = calloc(x->count ? x->count * XSUM_LIMBS : 1, sizeof *x->limbs);
    if (!x->limbs) {
        xsum_destroy(&x);
        return NULL;
    }
    xsum_clear(x);
    return x;
}

void xsum_destroy(xsum_t **self)
{
    if (!self || !*self)
        return;
    free((*self)->len);
    free((*self)->off);
    free((*self)->tops);
    free((*self)->limbs);
    free(*self);
    *self = NULL;
}

void xsum_clear(xsum_t *self)
{
    for (int s = 0; s < self->nseg; s++)
        self->tops[s] = XSUM_EMPTY;
    memset(self->limbs, 0, self->count * XSUM_LIMBS * sizeof *self->limbs);
}

int xsum_segments(const xsum_t *self)
{
    return self->nseg;
}

size_t xsum_len(const xsum_t *self, int seg)
{
    return self->len[seg];
}

size_t xsum_count(const xsum_t *self)
{
    return self->count;
}

const int32_t *xsum_tops(const xsum_t *self)
{
    return self->tops;
}

void xsum_set_tops(xsum_t *self, const int32_t *tops)
{
    memcpy(self->tops, tops, (size_t)self->nseg * sizeof *self->tops);
}

int64_t *xsum_limbs(xsum_t *self)
{
    return self->limbs;
}

/* Segment seg's window moves up to bin `top` (> its own, a bin or EMPTY):
 * the limbs shift down by the difference, the lowest ones dropped. */
static void raise_top(xsum_t *self, int seg, int32_t top)
{
    int32_t own = self->tops[seg];
    self->tops[seg] = top;
    if (own == XSUM_EMPTY)   /* nothing nonzero was added: the limbs are zero */
        return;
    int d = top - own;
    int64_t *L = self->limbs + self->off[seg] * XSUM_LIMBS;
    size_t n = self->len[seg];
    for (size_t e = 0; e < n; e++, L += XSUM_LIMBS)
        xsum_shift(L, d);
}

void xsum_align(xsum_t *self, const int32_t *tops)
{
    for (int s = 0; s < self->nseg; s++) {
        int32_t own = self->tops[s], t = tops[s];
        if (own == XSUM_NONFINITE)
            continue;
        if (t == XSUM_NONFINITE)
            self->tops[s] = XSUM_NONFINITE;
        else if (t > own)
            raise_top(self, s, t);
    }
}

/* Before adding a vector whose largest nonzero magnitude's leading bit is
 * in bin vtop: the segment's window moves up to cover it. 0, or -1 when the
 * segment is non-finite and nothing is to be added. */
static int prepare(xsum_t *self, int seg, int32_t vtop)
{
    int32_t own = self->tops[seg];
    if (own == XSUM_NONFINITE)
        return -1;
    if (vtop > own)
        raise_top(self, seg, vtop);
    return 0;
}

void xsum_add_f32(xsum_t *self, int seg, const float *x)
{
    size_t n = self->len[seg];
    if (self->tops[seg] == XSUM_NONFINITE)
        return;
    /* the largest magnitude's bits: |x| orders like its bits as an integer */
    uint32_t amax = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t b;
        memcpy(&b, &x[i], sizeof b);
        b &= 0x7fffffffu;
        amax = b > amax ? b : amax;
    }
    int32_t vtop = xsum_top_f32(amax);
    if (vtop == XSUM_NONFINITE) {
        self->tops[seg] = XSUM_NONFINITE;
        return;
    }
    if (vtop == XSUM_EMPTY || prepare(self, seg, vtop) < 0)
        return;
    int32_t top = self->tops[seg];
    int64_t *L = self->limbs + self->off[seg] * XSUM_LIMBS;
    for (size_t i = 0; i < n; i++, L += XSUM_LIMBS) {
        uint32_t b;
        memcpy(&b, &x[i], sizeof b);
        xsum_add_bits_f32(L, top, b);
    }
}

void xsum_add_f64(xsum_t *self, int seg, const double *x)
{
    size_t n = self->len[seg];
    if (self->tops[seg] == XSUM_NONFINITE)
        return;
    uint64_t amax = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t b;
        memcpy(&b, &x[i], sizeof b);
        b &= UINT64_C(0x7fffffffffffffff);
        amax = b > amax ? b : amax;
    }
    if (amax >= UINT64_C(0x7ff0000000000000)) {
        self->tops[seg] = XSUM_NONFINITE;
        return;
    }
    if (amax == 0)
        return;
    uint64_t ex = amax >> 52;
    int p = ex ? (int)ex - 1023 : (63 - __builtin_clzll(amax)) - 1074;
    if (prepare(self, seg, xsum_bin_of(p)) < 0)
        return;
    int top = self->tops[seg];
    int64_t *L = self->limbs + self->off[seg] * XSUM_LIMBS;
    for (size_t i = 0; i < n; i++, L += XSUM_LIMBS) {
        uint64_t b;
        memcpy(&b, &x[i], sizeof b);
        uint64_t e = (b >> 52) & 0x7ffu;
        uint64_t m = (b & ((UINT64_C(1) << 52) - 1)) | (e ? UINT64_C(1) << 52 : 0);
        int q = (int)(e ? e : 1) - 1075 - XSUM_BASE;   /* in [6, 2051] */
        int b0 = q / XSUM_BITS, r = q - b0 * XSUM_BITS;
        /* m << r has up to 82 bits: three slices, taken without the shift
         * overflowing (r <= 29) */
        int64_t sign = -(int64_t)(b >> 63);
        int64_t s0 = xsum_signed_slice((m << r) & XSUM_MASK, sign);
        int64_t s1 = xsum_signed_slice((m >> (XSUM_BITS - r)) & XSUM_MASK, sign);
        int64_t s2 = xsum_signed_slice(m >> (2 * XSUM_BITS - r), sign);
        int k0 = top - b0;
        L[0] += (k0 == 0 ? s0 : 0) + (k0 == 1 ? s1 : 0) + (k0 == 2 ? s2 : 0);
        L[1] += (k0 == 1 ? s0 : 0) + (k0 == 2 ? s1 : 0) + (k0 == 3 ? s2 : 0);
        L[2] += (k0 == 2 ? s0 : 0) + (k0 == 3 ? s1 : 0) + (k0 == 4 ? s2 : 0);
    }
}

void xsum_get_f32(const xsum_t *self, int seg, float *out)
{
    size_t n = self->len[seg];
    int32_t top = self->tops[seg];
    const int64_t *L = self->limbs + self->off[seg] * XSUM_LIMBS;
    for (size_t i = 0; i < n; i++, L += XSUM_LIMBS) {
        uint32_t b32 = xsum_bits_f32(L, top);
        memcpy(&out[i], &b32, sizeof b32);
    }
}

void xsum_get_f64(const xsum_t *self, int seg, double *out)
{
    size_t n = self->len[seg];
    int32_t top = self->tops[seg];
    if (top == XSUM_NONFINITE || top == XSUM_EMPTY) {
        for (size_t i = 0; i < n; i++)
            out[i] = top == XSUM_EMPTY ? 0.0 : NAN;
        return;
    }
    const int64_t *L = self->limbs + self->off[seg] * XSUM_LIMBS;
    for (size_t i = 0; i < n; i++, L += XSUM_LIMBS) {
        uint64_t sign, b = xsum_round_bits(xsum_window(L), xsum_window_exp(top), 53, -1074,
                                           UINT64_C(0x7ff0000000000000), &sign);
        b |= sign << 63;
        memcpy(&out[i], &b, sizeof b);
    }
}
