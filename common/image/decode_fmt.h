/* decode_fmt — the decoders behind decode_image for the formats other than
 * JPEG and PNG: BMP and PPM/PGM/PBM read here (small formats), TIFF through
 * libtiff, WebP through libwebp's demux API and GIF through giflib (each
 * when the build found the library; DECODE_HAVE_TIFF, _WEBP, _GIF).
 * decode.c picks one by the file's signature, not its name.
 *
 * Each returns the image at its source size as PIL's
 * Image.open(f).convert("RGB") gives it (1 channel when PIL's mode is gray:
 * "1", "L", "LA", "I"), or NULL with a reason that names the format
 * ("image file is truncated (...)" when the data ends early). The rules,
 * mode by mode, follow Pillow 9.4's plugins (BmpImagePlugin,
 * PpmImagePlugin, TiffImagePlugin, WebPImagePlugin, GifImagePlugin). */
#ifndef DDP_DECODE_FMT_H
#define DDP_DECODE_FMT_H

#include "common/image/decode.h"

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

/* Size limits shared by every decoder (decode.h): 0, or -1 with a reason. */
int decode_check_dims(long long w, long long h, char *err, size_t errlen);

/* image_new with an "out of memory" reason on failure. */
image_t *decode_image_new(int w, int h, int c, char *err, size_t errlen);

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
