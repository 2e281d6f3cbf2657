#include "loaderd/resize.h"

#include <math.h>
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

/* Horizontal pass over ROWS source rows starting at y0: dst row r gets the
 * columns described by T, interleaved with C channels. */
static void pass_h(const image_t *src, int y0, int rows, const taps_t *t, int cols,
                   uint8_t *dst)
{
    const int c = src->c;
    for (int r = 0; r < rows; r++) {
        const uint8_t *in = src->px + (size_t)(y0 + r) * src->w * c;
        uint8_t *out = dst + (size_t)r * cols * c;
        for (int x = 0; x < cols; x++) {
            const int32_t *k = t->k + (size_t)x * t->ksize;
            const uint8_t *p = in + (size_t)t->lo[x] * c;
            int n = t->n[x];
            if (c == 1) {
                int32_t s0 = 1 << (PRECISION_BITS - 1);
                for (int i = 0; i < n; i++)
                    s0 += p[i] * k[i];
                out[x] = clip8(s0);
            } else {
                int32_t s0 = 1 << (PRECISION_BITS - 1), s1 = s0, s2 = s0;
                for (int i = 0; i < n; i++, p += 3) {
                    s0 += p[0] * k[i];
                    s1 += p[1] * k[i];
                    s2 += p[2] * k[i];
                }
                out[3 * x] = clip8(s0);
                out[3 * x + 1] = clip8(s1);
                out[3 * x + 2] = clip8(s2);
            }
        }
    }
}

/* Writes one finished row of LEN interleaved values (cols x c) into the
 * output window at row Y, column X, interleaved or planar. */
static void put_row(uint8_t *out, const resize_window_t *win, int c, int planar, int y, int x,
                    const uint8_t *row, int cols)
{
    if (!planar) {
        memcpy(out + ((size_t)y * win->w + x) * c, row, (size_t)cols * c);
        return;
    }
    size_t plane = (size_t)win->w * win->h;
    for (int ch = 0; ch < c; ch++) {
        uint8_t *o = out + ch * plane + (size_t)y * win->w + x;
        for (int i = 0; i < cols; i++)
            o[i] = row[i * c + ch];
    }
}

/* Vertical pass for output row i: source row y lives at
 * IN + (y - in_y0) * STRIDE; LEN values of each are filtered into ROW. */
static void pass_v(const uint8_t *in, size_t stride, int in_y0, size_t len, const taps_t *tv,
                   int i, int32_t *acc, uint8_t *row)
{
    const int32_t *k = tv->k + (size_t)i * tv->ksize;
    for (size_t x = 0; x < len; x++)
        acc[x] = 1 << (PRECISION_BITS - 1);
    for (int j = 0; j < tv->n[i]; j++) {
        const uint8_t *r = in + (size_t)(tv->lo[i] + j - in_y0) * stride;
        int32_t kj = k[j];
        for (size_t x = 0; x < len; x++)
            acc[x] += r[x] * kj;
    }
    for (size_t x = 0; x < len; x++)
        row[x] = clip8(acc[x]);
}

typedef struct {
    int x0, x1, y0, y1; /* clipped window in dst coordinates */
} span_t;

static int resize_window(const image_t *src, int dst_w, int dst_h, const resize_window_t *win,
                         const span_t *sp, uint8_t *out, int planar)
{
    const int c = src->c, cols = sp->x1 - sp->x0, rows = sp->y1 - sp->y0;
    const int need_h = dst_w != src->w, need_v = dst_h != src->h;
    taps_t th = {0}, tv = {0};
    uint8_t *tmp = NULL, *row = NULL;
    int32_t *acc = NULL;
    int rc = -1;
    if (need_v && taps_compute(src->h, dst_h, sp->y0, rows, &tv) != 0)
        goto done;
    /* source rows the vertical pass reads (all window rows when no pass) */
    int sy0 = need_v ? tv.lo[0] : sp->y0;
    int sy1 = need_v ? tv.lo[rows - 1] + tv.n[rows - 1] : sp->y1;
    size_t len = (size_t)cols * c;
    if (need_h) {
        if (taps_compute(src->w, dst_w, sp->x0, cols, &th) != 0 ||
            !(tmp = malloc((size_t)(sy1 - sy0) * len)))
            goto done;
        pass_h(src, sy0, sy1 - sy0, &th, cols, tmp);
    }
    /* without a horizontal pass the rows are read straight from the source */
    const uint8_t *mid = tmp ? tmp : src->px;
    size_t stride = tmp ? len : (size_t)src->w * c;
    int mid_y0 = tmp ? sy0 : 0;
    size_t xoff = tmp ? 0 : (size_t)sp->x0 * c;
    if (!(row = malloc(len)) || !(acc = malloc(len * sizeof *acc)))
        goto done;
    for (int i = 0; i < rows; i++) {
        const uint8_t *r = row;
        if (need_v)
            pass_v(mid + xoff, stride, mid_y0, len, &tv, i, acc, row);
        else
            r = mid + (size_t)(sp->y0 + i - mid_y0) * stride + xoff;
        put_row(out, win, c, planar, sp->y0 + i - win->y, sp->x0 - win->x, r, cols);
    }
    rc = 0;
done:
    taps_free(&th);
    taps_free(&tv);
    free(tmp);
    free(row);
    free(acc);
    return rc;
}

int resize_region(const image_t *src, int dst_w, int dst_h, const resize_window_t *win,
                  uint8_t *out, int planar, char *err, size_t errlen)
{
    if (!src || dst_w <= 0 || dst_h <= 0 || dst_w > MAX_DIM || dst_h > MAX_DIM ||
        win->w <= 0 || win->h <= 0 || win->w > MAX_DIM || win->h > MAX_DIM) {
        snprintf(err, errlen, "bad resize to %dx%d (window %dx%d)", dst_w, dst_h, win->w, win->h);
        return -1;
    }
    span_t sp = {win->x < 0 ? 0 : win->x, win->x + win->w > dst_w ? dst_w : win->x + win->w,
                 win->y < 0 ? 0 : win->y, win->y + win->h > dst_h ? dst_h : win->y + win->h};
    /* zero padding of a crop larger than the image (torchvision pads with 0) */
    if (sp.x0 != win->x || sp.y0 != win->y || sp.x1 != win->x + win->w ||
        sp.y1 != win->y + win->h)
        memset(out, 0, (size_t)win->w * win->h * src->c);
    if (sp.x0 >= sp.x1 || sp.y0 >= sp.y1)
        return 0;
    if (resize_window(src, dst_w, dst_h, win, &sp, out, planar) != 0) {
        snprintf(err, errlen, "out of memory resizing %dx%d to %dx%d", src->w, src->h, dst_w,
                 dst_h);
        return -1;
    }
    return 0;
}

image_t *resize_image(const image_t *src, int dst_w, int dst_h, char *err, size_t errlen)
{
    image_t *img = image_new(dst_w, dst_h, src ? src->c : 1);
    if (!img) {
        snprintf(err, errlen, "cannot allocate a %dx%d image", dst_w, dst_h);
        return NULL;
    }
    resize_window_t win = {0, 0, dst_w, dst_h};
    if (resize_region(src, dst_w, dst_h, &win, img->px, 0, err, errlen) != 0)
        image_destroy(&img);
    return img;
}
