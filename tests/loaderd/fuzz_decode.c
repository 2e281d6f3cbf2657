/* fuzz_decode — libFuzzer target for the image path of loaderd: any byte
 * string goes through the in-memory decode (every format decode.h reads,
 * partial JPEG decode, DCT scaling) and the eval transform to a small batch image, as
 * sample_load does for a file. It must either succeed or fail with a
 * reason; ASan/UBSan catch the rest.
 *   CC=clang cmake -DDDPIPE_FUZZ=ON ... && ./fuzz_decode -max_total_time=60 corpus_decode */
#include "common/image/decode.h"
#include "common/image/transform.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
unsigned long fuzz_accepted; /* inputs that decoded (the replay checks seeds) */

/* Sources above this many pixels are skipped: they decode correctly but
 * slowly, which only slows the search (DECODE_MAX_PIXELS still applies). */
#define FUZZ_MAX_PIXELS (1L << 22)

static void must_say_why(int rc, const char *err)
{
    if (rc != 0 && !err[0])
        abort(); /* a refusal must say why */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256] = "";
    int w, h;
    if (decode_probe(data, size, &w, &h, err, sizeof err) == 0 && (long)w * h > FUZZ_MAX_PIXELS)
        return 0;
    /* resnet-like: resize + crop to RGB, DCT scaling allowed (partial decode) */
    static uint8_t out[3 * 28 * 28];
    transform_t rgb = {.resize = 32, .crop_h = 28, .crop_w = 28, .channels = 3, .dct_scaling = 1};
    err[0] = 0;
    int rc = sample_load_buffer(data, size, &rgb, out, 28, 28, err, sizeof err);
    must_say_why(rc, err);
    fuzz_accepted += rc == 0;
    /* gray, crop only (PIL-exact path, crop larger than small images) */
    transform_t gray = {.crop_h = 20, .crop_w = 20, .channels = 1};
    err[0] = 0;
    must_say_why(sample_load_buffer(data, size, &gray, out, 20, 20, err, sizeof err), err);
    /* the whole-image decode */
    int sw, sh;
    err[0] = 0;
    image_t *img = decode_image(data, size, NULL, &sw, &sh, err, sizeof err);
    if (img && (img->w != sw || img->h != sh || (img->c != 1 && img->c != 3)))
        abort(); /* no scaling asked: the image is the source size */
    must_say_why(img ? 0 : -1, err);
    image_destroy(&img);
    return 0;
}
