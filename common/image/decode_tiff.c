/* TIFF through libtiff (its first directory, as PIL opens it): libtiff
 * undoes the compression and fill order, the samples are then converted
 * the way Pillow 9.4's TiffImagePlugin modes convert to RGB:
 *   gray 1/2/4/8 bits (min-is-black or -white), LA   -> gray (alpha dropped)
 *   gray 16 bits ("I;16")                            -> clipped to 255
 *   RGB 8/16 bits (+ extra samples)                  -> RGB (16: high byte;
 *     associated alpha is un-premultiplied as PIL's "RGBa" unpacker does)
 *   palette 1/2/4/8 bits (colormap >> 8)             -> RGB
 *   CMYK 8 bits                                      -> PIL's cmyk2rgb
 *   YCbCr: JPEG-compressed read as RGB by libjpeg (JPEGCOLORMODE_RGB, as
 *     PIL asks), other compressions through TIFFReadRGBAImage (as PIL does)
 * Strips and tiles, contiguous or separate planes. Other layouts (float or
 * signed samples, LAB, 12/32-bit) are refused with a reason. */
#include "common/errbuf.h"
#include "common/image/decode_fmt.h"

#ifdef DECODE_HAVE_TIFF
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tiffio.h>

/* ---- libtiff over a memory buffer ------------------------------------------- */

typedef struct {
    const uint8_t *buf;
    size_t len, pos;
    char *err;
    size_t errlen;
} tiff_src_t;

static tmsize_t mem_read(thandle_t h, void *out, tmsize_t n)
{
    tiff_src_t *s = (tiff_src_t *)h;
    size_t left = s->pos < s->len ? s->len - s->pos : 0;
    size_t k = n < 0 ? 0 : (size_t)n < left ? (size_t)n : left;
    memcpy(out, s->buf + s->pos, k);
    s->pos += k;
    return (tmsize_t)k;
}

static tmsize_t mem_write(thandle_t h, void *in, tmsize_t n)
{
    (void)h;
    (void)in;
    (void)n;
    return -1;
}

static toff_t mem_seek(thandle_t h, toff_t off, int whence)
{
    tiff_src_t *s = (tiff_src_t *)h;
    uint64_t base = whence == SEEK_CUR ? s->pos : whence == SEEK_END ? s->len : 0;
    uint64_t to = base + off; /* libtiff passes negative offsets as wrapped values */
    if (to > (uint64_t)SIZE_MAX / 2)
        return (toff_t)-1;
    s->pos = (size_t)to;
    return to;
}

static int mem_close(thandle_t h)
{
    (void)h;
    return 0;
}

static toff_t mem_size(thandle_t h)
{
    return ((tiff_src_t *)h)->len;
}

static int mem_map(thandle_t h, void **base, toff_t *size)
{
    (void)h;
    (void)base;
    (void)size;
    return 0;
}

static void mem_unmap(thandle_t h, void *base, toff_t size)
{
    (void)h;
    (void)base;
    (void)size;
}

/* libtiff's first error is the reason; warnings are ignored, as PIL does. */
static int on_error(TIFF *tif, void *user, const char *module, const char *fmt, va_list ap)
{
    (void)tif;
    (void)module;
    tiff_src_t *s = user;
    if (!s->err[0]) {
        char msg[256];
        vsnprintf(msg, sizeof msg, fmt, ap);
        err_set(s->err, s->errlen, "corrupt TIFF: %s", msg);
    }
    return 1;
}

static int on_warning(TIFF *tif, void *user, const char *module, const char *fmt, va_list ap)
{
    (void)tif;
    (void)user;
    (void)module;
    (void)fmt;
    (void)ap;
    return 1;
}

/* ---- the layout --------------------------------------------------------------- */

typedef enum { L_GRAY, L_RGB, L_PAL, L_CMYK } layout_t;

typedef struct {
    uint32_t w, h;
    uint16_t bps, spp, photo, planar, fmt;
    int invert;     /* min-is-white gray */
    int assoc;      /* RGB with associated (premultiplied) alpha */
    layout_t layout;
    uint16_t *cmap[3];
} tinfo_t;

static int unsupported(const tinfo_t *t, char *err, size_t errlen)
{
    if (!err[0])
        err_set(err, errlen,
                "unsupported TIFF layout (photometric %u, %u bits, %u samples, sample format %u)",
                t->photo, t->bps, t->spp, t->fmt);
    return -1;
}

static int read_layout(TIFF *tif, tinfo_t *t, char *err, size_t errlen)
{
    uint16_t n_extra = 0, *extra = NULL;
    if (!TIFFGetField(tif, TIFFTAG_IMAGEWIDTH, &t->w) ||
        !TIFFGetField(tif, TIFFTAG_IMAGELENGTH, &t->h)) {
        if (!err[0])
            err_set(err, errlen, "corrupt TIFF: no image size");
        return -1;
    }
    if (!TIFFGetField(tif, TIFFTAG_PHOTOMETRIC, &t->photo)) {
        if (!err[0])
            err_set(err, errlen, "corrupt TIFF: no photometric interpretation");
        return -1;
    }
    TIFFGetFieldDefaulted(tif, TIFFTAG_BITSPERSAMPLE, &t->bps);
    TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLESPERPIXEL, &t->spp);
    TIFFGetFieldDefaulted(tif, TIFFTAG_PLANARCONFIG, &t->planar);
    TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLEFORMAT, &t->fmt);
    TIFFGetFieldDefaulted(tif, TIFFTAG_EXTRASAMPLES, &n_extra, &extra);
    if (image_check_dims(t->w, t->h, err, errlen) != 0)
        return -1;
    int b = t->bps, s = t->spp;
    if (t->fmt != SAMPLEFORMAT_UINT || s < 1)
        return unsupported(t, err, errlen);
    switch (t->photo) {
    case PHOTOMETRIC_MINISWHITE:
    case PHOTOMETRIC_MINISBLACK:
        t->layout = L_GRAY;
        t->invert = t->photo == PHOTOMETRIC_MINISWHITE;
        if (b == 16 && t->invert && TIFFIsBigEndian(tif))
            return unsupported(t, err, errlen); /* as in PIL, which has no mode for it */
        if (b == 16)
            t->invert = 0; /* PIL reads little-endian ones as plain "I;16" */
        if (!((s == 1 && (b == 1 || b == 2 || b == 4 || b == 8 || b == 16)) ||
              (s == 2 && b == 8 && n_extra == 1 && extra[0] == EXTRASAMPLE_UNASSALPHA)))
            return unsupported(t, err, errlen);
        return 0;
    case PHOTOMETRIC_YCBCR: /* the caller made JPEG give RGB */
    case PHOTOMETRIC_RGB:
        t->layout = L_RGB;
        t->assoc = s >= 4 && n_extra >= 1 && extra[0] == EXTRASAMPLE_ASSOCALPHA;
        if ((b == 8 && s >= 3 && s <= 6) || (b == 16 && (s == 3 || s == 4)))
            return 0;
        return unsupported(t, err, errlen);
    case PHOTOMETRIC_PALETTE:
        t->layout = L_PAL;
        if (!((s == 1 && (b == 1 || b == 2 || b == 4 || b == 8)) || (s == 2 && b == 8)))
            return unsupported(t, err, errlen);
        if (!TIFFGetField(tif, TIFFTAG_COLORMAP, &t->cmap[0], &t->cmap[1], &t->cmap[2])) {
            err_set(err, errlen, "corrupt TIFF: palette image without a colormap");
            return -1;
        }
        return 0;
    case PHOTOMETRIC_SEPARATED:
        t->layout = L_CMYK;
        if (b == 8 && s >= 4 && s <= 6)
            return 0;
        return unsupported(t, err, errlen);
    default:
        return unsupported(t, err, errlen);
    }
}

/* ---- samples ------------------------------------------------------------------ */

/* Planes of decoded samples: one (contiguous) or spp (separate), each h
 * rows of `stride` bytes; 16-bit samples in host order (libtiff swaps). */
typedef struct {
    uint8_t *plane[8];
    size_t stride;
    int nplanes, per; /* samples per pixel within a plane */
} samples_t;

static unsigned sample(const tinfo_t *t, const samples_t *sm, uint32_t x, uint32_t y, int s)
{
    const uint8_t *row = sm->plane[sm->nplanes > 1 ? s : 0] + (size_t)y * sm->stride;
    size_t i = (size_t)x * sm->per + (sm->nplanes > 1 ? 0 : (size_t)s);
    switch (t->bps) {
    case 8:
        return row[i];
    case 16: {
        uint16_t v;
        memcpy(&v, row + 2 * i, 2);
        return v;
    }
    default: { /* 1, 2, 4 bits, most significant first */
        size_t bit = i * t->bps;
        return (row[bit / 8] >> (8 - t->bps - bit % 8)) & ((1u << t->bps) - 1);
    }
    }
}

static int read_samples(TIFF *tif, const tinfo_t *t, samples_t *sm, char *err, size_t errlen)
{
    sm->nplanes = t->planar == PLANARCONFIG_SEPARATE && t->spp > 1 ? t->spp : 1;
    sm->per = sm->nplanes > 1 ? 1 : t->spp;
    if (sm->nplanes > 8)
        return unsupported(t, err, errlen);
    sm->stride = ((size_t)t->w * sm->per * t->bps + 7) / 8;
    uint8_t *chunk = NULL;
    int tiled = TIFFIsTiled(tif), rc = 0;
    uint32_t tw = 0, th = 0;
    tmsize_t csize = tiled ? TIFFTileSize(tif) : TIFFScanlineSize(tif);
    if (tiled) {
        TIFFGetField(tif, TIFFTAG_TILEWIDTH, &tw);
        TIFFGetField(tif, TIFFTAG_TILELENGTH, &th);
    }
    if (csize <= 0 || (tiled && (!tw || !th || ((size_t)tw * sm->per * t->bps) % 8))) {
        if (!err[0])
            err_set(err, errlen, "corrupt TIFF: bad strip or tile size");
        return -1;
    }
    size_t trow = tiled ? ((size_t)tw * sm->per * t->bps + 7) / 8 : 0;
    if ((tiled && (size_t)csize < trow * th) || (!tiled && (size_t)csize < sm->stride)) {
        if (!err[0])
            err_set(err, errlen, "corrupt TIFF: strip or tile smaller than its rows");
        return -1;
    }
    chunk = malloc((size_t)csize);
    for (int p = 0; chunk && p < sm->nplanes; p++) {
        sm->plane[p] = malloc(sm->stride * t->h);
        if (!sm->plane[p])
            break;
    }
    if (!chunk || !sm->plane[sm->nplanes - 1]) {
        free(chunk);
        err_set(err, errlen, "out of memory for a %ux%u TIFF", t->w, t->h);
        return -1;
    }
    for (int p = 0; rc == 0 && p < sm->nplanes; p++) {
        if (!tiled) {
            for (uint32_t y = 0; rc == 0 && y < t->h; y++) {
                if (TIFFReadScanline(tif, chunk, y, (uint16_t)p) < 0)
                    rc = -1;
                else
                    memcpy(sm->plane[p] + y * sm->stride, chunk, sm->stride);
            }
            continue;
        }
        for (uint32_t ty = 0; rc == 0 && ty < t->h; ty += th) {
            for (uint32_t tx = 0; rc == 0 && tx < t->w; tx += tw) {
                if (TIFFReadTile(tif, chunk, tx, ty, 0, (uint16_t)p) < 0) {
                    rc = -1;
                    break;
                }
                /* tile widths are multiples of 16, so tile columns start on bytes */
                size_t x0 = (size_t)tx * sm->per * t->bps / 8;
                size_t nb = sm->stride - x0 < trow ? sm->stride - x0 : trow;
                for (uint32_t r = 0; r < th && ty + r < t->h; r++)
                    memcpy(sm->plane[p] + (ty + r) * sm->stride + x0, chunk + r * trow, nb);
            }
        }
    }
    free(chunk);
    if (rc != 0 && !err[0])
        err_set(err, errlen, "corrupt TIFF: cannot read the image data");
    return rc;
}

static uint8_t clip16(unsigned v)
{
    return (uint8_t)(v > 255 ? 255 : v);
}

/* The common case, 8-bit contiguous gray or RGB(+extra) without
 * premultiplied alpha, row by row without the per-sample lookups. 1 when
 * it applied. */
static int convert_fast(const tinfo_t *t, const samples_t *sm, image_t *img)
{
    if (t->bps != 8 || sm->nplanes != 1 || t->assoc || t->invert ||
        (t->layout != L_GRAY && t->layout != L_RGB))
        return 0;
    for (uint32_t y = 0; y < t->h; y++) {
        const uint8_t *s = sm->plane[0] + (size_t)y * sm->stride;
        uint8_t *d = img->px + (size_t)y * t->w * img->c;
        for (uint32_t x = 0; x < t->w; x++, s += sm->per, d += img->c)
            memcpy(d, s, (size_t)img->c);
    }
    return 1;
}

static void convert(const tinfo_t *t, const samples_t *sm, image_t *img)
{
    if (convert_fast(t, sm, img))
        return;
    for (uint32_t y = 0; y < t->h; y++) {
        uint8_t *d = img->px + (size_t)y * t->w * img->c;
        for (uint32_t x = 0; x < t->w; x++, d += img->c) {
            unsigned v = sample(t, sm, x, y, 0);
            if (t->layout == L_GRAY) {
                unsigned max = (1u << (t->bps < 16 ? t->bps : 8)) - 1;
                if (t->bps == 16)
                    d[0] = clip16(v);
                else /* PIL's "1", "L;2", "L;4" unpackers: v * 255 / max */
                    d[0] = (uint8_t)((t->invert ? max - v : v) * 255 / max);
            } else if (t->layout == L_PAL) {
                for (int ch = 0; ch < 3; ch++)
                    d[ch] = (uint8_t)(t->cmap[ch][v] >> 8);
            } else if (t->layout == L_CMYK) {
                uint8_t k[4] = {(uint8_t)v, (uint8_t)sample(t, sm, x, y, 1),
                                (uint8_t)sample(t, sm, x, y, 2), (uint8_t)sample(t, sm, x, y, 3)};
                decode_cmyk_px(k, d);
            } else {
                int sh = t->bps == 16 ? 8 : 0; /* 16 bits: PIL keeps the high byte */
                unsigned rgb[3] = {v >> sh, sample(t, sm, x, y, 1) >> sh,
                                   sample(t, sm, x, y, 2) >> sh};
                unsigned a = t->assoc ? sample(t, sm, x, y, 3) >> sh : 255;
                for (int ch = 0; ch < 3; ch++) /* PIL's "RGBa" unpacker */
                    d[ch] = a == 255 ? (uint8_t)rgb[ch] : !a ? 0 : clip16(rgb[ch] * 255 / a);
            }
        }
    }
}

/* YCbCr other than JPEG: libtiff's RGBA image, as PIL reads it. */
static image_t *read_rgba(TIFF *tif, uint32_t w, uint32_t h, char *err, size_t errlen)
{
    image_t *img = image_alloc((int)w, (int)h, 3, err, errlen);
    uint32_t *rgba = img ? malloc((size_t)w * h * 4) : NULL;
    if (img && !rgba)
        err_set(err, errlen, "out of memory for a %ux%u TIFF", w, h);
    if (rgba && !TIFFReadRGBAImageOriented(tif, w, h, rgba, ORIENTATION_TOPLEFT, 1) && !err[0])
        err_set(err, errlen, "corrupt TIFF: cannot read the YCbCr image");
    for (size_t i = 0; rgba && !err[0] && i < (size_t)w * h; i++) {
        img->px[3 * i] = (uint8_t)TIFFGetR(rgba[i]);
        img->px[3 * i + 1] = (uint8_t)TIFFGetG(rgba[i]);
        img->px[3 * i + 2] = (uint8_t)TIFFGetB(rgba[i]);
    }
    free(rgba);
    if (err[0])
        image_destroy(&img);
    return img;
}

static image_t *decode_open(TIFF *tif, char *err, size_t errlen)
{
    tinfo_t t = {0};
    uint16_t photo = 0, comp = 0;
    TIFFGetField(tif, TIFFTAG_PHOTOMETRIC, &photo);
    TIFFGetFieldDefaulted(tif, TIFFTAG_COMPRESSION, &comp);
    if (photo == PHOTOMETRIC_YCBCR && comp == COMPRESSION_JPEG)
        TIFFSetField(tif, TIFFTAG_JPEGCOLORMODE, JPEGCOLORMODE_RGB);
    else if (photo == PHOTOMETRIC_YCBCR) {
        uint32_t w = 0, h = 0;
        TIFFGetField(tif, TIFFTAG_IMAGEWIDTH, &w);
        TIFFGetField(tif, TIFFTAG_IMAGELENGTH, &h);
        if (image_check_dims(w, h, err, errlen) != 0)
            return NULL;
        return read_rgba(tif, w, h, err, errlen);
    }
    if (read_layout(tif, &t, err, errlen) != 0)
        return NULL;
    if (photo == PHOTOMETRIC_YCBCR)
        t.spp = 3; /* libjpeg gives RGB */
    samples_t sm = {0};
    image_t *img = NULL;
    if (read_samples(tif, &t, &sm, err, errlen) == 0 && !err[0]) {
        img = image_alloc((int)t.w, (int)t.h, t.layout == L_GRAY ? 1 : 3, err, errlen);
        if (img)
            convert(&t, &sm, img);
    }
    for (int p = 0; p < 8; p++)
        free(sm.plane[p]);
    return img;
}

static TIFF *open_mem(tiff_src_t *src)
{
    TIFFOpenOptions *opts = TIFFOpenOptionsAlloc();
    if (!opts) {
        err_set(src->err, src->errlen, "out of memory for a TIFF decoder");
        return NULL;
    }
    TIFFOpenOptionsSetErrorHandlerExtR(opts, on_error, src);
    TIFFOpenOptionsSetWarningHandlerExtR(opts, on_warning, src);
    /* "m": no memory mapping (the procs above cannot map) */
    TIFF *tif = TIFFClientOpenExt("tiff", "rm", (thandle_t)src, mem_read, mem_write, mem_seek,
                                  mem_close, mem_size, mem_map, mem_unmap, opts);
    TIFFOpenOptionsFree(opts);
    if (!tif && !src->err[0])
        err_set(src->err, src->errlen, "corrupt TIFF: cannot read its header");
    return tif;
}

int decode_tiff_probe(const uint8_t *buf, size_t len, int *w, int *h, char *err, size_t errlen)
{
    err[0] = 0;
    tiff_src_t src = {buf, len, 0, err, errlen};
    TIFF *tif = open_mem(&src);
    uint32_t tw = 0, th = 0;
    if (!tif)
        return -1;
    int ok = TIFFGetField(tif, TIFFTAG_IMAGEWIDTH, &tw) && TIFFGetField(tif, TIFFTAG_IMAGELENGTH, &th);
    TIFFClose(tif);
    if (!ok) {
        err_set(err, errlen, "corrupt TIFF: no image size");
        return -1;
    }
    if (image_check_dims(tw, th, err, errlen) != 0)
        return -1;
    *w = (int)tw;
    *h = (int)th;
    return 0;
}

image_t *decode_tiff(const uint8_t *buf, size_t len, char *err, size_t errlen)
{
    err[0] = 0;
    tiff_src_t src = {buf, len, 0, err, errlen};
    TIFF *tif = open_mem(&src);
    if (!tif)
        return NULL;
    image_t *img = decode_open(tif, err, errlen);
    TIFFClose(tif);
    if (err[0])
        image_destroy(&img);
    return img;
}
#endif
