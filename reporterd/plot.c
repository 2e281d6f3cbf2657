#include "reporterd/plot.h"
#include "common/errbuf.h"
#include "reporterd/canvas.h"

#include <cairo-svg.h>
#include <cairo.h>
#include <fontconfig/fontconfig.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


/* Everything is laid out on an 800x500 canvas, scaled to the output size. */
#define BASE_W 800.0
#define BASE_H 500.0

typedef struct {
    char *name;
    double *x, *y;
    size_t n;
} series_t;

struct plot {
    char *title, *xlabel, *ylabel;
    series_t series[PLOT_MAX_SERIES];
    int ns;
    bool integer_x;
    bool y_from_zero;
};

typedef struct {
    double lo, hi;   /* the axis' extent */
    double step;     /* tick spacing */
    int decimals;    /* for tick labels */
} axis_t;

typedef struct {
    double x, y, w, h; /* plot area on the canvas */
    axis_t ax, ay;
} frame_t;

/* matplotlib's tab10: distinct, colour-blind-friendlier than pure RGB */
static const double s_colors[PLOT_MAX_SERIES][3] = {
    {0.122, 0.467, 0.706}, {1.000, 0.498, 0.055}, {0.173, 0.627, 0.173}, {0.839, 0.153, 0.157},
    {0.580, 0.404, 0.741}, {0.549, 0.337, 0.294}, {0.890, 0.467, 0.761}, {0.498, 0.498, 0.498}};

plot_t *plot_new(const char *title, const char *xlabel, const char *ylabel)
{
    plot_t *self = calloc(1, sizeof *self);
    if (!self)
        return NULL;
    self->title = strdup(title ? title : "");
    self->xlabel = strdup(xlabel ? xlabel : "");
    self->ylabel = strdup(ylabel ? ylabel : "");
    if (!self->title || !self->xlabel || !self->ylabel)
        plot_destroy(&self);
    return self;
}

void plot_destroy(plot_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    plot_t *self = *self_p;
    for (int i = 0; i < self->ns; i++) {
        free(self->series[i].name);
        free(self->series[i].x);
        free(self->series[i].y);
    }
    free(self->title);
    free(self->xlabel);
    free(self->ylabel);
    free(self);
    *self_p = NULL;
}

int plot_add_series(plot_t *self, const char *name, const double *x, const double *y, size_t n)
{
    if (self->ns >= PLOT_MAX_SERIES)
        return -1;
    series_t *s = &self->series[self->ns];
    s->name = strdup(name ? name : "");
    s->x = malloc((n ? n : 1) * sizeof(double));
    s->y = malloc((n ? n : 1) * sizeof(double));
    if (!s->name || !s->x || !s->y) {
        free(s->name);
        free(s->x);
        free(s->y);
        memset(s, 0, sizeof *s);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        if (isfinite(x[i]) && isfinite(y[i])) {
            s->x[s->n] = x[i];
            s->y[s->n] = y[i];
            s->n++;
        }
    self->ns++;
    return 0;
}

void plot_set_integer_x(plot_t *self, bool on) { self->integer_x = on; }
void plot_set_y_from_zero(plot_t *self, bool on) { self->y_from_zero = on; }

/* Heckbert, "Nice numbers for graph labels" (Graphics Gems, 1990). */
static double s_nicenum(double x, bool round_it)
{
    double e = floor(log10(x));
    double f = x / pow(10.0, e);
    double nf;
    if (round_it)
        nf = f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10;
    else
        nf = f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10;
    return nf * pow(10.0, e);
}

double plot_nice_step(double lo, double hi, int target, int *decimals)
{
    double range = hi - lo;
    if (!(range > 0) || !isfinite(range))
        range = 1.0;
    if (target < 2)
        target = 2;
    double step = s_nicenum(s_nicenum(range, false) / (target - 1), true);
    int d = (int)-floor(log10(step));
    if (decimals)
        *decimals = d > 0 ? d : 0;
    return step;
}

static void s_data_range(const plot_t *self, double *x0, double *x1, double *y0, double *y1)
{
    *x0 = *y0 = INFINITY;
    *x1 = *y1 = -INFINITY;
    for (int i = 0; i < self->ns; i++)
        for (size_t j = 0; j < self->series[i].n; j++) {
            *x0 = fmin(*x0, self->series[i].x[j]);
            *x1 = fmax(*x1, self->series[i].x[j]);
            *y0 = fmin(*y0, self->series[i].y[j]);
            *y1 = fmax(*y1, self->series[i].y[j]);
        }
    if (*x0 > *x1) { /* no points at all */
        *x0 = *y0 = 0.0;
        *x1 = *y1 = 1.0;
    }
}

/* y: pad a flat range, then snap outwards to whole ticks. */
static axis_t s_y_axis(const plot_t *self, double lo, double hi)
{
    bool nonneg = lo >= 0.0;
    if (self->y_from_zero && nonneg)
        lo = 0.0;
    if (hi - lo <= 1e-12 * fmax(fabs(hi), 1.0)) {
        double pad = fabs(hi) > 0 ? fabs(hi) * 0.1 : 1.0;
        lo -= pad;
        hi += pad;
        if (nonneg && lo < 0.0)
            lo = 0.0;
    }
    axis_t a;
    a.step = plot_nice_step(lo, hi, 6, &a.decimals);
    a.lo = floor(lo / a.step) * a.step;
    a.hi = ceil(hi / a.step) * a.step;
    /* a rate touching the frame reads as clipped: one more tick of headroom */
    if (self->y_from_zero && a.hi - hi < 0.03 * (a.hi - a.lo))
        a.hi += a.step;
    return a;
}

/* x: a little room around the points; ticks inside. */
static axis_t s_x_axis(const plot_t *self, double lo, double hi)
{
    axis_t a;
    if (hi - lo <= 1e-12 * fmax(fabs(hi), 1.0)) {
        double pad = self->integer_x ? 0.5 : (fabs(hi) > 0 ? fabs(hi) * 0.1 : 1.0);
        a.lo = lo - pad;
        a.hi = hi + pad;
    } else {
        a.lo = lo - (hi - lo) * 0.04;
        a.hi = hi + (hi - lo) * 0.04;
    }
    a.step = plot_nice_step(a.lo, a.hi, 8, &a.decimals);
    if (self->integer_x && a.step < 1.0) {
        a.step = 1.0;
        a.decimals = 0;
    }
    return a;
}

static double s_px(const frame_t *f, double x)
{
    return f->x + (x - f->ax.lo) / (f->ax.hi - f->ax.lo) * f->w;
}
static double s_py(const frame_t *f, double y)
{
    return f->y + f->h - (y - f->ay.lo) / (f->ay.hi - f->ay.lo) * f->h;
}

static void s_tick_label(char *buf, size_t len, double v, int decimals)
{
    snprintf(buf, len, "%.*f", decimals, v);
    /* k*step can land a hair below zero: "-0.0" reads badly */
    if (buf[0] == '-' && strspn(buf + 1, "0.") == strlen(buf + 1))
        memmove(buf, buf + 1, strlen(buf));
}

/* Ticks k*step inside [lo, hi] (with a little tolerance at the ends). */
static void s_tick_range(const axis_t *a, long *k0, long *k1)
{
    *k0 = (long)ceil(a->lo / a->step - 1e-9);
    *k1 = (long)floor(a->hi / a->step + 1e-9);
    if (*k1 - *k0 > 100) /* cannot happen with nice steps; never loop long */
        *k1 = *k0 + 100;
}

static double s_widest_ytick(cairo_t *cr, const axis_t *ay)
{
    long k0, k1;
    s_tick_range(ay, &k0, &k1);
    double w = 0;
    char buf[64];
    for (long k = k0; k <= k1; k++) {
        cairo_text_extents_t e;
        s_tick_label(buf, sizeof buf, (double)k * ay->step, ay->decimals);
        cairo_text_extents(cr, buf, &e);
        w = fmax(w, e.x_advance);
    }
    return w;
}

static frame_t s_layout(const plot_t *self, cairo_t *cr, double w, double h)
{
    frame_t f;
    double x0, x1, y0, y1;
    s_data_range(self, &x0, &x1, &y0, &y1);
    f.ax = s_x_axis(self, x0, x1);
    f.ay = s_y_axis(self, y0, y1);
    canvas_font(cr, 12, false);
    double left = 16 + 18 + 8 + s_widest_ytick(cr, &f.ay) + 8;
    double top = self->title[0] ? 48 : 20;
    double bottom = 12 + 16 + 8 + 18 + 10;
    f.x = left;
    f.y = top;
    f.w = w - left - 24;
    f.h = h - top - bottom;
    return f;
}

static void s_grid_and_ticks(cairo_t *cr, const frame_t *f)
{
    char buf[64];
    long k0, k1;
    canvas_font(cr, 12, false);
    cairo_set_line_width(cr, 1.0);
    s_tick_range(&f->ay, &k0, &k1);
    for (long k = k0; k <= k1; k++) {
        double v = (double)k * f->ay.step, y = round(s_py(f, v)) + 0.5;
        cairo_set_source_rgb(cr, 0.88, 0.88, 0.88);
        cairo_move_to(cr, f->x, y);
        cairo_line_to(cr, f->x + f->w, y);
        cairo_stroke(cr);
        cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
        s_tick_label(buf, sizeof buf, v, f->ay.decimals);
        canvas_text(cr, buf, f->x - 8, y, 1.0, 0.5);
    }
    s_tick_range(&f->ax, &k0, &k1);
    for (long k = k0; k <= k1; k++) {
        double v = (double)k * f->ax.step, x = round(s_px(f, v)) + 0.5;
        cairo_set_source_rgb(cr, 0.93, 0.93, 0.93);
        cairo_move_to(cr, x, f->y);
        cairo_line_to(cr, x, f->y + f->h);
        cairo_stroke(cr);
        cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
        cairo_move_to(cr, x, f->y + f->h);
        cairo_line_to(cr, x, f->y + f->h + 5);
        cairo_stroke(cr);
        s_tick_label(buf, sizeof buf, v, f->ax.decimals);
        canvas_text(cr, buf, x, f->y + f->h + 8, 0.5, 0.0);
    }
    cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
    cairo_rectangle(cr, round(f->x) + 0.5, round(f->y) + 0.5, round(f->w), round(f->h));
    cairo_stroke(cr);
}

static void s_labels(const plot_t *self, cairo_t *cr, const frame_t *f, double w, double h)
{
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    canvas_font(cr, 17, true);
    canvas_text(cr, self->title, f->x + f->w / 2, 16, 0.5, 0.0);
    canvas_font(cr, 14, false);
    canvas_text(cr, self->xlabel, f->x + f->w / 2, h - 12, 0.5, 1.0);
    cairo_save(cr);
    cairo_translate(cr, 16, f->y + f->h / 2);
    cairo_rotate(cr, -M_PI / 2);
    canvas_text(cr, self->ylabel, 0, 0, 0.5, 0.0);
    cairo_restore(cr);
    (void)w;
}

/* circle, square, triangle, diamond, ... by series index */
static void s_marker(cairo_t *cr, int shape, double x, double y, double r)
{
    switch (shape % 4) {
    case 0: cairo_arc(cr, x, y, r, 0, 2 * M_PI); break;
    case 1: cairo_rectangle(cr, x - r * 0.85, y - r * 0.85, r * 1.7, r * 1.7); break;
    case 2:
        cairo_move_to(cr, x, y - r * 1.15);
        cairo_line_to(cr, x + r * 1.05, y + r * 0.75);
        cairo_line_to(cr, x - r * 1.05, y + r * 0.75);
        cairo_close_path(cr);
        break;
    default:
        cairo_move_to(cr, x, y - r * 1.2);
        cairo_line_to(cr, x + r * 1.2, y);
        cairo_line_to(cr, x, y + r * 1.2);
        cairo_line_to(cr, x - r * 1.2, y);
        cairo_close_path(cr);
    }
    cairo_fill_preserve(cr);
    cairo_save(cr);
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_set_line_width(cr, 1.0);
    cairo_stroke(cr);
    cairo_restore(cr);
}

static void s_series(const plot_t *self, cairo_t *cr, const frame_t *f)
{
    cairo_save(cr);
    /* a marker exactly on the frame (accuracy 1.0) must show whole */
    cairo_rectangle(cr, f->x - 6, f->y - 6, f->w + 12, f->h + 12);
    cairo_clip(cr);
    cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
    for (int i = 0; i < self->ns; i++) {
        const series_t *s = &self->series[i];
        cairo_set_source_rgb(cr, s_colors[i][0], s_colors[i][1], s_colors[i][2]);
        cairo_set_line_width(cr, 2.2);
        for (size_t j = 0; j < s->n; j++) {
            double x = s_px(f, s->x[j]), y = s_py(f, s->y[j]);
            if (j == 0)
                cairo_move_to(cr, x, y);
            else
                cairo_line_to(cr, x, y);
        }
        cairo_stroke(cr);
        /* fewer markers when points are dense, but always for few points */
        size_t every = s->n > 60 ? s->n / 30 : 1;
        for (size_t j = 0; j < s->n; j += every)
            s_marker(cr, i, s_px(f, s->x[j]), s_py(f, s->y[j]), s->n > 60 ? 2.5 : 4.5);
        if (s->n == 1) { /* a lone point: say its value, there is no line to read */
            char buf[32];
            snprintf(buf, sizeof buf, "%.4g", s->y[0]);
            canvas_font(cr, 12, false);
            canvas_text(cr, buf, s_px(f, s->x[0]) + 9, s_py(f, s->y[0]), 0.0, 0.5);
        }
    }
    cairo_restore(cr);
}

/* Points of all series inside a canvas rectangle: the legend goes where
 * it hides the fewest. */
static size_t s_points_in(const plot_t *self, const frame_t *f, double x, double y, double w,
                          double h)
{
    size_t count = 0;
    for (int i = 0; i < self->ns; i++)
        for (size_t j = 0; j < self->series[i].n; j++) {
            double px = s_px(f, self->series[i].x[j]), py = s_py(f, self->series[i].y[j]);
            count += px >= x - 6 && px <= x + w + 6 && py >= y - 6 && py <= y + h + 6;
        }
    return count;
}

static void s_legend(const plot_t *self, cairo_t *cr, const frame_t *f)
{
    if (self->ns == 0)
        return;
    canvas_font(cr, 12, false);
    double tw = 0;
    for (int i = 0; i < self->ns; i++) {
        cairo_text_extents_t e;
        cairo_text_extents(cr, self->series[i].name, &e);
        tw = fmax(tw, e.x_advance);
    }
    double bw = 12 + 28 + 8 + tw + 12, bh = 10 + 20.0 * self->ns, m = 10;
    /* upper right, upper left, lower right, lower left */
    double cx[4] = {f->x + f->w - m - bw, f->x + m, f->x + f->w - m - bw, f->x + m};
    double cy[4] = {f->y + m, f->y + m, f->y + f->h - m - bh, f->y + f->h - m - bh};
    int best = 0;
    size_t fewest = (size_t)-1;
    for (int c = 0; c < 4; c++) {
        size_t n = s_points_in(self, f, cx[c], cy[c], bw, bh);
        if (n < fewest) {
            fewest = n;
            best = c;
        }
    }
    double x = cx[best], y = cy[best];
    cairo_rectangle(cr, x + 0.5, y + 0.5, bw, bh);
    cairo_set_source_rgba(cr, 1, 1, 1, 0.9);
    cairo_fill_preserve(cr);
    cairo_set_source_rgb(cr, 0.75, 0.75, 0.75);
    cairo_set_line_width(cr, 1.0);
    cairo_stroke(cr);
    for (int i = 0; i < self->ns; i++) {
        double ly = y + 15 + 20.0 * i;
        cairo_set_source_rgb(cr, s_colors[i][0], s_colors[i][1], s_colors[i][2]);
        cairo_set_line_width(cr, 2.2);
        cairo_move_to(cr, x + 12, ly);
        cairo_line_to(cr, x + 40, ly);
        cairo_stroke(cr);
        s_marker(cr, i, x + 26, ly, 4.5);
        cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
        canvas_text(cr, self->series[i].name, x + 48, ly, 0.0, 0.5);
    }
}

static bool s_has_points(const plot_t *self)
{
    for (int i = 0; i < self->ns; i++)
        if (self->series[i].n)
            return true;
    return false;
}

static int s_render(const void *ctx, cairo_t *cr, double width, double height)
{
    const plot_t *self = ctx;
    double scale = fmin(width / BASE_W, height / BASE_H);
    double w = width / scale, h = height / scale;
    cairo_scale(cr, scale, scale);
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);
    frame_t f = s_layout(self, cr, w, h);
    s_grid_and_ticks(cr, &f);
    s_labels(self, cr, &f, w, h);
    if (s_has_points(self)) {
        s_series(self, cr, &f);
        s_legend(self, cr, &f);
    } else {
        cairo_set_source_rgb(cr, 0.5, 0.5, 0.5);
        canvas_font(cr, 16, false);
        canvas_text(cr, "no data", f.x + f.w / 2, f.y + f.h / 2, 0.5, 0.5);
    }
    return cairo_status(cr) == CAIRO_STATUS_SUCCESS ? 0 : -1;
}

void plot_shutdown(void)
{
    cairo_debug_reset_static_data(); /* drops cairo's font faces first */
    FcFini();
}

int plot_write_png(const plot_t *self, const char *path, int width, int height, char *err,
                   size_t errlen)
{
    if (width < 100 || height < 80 || width > 10000 || height > 10000) {
        err_set(err, errlen, "plot %s: size %dx%d outside 100x80..10000x10000", path, width,
                 height);
        return -1;
    }
    return canvas_write(s_render, self, path, false, width, height, "plot", err, errlen);
}

int plot_write_svg(const plot_t *self, const char *path, double width, double height,
                   char *err, size_t errlen)
{
    if (!(width >= 100 && height >= 80 && width <= 10000 && height <= 10000)) {
        err_set(err, errlen, "plot %s: size %gx%g outside 100x80..10000x10000", path, width,
                 height);
        return -1;
    }
    return canvas_write(s_render, self, path, true, width, height, "plot", err, errlen);
}
