#include "reporterd/chart.h"
#include "common/errbuf.h"
#include "reporterd/canvas.h"

#include <cairo-svg.h>
#include <cairo.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "reporterd/clsmetrics.h"
#include "reporterd/plot.h"


/* Draws the figure on a canvas of w x h units. */
typedef void (*chart_draw_fn)(const void *ctx, cairo_t *cr, double w, double h);

/* Class c's display name: the name shortened to CHART_MAX_NAME code points
 * (the last one "…"), or its index. */
static const char *s_name(const chart_classes_t *c, uint32_t k, char buf[4 * CHART_MAX_NAME + 8])
{
    if (!c->names || !c->names[k]) {
        snprintf(buf, 4 * CHART_MAX_NAME + 8, "%u", k);
        return buf;
    }
    const unsigned char *s = (const unsigned char *)c->names[k];
    size_t ends[CHART_MAX_NAME + 1] = {0}, i = 0, cps = 0;
    while (s[i] && cps < CHART_MAX_NAME) {
        i++;
        for (int more = 0; more < 3 && (s[i] & 0xC0) == 0x80; more++)
            i++; /* continuation bytes of this code point (at most 3) */
        ends[++cps] = i;
    }
    if (!s[i]) { /* fits: at most CHART_MAX_NAME code points of <= 4 bytes */
        memcpy(buf, s, i + 1);
        return buf;
    }
    size_t keep = ends[CHART_MAX_NAME - 1];
    memcpy(buf, s, keep);
    memcpy(buf + keep, "\xe2\x80\xa6", 4); /* U+2026 and the NUL */
    return buf;
}

/* White to a dark blue (matplotlib's "Blues" end points) by t in [0, 1]. */
static void s_blue(double t, double rgb[3])
{
    static const double lo[3] = {0.969, 0.984, 1.000}, mid[3] = {0.420, 0.682, 0.839},
                        hi[3] = {0.031, 0.188, 0.420};
    t = t < 0 ? 0 : t > 1 ? 1 : t;
    for (int i = 0; i < 3; i++)
        rgb[i] = t < 0.5 ? lo[i] + (mid[i] - lo[i]) * t * 2 : mid[i] + (hi[i] - mid[i]) * (t - 0.5) * 2;
}

static void s_title(cairo_t *cr, const char *title, double cx)
{
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    canvas_font(cr, 17, true);
    canvas_text(cr, title ? title : "", cx, 16, 0.5, 0.0);
}

/* ---- confusion heat map ---- */

typedef struct {
    const chart_classes_t *c;
    uint64_t *row;   /* row sums */
    uint64_t *dense; /* nc*nc, [true*nc + pred]: nc <= CHART_CONFUSION_MAX */
} conf_ctx_t;

static double s_widest_name(cairo_t *cr, const chart_classes_t *c)
{
    char buf[4 * CHART_MAX_NAME + 8];
    double w = 0;
    for (uint32_t k = 0; k < c->nc; k++)
        w = fmax(w, canvas_text_width(cr, s_name(c, k, buf)));
    return w;
}

/* Past CONF_VECTOR_MAX classes the cells are one image, a pixel per cell
 * scaled up without smoothing: as vector rectangles an SVG takes ~200
 * bytes a cell (206 MB and 17 s of cairo at 1,000 classes); as an image it
 * is the size of a compressed nc x nc PNG. Small matrices stay vectors
 * (with their counts). */
#define CONF_VECTOR_MAX 64

static double s_frac(const conf_ctx_t *x, uint32_t t, uint32_t p)
{
    uint64_t n = x->dense[(size_t)t * x->c->nc + p];
    return x->row[t] ? (double)n / (double)x->row[t] : 0;
}

static void s_conf_image(const conf_ctx_t *x, cairo_t *cr, double gx, double gy, double cell)
{
    uint32_t nc = x->c->nc;
    cairo_surface_t *img = cairo_image_surface_create(CAIRO_FORMAT_RGB24, (int)nc, (int)nc);
    if (cairo_surface_status(img) != CAIRO_STATUS_SUCCESS) {
        cairo_surface_destroy(img);   /* the chart goes without cells; cairo's error sticks */
        return;
    }
    cairo_surface_flush(img);
    unsigned char *data = cairo_image_surface_get_data(img);
    int stride = cairo_image_surface_get_stride(img);
    for (uint32_t t = 0; t < nc; t++)
        for (uint32_t p = 0; p < nc; p++) {
            double rgb[3];
            s_blue(s_frac(x, t, p), rgb);
            uint32_t px = (uint32_t)lround(rgb[0] * 255) << 16 |
                          (uint32_t)lround(rgb[1] * 255) << 8 | (uint32_t)lround(rgb[2] * 255);
            memcpy(data + (size_t)t * (size_t)stride + (size_t)p * 4, &px, 4);
        }
    cairo_surface_mark_dirty(img);
    cairo_save(cr);
    cairo_translate(cr, gx, gy);
    cairo_scale(cr, cell, cell);
    cairo_set_source_surface(cr, img, 0, 0);
    cairo_pattern_set_filter(cairo_get_source(cr), CAIRO_FILTER_NEAREST);
    cairo_rectangle(cr, 0, 0, nc, nc);
    cairo_fill(cr);
    cairo_restore(cr);
    cairo_surface_destroy(img);
}

static void s_conf_cells(const conf_ctx_t *x, cairo_t *cr, double gx, double gy, double cell)
{
    const chart_classes_t *c = x->c;
    char buf[32];
    double fs = fmin(12, cell / 3.2);
    bool numbers = cell >= 22 && fs >= 7;
    canvas_font(cr, fs, false);
    if (c->nc > CONF_VECTOR_MAX) {
        s_conf_image(x, cr, gx, gy, cell);
        numbers = false;
    }
    for (uint32_t t = 0; t < c->nc && c->nc <= CONF_VECTOR_MAX; t++)
        for (uint32_t p = 0; p < c->nc; p++) {
            uint64_t n = x->dense[(size_t)t * c->nc + p];
            double frac = s_frac(x, t, p), rgb[3];
            s_blue(frac, rgb);
            cairo_set_source_rgb(cr, rgb[0], rgb[1], rgb[2]);
            cairo_rectangle(cr, gx + p * cell, gy + t * cell, cell, cell);
            cairo_fill(cr);
            if (!numbers)
                continue;
            snprintf(buf, sizeof buf, "%llu", (unsigned long long)n);
            if (canvas_text_width(cr, buf) > cell - 2)
                continue; /* a huge count in a small cell: the colour says it */
            double ink = frac > 0.55 ? 1.0 : 0.15;
            cairo_set_source_rgb(cr, ink, ink, ink);
            canvas_text(cr, buf, gx + (p + 0.5) * cell, gy + (t + 0.5) * cell, 0.5, 0.5);
        }
    cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
    cairo_set_line_width(cr, 1.0);
    cairo_rectangle(cr, gx, gy, cell * c->nc, cell * c->nc);
    cairo_stroke(cr);
}

static void s_conf_names(const chart_classes_t *c, cairo_t *cr, double gx, double gy, double cell)
{
    if (cell < 9)
        return; /* unreadable: better none than a smear */
    char buf[4 * CHART_MAX_NAME + 8];
    canvas_font(cr, fmin(12, cell * 0.8), false);
    cairo_set_source_rgb(cr, 0.15, 0.15, 0.15);
    double side = cell * c->nc;
    for (uint32_t k = 0; k < c->nc; k++) {
        const char *name = s_name(c, k, buf);
        canvas_text(cr, name, gx - 6, gy + (k + 0.5) * cell, 1.0, 0.5);
        /* predicted-class names at 45 degrees, ending under their column */
        cairo_save(cr);
        cairo_translate(cr, gx + (k + 0.5) * cell + 4, gy + side + 6);
        cairo_rotate(cr, -M_PI / 4);
        cairo_text_extents_t e;
        cairo_text_extents(cr, name, &e);
        cairo_move_to(cr, -e.x_advance, e.height / 2);
        cairo_show_text(cr, name);
        cairo_restore(cr);
    }
}

static void s_colorbar(cairo_t *cr, double x, double y, double h)
{
    const double bw = 18;
    for (int i = 0; i < 100; i++) {
        double rgb[3];
        s_blue(1.0 - (i + 0.5) / 100.0, rgb);
        cairo_set_source_rgb(cr, rgb[0], rgb[1], rgb[2]);
        cairo_rectangle(cr, x, y + h * i / 100.0, bw, h / 100.0 + 0.6);
        cairo_fill(cr);
    }
    cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
    cairo_set_line_width(cr, 1.0);
    cairo_rectangle(cr, x, y, bw, h);
    cairo_stroke(cr);
    canvas_font(cr, 12, false);
    char buf[16];
    for (int k = 0; k <= 5; k++) {
        double ty = y + h - h * k / 5.0;
        cairo_move_to(cr, x + bw, ty);
        cairo_line_to(cr, x + bw + 4, ty);
        cairo_stroke(cr);
        snprintf(buf, sizeof buf, "%.1f", k / 5.0);
        canvas_text(cr, buf, x + bw + 7, ty, 0.0, 0.5);
    }
    cairo_save(cr);
    cairo_translate(cr, x + bw + 44, y + h / 2);
    cairo_rotate(cr, M_PI / 2);
    canvas_font(cr, 13, false);
    canvas_text(cr, "fraction of the true class", 0, 0, 0.5, 0.0);
    cairo_restore(cr);
}

static void s_conf_draw(const void *ctx, cairo_t *cr, double w, double h)
{
    const conf_ctx_t *x = ctx;
    const chart_classes_t *c = x->c;
    canvas_font(cr, 12, false);
    double name_w = c->nc <= 80 ? s_widest_name(cr, c) : 0;
    double left = 16 + 18 + 10 + name_w + 10;
    double bottom = 14 + 18 + 10 + name_w * M_SQRT1_2 + 16;
    double top = 52, right = 18 + 70 + 16;
    double side = fmin(w - left - right, h - top - bottom);
    double cell = side / c->nc;
    if (cell < 9 && name_w > 0) { /* no room for names after all: use it for cells */
        left = 44;
        bottom = 44;
        side = fmin(w - left - right, h - top - bottom);
        cell = side / c->nc;
    }
    double gx = left + (w - left - right - side) / 2, gy = top;
    s_title(cr, c->title, w / 2);
    s_conf_cells(x, cr, gx, gy, cell);
    s_conf_names(c, cr, gx, gy, cell);
    s_colorbar(cr, gx + side + 18, gy, side);
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    canvas_font(cr, 14, false);
    canvas_text(cr, "predicted class", gx + side / 2, h - 14, 0.5, 1.0);
    cairo_save(cr);
    cairo_translate(cr, 16, gy + side / 2);
    cairo_rotate(cr, -M_PI / 2);
    canvas_text(cr, "true class", 0, 0, 0.5, 0.0);
    cairo_restore(cr);
}

/* ---- F1 bars ---- */

typedef struct {
    const chart_classes_t *c;
    const clsmetrics_t *m;
} f1_ctx_t;

static void s_f1_axis(cairo_t *cr, double gx, double gy, double gw, double gh)
{
    char buf[16];
    canvas_font(cr, 12, false);
    cairo_set_line_width(cr, 1.0);
    for (int k = 0; k <= 5; k++) {
        double x = round(gx + gw * k / 5.0) + 0.5;
        cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
        cairo_move_to(cr, x, gy);
        cairo_line_to(cr, x, gy + gh);
        cairo_stroke(cr);
        cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
        snprintf(buf, sizeof buf, "%.1f", k / 5.0);
        canvas_text(cr, buf, x, gy + gh + 6, 0.5, 0.0);
    }
}

static void s_f1_marker(cairo_t *cr, bool square, double x, double y)
{
    if (square)
        cairo_rectangle(cr, x - 3.5, y - 3.5, 7, 7);
    else
        cairo_arc(cr, x, y, 3.8, 0, 2 * M_PI);
    cairo_fill_preserve(cr);
    cairo_save(cr);
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_set_line_width(cr, 1.0);
    cairo_stroke(cr);
    cairo_restore(cr);
}

static void s_f1_bars(const f1_ctx_t *x, cairo_t *cr, double gx, double gy, double gw, double row)
{
    const chart_classes_t *c = x->c;
    char buf[4 * CHART_MAX_NAME + 8];
    bool labels = row >= 9, values = row >= 12;
    for (uint32_t k = 0; k < x->m->nc; k++) {
        const cls_class_t *pc = &x->m->per_class[k];
        double y = gy + row * k, bh = row * 0.7;
        cairo_set_source_rgb(cr, 0.122, 0.467, 0.706);
        cairo_rectangle(cr, gx, y + (row - bh) / 2, gw * pc->f1, bh);
        cairo_fill(cr);
        if (row >= 8) {
            cairo_set_source_rgb(cr, 1.0, 0.498, 0.055);
            s_f1_marker(cr, false, gx + gw * pc->precision, y + row / 2);
            cairo_set_source_rgb(cr, 0.173, 0.627, 0.173);
            s_f1_marker(cr, true, gx + gw * pc->recall, y + row / 2);
        }
        canvas_font(cr, fmin(12, row * 0.8), false);
        cairo_set_source_rgb(cr, 0.15, 0.15, 0.15);
        if (labels)
            canvas_text(cr, s_name(c, k, buf), gx - 8, y + row / 2, 1.0, 0.5);
        if (values) {
            snprintf(buf, sizeof buf, "%.3f", pc->f1);
            canvas_text(cr, buf, gx + gw + 8, y + row / 2, 0.0, 0.5);
        }
    }
}

static void s_f1_legend(const f1_ctx_t *x, cairo_t *cr, double gx, double y, double gw)
{
    char buf[64];
    canvas_font(cr, 12, false);
    double lx = gx;
    cairo_set_source_rgb(cr, 0.122, 0.467, 0.706);
    cairo_rectangle(cr, lx, y - 6, 22, 12);
    cairo_fill(cr);
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    canvas_text(cr, "F1", lx + 28, y, 0.0, 0.5);
    lx += 70;
    cairo_set_source_rgb(cr, 1.0, 0.498, 0.055);
    s_f1_marker(cr, false, lx + 8, y);
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    canvas_text(cr, "precision", lx + 18, y, 0.0, 0.5);
    lx += 100;
    cairo_set_source_rgb(cr, 0.173, 0.627, 0.173);
    s_f1_marker(cr, true, lx + 8, y);
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    canvas_text(cr, "recall", lx + 18, y, 0.0, 0.5);
    lx += 80;
    cairo_set_source_rgb(cr, 0.84, 0.15, 0.16);
    cairo_set_line_width(cr, 2.0);
    double dash[] = {6, 4};
    cairo_set_dash(cr, dash, 2, 0);
    cairo_move_to(cr, lx, y);
    cairo_line_to(cr, lx + 26, y);
    cairo_stroke(cr);
    cairo_set_dash(cr, NULL, 0, 0);
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    snprintf(buf, sizeof buf, "macro F1 %.3f", x->m->macro.f1);
    canvas_text(cr, buf, lx + 32, y, 0.0, 0.5);
    (void)gw;
}

static void s_f1_draw(const void *ctx, cairo_t *cr, double w, double h)
{
    const f1_ctx_t *x = ctx;
    const chart_classes_t *c = x->c;
    canvas_font(cr, 12, false);
    double name_w = x->m->nc <= 200 ? s_widest_name(cr, c) : 0;
    double top = 52 + 24, bottom = 12 + 18 + 8 + 16 + 10;
    double gh = h - top - bottom, row = gh / x->m->nc;   /* the labelled classes */
    if (row < 9)
        name_w = 0;
    double left = 16 + 18 + 10 + name_w + 10, right = 56;
    double gx = left, gw = w - left - right;
    s_title(cr, c->title, w / 2);
    s_f1_legend(x, cr, gx, 52 + 6, gw);
    s_f1_axis(cr, gx, top, gw, gh);
    s_f1_bars(x, cr, gx, top, gw, row);
    /* the macro average, dashed across all bars */
    double mx = gx + gw * x->m->macro.f1;
    cairo_set_source_rgb(cr, 0.84, 0.15, 0.16);
    cairo_set_line_width(cr, 2.0);
    double dash[] = {6, 4};
    cairo_set_dash(cr, dash, 2, 0);
    cairo_move_to(cr, mx, top);
    cairo_line_to(cr, mx, top + gh);
    cairo_stroke(cr);
    cairo_set_dash(cr, NULL, 0, 0);
    cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
    cairo_set_line_width(cr, 1.0);
    cairo_rectangle(cr, round(gx) + 0.5, round(top) + 0.5, round(gw), round(gh));
    cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    canvas_font(cr, 14, false);
    canvas_text(cr, "score (precision, recall, F1)", gx + gw / 2, h - 12, 0.5, 1.0);
    cairo_save(cr);
    cairo_translate(cr, 16, top + gh / 2);
    cairo_rotate(cr, -M_PI / 2);
    canvas_text(cr, "class", 0, 0, 0.5, 0.0);
    cairo_restore(cr);
}

/* ---- value bars ---- */

static int s_write_both(chart_draw_fn draw, const void *ctx, const char *png, const char *svg,
                        double w, double h, char *err, size_t errlen);

/* tab10, as plot.c's series: a bar has its series' colour */
static const double s_tab10[4][3] = {{0.122, 0.467, 0.706}, {1.0, 0.498, 0.055},
                                     {0.173, 0.627, 0.173}, {0.839, 0.153, 0.157}};

static double s_bars_top(const chart_values_t *v)
{
    double top = v->ymax > 0 ? v->ymax : 0;
    for (size_t i = 0; i < v->n; i++)
        if (isfinite(v->values[i]) && v->values[i] > top)
            top = v->values[i];
    return top > 0 ? top * (v->ymax > 0 ? 1.0 : 1.15) : 1.0;
}

static void s_bars_axis(cairo_t *cr, double top, double gx, double gy, double gw, double gh)
{
    int dec = 0;
    double step = plot_nice_step(0, top, 5, &dec);
    char buf[32];
    canvas_font(cr, 12, false);
    cairo_set_line_width(cr, 1.0);
    for (double t = 0; t <= top * (1 + 1e-9); t += step) {
        double y = round(gy + gh - gh * t / top) + 0.5;
        cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
        cairo_move_to(cr, gx, y);
        cairo_line_to(cr, gx + gw, y);
        cairo_stroke(cr);
        cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
        snprintf(buf, sizeof buf, "%.*f", dec, t);
        canvas_text(cr, buf, gx - 6, y, 1.0, 0.5);
    }
}

static void s_bars_draw(const void *ctx, cairo_t *cr, double w, double h)
{
    const chart_values_t *v = ctx;
    double gx = 90, gy = 60, gw = w - gx - 30, gh = h - gy - 60, top = s_bars_top(v);
    s_title(cr, v->title, w / 2);
    s_bars_axis(cr, top, gx, gy, gw, gh);
    double slot = gw / (double)v->n, bw = fmin(slot * 0.6, 140);
    char buf[64];
    for (size_t i = 0; i < v->n; i++) {
        double cx = gx + slot * ((double)i + 0.5), val = v->values[i];
        const double *c = s_tab10[i % 4];
        if (isfinite(val)) {
            double bh = gh * fmax(0, val) / top;
            cairo_set_source_rgb(cr, c[0], c[1], c[2]);
            cairo_rectangle(cr, cx - bw / 2, gy + gh - bh, bw, bh);
            cairo_fill(cr);
            snprintf(buf, sizeof buf, "%.*f", v->decimals, val);
        } else {
            snprintf(buf, sizeof buf, "n/a");
        }
        double bh = isfinite(val) ? gh * fmax(0, val) / top : 0;
        cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
        canvas_font(cr, 14, true);
        canvas_text(cr, buf, cx, gy + gh - bh - 6, 0.5, 1.0);
        canvas_font(cr, 13, false);
        canvas_text(cr, v->names[i], cx, gy + gh + 8, 0.5, 0.0);
    }
    cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
    cairo_set_line_width(cr, 1.0);
    cairo_rectangle(cr, round(gx) + 0.5, round(gy) + 0.5, round(gw), round(gh));
    cairo_stroke(cr);
    canvas_font(cr, 14, false);
    cairo_save(cr);
    cairo_translate(cr, 22, gy + gh / 2);
    cairo_rotate(cr, -M_PI / 2);
    canvas_text(cr, v->ylabel ? v->ylabel : "", 0, 0, 0.5, 0.5);
    cairo_restore(cr);
}

int chart_values_write(const chart_values_t *v, const char *png, const char *svg, char *err,
                       size_t errlen)
{
    if (!v || v->n == 0 || v->n > CHART_MAX_VALUES || !v->names || !v->values) {
        err_set(err, errlen, "chart: 1..%d values to draw", CHART_MAX_VALUES);
        return -1;
    }
    return s_write_both(s_bars_draw, v, png, svg, 800, 500, err, errlen);
}

/* ---- output ---- */

/* Scales the figure's base size (base_w x base_h units) to the canvas. */
typedef struct {
    chart_draw_fn draw;
    const void *ctx;
    double base_w, base_h;
} paint_t;

static int s_paint(const void *ctx, cairo_t *cr, double w, double h)
{
    const paint_t *p = ctx;
    double scale = fmin(w / p->base_w, h / p->base_h);
    cairo_scale(cr, scale, scale);
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);
    p->draw(p->ctx, cr, w / scale, h / scale);
    return 0;
}

static int s_write(chart_draw_fn draw, const void *ctx, const char *path, bool svg, double w,
                   double h, char *err, size_t errlen)
{
    paint_t p = {.draw = draw, .ctx = ctx, .base_w = w, .base_h = h};
    return canvas_write(s_paint, &p, path, svg, w, h, "chart", err, errlen);
}

static int s_write_both(chart_draw_fn draw, const void *ctx, const char *png, const char *svg,
                        double w, double h, char *err, size_t errlen)
{
    if (png && s_write(draw, ctx, png, false, w, h, err, errlen) != 0)
        return -1;
    if (svg && s_write(draw, ctx, svg, true, w, h, err, errlen) != 0)
        return -1;
    return 0;
}

static int s_check(const chart_classes_t *c, char *err, size_t errlen)
{
    if (!c || (c->ncells && !c->cells) || c->nc == 0) {
        err_set(err, errlen, "chart: no confusion matrix to draw");
        return -1;
    }
    return 0;
}

int chart_confusion_write(const chart_classes_t *c, const char *png, const char *svg,
                          char *err, size_t errlen)
{
    if (s_check(c, err, errlen) != 0)
        return -1;
    if (c->nc > CHART_CONFUSION_MAX) {
        err_set(err, errlen, "chart: %u classes is more than the %u a confusion heat map "
                "draws", c->nc, CHART_CONFUSION_MAX);
        return -1;
    }
    conf_ctx_t x = {c, calloc(c->nc, sizeof(uint64_t)),
                    calloc((size_t)c->nc * c->nc, sizeof(uint64_t))};
    if (!x.row || !x.dense) {
        free(x.row);
        free(x.dense);
        err_set(err, errlen, "chart: out of memory for %u classes", c->nc);
        return -1;
    }
    for (uint64_t i = 0; i < c->ncells; i++) {
        const ev_cell_t *cell = &c->cells[i];
        if (cell->truth >= c->nc || cell->pred >= c->nc)
            continue;   /* event_validate refuses these */
        x.dense[(size_t)cell->truth * c->nc + cell->pred] += cell->count;
        x.row[cell->truth] += cell->count;
    }
    int rc = s_write_both(s_conf_draw, &x, png, svg, 820, 760, err, errlen);
    free(x.row);
    free(x.dense);
    return rc;
}

int chart_f1_write(const chart_classes_t *c, const char *png, const char *svg, char *err,
                   size_t errlen)
{
    if (s_check(c, err, errlen) != 0)
        return -1;
    clsmetrics_t m;
    if (clsmetrics_compute_labels(c->cells, c->ncells, c->nc, c->nl ? c->nl : c->nc, &m) != 0) {
        err_set(err, errlen, "chart: out of memory for %u classes", c->nc);
        return -1;
    }
    f1_ctx_t x = {c, &m};
    /* a row per class: tall enough to read up to ~100 classes */
    double h = fmin(3000, fmax(420, 150 + 26.0 * m.nc));
    int rc = s_write_both(s_f1_draw, &x, png, svg, 820, h, err, errlen);
    clsmetrics_clear(&m);
    return rc;
}
