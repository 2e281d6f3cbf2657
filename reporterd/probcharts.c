#include "reporterd/probcharts.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/errbuf.h"
#include "common/scorehist.h"
#include "reporterd/plot.h"

typedef struct {
    double *x, *y;
    size_t n;
    int pr; /* 0: ROC (fpr, tpr); 1: PR (recall, precision) */
} points_t;

static void s_point(uint64_t tp, uint64_t fp, uint64_t p, uint64_t n, uint32_t q, void *arg)
{
    (void)q;
    points_t *pts = arg;
    if (pts->pr) {
        pts->x[pts->n] = p ? (double)tp / (double)p : NAN;
        pts->y[pts->n] = (double)tp / (double)(tp + fp);
    } else {
        pts->x[pts->n] = n ? (double)fp / (double)n : NAN;
        pts->y[pts->n] = p ? (double)tp / (double)p : NAN;
    }
    pts->n++;
}

static int s_write(plot_t *p, const char *dir, const char *stem, int w, int h, char *err,
                   size_t errlen)
{
    char png[4096], svg[4096];
    snprintf(png, sizeof png, "%s/%s.png", dir, stem);
    snprintf(svg, sizeof svg, "%s/%s.svg", dir, stem);
    if (plot_write_png(p, png, w, h, err, errlen) != 0)
        return -1;
    return plot_write_svg(p, svg, w, h, err, errlen);
}

static int s_reliability(const ev_metric_t *m, const char *dir, int w, int h, char *err,
                         size_t errlen)
{
    char title[128];
    snprintf(title, sizeof title, "Reliability (ECE %.4f, 15 bins)", m->ece);
    plot_t *p = plot_new(title, "mean confidence (top-1)", "accuracy");
    double x[EVENT_CALIB_SLOTS], y[EVENT_CALIB_SLOTS], diag[2] = {0, 1};
    size_t n = 0;
    for (uint32_t b = 0; b < EVENT_CALIB_SLOTS; b++) {
        uint64_t c = m->calib[b];
        if (!c)
            continue; /* an empty bin has no accuracy */
        x[n] = (double)m->calib[2 * EVENT_CALIB_SLOTS + b] / (PROB_RES * (double)c);
        y[n] = (double)m->calib[EVENT_CALIB_SLOTS + b] / (double)c;
        n++;
    }
    int rc = -1;
    if (p && plot_add_series(p, "perfect calibration", diag, diag, 2) == 0 &&
        (!n || plot_add_series(p, "accuracy per bin", x, y, n) == 0))
        rc = s_write(p, dir, "reliability", w, h, err, errlen);
    else
        err_set(err, errlen, "out of memory for the reliability diagram");
    plot_destroy(&p);
    return rc;
}

static int s_curves(const ev_metric_t *m, int pr, const char *dir, int w, int h, char *err,
                    size_t errlen)
{
    plot_t *p = pr ? plot_new("Precision-recall, worst classes by AP", "recall", "precision")
                   : plot_new("ROC, worst classes by AP", "false positive rate",
                              "true positive rate");
    points_t pts = {malloc((PROB_BINS + 1) * sizeof(double)),
                    malloc((PROB_BINS + 1) * sizeof(double)), 0, pr};
    double diag[2] = {0, 1};
    int ok = p && pts.x && pts.y && (pr || plot_add_series(p, "chance", diag, diag, 2) == 0);
    for (uint32_t i = 0; ok && i < m->ncurves; i++) {
        int32_t c = m->curve_class[i];
        char name[96];
        snprintf(name, sizeof name, "%.40s (%s %.3f)",
                 m->class_names && m->class_names[c] ? m->class_names[c] : "?",
                 pr ? "AP" : "AUC", pr ? m->ap[c] : m->auc[c]);
        pts.n = 0;
        if (!pr) { /* the ROC starts at (0, 0) as sklearn's roc_curve */
            pts.x[0] = pts.y[0] = 0;
            pts.n = 1;
        }
        scorehist_walk(m->curve_pos + (size_t)i * PROB_BINS, m->curve_neg + (size_t)i * PROB_BINS,
                       PROB_BINS, s_point, &pts);
        ok = plot_add_series(p, name, pts.x, pts.y, pts.n) == 0;
    }
    int rc = -1;
    if (ok)
        rc = s_write(p, dir, pr ? "pr_worst" : "roc_worst", w, h, err, errlen);
    else
        err_set(err, errlen, "out of memory for the %s curves", pr ? "PR" : "ROC");
    free(pts.x);
    free(pts.y);
    plot_destroy(&p);
    return rc;
}

int probcharts_write(const ev_metric_t *m, const char *dir, int width, int height, char *err,
                     size_t errlen)
{
    if (!m->has_probs)
        return 0;
    if (s_reliability(m, dir, width, height, err, errlen) != 0 ||
        s_curves(m, 0, dir, width, height, err, errlen) != 0 ||
        s_curves(m, 1, dir, width, height, err, errlen) != 0)
        return -1;
    return 0;
}
