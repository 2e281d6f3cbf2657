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
 *
 * Failures never crash: a truncated JPEG is an error ("image file is
 * truncated", as PIL raises), other libjpeg warnings are not (PIL ignores
 * them too); anything that is not a JPEG/PNG, empty input, corrupt headers
 * and zero or huge dimensions are errors with a reason.
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

#include <stddef.h>
#include <stdint.h>

typedef struct {
    int w, h, c;   /* c: 1 (gray) or 3 (RGB) */
    uint8_t *px;   /* h * w * c bytes, rows top to bottom, channels interleaved */
} image_t;

/* NULL when out of memory or the size is not positive / too large. */
image_t *image_new(int w, int h, int c);
void image_destroy(image_t **img);

/* Largest accepted width or height (PIL's default decompression-bomb limit
 * is ~89 Mpixel; JPEG's own limit is 65500). */
#define DECODE_MAX_DIM 65500
#define DECODE_MAX_PIXELS (89478485LL)

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

/* Image size from the header only; 0 or -1 with a reason. */
int decode_probe(const uint8_t *buf, size_t len, int *w, int *h, char *err, size_t errlen);

/* 1 when this build decodes PNG. */
int decode_has_png(void);

/* Reads a whole file (at most 256 MiB) into *buf (malloc'd). 0 or -1 with a
 * reason. */
int decode_read_file(const char *path, uint8_t **buf, size_t *len, char *err, size_t errlen);

#endif
