/* The reference convolutions (gpud/cpu/ref_conv.c) against their
 * definition: one double accumulator per output element, summed in the
 * order below (the plain loops ref_ops.c had before the lanes), bit for
 * bit, over shapes with channel counts below, at and past the lane width,
 * strides, padding wider than the kernel's reach and 1x1 kernels. The
 * emulator's fake cuDNN and the ref backend both run these, and the ref
 * backend's goldens and the bitwise tests rest on their exact bits. */
#include "gpud/cpu/ref_ops.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int s_fail;

/* The definition, one output at a time. */
static double conv_point(const float *x, int ic, int ih, int iw, const float *w, int kh,
                         int kw, int y0, int x0)
{
    double acc = 0.0;
    for (int c = 0; c < ic; c++)
        for (int i = 0; i < kh; i++) {
            int yy = y0 + i;
            if (yy < 0 || yy >= ih)
                continue;
            const float *xr = x + ((size_t)c * ih + yy) * iw;
            const float *wr = w + ((size_t)c * kh + i) * kw;
            for (int j = 0; j < kw; j++) {
                int xx = x0 + j;
                if (xx >= 0 && xx < iw)
                    acc += (double)xr[xx] * wr[j];
            }
        }
    return acc;
}

static void naive_fwd(const float *x, int n, int ic, int ih, int iw, const float *w,
                const float *bias, int oc, int kh, int kw, int sh, int sw, int ph, int pw,
                float *y, int oh, int ow)
{
    for (int b = 0; b < n; b++)
        for (int o = 0; o < oc; o++) {
            const float *xb = x + (size_t)b * ic * ih * iw;
            const float *wo = w + (size_t)o * ic * kh * kw;
            float *yo = y + ((size_t)b * oc + o) * oh * ow;
            for (int r = 0; r < oh; r++)
                for (int s = 0; s < ow; s++) {
                    double acc = conv_point(xb, ic, ih, iw, wo, kh, kw, r * sh - ph, s * sw - pw);
                    yo[(size_t)r * ow + s] = (float)(acc + (bias ? bias[o] : 0.0));
                }
        }
}

static void naive_bwd_data(const float *gy, int n, int ic, int ih, int iw, const float *w,
                         int oc, int kh, int kw, int sh, int sw, int ph, int pw, float *gx,
                         int oh, int ow)
{
    for (int b = 0; b < n; b++)
        for (int c = 0; c < ic; c++) {
            float *gxp = gx + ((size_t)b * ic + c) * ih * iw;
            for (int yy = 0; yy < ih; yy++)
                for (int xx = 0; xx < iw; xx++) {
                    double acc = 0.0;
                    /* output rows r with r*sh - ph + i == yy for some tap i */
                    for (int i = 0; i < kh; i++) {
                        int rr = yy + ph - i;
                        if (rr < 0 || rr % sh || rr / sh >= oh)
                            continue;
                        int r = rr / sh;
                        for (int j = 0; j < kw; j++) {
                            int ss = xx + pw - j;
                            if (ss < 0 || ss % sw || ss / sw >= ow)
                                continue;
                            int s = ss / sw;
                            for (int o = 0; o < oc; o++)
                                acc += (double)gy[(((size_t)b * oc + o) * oh + r) * ow + s] *
                                       w[(((size_t)o * ic + c) * kh + i) * kw + j];
                        }
                    }
                    gxp[(size_t)yy * iw + xx] = (float)acc;
                }
        }
}

static void naive_bwd_weights(const float *x, int n, int ic, int ih, int iw, const float *gy,
                            int oc, int kh, int kw, int sh, int sw, int ph, int pw,
                            float *gw, float *gb, int oh, int ow)
{
    for (int o = 0; o < oc; o++) {
        if (gb) {
            double acc = 0.0;
            for (int b = 0; b < n; b++)
                for (int p = 0; p < oh * ow; p++)
                    acc += gy[((size_t)b * oc + o) * oh * ow + p];
            gb[o] = (float)acc;
        }
        if (!gw)
            continue;
        for (int c = 0; c < ic; c++)
            for (int i = 0; i < kh; i++)
                for (int j = 0; j < kw; j++) {
                    double acc = 0.0;
                    for (int b = 0; b < n; b++) {
                        const float *xp = x + ((size_t)b * ic + c) * ih * iw;
                        const float *gp = gy + ((size_t)b * oc + o) * oh * ow;
                        for (int r = 0; r < oh; r++) {
                            int yy = r * sh - ph + i;
                            if (yy < 0 || yy >= ih)
                                continue;
                            for (int s = 0; s < ow; s++) {
                                int xx = s * sw - pw + j;
                                if (xx >= 0 && xx < iw)
                                    acc += (double)gp[r * ow + s] * xp[yy * iw + xx];
                            }
                        }
                    }
                    gw[(((size_t)o * ic + c) * kh + i) * kw + j] = (float)acc;
                }
    }
}

static float *randv(size_t n, unsigned seed)
{
    float *v = malloc((n ? n : 1) * sizeof *v);
    uint64_t z = seed;
    for (size_t i = 0; v && i < n; i++) {
        z = mix64(z + MIX64_GOLDEN);
        /* both signs and magnitudes 2^-30 .. 2^30: products that cancel
         * and ones far below the running sum, so that a sum taken in
         * another order ends in other float bits */
        double m = 1.0 + (double)(z >> 40) / 16777216.0;
        int e = (int)((z >> 8) % 61) - 30;
        v[i] = (float)ldexp(z & 1 ? -m : m, e);
    }
    return v;
}

static void same(const char *what, const int *d, const float *a, const float *b, size_t n)
{
    if (memcmp(a, b, n * sizeof *a) == 0)
        return;
    size_t i = 0;
    while (i < n && memcmp(&a[i], &b[i], sizeof *a) == 0)
        i++;
    fprintf(stderr, "FAIL %s n%d ic%d %dx%d oc%d k%dx%d s%d,%d p%d,%d: element %zu is %.9g, "
            "the definition %.9g\n", what, d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7], d[8],
            d[9], d[10], i, (double)a[i], (double)b[i]);
    s_fail++;
}

/* d: n ic ih iw oc kh kw sh sw ph pw */
static void check(const int *d)
{
    int n = d[0], ic = d[1], ih = d[2], iw = d[3], oc = d[4], kh = d[5], kw = d[6], sh = d[7],
        sw = d[8], ph = d[9], pw = d[10];
    int oh = (ih + 2 * ph - kh) / sh + 1, ow = (iw + 2 * pw - kw) / sw + 1;
    size_t nx = (size_t)n * ic * ih * iw, nw = (size_t)oc * ic * kh * kw,
           ny = (size_t)n * oc * oh * ow;
    float *x = randv(nx, 1 + (unsigned)d[1]), *w = randv(nw, 2 + (unsigned)d[4]),
          *b = randv(oc, 3), *gy = randv(ny, 4 + (unsigned)d[2]);
    float *y1 = malloc(ny * 4), *y2 = malloc(ny * 4), *gx1 = malloc(nx * 4),
          *gx2 = malloc(nx * 4), *gw1 = malloc(nw * 4), *gw2 = malloc(nw * 4),
          *gb1 = malloc((size_t)oc * 4), *gb2 = malloc((size_t)oc * 4);
    if (!x || !w || !b || !gy || !y1 || !y2 || !gx1 || !gx2 || !gw1 || !gw2 || !gb1 || !gb2) {
        fprintf(stderr, "FAIL out of memory\n");
        exit(1);
    }
    ref_conv2d(x, n, ic, ih, iw, w, b, oc, kh, kw, sh, sw, ph, pw, y1, oh, ow);
    naive_fwd(x, n, ic, ih, iw, w, b, oc, kh, kw, sh, sw, ph, pw, y2, oh, ow);
    same("forward", d, y1, y2, ny);
    ref_conv2d(x, n, ic, ih, iw, w, NULL, oc, kh, kw, sh, sw, ph, pw, y1, oh, ow);
    naive_fwd(x, n, ic, ih, iw, w, NULL, oc, kh, kw, sh, sw, ph, pw, y2, oh, ow);
    same("forward without bias", d, y1, y2, ny);
    ref_conv2d_bwd_data(gy, n, ic, ih, iw, w, oc, kh, kw, sh, sw, ph, pw, gx1, oh, ow);
    naive_bwd_data(gy, n, ic, ih, iw, w, oc, kh, kw, sh, sw, ph, pw, gx2, oh, ow);
    same("backward data", d, gx1, gx2, nx);
    ref_conv2d_bwd_weights(x, n, ic, ih, iw, gy, oc, kh, kw, sh, sw, ph, pw, gw1, gb1, oh, ow);
    naive_bwd_weights(x, n, ic, ih, iw, gy, oc, kh, kw, sh, sw, ph, pw, gw2, gb2, oh, ow);
    same("backward weights", d, gw1, gw2, nw);
    same("backward bias", d, gb1, gb2, (size_t)oc);
    ref_conv2d_bwd_weights(x, n, ic, ih, iw, gy, oc, kh, kw, sh, sw, ph, pw, NULL, gb1, oh, ow);
    same("backward bias alone", d, gb1, gb2, (size_t)oc);
    free(x), free(w), free(b), free(gy), free(y1), free(y2), free(gx1), free(gx2);
    free(gw1), free(gw2), free(gb1), free(gb2);
}

/* The order itself: three terms 2^53, 1, -2^53 in the defined order sum to
 * 0 (2^53 + 1 rounds back to 2^53); in any other order to 1 or -1. Each
 * direction gets them along its summation axis (forward: input channels;
 * backward data: output channels; backward weights: output columns), for
 * more outputs than lanes, every output wanting 0. */
static void check_order(void)
{
    const float big = 134217728.0f, half = 67108864.0f;   /* 2^27, 2^26 */
    enum { L = 17 };   /* more outputs than lanes */
    float x[3 * L], w[3 * L], g[3 * L], out[3 * L];   /* g: the bias gradient */
    for (int o = 0; o < L; o++)   /* forward: x[c] * w[o][c] over c */
        for (int c = 0; c < 3; c++)
            w[o * 3 + c] = c == 1 ? 1.0f : half;
    float xs[3] = {big, 1.0f, -big};
    ref_conv2d(xs, 1, 3, 1, 1, w, NULL, L, 1, 1, 1, 1, 0, 0, out, 1, 1);
    for (int o = 0; o < L; o++)
        if (out[o] != 0.0f) {
            fprintf(stderr, "FAIL forward order: output %d is %g, not 0\n", o, (double)out[o]);
            s_fail++;
        }
    for (int o = 0; o < 3; o++)   /* backward data: gy[o] * w[o][c] over o */
        for (int c = 0; c < L; c++)
            w[o * L + c] = o == 1 ? 1.0f : half;
    ref_conv2d_bwd_data(xs, 1, L, 1, 1, w, 3, 1, 1, 1, 1, 0, 0, out, 1, 1);
    for (int c = 0; c < L; c++)
        if (out[c] != 0.0f) {
            fprintf(stderr, "FAIL backward data order: input %d is %g, not 0\n", c,
                    (double)out[c]);
            s_fail++;
        }
    for (int c = 0; c < L; c++)   /* backward weights: gy[s] * x[c][s] over s */
        for (int s = 0; s < 3; s++)
            x[c * 3 + s] = s == 1 ? 1.0f : half;
    ref_conv2d_bwd_weights(x, 1, L, 1, 3, xs, 1, 1, 1, 1, 1, 0, 0, out, g, 1, 3);
    for (int c = 0; c < L; c++)
        if (out[c] != 0.0f) {
            fprintf(stderr, "FAIL backward weights order: weight %d is %g, not 0\n", c,
                    (double)out[c]);
            s_fail++;
        }
}

int main(void)
{
    check_order();
    static const int shapes[][11] = {
        /* n ic ih iw oc kh kw sh sw ph pw */
        {2, 3, 9, 11, 5, 3, 3, 1, 1, 1, 1},      /* fewer channels than lanes */
        {1, 8, 7, 7, 8, 3, 3, 1, 1, 1, 1},       /* exactly the lane width */
        {2, 13, 10, 9, 17, 3, 3, 2, 2, 1, 1},    /* past it, strided */
        {3, 16, 8, 8, 24, 1, 1, 1, 1, 0, 0},     /* 1x1 */
        {2, 9, 6, 7, 11, 1, 1, 2, 2, 0, 0},      /* 1x1 strided (a downsample) */
        {1, 3, 15, 13, 10, 7, 7, 2, 2, 3, 3},    /* a stem */
        {2, 5, 5, 6, 3, 3, 5, 1, 2, 2, 0},       /* unequal kernel, stride and pad */
        {1, 2, 4, 4, 9, 3, 3, 1, 1, 2, 2},       /* padding past the kernel's reach */
        {1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        check(shapes[i]);
    printf("%s\n", s_fail ? "FAILED" : "all convolutions bit for bit");
    return s_fail ? 1 : 0;
}
