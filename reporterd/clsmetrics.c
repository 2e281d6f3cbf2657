#include "reporterd/clsmetrics.h"

#include <stdlib.h>
#include <string.h>

/* numpy/core/src/umath/loops_utils.h.src: pairwise_sum with PW_BLOCKSIZE
 * 128 and an 8-way unrolled inner loop. */
double clsmetrics_pairwise_sum(const double *a, uint64_t n)
{
    if (n < 8) {
        double res = 0.0;
        for (uint64_t i = 0; i < n; i++)
            res += a[i];
        return res;
    }
    if (n <= 128) {
        double r[8];
        memcpy(r, a, sizeof r);
        uint64_t i;
        for (i = 8; i < n - (n % 8); i += 8)
            for (int j = 0; j < 8; j++)
                r[j] += a[i + j];
        double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++)
            res += a[i];
        return res;
    }
    uint64_t n2 = n / 2;
    n2 -= n2 % 8;
    return clsmetrics_pairwise_sum(a, n2) + clsmetrics_pairwise_sum(a + n2, n - n2);
}

static double s_div(uint64_t num, uint64_t den) { return den ? (double)num / (double)den : 0.0; }

static double s_f1(double p, double r)
{
    double denom = p + r;
    if (denom == 0.0)
        denom = 1.0;
    return 2.0 * p * r / denom;
}

/* np.average(values, weights=w): sum(values*w)/sum(w), pairwise both. */
static void s_averages(clsmetrics_t *self, double *tmp)
{
    uint32_t nc = self->nc;
    const cls_class_t *pc = self->per_class;
    double field[3];
    for (int f = 0; f < 3; f++) {
        for (uint32_t c = 0; c < nc; c++)
            tmp[c] = f == 0 ? pc[c].precision : f == 1 ? pc[c].recall : pc[c].f1;
        field[f] = clsmetrics_pairwise_sum(tmp, nc) / (double)nc;
    }
    self->macro = (cls_avg_t){field[0], field[1], field[2]};
    if (self->total == 0) {
        /* sklearn: no support at all -> precision/f1 0 (zero_division) */
        self->weighted = (cls_avg_t){0.0, 0.0, 0.0};
        return;
    }
    for (int f = 0; f < 3; f++) {
        for (uint32_t c = 0; c < nc; c++) {
            double v = f == 0 ? pc[c].precision : f == 1 ? pc[c].recall : pc[c].f1;
            tmp[c] = v * (double)pc[c].support;
        }
        field[f] = clsmetrics_pairwise_sum(tmp, nc) / (double)self->total;
    }
    self->weighted = (cls_avg_t){field[0], field[1], field[2]};
}

int clsmetrics_compute(const ev_cell_t *cells, uint64_t ncells, uint32_t nc,
                       clsmetrics_t *out)
{
    return clsmetrics_compute_labels(cells, ncells, nc, nc, out);
}

int clsmetrics_compute_labels(const ev_cell_t *cells, uint64_t ncells, uint32_t nc,
                              uint32_t nl, clsmetrics_t *out)
{
    memset(out, 0, sizeof *out);
    if (nc == 0 || nl == 0 || nl > nc)
        return -1;
    out->per_class = calloc(nc, sizeof *out->per_class);
    double *tmp = calloc(nc, sizeof *tmp);
    if (!out->per_class || !tmp) {
        free(tmp);
        clsmetrics_clear(out);
        return -1;
    }
    out->nc = nl;
    out->micro_is_accuracy = true;
    uint64_t tp_all = 0, pred_all = 0;
    for (uint64_t i = 0; i < ncells; i++) {
        const ev_cell_t *c = &cells[i];
        if (c->truth >= nc || c->pred >= nc)
            continue;   /* event_validate refuses these; a caller's bug must not write out */
        out->per_class[c->truth].support += c->count;
        out->per_class[c->pred].predicted += c->count;
        if (c->truth == c->pred)
            out->per_class[c->truth].tp += c->count;
    }
    /* sklearn prints "micro avg" when the labels are not exactly the ones
     * seen in y_true and y_pred: a labelled class never seen, or a sample
     * (true or predicted) outside the labels */
    for (uint32_t c = nl; c < nc; c++)
        if (out->per_class[c].support || out->per_class[c].predicted)
            out->micro_is_accuracy = false;
    for (uint32_t c = 0; c < nl; c++) {
        cls_class_t *k = &out->per_class[c];
        k->precision = s_div(k->tp, k->predicted);
        k->recall = s_div(k->tp, k->support);
        k->f1 = s_f1(k->precision, k->recall);
        out->total += k->support;
        tp_all += k->tp;
        pred_all += k->predicted;
        if (k->support == 0 && k->predicted == 0)
            out->micro_is_accuracy = false;
    }
    double mp = s_div(tp_all, pred_all), mr = s_div(tp_all, out->total);
    out->micro = (cls_avg_t){mp, mr, s_f1(mp, mr)};
    s_averages(out, tmp);
    free(tmp);
    return 0;
}

void clsmetrics_clear(clsmetrics_t *self)
{
    if (!self)
        return;
    free(self->per_class);
    memset(self, 0, sizeof *self);
}
