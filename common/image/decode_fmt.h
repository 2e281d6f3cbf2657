/* decode_fmt — the decoders behind decode_image for the formats other than
 * JPEG and PNG: BMP and PPM/PGM/PBM read here (small formats), TIFF through
 * libtiff, WebP through libwebp's demux API and GIF through giflib (each
 * when the build found the library; DECODE_HAVE_TIFF, _WEBP, _GIF).
 * decode.c picks one by the file's signature, not its name, and reaches it
 * through the table of decoders.c (decoder_find), which alone names them;
 * they allocate through image.h, so every include points down.
 *
 * Each returns the image at its source size as PIL's
 * Image.open(f).convert("RGB") gives it (1 channel when PIL's mode is gray:
 * "1", "L", "LA", "I"), or NULL with a reason that names the format
 * ("image file is truncated (...)" when the data ends early). The rules,
 * mode by mode, follow Pillow 9.4's plugins (BmpImagePlugin,
 * PpmImagePlugin, TiffImagePlugin, WebPImagePlugin, GifImagePlugin). */
#ifndef DDP_DECODE_FMT_H
#define DDP_DECODE_FMT_H

#include "common/image/image.h"

#include <stddef.h>
#include <stdint.h>

image_t *decode_bmp(const uint8_t *buf, size_t len, char *err, size_t errlen);
image_t *decode_pnm(const uint8_t *buf, size_t len, char *err, size_t errlen);
image_t *decode_tiff(const uint8_t *buf, size_t len, char *err, size_t errlen);
image_t *decode_webp(const uint8_t *buf, size_t len, char *err, size_t errlen);
image_t *decode_gif(const uint8_t *buf, size_t len, char *err, size_t errlen);

/* The size from the header alone (decode_probe): 0, or -1 with a reason. */
int decode_bmp_probe(const uint8_t *buf, size_t len, int *w, int *h, char *err, size_t errlen);
int decode_pnm_probe(const uint8_t *buf, size_t len, int *w, int *h, char *err, size_t errlen);
int decode_tiff_probe(const uint8_t *buf, size_t len, int *w, int *h, char *err, size_t errlen);
int decode_webp_probe(const uint8_t *buf, size_t len, int *w, int *h, char *err, size_t errlen);
int decode_gif_probe(const uint8_t *buf, size_t len, int *w, int *h, char *err, size_t errlen);

/* One entry of the registration table (decoders.c). */
typedef struct {
    const char *name; /* as decode_has_format names it: "bmp", "pnm", "tiff", "webp", "gif" */
    image_t *(*decode)(const uint8_t *buf, size_t len, char *err, size_t errlen);
    int (*probe)(const uint8_t *buf, size_t len, int *w, int *h, char *err, size_t errlen);
} decoder_t;

/* The decoder of format NAME, or NULL when this build has none (its
 * library was not found, or NAME is JPEG, PNG or unknown: decode.c reads
 * those two itself). */
const decoder_t *decoder_find(const char *name);

/* PIL's cmyk2rgb of one pixel: nk = 255 - K, out = clip(nk - nk * C / 255)
 * in its MULDIV255 rounding. */
static inline void decode_cmyk_px(const uint8_t cmyk[4], uint8_t *rgb)
{
    int nk = 255 - cmyk[3];
    for (int ch = 0; ch < 3; ch++) {
        int t = cmyk[ch] * nk + 128;
        int v = nk - (((t >> 8) + t) >> 8);
        rgb[ch] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
    }
}

#endif
