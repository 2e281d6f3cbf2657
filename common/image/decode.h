/* decode — compressed image bytes to uint8 pixels, as PIL's
 * Image.open(f).convert("RGB") would give them (or "L" for gray sources).
 *
 * JPEG goes through libjpeg-turbo's TurboJPEG API with the settings PIL uses
 * (accurate integer IDCT, fancy upsampling), so pixels are identical to
 * PIL's. Grayscale JPEGs stay 1 channel (gray -> RGB replication commutes
 * with resize and crop, so it is done last and costs a third). CMYK/YCCK
 * JPEGs are read with PIL's Adobe polarity and converted with PIL's
 * cmyk2rgb formula. PNG goes through libpng when the build found it
 * (DECODE_HAVE_PNG): palette expanded, alpha dropped, 16-bit reduced to the
 * high byte — PIL's convert("RGB") (except 16-bit gray, which PIL clips).
 * The other formats torchvision's ImageFolder accepts — BMP, PPM/PGM/PBM,
 * TIFF (libtiff), WebP (libwebp) — and GIF's first frame (giflib) are
 * decoded in decode_<format>.c (decode_fmt.h lists the rules), also to
 * PIL's convert("RGB") pixels. The format is picked by the file's
 * signature, never its name.
 *
 * Failures never crash: a truncated file is an error ("image file is
 * truncated (...)", as PIL raises), other libjpeg warnings are not (PIL
 * ignores them too); unknown signatures, empty input, corrupt headers,
 * layouts PIL cannot read either, and zero or huge dimensions are errors
 * with a reason naming the format.
 *
 * DCT scaling: libjpeg-turbo can decode at 1/8..7/8 of the size almost for
 * free by doing a smaller IDCT. That changes pixels (it is a different
 * downsampling filter than PIL's bilinear antialias — torchvision + PIL
 * never do it, since torchvision does not call Image.draft), so it is an
 * opt-in: decode_image only scales when the caller gives a minimum size and
 * the source is at least twice that size in both directions; it then picks
 * the smallest scale whose output still covers the minimum, so the final
 * resize is still a (mild) antialiased downscale. Expect differences of a
 * few grey levels vs torchvision, and accuracy within noise. */
#ifndef DDP_DECODE_H
#define DDP_DECODE_H

#include "common/image/image.h" /* image_t, its allocators and size limits */

#include <stddef.h>
#include <stdint.h>

typedef struct {
    /* DCT scaling: 0 = never (PIL-exact); else the decoded image must be at
     * least min_w x min_h; scaling is used only when the source is at
     * least twice that in both directions. */
    int min_w, min_h;
} decode_opts_t;

/* Decodes BUF. On success returns the image and sets *src_w, *src_h to the
 * size of the image before any DCT scaling (PIL's Image.size). NULL with a
 * reason in ERR otherwise. opts may be NULL (no scaling). */
image_t *decode_image(const uint8_t *buf, size_t len, const decode_opts_t *opts, int *src_w,
                      int *src_h, char *err, size_t errlen);

/* Partial decoding. decode_image_part asks NEED, once the header is read,
 * for the rectangle of the src_w x src_h image the caller will use (0, or
 * -1 with a reason, which fails the decode), and may then decode only a
 * window covering it: for single-scan YCbCr/RGB/gray JPEGs (libjpeg's
 * jpeg_crop_scanline and jpeg_skip_scanlines; rows below the rectangle are
 * not decoded at all) when the build has the libjpeg API
 * (DECODE_HAVE_LIBJPEG). Pixels inside the rectangle are identical to
 * decode_image's. Every other input is decoded whole, as decode_image does
 * (NEED may then not be called). Errors are decode_image's, truncation
 * included: a file that does not end with the JPEG EOI marker is decoded
 * to its end. */
typedef struct {
    int x, y, w, h;
} decode_rect_t;

typedef int (*decode_need_fn)(void *ctx, int src_w, int src_h, decode_rect_t *need, char *err,
                              size_t errlen);

/* Where the returned pixels lie: image pixel (0, 0) is pixel (x, y) of the
 * full_w x full_h decoded image (the source size, or the DCT-scaled size
 * when opts allowed scaling and it was used). */
typedef struct {
    int x, y, full_w, full_h;
} decode_part_t;

/* REUSE (may be NULL): the partial path decodes into its buffer and
 * returns &reuse->img, which the caller keeps owning. Any other result is
 * the caller's to image_destroy. */
image_t *decode_image_part(const uint8_t *buf, size_t len, const decode_opts_t *opts,
                           decode_need_fn need, void *ctx, image_buf_t *reuse,
                           decode_part_t *part,
                           int *src_w, int *src_h, char *err, size_t errlen);

/* 1 when this build decodes JPEG windows (decode_image_part can crop). */
int decode_has_partial_jpeg(void);

/* Image size from the header only; 0 or -1 with a reason. */
int decode_probe(const uint8_t *buf, size_t len, int *w, int *h, char *err, size_t errlen);

/* 1 when this build decodes PNG. */
int decode_has_png(void);

/* 1 when this build decodes the format NAME: "jpeg", "png", "bmp", "pnm",
 * "tiff", "webp", "gif" (the last three need their libraries at build
 * time; the others are always there but for PNG). */
int decode_has_format(const char *name);

/* Reads a whole file (at most 256 MiB) into *buf (malloc'd). 0 or -1 with a
 * reason. */
int decode_read_file(const char *path, uint8_t **buf, size_t *len, char *err, size_t errlen);

/* decode_read_file into *buf (*cap bytes, malloc'd or NULL), grown when
 * the file is larger; *buf stays the caller's on success and failure. */
int decode_read_file_into(const char *path, uint8_t **buf, size_t *cap, size_t *len, char *err,
                          size_t errlen);

#endif
