#include "common/image/decode.h"
#include "common/errbuf.h"
#include "common/image/decode_fmt.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <turbojpeg.h>
#include <unistd.h>

#ifdef DECODE_HAVE_PNG
#include <png.h>
#endif
#ifdef DECODE_HAVE_LIBJPEG
#include <jpeglib.h> /* after stdio.h: it needs FILE and size_t */
#include <jerror.h>
#endif
#include <setjmp.h>

#define READ_MAX_BYTES ((size_t)256 << 20)

int decode_has_png(void)
{
#ifdef DECODE_HAVE_PNG
    return 1;
#else
    return 0;
#endif
}

/* ---- format sniffing ---------------------------------------------------- */

typedef enum { FMT_UNKNOWN, FMT_JPEG, FMT_PNG, FMT_BMP, FMT_PNM, FMT_TIFF, FMT_WEBP, FMT_GIF } fmt_t;

/* The formats whose library is optional: its name, the Debian package that
 * brings it, and whether this build has it. */
static fmt_t needs_library(fmt_t f, const char *name, const char *pkg, int have, char *err,
                           size_t errlen)
{
    if (have)
        return f;
    err_set(err, errlen, "%s image, but this build has no %s support (install %s and rebuild, "
                          "or convert the file to JPEG)", name, name, pkg);
    return FMT_UNKNOWN;
}

/* By signature, not by file name: a mislabelled file still decodes. */
static fmt_t sniff(const uint8_t *b, size_t len, char *err, size_t errlen)
{
    if (len == 0) {
        err_set(err, errlen, "empty file");
        return FMT_UNKNOWN;
    }
    if (len >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF)
        return FMT_JPEG;
    if (len >= 8 && !memcmp(b, "\x89PNG\r\n\x1a\n", 8))
        return needs_library(FMT_PNG, "PNG", "libpng-dev", decode_has_png(), err, errlen);
    if (len >= 2 && b[0] == 'B' && b[1] == 'M')
        return FMT_BMP;
    if (len >= 2 && b[0] == 'P' && b[1] >= '1' && b[1] <= '6')
        return FMT_PNM;
    if (len >= 4 && (!memcmp(b, "II*\0", 4) || !memcmp(b, "MM\0*", 4) ||
                     !memcmp(b, "II+\0", 4) || !memcmp(b, "MM\0+", 4)))
        return needs_library(FMT_TIFF, "TIFF", "libtiff-dev", decode_has_format("tiff"), err,
                             errlen);
    if (len >= 12 && !memcmp(b, "RIFF", 4) && !memcmp(b + 8, "WEBP", 4))
        return needs_library(FMT_WEBP, "WebP", "libwebp-dev", decode_has_format("webp"), err,
                             errlen);
    if (len >= 6 && (!memcmp(b, "GIF87a", 6) || !memcmp(b, "GIF89a", 6)))
        return needs_library(FMT_GIF, "GIF", "libgif-dev", decode_has_format("gif"), err, errlen);
    err_set(err, errlen, "not an image: unknown signature %02x %02x %02x %02x (%zu bytes)",
             b[0], len > 1 ? b[1] : 0, len > 2 ? b[2] : 0, len > 3 ? b[3] : 0, len);
    return FMT_UNKNOWN;
}

int decode_has_format(const char *name)
{
    if (!strcmp(name, "jpeg"))
        return 1;
    if (!strcmp(name, "png"))
        return decode_has_png();
    return decoder_find(name) != NULL;
}

/* The entry of decoders.c's table for F; NULL for JPEG and PNG (read
 * here) and for a format this build lacks (sniff has refused it). */
static const decoder_t *listed(fmt_t f)
{
    static const char *const names[] = {
        [FMT_BMP] = "bmp", [FMT_PNM] = "pnm", [FMT_TIFF] = "tiff", [FMT_WEBP] = "webp",
        [FMT_GIF] = "gif",
    };
    return names[f] ? decoder_find(names[f]) : NULL;
}

/* ---- JPEG ----------------------------------------------------------------- */

/* The smallest TurboJPEG scale whose output still covers the minimum, used
 * only when the source is at least twice the minimum (see decode.h). */
static tjscalingfactor pick_scale(int w, int h, const decode_opts_t *o)
{
    tjscalingfactor best = {1, 1};
    if (!o || o->min_w <= 0 || o->min_h <= 0 || w < 2 * o->min_w || h < 2 * o->min_h)
        return best;
    int n = 0;
    tjscalingfactor *sf = tjGetScalingFactors(&n);
    for (int i = 0; sf && i < n; i++) {
        if (sf[i].num >= sf[i].denom)
            continue;
        int sw = TJSCALED(w, sf[i]), sh = TJSCALED(h, sf[i]);
        if (sw >= o->min_w && sh >= o->min_h &&
            (long long)sw * sh < (long long)TJSCALED(w, best) * TJSCALED(h, best))
            best = sf[i];
    }
    return best;
}

/* PIL reads CMYK JPEGs as Adobe-inverted ("CMYK;I") and converts with
 * cmyk2rgb: nk = 255 - K; out = clip(nk - nk * C / 255) in its MULDIV255
 * rounding. With the inversion folded in, nk is the stored K byte. */
static void cmyk_to_rgb(const uint8_t *in, uint8_t *out, size_t npix)
{
    for (size_t i = 0; i < npix; i++, in += 4, out += 3) {
        int nk = in[3];
        for (int ch = 0; ch < 3; ch++) {
            int t = (255 - in[ch]) * nk + 128;
            int v = nk - (((t >> 8) + t) >> 8);
            out[ch] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
        }
    }
}

/* tjDecompress2 returns -1 for warnings too. PIL ignores libjpeg warnings
 * except running out of data, which it reports as a truncated file. */
static int jpeg_failed(tjhandle tj, char *err, size_t errlen)
{
    const char *msg = tjGetErrorStr2(tj);
    if (tjGetErrorCode(tj) == TJERR_WARNING && !strstr(msg, "Premature end of JPEG file"))
        return 0;
    if (strstr(msg, "Premature end of JPEG file"))
        err_set(err, errlen, "image file is truncated (%s)", msg);
    else
        err_set(err, errlen, "corrupt JPEG: %s", msg);
    return -1;
}

/* tjDecompressHeader3 returns success without setting the size for data
 * that ends before a frame header (libjpeg's "tables only" case), so the
 * size starts at 0 and 0 means corrupt. */
static int jpeg_header(tjhandle tj, const uint8_t *buf, size_t len, int *w, int *h, int *subsamp,
                       int *cs, char *err, size_t errlen)
{
    *w = *h = 0;
    if (tjDecompressHeader3(tj, buf, (unsigned long)len, w, h, subsamp, cs) != 0) {
        err_set(err, errlen, "corrupt JPEG header: %s", tjGetErrorStr2(tj));
        return -1;
    }
    if (*w == 0 && *h == 0) {
        err_set(err, errlen, "corrupt JPEG: no frame header (truncated or tables-only data)");
        return -1;
    }
    return image_check_dims(*w, *h, err, errlen);
}

static image_t *decode_jpeg_tj(tjhandle tj, const uint8_t *buf, size_t len,
                               const decode_opts_t *opts, int *src_w, int *src_h, char *err,
                               size_t errlen)
{
    int w, h, subsamp, cs;
    if (jpeg_header(tj, buf, len, &w, &h, &subsamp, &cs, err, errlen) != 0)
        return NULL;
    tjscalingfactor sf = pick_scale(w, h, opts);
    int ow = TJSCALED(w, sf), oh = TJSCALED(h, sf);
    int cmyk = cs == TJCS_CMYK || cs == TJCS_YCCK;
    int pf = cs == TJCS_GRAY ? TJPF_GRAY : cmyk ? TJPF_CMYK : TJPF_RGB;
    image_t *img = image_new(ow, oh, cs == TJCS_GRAY ? 1 : 3);
    uint8_t *dst = img && cmyk ? malloc((size_t)ow * oh * 4) : img ? img->px : NULL;
    if (!dst) {
        err_set(err, errlen, "out of memory for a %dx%d image", ow, oh);
        image_destroy(&img);
        return NULL;
    }
    int rc = tjDecompress2(tj, buf, (unsigned long)len, dst, ow, 0, oh, pf, 0);
    if (rc != 0 && jpeg_failed(tj, err, errlen) != 0)
        image_destroy(&img);
    else if (cmyk)
        cmyk_to_rgb(dst, img->px, (size_t)ow * oh);
    if (cmyk)
        free(dst);
    *src_w = w;
    *src_h = h;
    return img;
}

static image_t *decode_jpeg(const uint8_t *buf, size_t len, const decode_opts_t *opts,
                            int *src_w, int *src_h, char *err, size_t errlen)
{
    /* a handle per call: its setup is microseconds next to a decode, and it
     * keeps decode_image free of shared state across threads */
    tjhandle tj = tjInitDecompress();
    if (!tj) {
        err_set(err, errlen, "cannot create a TurboJPEG decompressor: %s",
                 tjGetErrorStr2(NULL));
        return NULL;
    }
    image_t *img = decode_jpeg_tj(tj, buf, len, opts, src_w, src_h, err, errlen);
    tjDestroy(tj);
    return img;
}

/* ---- JPEG, partial: only the rectangle the caller needs ------------------- */

#ifdef DECODE_HAVE_LIBJPEG
/* libjpeg errors longjmp back to the decode; warnings are counted, and the
 * one PIL treats as fatal (data ended early) is remembered. */
typedef struct {
    struct jpeg_error_mgr pub;
    jmp_buf jb;
    int truncated;
} jl_err_t;

static void jl_error_exit(j_common_ptr c)
{
    longjmp(((jl_err_t *)c->err)->jb, 1);
}

static void jl_emit(j_common_ptr c, int level)
{
    if (level >= 0)
        return; /* trace messages */
    if (c->err->msg_code == JWRN_JPEG_EOF)
        ((jl_err_t *)c->err)->truncated = 1;
    c->err->num_warnings++;
}

/* The partial decode handles single-scan Huffman or arithmetic JPEGs in
 * YCbCr, RGB or gray. Progressive and multi-scan files buffer every
 * coefficient before the first row comes out (crop and skip would save
 * little), and CMYK/YCCK need PIL's conversion: those take the full path. */
static int jl_eligible(j_decompress_ptr ci)
{
    if (ci->progressive_mode || jpeg_has_multiple_scans(ci))
        return 0;
    return (ci->jpeg_color_space == JCS_YCbCr && ci->num_components == 3) ||
           (ci->jpeg_color_space == JCS_RGB && ci->num_components == 3) ||
           (ci->jpeg_color_space == JCS_GRAYSCALE && ci->num_components == 1);
}

/* The rectangle to decode: NEED (clipped) widened by two chroma samples on
 * each side. jpeg_crop_scanline then moves the left edge to an iMCU
 * boundary; the fancy upsamplers treat the edges of the cropped row as
 * image edges (libjpeg.txt, "Partial image decompression"), so the outer
 * columns of the decoded window may differ from a full decode and must not
 * be used: the margin keeps them outside NEED. Rows get the same margin
 * above (jpeg_skip_scanlines is exact, the margin is cheap insurance);
 * rows below the rectangle are never produced, which is exact. */
static decode_rect_t jl_window(j_decompress_ptr ci, decode_rect_t need)
{
    int w = (int)ci->image_width, h = (int)ci->image_height;
    int mx = 2 * ci->max_h_samp_factor, my = 2 * ci->max_v_samp_factor;
    int x0 = need.x < 0 ? 0 : need.x, y0 = need.y < 0 ? 0 : need.y;
    int x1 = need.x + need.w > w ? w : need.x + need.w;
    int y1 = need.y + need.h > h ? h : need.y + need.h;
    if (need.w <= 0 || need.h <= 0 || x0 >= x1 || y0 >= y1)
        return (decode_rect_t){0, 0, w, h};
    x0 = x0 - mx < 0 ? 0 : x0 - mx;
    y0 = y0 - my < 0 ? 0 : y0 - my;
    x1 = x1 + mx > w ? w : x1 + mx;
    return (decode_rect_t){x0, y0, x1 - x0, y1 - y0};
}

/* Truncation check without decoding the rows below the rectangle: the
 * data must end with the EOI marker. A file that does not (truncated, or
 * with trailing bytes) is decoded to its end, so PIL's "truncated" verdict
 * stays exactly as a full decode would give it. */
static int jl_ends_with_eoi(const uint8_t *buf, size_t len)
{
    return len >= 4 && buf[len - 2] == 0xFF && buf[len - 1] == 0xD9;
}

/* Reads rows [y0, y0 + img->h) of the (cropped) output into IMG, straight
 * into its rows, then skips or drains the rest. Runs under the caller's
 * setjmp. */
static void jl_read(j_decompress_ptr ci, image_t *img, int y0, int drain, uint8_t *scratch)
{
    if (y0 > 0)
        jpeg_skip_scanlines(ci, (JDIMENSION)y0);
    const size_t stride = (size_t)img->w * img->c;
    JSAMPROW rows[16];
    for (int y = 0; y < img->h;) {
        int n = img->h - y < 16 ? img->h - y : 16;
        for (int i = 0; i < n; i++)
            rows[i] = img->px + (size_t)(y + i) * stride;
        JDIMENSION got = jpeg_read_scanlines(ci, rows, (JDIMENSION)n);
        if (got == 0)
            ERREXIT(ci, JERR_INPUT_EMPTY); /* cannot happen with a memory source */
        y += (int)got;
    }
    if (!drain)
        return;
    while (ci->output_scanline < ci->output_height) {
        rows[0] = scratch;
        if (jpeg_read_scanlines(ci, rows, 1) != 1)
            ERREXIT(ci, JERR_INPUT_EMPTY);
    }
    jpeg_finish_decompress(ci);
}

typedef enum { JL_DONE, JL_FAILED, JL_FULL_PATH } jl_rc_t;

/* Partial decode of a single-scan JPEG. JL_FULL_PATH: not eligible (or DCT
 * scaling wanted), nothing was decoded. */
static jl_rc_t jl_decode(const uint8_t *buf, size_t len, const decode_opts_t *opts,
                         decode_need_fn need_fn, void *ctx, image_buf_t *reuse, image_t **out,
                         decode_part_t *part, int *src_w, int *src_h, char *err, size_t errlen)
{
    struct jpeg_decompress_struct ci;
    jl_err_t je;
    image_t *volatile img = NULL;
    uint8_t *volatile scratch = NULL;
    volatile jl_rc_t rc = JL_FAILED;
    ci.err = jpeg_std_error(&je.pub);
    je.pub.error_exit = jl_error_exit;
    je.pub.emit_message = jl_emit;
    je.truncated = 0;
    if (setjmp(je.jb)) {
        char msg[JMSG_LENGTH_MAX];
        (*ci.err->format_message)((j_common_ptr)&ci, msg);
        if (je.truncated) /* the error came from the fake EOI after the data ran out */
            err_set(err, errlen, "image file is truncated (%s)", msg);
        else
            err_set(err, errlen, "corrupt JPEG: %s", msg);
        image_t *tmp = img;
        if (!reuse || tmp != &reuse->img)
            image_destroy(&tmp);
        free(scratch);
        jpeg_destroy_decompress(&ci);
        return JL_FAILED;
    }
    jpeg_create_decompress(&ci);
    jpeg_mem_src(&ci, buf, (unsigned long)len);
    jpeg_read_header(&ci, TRUE);
    int w = (int)ci.image_width, h = (int)ci.image_height;
    decode_rect_t need = {0, 0, w, h};
    tjscalingfactor sf = pick_scale(w, h, opts);
    if (image_check_dims(w, h, err, errlen) != 0) {
        rc = JL_FAILED;
    } else if (!jl_eligible(&ci) || sf.num != sf.denom) {
        rc = JL_FULL_PATH;
    } else if (need_fn && need_fn(ctx, w, h, &need, err, errlen) != 0) {
        rc = JL_FAILED;
    } else {
        /* PIL's settings, spelled out: accurate integer IDCT, fancy upsampling */
        ci.out_color_space = ci.num_components == 1 ? JCS_GRAYSCALE : JCS_RGB;
        ci.dct_method = JDCT_ISLOW;
        ci.do_fancy_upsampling = TRUE;
        decode_rect_t win = jl_window(&ci, need);
        jpeg_start_decompress(&ci);
        JDIMENSION xoff = (JDIMENSION)win.x, cw = (JDIMENSION)win.w;
        if (win.w < w)
            jpeg_crop_scanline(&ci, &xoff, &cw);
        int drain = !jl_ends_with_eoi(buf, len);
        int ow = (int)ci.output_width, oc = ci.out_color_components;
        if (!reuse)
            img = image_new(ow, win.h, oc);
        else if (image_buf_reshape(reuse, ow, win.h, oc) == 0)
            img = &reuse->img;
        scratch = drain && img ? malloc((size_t)ci.output_width * ci.out_color_components) : NULL;
        if (!img || (drain && !scratch)) {
            err_set(err, errlen, "out of memory for a %dx%d image", (int)ci.output_width, win.h);
        } else {
            jl_read(&ci, img, win.y, drain, scratch);
            if (je.truncated) {
                err_set(err, errlen, "image file is truncated (Premature end of JPEG file)");
            } else {
                *part = (decode_part_t){(int)xoff, win.y, w, h};
                *src_w = w;
                *src_h = h;
                *out = img;
                img = NULL;
                rc = JL_DONE;
            }
        }
    }
    image_t *tmp = img;
    if (!reuse || tmp != &reuse->img)
        image_destroy(&tmp);
    free(scratch);
    jpeg_destroy_decompress(&ci); /* also aborts a decode stopped early */
    return rc;
}
#endif

image_t *decode_image_part(const uint8_t *buf, size_t len, const decode_opts_t *opts,
                           decode_need_fn need, void *ctx, image_buf_t *reuse,
                           decode_part_t *part,
                           int *src_w, int *src_h, char *err, size_t errlen)
{
    err[0] = 0;
#ifdef DECODE_HAVE_LIBJPEG
    if (sniff(buf, len, err, errlen) == FMT_JPEG) {
        image_t *img = NULL;
        jl_rc_t rc = jl_decode(buf, len, opts, need, ctx, reuse, &img, part, src_w, src_h, err,
                               errlen);
        if (rc != JL_FULL_PATH)
            return img;
        err[0] = 0;
    }
#else
    (void)need;
    (void)ctx;
    (void)reuse;
#endif
    image_t *img = decode_image(buf, len, opts, src_w, src_h, err, errlen);
    if (img)
        *part = (decode_part_t){0, 0, img->w, img->h};
    return img;
}

int decode_has_partial_jpeg(void)
{
#ifdef DECODE_HAVE_LIBJPEG
    return 1;
#else
    return 0;
#endif
}

/* ---- PNG ------------------------------------------------------------------ */

#ifdef DECODE_HAVE_PNG
typedef struct {
    const uint8_t *buf;
    size_t len, pos;
    char *err;
    size_t errlen;
} png_src_t;

static void png_read_mem(png_structp png, png_bytep out, png_size_t n)
{
    png_src_t *s = png_get_io_ptr(png);
    if (n > s->len - s->pos) {
        snprintf(s->err, s->errlen, "image file is truncated (PNG data ends early)");
        png_longjmp(png, 1);
    }
    memcpy(out, s->buf + s->pos, n);
    s->pos += n;
}

static void png_on_error(png_structp png, png_const_charp msg)
{
    png_src_t *s = png_get_error_ptr(png);
    if (!s->err[0])
        snprintf(s->err, s->errlen, "corrupt PNG: %s", msg);
    png_longjmp(png, 1);
}

static void png_on_warning(png_structp png, png_const_charp msg)
{
    (void)png;
    (void)msg; /* PIL ignores ancillary-chunk problems too */
}

/* Sets the transforms that give PIL's convert("RGB") (or "L") bytes and
 * returns the channel count, or 0 for a size error. *wide is set for 16-bit
 * gray, which PIL opens as mode "I" and clips to 255 instead of keeping
 * the high byte (every other 16-bit PNG keeps the high byte in PIL). */
static int png_setup(png_structp png, png_infop info, int *w, int *h, int *wide, char *err,
                     size_t errlen)
{
    png_read_info(png, info);
    *w = (int)png_get_image_width(png, info);
    *h = (int)png_get_image_height(png, info);
    if (image_check_dims(*w, *h, err, errlen) != 0)
        return 0;
    int ct = png_get_color_type(png, info), depth = png_get_bit_depth(png, info);
    *wide = ct == PNG_COLOR_TYPE_GRAY && depth == 16;
    if (ct == PNG_COLOR_TYPE_PALETTE)
        png_set_palette_to_rgb(png);
    if (ct == PNG_COLOR_TYPE_GRAY && depth < 8)
        png_set_expand_gray_1_2_4_to_8(png);
    if (depth == 16 && !*wide)
        png_set_strip_16(png);
    png_set_strip_alpha(png);
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    int ch = png_get_channels(png, info);
    if (ch != 1 && ch != 3) {
        err_set(err, errlen, "PNG with %d channels after conversion is not supported", ch);
        return 0;
    }
    return ch;
}

/* 16-bit big-endian gray to 8 bits the way PIL's I -> L/RGB conversion does:
 * values above 255 become 255. In place: each output byte is at or before
 * the input sample it comes from. */
static void png_clip16(uint8_t *px, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned v = (unsigned)px[2 * i] << 8 | px[2 * i + 1];
        px[i] = (uint8_t)(v > 255 ? 255 : v);
    }
}

static image_t *decode_png(const uint8_t *buf, size_t len, int *src_w, int *src_h, char *err,
                           size_t errlen)
{
    err[0] = 0;
    png_src_t src = {buf, len, 0, err, errlen};
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, png_on_error,
                                             png_on_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    image_t *volatile img = NULL;
    uint8_t *volatile px = NULL; /* decoded samples: img->px, or a 16-bit buffer */
    png_bytep *volatile rows = NULL;
    if (!info) {
        err_set(err, errlen, "out of memory for a PNG decoder");
    } else if (setjmp(png_jmpbuf(png)) == 0) {
        png_set_read_fn(png, &src, png_read_mem);
        int w, h, wide = 0, ch = png_setup(png, info, &w, &h, &wide, err, errlen);
        img = ch ? image_new(w, h, ch) : NULL;
        px = !img ? NULL : wide ? malloc((size_t)w * h * 2) : img->px;
        rows = px ? malloc((size_t)h * sizeof *rows) : NULL;
        if (ch && !rows)
            err_set(err, errlen, "out of memory for a %dx%d image", w, h);
        for (int y = 0; rows && y < h; y++)
            rows[y] = px + (size_t)y * w * ch * (wide ? 2 : 1);
        if (rows) {
            png_read_image(png, rows);
            png_read_end(png, NULL);
            if (wide) {
                png_clip16(px, (size_t)w * h);
                memcpy(img->px, px, (size_t)w * h);
            }
            *src_w = w;
            *src_h = h;
        }
    }
    if (img && px != img->px)
        free(px);
    if (err[0]) {
        image_t *tmp = img;
        image_destroy(&tmp);
        img = NULL;
    }
    free(rows);
    png_destroy_read_struct(png ? &png : NULL, info ? &info : NULL, NULL);
    return img;
}
#endif

/* ---- public --------------------------------------------------------------- */

image_t *decode_image(const uint8_t *buf, size_t len, const decode_opts_t *opts, int *src_w,
                      int *src_h, char *err, size_t errlen)
{
    image_t *img = NULL;
    err[0] = 0;
    fmt_t f = sniff(buf, len, err, errlen);
    switch (f) {
    case FMT_JPEG:
        return decode_jpeg(buf, len, opts, src_w, src_h, err, errlen);
#ifdef DECODE_HAVE_PNG
    case FMT_PNG:
        return decode_png(buf, len, src_w, src_h, err, errlen);
#endif
    case FMT_UNKNOWN:
        return NULL;
    default:
        break;
    }
    const decoder_t *d = listed(f);
    img = d ? d->decode(buf, len, err, errlen) : NULL;
    if (img) {
        *src_w = img->w;
        *src_h = img->h;
    } else if (!err[0]) {
        err_set(err, errlen, "image could not be decoded (no reason given)");
    }
    return img;
}

int decode_probe(const uint8_t *buf, size_t len, int *w, int *h, char *err, size_t errlen)
{
    fmt_t f = sniff(buf, len, err, errlen);
    if (f == FMT_PNG) {
        /* IHDR is always first: width and height at bytes 16..23 */
        if (len < 24 || memcmp(buf + 12, "IHDR", 4) != 0) {
            err_set(err, errlen, "corrupt PNG: no IHDR chunk");
            return -1;
        }
        *w = (int)((uint32_t)buf[16] << 24 | buf[17] << 16 | buf[18] << 8 | buf[19]);
        *h = (int)((uint32_t)buf[20] << 24 | buf[21] << 16 | buf[22] << 8 | buf[23]);
        return image_check_dims(*w, *h, err, errlen);
    }
    if (f == FMT_UNKNOWN)
        return -1; /* sniff said why */
    if (f != FMT_JPEG) {
        const decoder_t *d = listed(f);
        return d ? d->probe(buf, len, w, h, err, errlen) : -1;
    }
    tjhandle tj = tjInitDecompress();
    int subsamp, cs, rc = -1;
    if (!tj)
        err_set(err, errlen, "cannot create a TurboJPEG decompressor");
    else
        rc = jpeg_header(tj, buf, len, w, h, &subsamp, &cs, err, errlen);
    if (tj)
        tjDestroy(tj);
    return rc;
}

int decode_read_file_into(const char *path, uint8_t **buf, size_t *cap, size_t *len, char *err,
                          size_t errlen)
{
    *len = 0;
    /* O_NONBLOCK: a FIFO among the images must not hang the loader */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        err_set(err, errlen, "cannot open: %s", strerror(errno));
        return -1;
    }
    struct stat st;
    int rc = -1;
    if (fstat(fd, &st) != 0) {
        err_set(err, errlen, "cannot stat: %s", strerror(errno));
    } else if (!S_ISREG(st.st_mode)) {
        err_set(err, errlen, "not a regular file");
    } else if ((size_t)st.st_size > READ_MAX_BYTES) {
        err_set(err, errlen, "file of %lld bytes is larger than the %zu MiB limit",
                 (long long)st.st_size, READ_MAX_BYTES >> 20);
    } else if ((size_t)st.st_size + 1 > *cap) {
        uint8_t *nb = malloc((size_t)st.st_size + 1);
        if (!nb) {
            err_set(err, errlen, "out of memory for %lld bytes", (long long)st.st_size);
        } else {
            free(*buf);
            *buf = nb;
            *cap = (size_t)st.st_size + 1;
            rc = 0;
        }
    } else {
        rc = 0;
    }
    size_t got = 0;
    while (rc == 0 && got < (size_t)st.st_size) {
        ssize_t n = read(fd, *buf + got, (size_t)st.st_size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            err_set(err, errlen, "read failed: %s", n < 0 ? strerror(errno) : "file shrank");
            rc = -1;
        } else {
            got += (size_t)n;
        }
    }
    close(fd);
    if (rc == 0)
        *len = got;
    return rc;
}

int decode_read_file(const char *path, uint8_t **buf, size_t *len, char *err, size_t errlen)
{
    size_t cap = 0;
    *buf = NULL;
    if (decode_read_file_into(path, buf, &cap, len, err, errlen) != 0) {
        free(*buf);
        *buf = NULL;
        return -1;
    }
    return 0;
}
