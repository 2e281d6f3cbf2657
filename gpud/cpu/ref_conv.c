/* ref_conv — the reference convolutions (ref_ops.h): forward, backward
 * data, backward weights. Each output element is ONE double accumulator
 * summed in a fixed order (forward: input channel, kernel row, kernel
 * column; backward data: kernel row, column, output channel; backward
 * weights: sample, output row, output column), taps outside the input
 * skipped; the float result is that sum rounded once. That order is the
 * reference's definition: tests/gpud/test_ref_conv.c holds the plain
 * per-element loops and wants these bits from them.
 *
 * Speed without a new order: LANES neighbouring outputs that differ only
 * in one channel (forward: output channels; backward data and weights:
 * input channels) are summed side by side, each in its own accumulator
 * and in its own order, so the adds do not wait on one another and the
 * lanes share vector registers (LANES_ADD; no reassociation: lane k's sum
 * is the same as alone), built for the machine's vector width
 * (simd_clones.h). The operand the lanes read is copied once per call into
 * a layout with the lanes adjacent; without memory for that copy the same
 * sums read it in place, one lane at a time. The suite's ref backend and
 * the cuda emulator's fake cuDNN run every convolution here. */
#include "gpud/cpu/ref_ops.h"

#include <stdlib.h>
#include <string.h>

#include "gpud/simd_clones.h"

#define LANES 16

/* LANES doubles as four parts of PART (GCC's vector extension; one AVX
 * register each in the avx2 / avx512f clones, where they stay in
 * registers: a wider generic vector would be kept in memory; four, so that
 * four adds are in flight while each waits on its own last one): each lane
 * an IEEE double of its own, the arithmetic lane by lane (no contraction:
 * -std=c11 sets -ffp-contract=off, and simd_clones.h keeps it off). */
#define PART (LANES / 4)
typedef double part_d __attribute__((vector_size(PART * sizeof(double))));
/* floats at any float's alignment (GCC lets a vector alias its elements) */
typedef float part_f __attribute__((vector_size(PART * sizeof(float)), aligned(4)));
/* doubles at any double's alignment, to store the parts into an array */
typedef double part_du __attribute__((vector_size(PART * sizeof(double)), aligned(8)));

#define PART_ADD(acc, a, p) ((acc) += (a) * __builtin_convertvector(*(const part_f *)(p), part_d))
/* acc[0..3] += a * p[0 .. LANES). A macro: accumulators passed by address
 * would live in memory under ASan, each add waiting on the last store. */
#define LANES_ADD(acc, a, p)                   \
    do {                                       \
        const float *p_ = (p);                 \
        double a_ = (a);                       \
        PART_ADD(acc##0, a_, p_);              \
        PART_ADD(acc##1, a_, p_ + PART);       \
        PART_ADD(acc##2, a_, p_ + 2 * PART);   \
        PART_ADD(acc##3, a_, p_ + 3 * PART);   \
    } while (0)
#define LANES_OUT(out, acc)                                                                \
    (*(part_du *)(out) = acc##0, *(part_du *)((out) + PART) = acc##1,                      \
     *(part_du *)((out) + 2 * PART) = acc##2, *(part_du *)((out) + 3 * PART) = acc##3)

/* One convolution's dimensions. */
typedef struct {
    int n, ic, ih, iw, oc, kh, kw, sh, sw, ph, pw, oh, ow;
} cv_t;

static int lanes_up(int n)
{
    return (n + LANES - 1) / LANES * LANES;
}

/* Lane l of n (padded to a multiple of LANES, d zeroed) at outer index
 * a = a1 * n2 + a2 (a1 < n1, a2 < n2): src[l * ls + a1 * s1 + a2 * s2] to
 * d[((l / LANES) * n1 * n2 + a) * LANES + l % LANES], so that a block of
 * LANES lanes walks its a contiguously. */
static void lanes_put(float *d, const float *src, int n, size_t ls, size_t n1, size_t s1,
                      size_t n2, size_t s2)
{
    for (int l = 0; l < n; l++)
        for (size_t a1 = 0; a1 < n1; a1++)
            for (size_t a2 = 0; a2 < n2; a2++)
                d[((size_t)(l / LANES) * n1 * n2 + a1 * n2 + a2) * LANES + l % LANES] =
                    src[(size_t)l * ls + a1 * s1 + a2 * s2];
}

/* Output row r of sample b (xb: its input), all columns and channels.
 * wt: lanes_put's blocks of output channels over the taps (c, i, j);
 * NULL: w [oc][taps] in place. */
SIMD_CLONES static void fwd_row(const cv_t *v, const float *xb, const float *w, const float *wt,
                                const float *bias, float *yb, int r)
{
    size_t taps = (size_t)v->ic * v->kh * v->kw;
    for (int s = 0; s < v->ow; s++)
        for (int o0 = 0; o0 < v->oc; o0 += LANES) {
            int nl = v->oc - o0 < LANES ? v->oc - o0 : LANES;
            part_d acc0 = {0}, acc1 = {0}, acc2 = {0}, acc3 = {0};
            float tmp[LANES] = {0};   /* w in place: this tap's lanes gathered */
            for (int c = 0; c < v->ic; c++)
                for (int i = 0; i < v->kh; i++) {
                    int yy = r * v->sh - v->ph + i;
                    if (yy < 0 || yy >= v->ih)
                        continue;
                    const float *xr = xb + ((size_t)c * v->ih + yy) * v->iw;
                    for (int j = 0; j < v->kw; j++) {
                        int xx = s * v->sw - v->pw + j;
                        if (xx < 0 || xx >= v->iw)
                            continue;
                        size_t tap = ((size_t)c * v->kh + i) * v->kw + j;
                        for (int l = 0; !wt && l < nl; l++)
                            tmp[l] = w[(size_t)(o0 + l) * taps + tap];
                        LANES_ADD(acc, (double)xr[xx], wt ? wt + o0 * taps + tap * LANES : tmp);
                    }
                }
            double out[LANES];
            LANES_OUT(out, acc);
            for (int l = 0; l < nl; l++)
                yb[((size_t)(o0 + l) * v->oh + r) * v->ow + s] =
                    (float)(out[l] + (bias ? bias[o0 + l] : 0.0));
        }
}

void ref_conv2d(const float *x, int n, int ic, int ih, int iw, const float *w,
                const float *bias, int oc, int kh, int kw, int sh, int sw, int ph, int pw,
                float *y, int oh, int ow)
{
    cv_t v = {n, ic, ih, iw, oc, kh, kw, sh, sw, ph, pw, oh, ow};
    size_t taps = (size_t)ic * kh * kw;
    float *wt = calloc(taps * lanes_up(oc), sizeof *wt);
    if (wt)
        lanes_put(wt, w, oc, taps, taps, 1, 1, 0);
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < n; b++)
        for (int r = 0; r < oh; r++)
            fwd_row(&v, x + (size_t)b * ic * ih * iw, w, wt, bias, y + (size_t)b * oc * oh * ow,
                    r);
    free(wt);
}

/* Input row yy of sample b (gyb: its output gradient), all columns and
 * channels. wt: lanes_put's blocks of input channels over (i, j, o); NULL:
 * w [o][c][i][j] in place. */
SIMD_CLONES static void bwd_data_row(const cv_t *v, const float *gyb, const float *w,
                                     const float *wt, float *gxb, int yy)
{
    size_t per_c = (size_t)v->kh * v->kw, per_o = (size_t)v->ic * per_c;
    size_t outer = per_c * v->oc;
    for (int xx = 0; xx < v->iw; xx++)
        for (int c0 = 0; c0 < v->ic; c0 += LANES) {
            int nl = v->ic - c0 < LANES ? v->ic - c0 : LANES;
            part_d acc0 = {0}, acc1 = {0}, acc2 = {0}, acc3 = {0};
            float tmp[LANES] = {0};   /* w in place: this (tap, o)'s lanes gathered */
            /* output rows r with r*sh - ph + i == yy for some tap i */
            for (int i = 0; i < v->kh; i++) {
                int rr = yy + v->ph - i;
                if (rr < 0 || rr % v->sh || rr / v->sh >= v->oh)
                    continue;
                int r = rr / v->sh;
                for (int j = 0; j < v->kw; j++) {
                    int ss = xx + v->pw - j;
                    if (ss < 0 || ss % v->sw || ss / v->sw >= v->ow)
                        continue;
                    int s = ss / v->sw;
                    size_t t = (size_t)i * v->kw + j;
                    const float *wb = wt ? wt + c0 * outer + t * v->oc * LANES : NULL;
                    for (int o = 0; o < v->oc; o++) {
                        double g = gyb[((size_t)o * v->oh + r) * v->ow + s];
                        for (int l = 0; !wt && l < nl; l++)
                            tmp[l] = w[o * per_o + (size_t)(c0 + l) * per_c + t];
                        LANES_ADD(acc, g, wt ? wb + (size_t)o * LANES : tmp);
                    }
                }
            }
            double out[LANES];
            LANES_OUT(out, acc);
            for (int l = 0; l < nl; l++)
                gxb[((size_t)(c0 + l) * v->ih + yy) * v->iw + xx] = (float)out[l];
        }
}

void ref_conv2d_bwd_data(const float *gy, int n, int ic, int ih, int iw, const float *w,
                         int oc, int kh, int kw, int sh, int sw, int ph, int pw, float *gx,
                         int oh, int ow)
{
    cv_t v = {n, ic, ih, iw, oc, kh, kw, sh, sw, ph, pw, oh, ow};
    /* w is [o][c][taps]: lane c at stride taps, (tap, o) the outer index */
    size_t per_c = (size_t)kh * kw;
    int icp = lanes_up(ic);
    float *wt = calloc(per_c * oc * (size_t)icp, sizeof *wt);
    if (wt)
        lanes_put(wt, w, ic, per_c, per_c, 1, (size_t)oc, (size_t)ic * per_c);
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < n; b++)
        for (int yy = 0; yy < ih; yy++)
            bwd_data_row(&v, gy + (size_t)b * oc * oh * ow, w, wt, gx + (size_t)b * ic * ih * iw,
                         yy);
    free(wt);
}

/* gw of output channel o, all input channels and taps. xt: lanes_put's
 * blocks of input channels over (b, pixel); NULL: x [b][c][pixel] in
 * place. */
SIMD_CLONES static void bwd_weights_oc(const cv_t *v, const float *x, const float *xt,
                                       const float *gy, float *gw, int o)
{
    size_t hw = (size_t)v->ih * v->iw;
    for (int c0 = 0; c0 < v->ic; c0 += LANES) {
        int nl = v->ic - c0 < LANES ? v->ic - c0 : LANES;
        for (int i = 0; i < v->kh; i++)
            for (int j = 0; j < v->kw; j++) {
                part_d acc0 = {0}, acc1 = {0}, acc2 = {0}, acc3 = {0};
                float tmp[LANES] = {0};   /* x in place: this pixel's lanes gathered */
                for (int b = 0; b < v->n; b++) {
                    const float *gp = gy + ((size_t)b * v->oc + o) * v->oh * v->ow;
                    for (int r = 0; r < v->oh; r++) {
                        int yy = r * v->sh - v->ph + i;
                        if (yy < 0 || yy >= v->ih)
                            continue;
                        for (int s = 0; s < v->ow; s++) {
                            int xx = s * v->sw - v->pw + j;
                            if (xx < 0 || xx >= v->iw)
                                continue;
                            double g = gp[r * v->ow + s];
                            size_t px = (size_t)yy * v->iw + xx;
                            for (int l = 0; !xt && l < nl; l++)
                                tmp[l] = x[((size_t)b * v->ic + c0 + l) * hw + px];
                            size_t at = (size_t)c0 * v->n * hw + ((size_t)b * hw + px) * LANES;
                            LANES_ADD(acc, g, xt ? xt + at : tmp);
                        }
                    }
                }
                double out[LANES];
                LANES_OUT(out, acc);
                for (int l = 0; l < nl; l++)
                    gw[(((size_t)o * v->ic + c0 + l) * v->kh + i) * v->kw + j] = (float)out[l];
            }
    }
}

void ref_conv2d_bwd_weights(const float *x, int n, int ic, int ih, int iw, const float *gy,
                            int oc, int kh, int kw, int sh, int sw, int ph, int pw,
                            float *gw, float *gb, int oh, int ow)
{
    cv_t v = {n, ic, ih, iw, oc, kh, kw, sh, sw, ph, pw, oh, ow};
    /* xt[b][pixel][c]: the LANES input channels of a pixel adjacent */
    size_t hw = (size_t)ih * iw;
    int icp = lanes_up(ic);
    float *xt = gw ? calloc((size_t)n * hw * icp, sizeof *xt) : NULL;
    if (xt)
        lanes_put(xt, x, ic, hw, (size_t)n, (size_t)ic * hw, hw, 1);
#pragma omp parallel for schedule(static)
    for (int o = 0; o < oc; o++) {
        if (gb) {
            double acc = 0.0;
            for (int b = 0; b < n; b++)
                for (int p = 0; p < oh * ow; p++)
                    acc += gy[((size_t)b * oc + o) * oh * ow + p];
            gb[o] = (float)acc;
        }
        if (gw)
            bwd_weights_oc(&v, x, xt, gy, gw, o);
    }
    free(xt);
}
