#include "common/image/augment.h"
#include "common/errbuf.h"

#include "common/image/resize.h"
#include "common/image/transform.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The rotation matrix must be computed exactly as CPython evaluates it
 * (a*x + b*y + c, two roundings each): no fused multiply-add. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#define MAX_SIDE 65535

augment_t augment_default(int channels)
{
    return (augment_t){.crop = 1,
                       .scale = {0.08, 1.0},
                       .ratio = {3.0 / 4.0, 4.0 / 3.0},
                       .flip_p = 0.5,
                       .rotate = 0,
                       .degrees = {0.0, 0.0},
                       .channels = channels};
}

int augment_check(const augment_t *cfg, char *err, size_t errlen)
{
    if (cfg->channels != 1 && cfg->channels != 3) {
        err_set(err, errlen, "augment: channels must be 1 or 3, not %d", cfg->channels);
        return -1;
    }
    if (cfg->crop && !(cfg->scale[0] > 0 && cfg->scale[0] <= cfg->scale[1] &&
                       isfinite(cfg->scale[1]))) {
        err_set(err, errlen, "augment: crop scale (%g, %g) must satisfy 0 < min <= max",
                 cfg->scale[0], cfg->scale[1]);
        return -1;
    }
    if (cfg->crop && !(cfg->ratio[0] > 0 && cfg->ratio[0] <= cfg->ratio[1] &&
                       isfinite(cfg->ratio[1]))) {
        err_set(err, errlen, "augment: crop ratio (%g, %g) must satisfy 0 < min <= max",
                 cfg->ratio[0], cfg->ratio[1]);
        return -1;
    }
    if (!(cfg->flip_p >= 0 && cfg->flip_p <= 1)) {
        err_set(err, errlen, "augment: flip probability %g is not in [0, 1]", cfg->flip_p);
        return -1;
    }
    if (cfg->rotate && !(isfinite(cfg->degrees[0]) && isfinite(cfg->degrees[1]) &&
                         cfg->degrees[0] <= cfg->degrees[1])) {
        err_set(err, errlen, "augment: rotation range (%g, %g) must be finite with min <= max",
                 cfg->degrees[0], cfg->degrees[1]);
        return -1;
    }
    return 0;
}

/* Python's int(round(v)) for the sizes here: half to even (the default
 * rounding mode), as a double so out-of-range values stay comparable. */
static double round_even(double v)
{
    return nearbyint(v);
}

void augment_crop_params(rng_t *r, int src_w, int src_h, const double scale[2],
                         const double ratio[2], augment_params_t *p)
{
    const double area = (double)src_h * src_w;
    const double lr0 = log(ratio[0]), lr1 = log(ratio[1]);
    p->crop = 1;
    for (int attempt = 1; attempt <= 10; attempt++) {
        double target = area * rng_uniform(r, scale[0], scale[1]);
        double aspect = exp(rng_uniform(r, lr0, lr1));
        double w = round_even(sqrt(target * aspect)), h = round_even(sqrt(target / aspect));
        if (w > 0 && w <= src_w && h > 0 && h <= src_h) {
            p->w = (int)w;
            p->h = (int)h;
            p->top = (int)rng_below(r, (uint64_t)(src_h - p->h + 1));
            p->left = (int)rng_below(r, (uint64_t)(src_w - p->w + 1));
            p->attempts = attempt;
            return;
        }
    }
    /* torchvision's fallback: the center crop with the ratio clamped */
    double in_ratio = (double)src_w / (double)src_h;
    p->w = src_w;
    p->h = src_h;
    if (in_ratio < ratio[0])
        p->h = (int)round_even(src_w / ratio[0]);
    else if (in_ratio > ratio[1])
        p->w = (int)round_even(src_h * ratio[1]);
    /* torchvision fails on an empty box (only with ratios far from 1 on
     * tiny images); keep one pixel instead */
    p->h = p->h < 1 ? 1 : p->h;
    p->w = p->w < 1 ? 1 : p->w;
    p->top = (src_h - p->h) / 2;
    p->left = (src_w - p->w) / 2;
    p->attempts = 11;
}

augment_params_t augment_draw(const augment_t *cfg, uint64_t seed, uint32_t epoch, uint64_t id,
                              int src_w, int src_h)
{
    augment_params_t p = {0};
    if (cfg->crop && src_w > 0 && src_h > 0) {
        rng_t r = rng_stream(seed, epoch, id, RNG_STREAM_CROP);
        augment_crop_params(&r, src_w, src_h, cfg->scale, cfg->ratio, &p);
    }
    if (cfg->flip_p > 0) {
        rng_t r = rng_stream(seed, epoch, id, RNG_STREAM_FLIP);
        p.flip = rng_unit(&r) < cfg->flip_p;
    }
    if (cfg->rotate) {
        rng_t r = rng_stream(seed, epoch, id, RNG_STREAM_ROTATE);
        p.rotate = 1;
        p.angle = rng_uniform(&r, cfg->degrees[0], cfg->degrees[1]);
    }
    return p;
}

/* ---- the pixel steps ---- */

int augment_resized_crop(const image_t *src, int top, int left, int h, int w, uint8_t *out,
                         int out_h, int out_w, char *err, size_t errlen)
{
    if (top < 0 || left < 0 || h < 1 || w < 1 || top > src->h - h || left > src->w - w) {
        err_set(err, errlen, "crop box %dx%d at (%d, %d) is not inside the %dx%d image", w, h,
                 left, top, src->w, src->h);
        return -1;
    }
    /* PIL crops to a new image, then resizes that on its own: the resize
     * sees only the box (edge taps are renormalised at the box's border) */
    image_t *box = image_new(w, h, src->c);
    if (!box) {
        err_set(err, errlen, "out of memory for a %dx%d crop", w, h);
        return -1;
    }
    size_t row = (size_t)w * src->c;
    for (int y = 0; y < h; y++)
        memcpy(box->px + (size_t)y * row,
               src->px + ((size_t)(top + y) * src->w + (size_t)left) * src->c, row);
    resize_window_t win = {0, 0, out_w, out_h};
    int rc = resize_region(box, out_w, out_h, &win, out, 1, err, errlen);
    image_destroy(&box);
    return rc;
}

void augment_flip_planes(uint8_t *planes, int c, int h, int w)
{
    for (size_t r = 0; r < (size_t)c * h; r++) {
        uint8_t *p = planes + r * w;
        for (int a = 0, b = w - 1; a < b; a++, b--) {
            uint8_t t = p[a];
            p[a] = p[b];
            p[b] = t;
        }
    }
}

/* Python's angle % 360.0: the result takes the divisor's sign, +0.0 for 0. */
static double py_mod360(double a)
{
    double m = fmod(a, 360.0);
    if (m != 0.0 && m < 0)
        m += 360.0;
    return m != 0.0 ? m : 0.0;
}

/* Python's round(v, 15): correctly rounded to 15 decimals, as glibc's
 * printf (exact, half to even) and strtod (correctly rounded) do. */
static double py_round15(double v)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%.15f", v);
    return strtod(buf, NULL);
}

/* Image.rotate's inverse matrix for a w x h image about its center. */
static void rotate_matrix(double angle, int w, int h, double a[6])
{
    double rad = -(angle * (M_PI / 180.0)); /* -math.radians(angle) */
    double c = cos(rad), s = sin(rad);
    double cx = w / 2.0, cy = h / 2.0;
    a[0] = py_round15(c);
    a[1] = py_round15(s);
    a[3] = py_round15(-s);
    a[4] = py_round15(c);
    a[2] = a[0] * -cx + a[1] * -cy + 0.0;
    a[5] = a[3] * -cx + a[4] * -cy + 0.0;
    a[2] += cx;
    a[5] += cy;
}

/* Geometry.c's COORD: truncation, with everything left of 0 at -1. */
static int coord(double v)
{
    return v < 0.0 ? -1 : (int)v;
}

/* floor(v / 65536), which Pillow's arithmetic `v >> 16` gives. */
static int64_t asr16(int64_t v)
{
    return v >= 0 ? v >> 16 : ~(~v >> 16);
}

static int64_t fix16(double v)
{
    v = v * 65536.0 + 0.5;
    return v < 0.0 ? (int64_t)floor(v) : (int64_t)v;
}

static int fits_fixed(const double a[6], int x, int y)
{
    return fabs(x * a[0] + y * a[1] + a[2]) < 32768.0 &&
           fabs(x * a[3] + y * a[4] + a[5]) < 32768.0;
}

/* ImagingScaleAffine: no shear, nearest neighbour. Pillow tabulates the
 * columns once (x stepping xo += a[0]) and copies the run of valid ones;
 * with a[0] = +-1 (the only scale a rotation makes) the valid columns are
 * one run, so walking the same sums per row gives the same pixels. */
static void affine_scale(const uint8_t *in, uint8_t *out, int h, int w, const double a[6])
{
    double yo = a[5] + a[4] * 0.5;
    for (int y = 0; y < h; y++) {
        int yi = coord(yo);
        double xo = a[2] + a[0] * 0.5;
        for (int x = 0; x < w && yi >= 0 && yi < h; x++) {
            int xin = coord(xo);
            if (xin >= 0 && xin < w)
                out[(size_t)y * w + x] = in[(size_t)yi * w + xin];
            xo += a[0];
        }
        yo += a[4];
    }
}

/* affine_fixed: 16.16 fixed point, stepping along rows and columns. */
static void affine_fixed(const uint8_t *in, uint8_t *out, int h, int w, const double a[6])
{
    int64_t a0 = fix16(a[0]), a1 = fix16(a[1]), a3 = fix16(a[3]), a4 = fix16(a[4]);
    int64_t a2 = fix16(a[2] + a[0] * 0.5 + a[1] * 0.5);
    int64_t a5 = fix16(a[5] + a[3] * 0.5 + a[4] * 0.5);
    for (int y = 0; y < h; y++) {
        int64_t xx = a2, yy = a5;
        for (int x = 0; x < w; x++) {
            int64_t xin = asr16(xx), yin = asr16(yy);
            if (xin >= 0 && xin < w && yin >= 0 && yin < h)
                out[(size_t)y * w + x] = in[(size_t)yin * w + (size_t)xin];
            xx += a0;
            yy += a3;
        }
        a2 += a1;
        a5 += a4;
    }
}

/* ImagingTransformAffine's floating-point path (coordinates past 32767). */
static void affine_float(const uint8_t *in, uint8_t *out, int h, int w, const double a[6])
{
    double xo = a[2] + a[1] * 0.5 + a[0] * 0.5, yo = a[5] + a[4] * 0.5 + a[3] * 0.5;
    for (int y = 0; y < h; y++) {
        double xx = xo, yy = yo;
        for (int x = 0; x < w; x++) {
            int xin = coord(xx), yin = coord(yy);
            if (xin >= 0 && xin < w && yin >= 0 && yin < h)
                out[(size_t)y * w + x] = in[(size_t)yin * w + xin];
            xx += a[0];
            yy += a[3];
        }
        xo += a[1];
        yo += a[4];
    }
}

/* One plane through Image.rotate's shortcuts or its affine transform. */
static void rotate_plane(const uint8_t *in, uint8_t *out, int h, int w, double angle)
{
    double m = py_mod360(angle);
    size_t n = (size_t)h * w;
    if (m == 0.0) {
        memcpy(out, in, n);
        return;
    }
    if (m == 180.0 || ((m == 90.0 || m == 270.0) && w == h)) {
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++) {
                uint8_t v = in[(size_t)y * w + x];
                if (m == 180.0)
                    out[(size_t)(h - 1 - y) * w + (w - 1 - x)] = v;
                else if (m == 90.0) /* PIL ROTATE_90, counter-clockwise */
                    out[(size_t)(w - 1 - x) * h + y] = v;
                else
                    out[(size_t)x * h + (h - 1 - y)] = v;
            }
        return;
    }
    double a[6];
    rotate_matrix(m, w, h, a);
    memset(out, 0, n); /* fillcolor 0 */
    if (a[1] == 0 && a[3] == 0)
        affine_scale(in, out, h, w, a);
    else if (fits_fixed(a, 0, 0) && fits_fixed(a, w, h) && fits_fixed(a, 0, h) &&
             fits_fixed(a, w, 0))
        affine_fixed(in, out, h, w, a);
    else
        affine_float(in, out, h, w, a);
}

void augment_rotate_planes(const uint8_t *in, uint8_t *out, int c, int h, int w, double angle)
{
    size_t n = (size_t)h * w;
    for (int ch = 0; ch < c; ch++)
        rotate_plane(in + ch * n, out + ch * n, h, w, angle);
}

/* SRC interleaved to planar, same size. */
static void to_planar(const image_t *src, uint8_t *out)
{
    size_t n = (size_t)src->w * src->h;
    for (int ch = 0; ch < src->c; ch++)
        for (size_t i = 0; i < n; i++)
            out[ch * n + i] = src->px[i * src->c + ch];
}

/* The pixel steps on SRC (already in the working channels) into OUT. */
static int apply_steps(const augment_params_t *p, const image_t *src, uint8_t *out, int out_h,
                       int out_w, char *err, size_t errlen)
{
    if (p->crop) {
        if (augment_resized_crop(src, p->top, p->left, p->h, p->w, out, out_h, out_w, err,
                                 errlen) != 0)
            return -1;
    } else if (src->w != out_w || src->h != out_h) {
        err_set(err, errlen, "image is %dx%d, batch needs %dx%d; without a random crop the "
                 "source must have the output size", src->w, src->h, out_w, out_h);
        return -1;
    } else {
        to_planar(src, out);
    }
    if (p->flip)
        augment_flip_planes(out, src->c, out_h, out_w);
    if (p->rotate) {
        size_t n = (size_t)src->c * out_h * out_w;
        uint8_t *tmp = malloc(n);
        if (!tmp) {
            err_set(err, errlen, "out of memory rotating a %dx%d image", out_w, out_h);
            return -1;
        }
        memcpy(tmp, out, n);
        augment_rotate_planes(tmp, out, src->c, out_h, out_w, p->angle);
        free(tmp);
    }
    return 0;
}

int augment_apply(const augment_t *cfg, const augment_params_t *p, const image_t *src,
                  uint8_t *out, int out_h, int out_w, char *err, size_t errlen)
{
    if (augment_check(cfg, err, errlen) != 0)
        return -1;
    if (!src || !src->px || (src->c != 1 && src->c != 3) || out_h < 1 || out_w < 1 ||
        out_h > MAX_SIDE || out_w > MAX_SIDE) {
        err_set(err, errlen, "augment: bad input (need a 1- or 3-channel image and an output "
                 "size in 1..%d, got %dx%d)", MAX_SIDE, out_w, out_h);
        return -1;
    }
    image_t *gray = NULL;
    if (cfg->channels == 1 && src->c == 3) {
        /* Grayscale first, as the eval path does (resize does not commute
         * with PIL's rounding gray conversion) */
        if (!(gray = image_new(src->w, src->h, 1))) {
            err_set(err, errlen, "out of memory for a %dx%d gray image", src->w, src->h);
            return -1;
        }
        rgb_to_gray(src->px, gray->px, (size_t)src->w * src->h);
        src = gray;
    }
    int rc = apply_steps(p, src, out, out_h, out_w, err, errlen);
    if (rc == 0 && cfg->channels == 3 && src->c == 1) {
        size_t plane = (size_t)out_h * out_w;
        memcpy(out + plane, out, plane);
        memcpy(out + 2 * plane, out, plane);
    }
    image_destroy(&gray);
    return rc;
}

int augment_sample(const augment_t *cfg, uint64_t seed, uint32_t epoch, uint64_t id,
                   const image_t *src, uint8_t *out, int out_h, int out_w, char *err,
                   size_t errlen)
{
    if (!src) {
        err_set(err, errlen, "augment: no image");
        return -1;
    }
    augment_params_t p = augment_draw(cfg, seed, epoch, id, src->w, src->h);
    return augment_apply(cfg, &p, src, out, out_h, out_w, err, errlen);
}

typedef struct {
    const augment_t *cfg;
    uint64_t seed, id;
    uint32_t epoch;
    augment_params_t p; /* drawn once the size is known */
} load_ctx_t;

/* decode_need_fn: draw the parameters from the real size, ask for the box. */
static int need_box(void *arg, int src_w, int src_h, decode_rect_t *need, char *err,
                    size_t errlen)
{
    load_ctx_t *c = arg;
    (void)err;
    (void)errlen;
    c->p = augment_draw(c->cfg, c->seed, c->epoch, c->id, src_w, src_h);
    *need = c->p.crop ? (decode_rect_t){c->p.left, c->p.top, c->p.w, c->p.h}
                      : (decode_rect_t){0, 0, src_w, src_h};
    return 0;
}

/* The file in BUF decoded (only the crop box's window of a JPEG where the
 * build can) and augmented. */
static int load_buffer(const uint8_t *buf, size_t len, load_ctx_t *c, uint8_t *out, int out_h,
                       int out_w, char *err, size_t errlen)
{
    decode_part_t part;
    int src_w, src_h;
    c->p = (augment_params_t){0};
    image_t *img = decode_image_part(buf, len, NULL, need_box, c, NULL, &part, &src_w, &src_h,
                                     err, errlen);
    if (!img)
        return -1;
    if (part.x == 0 && part.y == 0 && part.full_w == img->w && part.full_h == img->h)
        c->p = augment_draw(c->cfg, c->seed, c->epoch, c->id, src_w, src_h); /* whole image */
    /* the box in the decoded window's coordinates */
    augment_params_t p = c->p;
    p.top -= part.y;
    p.left -= part.x;
    int rc = augment_apply(c->cfg, &p, img, out, out_h, out_w, err, errlen);
    image_destroy(&img);
    return rc;
}

static int load_file(const dataset_t *ds, load_ctx_t *c, uint8_t *out, int out_h, int out_w,
                     char *err, size_t errlen)
{
    char path[4096];
    int n = snprintf(path, sizeof path, "%s/%s", dataset_root(ds), dataset_path(ds, c->id));
    if (n < 0 || (size_t)n >= sizeof path) {
        err_set(err, errlen, "path too long");
        return -1;
    }
    uint8_t *buf = NULL;
    size_t len;
    if (decode_read_file(path, &buf, &len, err, errlen) != 0)
        return -1;
    int rc = load_buffer(buf, len, c, out, out_h, out_w, err, errlen);
    free(buf);
    return rc;
}

int augment_flip_rotate(const augment_t *cfg, uint64_t seed, uint32_t epoch, uint64_t id,
                        uint8_t *out, int out_h, int out_w, char *err, size_t errlen)
{
    int c = cfg->channels;
    augment_params_t p = augment_draw(cfg, seed, epoch, id, out_w, out_h);
    if (p.flip)
        augment_flip_planes(out, c, out_h, out_w);
    if (!p.rotate)
        return 0;
    size_t n = (size_t)c * out_h * out_w;
    uint8_t *tmp = malloc(n);
    if (!tmp) {
        err_set(err, errlen, "out of memory rotating a %dx%d image", out_w, out_h);
        return -1;
    }
    memcpy(tmp, out, n);
    augment_rotate_planes(tmp, out, c, out_h, out_w, p.angle);
    free(tmp);
    return 0;
}

int augment_load_buffer(const uint8_t *buf, size_t len, const augment_t *cfg,
                        const transform_t *t, uint64_t seed, uint32_t epoch, uint64_t id,
                        uint8_t *out, int out_h, int out_w, char *err, size_t errlen)
{
    if (augment_check(cfg, err, errlen) != 0)
        return -1;
    if (!cfg->crop) {
        if (sample_load_buffer(buf, len, t, out, out_h, out_w, err, errlen) != 0)
            return -1;
        return augment_flip_rotate(cfg, seed, epoch, id, out, out_h, out_w, err, errlen);
    }
    load_ctx_t c = {cfg, seed, id, epoch, {0}};
    return load_buffer(buf, len, &c, out, out_h, out_w, err, errlen);
}

int augment_load(const dataset_t *ds, uint64_t id, const augment_t *cfg, uint64_t seed,
                 uint32_t epoch, uint8_t *out, int out_h, int out_w, char *err, size_t errlen)
{
    if (id >= dataset_size(ds)) {
        err_set(err, errlen, "sample %llu is out of range (dataset has %llu)",
                 (unsigned long long)id, (unsigned long long)dataset_size(ds));
        return -1;
    }
    if (augment_check(cfg, err, errlen) != 0)
        return -1;
    if (dataset_is_idx(ds)) {
        image_t view = {0, 0, 1, NULL};
        view.px = (uint8_t *)dataset_idx_pixels(ds, id, &view.h, &view.w);
        return augment_sample(cfg, seed, epoch, id, &view, out, out_h, out_w, err, errlen);
    }
    load_ctx_t c = {cfg, seed, id, epoch, {0}};
    return load_file(ds, &c, out, out_h, out_w, err, errlen);
}
