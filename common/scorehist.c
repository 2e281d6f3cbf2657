#include "common/scorehist.h"

#include <math.h>

uint16_t prob_quantize(float p)
{
    if (!(p > 0.0f))
        return 0; /* also NaN: a NaN row has no probability */
    if (p >= 1.0f)
        return (uint16_t)PROB_RES;
    /* the CSV prints q itself ("%u.%04u"), so whatever this rounding does
     * at a half-way float, the printed value and the counted bin agree */
    return (uint16_t)floor((double)p * PROB_RES + 0.5);
}

static void s_totals(const uint32_t *pos, const uint32_t *neg, size_t bins, uint64_t *p,
                     uint64_t *n)
{
    *p = *n = 0;
    for (size_t q = 0; q < bins; q++) {
        *p += pos[q];
        *n += neg[q];
    }
}

size_t scorehist_walk(const uint32_t *pos, const uint32_t *neg, size_t bins,
                      scorehist_point_fn fn, void *arg)
{
    uint64_t p, n, tp = 0, fp = 0;
    size_t points = 0;
    s_totals(pos, neg, bins, &p, &n);
    for (size_t q = bins; q-- > 0;) {
        if (!pos[q] && !neg[q])
            continue; /* no sample has this score: not a threshold */
        tp += pos[q];
        fp += neg[q];
        if (fn)
            fn(tp, fp, p, n, (uint32_t)q, arg);
        points++;
    }
    return points;
}

double scorehist_roc_auc(const uint32_t *pos, const uint32_t *neg, size_t bins)
{
    uint64_t p, n;
    s_totals(pos, neg, bins, &p, &n);
    if (!p || !n)
        return NAN;
    /* trapezoid in integers: 2 * area * p * n = sum dfp * (tp_prev + tp) */
    double twice = 0.0;
    uint64_t tp = 0;
    for (size_t q = bins; q-- > 0;) {
        uint64_t t = tp + pos[q];
        twice += (double)neg[q] * (double)(tp + t);
        tp = t;
    }
    return twice / (2.0 * (double)p * (double)n);
}

double scorehist_ap(const uint32_t *pos, const uint32_t *neg, size_t bins)
{
    uint64_t p, n;
    s_totals(pos, neg, bins, &p, &n);
    if (!p)
        return NAN;
    double ap = 0.0;
    uint64_t tp = 0, fp = 0;
    for (size_t q = bins; q-- > 0;) {
        if (!pos[q] && !neg[q])
            continue;
        tp += pos[q];
        fp += neg[q];
        /* recall grows by pos[q] / p at this threshold; precision tp/(tp+fp) */
        if (pos[q])
            ap += ((double)pos[q] / (double)p) * ((double)tp / (double)(tp + fp));
    }
    return ap;
}

uint32_t calib_bin(uint32_t q)
{
    return q >= PROB_RES ? CALIB_BINS : (uint32_t)((uint64_t)q * CALIB_BINS / PROB_RES);
}

double calib_ece(const uint64_t *count, const uint64_t *correct, const uint64_t *qsum)
{
    uint64_t total = 0;
    double num = 0.0;
    for (uint32_t b = 0; b <= CALIB_BINS; b++) {
        total += count[b];
        /* |correct * RES - qsum| is an exact integer */
        uint64_t c = correct[b] * PROB_RES;
        num += (double)(c > qsum[b] ? c - qsum[b] : qsum[b] - c);
    }
    return total ? num / ((double)PROB_RES * (double)total) : NAN;
}
