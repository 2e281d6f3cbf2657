#include "common/image/transform.h"
#include "common/errbuf.h"

#include "common/image/resize.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SIDE 65535

int transform_check(const transform_t *t, char *err, size_t errlen)
{
    if (t->channels != 1 && t->channels != 3) {
        err_set(err, errlen, "channels must be 1 or 3, not %d", t->channels);
        return -1;
    }
    if (t->resize < 0 || t->resize > MAX_SIDE) {
        err_set(err, errlen, "resize %d is out of range [0, %d]", t->resize, MAX_SIDE);
        return -1;
    }
    if (t->crop_h < 0 || t->crop_w < 0 || t->crop_h > MAX_SIDE || t->crop_w > MAX_SIDE ||
        (t->crop_h == 0) != (t->crop_w == 0)) {
        err_set(err, errlen, "crop %dx%d: give both sides (1..%d) or neither", t->crop_w,
                 t->crop_h, MAX_SIDE);
        return -1;
    }
    return 0;
}

int center_crop_offset(int size, int crop)
{
    if (crop > size)
        return -((crop - size) / 2);
    int d = size - crop, q = d / 2;
    if (d % 2 && q % 2) /* q + 0.5 rounds half to even */
        q++;
    return q;
}

void rgb_to_gray(const uint8_t *rgb, uint8_t *gray, size_t npix)
{
    for (size_t i = 0; i < npix; i++, rgb += 3)
        gray[i] = (uint8_t)((rgb[0] * 19595u + rgb[1] * 38470u + rgb[2] * 7471u + 0x8000u) >> 16);
}

/* Size after Resize (the source size when there is none). */
static void resized_size(const transform_t *t, int src_w, int src_h, int *w, int *h)
{
    if (t->resize > 0)
        resize_shorter_side(src_w, src_h, t->resize, w, h);
    else {
        *w = src_w;
        *h = src_h;
    }
}

int transform_window(const transform_t *t, int src_w, int src_h, int out_h, int out_w,
                     int *rw, int *rh, resize_window_t *win, char *err, size_t errlen)
{
    resized_size(t, src_w, src_h, rw, rh);
    *win = (resize_window_t){0, 0, *rw, *rh};
    if (t->crop_h) {
        *win = (resize_window_t){center_crop_offset(*rw, t->crop_w),
                                 center_crop_offset(*rh, t->crop_h), t->crop_w, t->crop_h};
    }
    if (win->w != out_w || win->h != out_h) {
        err_set(err, errlen, "image is %dx%d%s, batch needs %dx%d; use --crop/--resize", win->w,
                 win->h, t->resize ? " after resize" : "", out_w, out_h);
        return -1;
    }
    return 0;
}

int transform_part(const image_t *img, const decode_part_t *part, int src_w, int src_h,
                   const transform_t *t, uint8_t *out, int out_h, int out_w, char *err,
                   size_t errlen)
{
    int rw, rh;
    resize_window_t win;
    if (transform_check(t, err, errlen) != 0 ||
        transform_window(t, src_w, src_h, out_h, out_w, &rw, &rh, &win, err, errlen) != 0)
        return -1;
    image_t *gray = NULL;
    if (t->channels == 1 && img->c == 3) {
        if (!(gray = image_new(img->w, img->h, 1))) {
            err_set(err, errlen, "out of memory for a %dx%d gray image", img->w, img->h);
            return -1;
        }
        rgb_to_gray(img->px, gray->px, (size_t)img->w * img->h);
        img = gray;
    }
    int rc = resize_region_at(img, part->x, part->y, part->full_w, part->full_h, rw, rh, &win,
                              out, 1, err, errlen);
    image_destroy(&gray);
    if (rc == 0 && t->channels == 3 && img->c == 1) {
        size_t plane = (size_t)out_h * out_w;
        memcpy(out + plane, out, plane);
        memcpy(out + 2 * plane, out, plane);
    }
    return rc;
}

int transform_image(const image_t *img, int src_w, int src_h, const transform_t *t,
                    uint8_t *out, int out_h, int out_w, char *err, size_t errlen)
{
    decode_part_t whole = {0, 0, img->w, img->h};
    return transform_part(img, &whole, src_w, src_h, t, out, out_h, out_w, err, errlen);
}

typedef struct {
    const transform_t *t;
    int out_h, out_w;
} need_ctx_t;

/* decode_need_fn: the source pixels that Resize + CenterCrop read. */
static int need_rect(void *arg, int src_w, int src_h, decode_rect_t *need, char *err,
                     size_t errlen)
{
    const need_ctx_t *n = arg;
    int rw, rh;
    resize_window_t win, rect;
    if (transform_window(n->t, src_w, src_h, n->out_h, n->out_w, &rw, &rh, &win, err, errlen) != 0 ||
        resize_source_rect(src_w, src_h, rw, rh, &win, &rect, err, errlen) != 0)
        return -1;
    /* a crop wholly outside the image reads nothing: decode one pixel */
    *need = rect.w > 0 ? (decode_rect_t){rect.x, rect.y, rect.w, rect.h}
                       : (decode_rect_t){0, 0, 1, 1};
    return 0;
}

/* Per-thread buffers for sample_load: the file bytes and the decoded
 * window are reused from sample to sample, so a loader thread's heap does
 * not grow and shrink (mmap, page faults, trimming) with every image.
 * Buffers grown past KEEP_MAX bytes by an unusually large image are
 * released after it. Freed when the thread exits. */
#define KEEP_MAX ((size_t)16 << 20)

typedef struct {
    uint8_t *file;
    size_t file_cap;
    image_buf_t img;
} workspace_t;

static pthread_key_t ws_key;
static pthread_once_t ws_once = PTHREAD_ONCE_INIT;
static int ws_key_ok;

static void ws_free(void *arg)
{
    workspace_t *ws = arg;
    free(ws->file);
    free(ws->img.img.px);
    free(ws);
}

static void ws_init(void)
{
    ws_key_ok = pthread_key_create(&ws_key, ws_free) == 0;
}

/* This thread's workspace; NULL (allocate per sample) if it cannot be made. */
static workspace_t *workspace(void)
{
    if (pthread_once(&ws_once, ws_init) != 0 || !ws_key_ok)
        return NULL;
    workspace_t *ws = pthread_getspecific(ws_key);
    if (!ws && (ws = calloc(1, sizeof *ws)) && pthread_setspecific(ws_key, ws) != 0) {
        free(ws);
        ws = NULL;
    }
    return ws;
}

static void ws_trim(workspace_t *ws)
{
    if (ws->file_cap > KEEP_MAX) {
        free(ws->file);
        ws->file = NULL;
        ws->file_cap = 0;
    }
    if (ws->img.cap > KEEP_MAX) {
        free(ws->img.img.px);
        memset(&ws->img, 0, sizeof ws->img);
    }
}

/* Decodes the part of BUF that T reads (with DCT scaling down to what the
 * resize needs when allowed). */
static image_t *decode_for(const uint8_t *buf, size_t len, const transform_t *t, int out_h,
                           int out_w, image_buf_t *reuse, decode_part_t *part, int *src_w,
                           int *src_h, char *err, size_t errlen)
{
    decode_opts_t opts = {0, 0};
    int w, h;
    if (t->dct_scaling && t->resize > 0 && decode_probe(buf, len, &w, &h, err, errlen) == 0)
        resized_size(t, w, h, &opts.min_w, &opts.min_h);
    need_ctx_t need = {t, out_h, out_w};
    return decode_image_part(buf, len, &opts, need_rect, &need, reuse, part, src_w, src_h, err,
                             errlen);
}

/* Decodes the part of file I of an ImageFolder that T reads (with DCT
 * scaling down to what the resize needs when allowed). */
static image_t *load_file(const dataset_t *ds, uint64_t i, const transform_t *t, int out_h,
                          int out_w, workspace_t *ws, decode_part_t *part, int *src_w,
                          int *src_h, char *err, size_t errlen)
{
    char path[4096];
    int n = snprintf(path, sizeof path, "%s/%s", dataset_root(ds), dataset_path(ds, i));
    if (n < 0 || (size_t)n >= sizeof path) {
        err_set(err, errlen, "path too long");
        return NULL;
    }
    uint8_t *buf = NULL;
    size_t len, cap = 0;
    uint8_t **bufp = ws ? &ws->file : &buf;
    if (decode_read_file_into(path, bufp, ws ? &ws->file_cap : &cap, &len, err, errlen) != 0) {
        free(buf);
        return NULL;
    }
    image_t *img = decode_for(*bufp, len, t, out_h, out_w, ws ? &ws->img : NULL, part, src_w,
                              src_h, err, errlen);
    free(buf);
    return img;
}

int sample_load_buffer(const uint8_t *buf, size_t len, const transform_t *t, uint8_t *out,
                       int out_h, int out_w, char *err, size_t errlen)
{
    int src_w, src_h;
    decode_part_t part;
    if (transform_check(t, err, errlen) != 0)
        return -1;
    /* this thread's pixel buffer, as sample_load (gpud decodes --wire jpeg batches here) */
    workspace_t *ws = workspace();
    image_t *img = decode_for(buf, len, t, out_h, out_w, ws ? &ws->img : NULL, &part, &src_w,
                              &src_h, err, errlen);
    int rc = img ? transform_part(img, &part, src_w, src_h, t, out, out_h, out_w, err, errlen) : -1;
    if (!ws || img != &ws->img.img)
        image_destroy(&img);
    if (ws)
        ws_trim(ws);
    return rc;
}

int sample_load(const dataset_t *ds, uint64_t i, const transform_t *t, uint8_t *out, int out_h,
                int out_w, char *err, size_t errlen)
{
    if (i >= dataset_size(ds)) {
        err_set(err, errlen, "sample %llu is out of range (dataset has %llu)",
                 (unsigned long long)i, (unsigned long long)dataset_size(ds));
        return -1;
    }
    if (dataset_is_idx(ds)) {
        image_t view = {0, 0, 1, NULL};
        view.px = (uint8_t *)dataset_idx_pixels(ds, i, &view.h, &view.w);
        return transform_image(&view, view.w, view.h, t, out, out_h, out_w, err, errlen);
    }
    int src_w, src_h;
    decode_part_t part;
    if (transform_check(t, err, errlen) != 0)
        return -1;
    workspace_t *ws = workspace();
    image_t *img = load_file(ds, i, t, out_h, out_w, ws, &part, &src_w, &src_h, err, errlen);
    int rc = -1;
    if (img)
        rc = transform_part(img, &part, src_w, src_h, t, out, out_h, out_w, err, errlen);
    if (!ws || img != &ws->img.img)
        image_destroy(&img);
    if (ws)
        ws_trim(ws);
    return rc;
}

static int first_image_size(const dataset_t *ds, int *w, int *h, char *err, size_t errlen)
{
    char why[256] = "";
    for (uint64_t i = 0; i < dataset_size(ds); i++) {
        char path[4096];
        uint8_t *buf;
        size_t len;
        snprintf(path, sizeof path, "%s/%s", dataset_root(ds), dataset_path(ds, i));
        if (decode_read_file(path, &buf, &len, why, sizeof why) != 0)
            continue;
        int rc = decode_probe(buf, len, w, h, why, sizeof why);
        free(buf);
        if (rc == 0)
            return 0;
    }
    err_set(err, errlen, "%s: no image in the dataset can be decoded (last: %s)",
             dataset_root(ds), why);
    return -1;
}

int transform_output_hw(const transform_t *t, const dataset_t *ds, int *h, int *w, char *err,
                        size_t errlen)
{
    if (transform_check(t, err, errlen) != 0)
        return -1;
    if (t->crop_h) {
        *h = t->crop_h;
        *w = t->crop_w;
        return 0;
    }
    int sw, sh;
    if (dataset_is_idx(ds)) {
        if (!dataset_idx_pixels(ds, 0, &sh, &sw)) {
            err_set(err, errlen, "idx dataset has no samples");
            return -1;
        }
    } else if (first_image_size(ds, &sw, &sh, err, errlen) != 0) {
        return -1;
    }
    resized_size(t, sw, sh, w, h);
    return 0;
}
