/* decoders — the registration table of the format decoders (decode_fmt.h):
 * the one place that names them, so decode.c depends on this list and the
 * decoders depend on image.h only. A format whose library this build lacks
 * is not listed. */
#include "common/image/decode_fmt.h"

#include <string.h>

static const decoder_t decoders[] = {
    {"bmp", decode_bmp, decode_bmp_probe},
    {"pnm", decode_pnm, decode_pnm_probe},
#ifdef DECODE_HAVE_TIFF
    {"tiff", decode_tiff, decode_tiff_probe},
#endif
#ifdef DECODE_HAVE_WEBP
    {"webp", decode_webp, decode_webp_probe},
#endif
#ifdef DECODE_HAVE_GIF
    {"gif", decode_gif, decode_gif_probe},
#endif
};

const decoder_t *decoder_find(const char *name)
{
    for (size_t i = 0; i < sizeof decoders / sizeof decoders[0]; i++)
        if (!strcmp(decoders[i].name, name))
            return &decoders[i];
    return NULL;
}
