/* WebP through libwebp's demux API, as Pillow 9.4 reads it: a
 * WebPAnimDecoder in MODE_RGBA (still images too), the first frame of the
 * canvas, alpha dropped. Same library, same pixels, lossy ones included. */
#include "common/errbuf.h"
#include "common/image/decode_fmt.h"

#ifdef DECODE_HAVE_WEBP
#include <string.h>
#include <webp/decode.h>
#include <webp/demux.h>

/* Why WebPAnimDecoderNew refused BUF, from the bitstream's own check. */
static void why(const uint8_t *buf, size_t len, char *err, size_t errlen)
{
    WebPBitstreamFeatures f;
    VP8StatusCode st = WebPGetFeatures(buf, len, &f);
    if (st == VP8_STATUS_NOT_ENOUGH_DATA)
        err_set(err, errlen, "image file is truncated (WebP data ends early)");
    else if (st != VP8_STATUS_OK)
        err_set(err, errlen, "corrupt WebP: bitstream error %d", (int)st);
    else
        err_set(err, errlen, "corrupt WebP: the container does not parse (truncated or damaged)");
}

int decode_webp_probe(const uint8_t *buf, size_t len, int *w, int *h, char *err, size_t errlen)
{
    if (!WebPGetInfo(buf, len, w, h)) {
        why(buf, len, err, errlen);
        return -1;
    }
    return image_check_dims(*w, *h, err, errlen);
}

image_t *decode_webp(const uint8_t *buf, size_t len, char *err, size_t errlen)
{
    WebPAnimDecoderOptions o;
    if (!WebPAnimDecoderOptionsInit(&o)) {
        err_set(err, errlen, "libwebp version mismatch: rebuild against the installed libwebp");
        return NULL;
    }
    o.color_mode = MODE_RGBA;
    o.use_threads = 0;
    WebPData data = {buf, len};
    WebPAnimDecoder *dec = WebPAnimDecoderNew(&data, &o);
    if (!dec) {
        why(buf, len, err, errlen);
        return NULL;
    }
    WebPAnimInfo info;
    image_t *img = NULL;
    uint8_t *rgba = NULL;
    int ts = 0;
    if (!WebPAnimDecoderGetInfo(dec, &info)) {
        err_set(err, errlen, "corrupt WebP: no canvas information");
    } else if (image_check_dims(info.canvas_width, info.canvas_height, err, errlen) == 0) {
        if (!WebPAnimDecoderGetNext(dec, &rgba, &ts))
            why(buf, len, err, errlen);
        else
            img = image_alloc((int)info.canvas_width, (int)info.canvas_height, 3, err,
                                   errlen);
    }
    for (size_t i = 0; img && i < (size_t)img->w * img->h; i++)
        memcpy(img->px + 3 * i, rgba + 4 * i, 3);
    WebPAnimDecoderDelete(dec);
    return img;
}
#endif
