/* GIF through giflib: the first frame, as Pillow 9.4 reads it. The canvas
 * is the logical screen (grown to hold the frame if it sticks out), filled
 * with the frame's transparency index (or 0) outside the frame; every
 * index is then looked up in the frame's palette (local, else global), and
 * indices past the palette's end, or every index when there is no
 * palette, are gray (PIL's palette starts as a gray ramp): convert("RGB")
 * of PIL's "P" or "L" frame. Transparency is not composited (PIL's
 * convert("RGB") ignores it). */
#include "common/errbuf.h"
#include "common/image/decode_fmt.h"

int decode_gif_probe(const uint8_t *buf, size_t len, int *w, int *h, char *err, size_t errlen)
{
    if (len < 10) {
        err_set(err, errlen, "image file is truncated (GIF header ends early)");
        return -1;
    }
    *w = buf[6] | buf[7] << 8; /* the logical screen; a first frame may grow it */
    *h = buf[8] | buf[9] << 8;
    return image_check_dims(*w, *h, err, errlen);
}

#ifdef DECODE_HAVE_GIF
#include <gif_lib.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const uint8_t *buf;
    size_t len, pos;
} gif_src_t;

static int gif_read(GifFileType *g, GifByteType *out, int n)
{
    gif_src_t *s = g->UserData;
    size_t left = s->len - s->pos, k = n < 0 ? 0 : (size_t)n < left ? (size_t)n : left;
    memcpy(out, s->buf + s->pos, k);
    s->pos += k;
    return (int)k;
}

static void gif_fail(const GifFileType *g, const char *what, char *err, size_t errlen)
{
    int code = g ? g->Error : 0;
    const char *msg = GifErrorString(code);
    if (code == D_GIF_ERR_READ_FAILED || code == D_GIF_ERR_EOF_TOO_SOON)
        err_set(err, errlen, "image file is truncated (GIF %s: %s)", what, msg ? msg : "?");
    else
        err_set(err, errlen, "corrupt GIF: %s: %s", what, msg ? msg : "unknown error");
}

/* Skips an extension, keeping a graphic control block's transparency. */
static int read_extension(GifFileType *g, int *transparent, char *err, size_t errlen)
{
    int code;
    GifByteType *ext = NULL;
    if (DGifGetExtension(g, &code, &ext) != GIF_OK) {
        gif_fail(g, "extension", err, errlen);
        return -1;
    }
    if (code == GRAPHICS_EXT_FUNC_CODE && ext && ext[0] >= 4)
        *transparent = ext[1] & 1 ? ext[4] : -1;
    while (ext) {
        if (DGifGetExtensionNext(g, &ext) != GIF_OK) {
            gif_fail(g, "extension", err, errlen);
            return -1;
        }
    }
    return 0;
}

/* Reads the frame's indices into IDX (the cw-wide canvas). */
static int read_frame(GifFileType *g, uint8_t *idx, int cw, char *err, size_t errlen)
{
    const GifImageDesc *d = &g->Image;
    static const int start[4] = {0, 4, 2, 1}, step[4] = {8, 8, 4, 2};
    int passes = d->Interlace ? 4 : 1;
    for (int p = 0; p < passes; p++) {
        for (int y = d->Interlace ? start[p] : 0; y < d->Height; y += d->Interlace ? step[p] : 1) {
            GifPixelType *row = idx + ((size_t)(d->Top + y) * cw + d->Left);
            if (DGifGetLine(g, row, d->Width) != GIF_OK) {
                gif_fail(g, "image data", err, errlen);
                return -1;
            }
        }
    }
    return 0;
}

static image_t *first_frame(GifFileType *g, char *err, size_t errlen)
{
    int transparent = -1, rec;
    for (;;) {
        if (DGifGetRecordType(g, (GifRecordType *)&rec) != GIF_OK) {
            gif_fail(g, "record", err, errlen);
            return NULL;
        }
        if (rec == TERMINATE_RECORD_TYPE) {
            err_set(err, errlen, "corrupt GIF: no image in the file");
            return NULL;
        }
        if (rec == EXTENSION_RECORD_TYPE) {
            if (read_extension(g, &transparent, err, errlen) != 0)
                return NULL;
            continue;
        }
        if (rec == IMAGE_DESC_RECORD_TYPE)
            break;
    }
    if (DGifGetImageDesc(g) != GIF_OK) {
        gif_fail(g, "image descriptor", err, errlen);
        return NULL;
    }
    const GifImageDesc *d = &g->Image;
    long long cw = g->SWidth, ch = g->SHeight;
    if (d->Left + d->Width > cw)
        cw = d->Left + d->Width;
    if (d->Top + d->Height > ch)
        ch = d->Top + d->Height;
    if (image_check_dims(cw, ch, err, errlen) != 0)
        return NULL;
    const ColorMapObject *map = d->ColorMap ? d->ColorMap : g->SColorMap;
    uint8_t *idx = malloc((size_t)cw * ch);
    image_t *img = idx ? image_alloc((int)cw, (int)ch, map ? 3 : 1, err, errlen) : NULL;
    if (!idx)
        err_set(err, errlen, "out of memory for a %lldx%lld GIF", cw, ch);
    if (img) {
        memset(idx, transparent >= 0 ? transparent : 0, (size_t)cw * ch);
        if (read_frame(g, idx, (int)cw, err, errlen) != 0)
            image_destroy(&img);
    }
    for (size_t i = 0; img && i < (size_t)cw * ch; i++) {
        int v = idx[i];
        if (!map)
            img->px[i] = (uint8_t)v;
        else if (v < map->ColorCount)
            memcpy(img->px + 3 * i, &map->Colors[v], 3);
        else
            memset(img->px + 3 * i, v, 3);
    }
    free(idx);
    return img;
}

image_t *decode_gif(const uint8_t *buf, size_t len, char *err, size_t errlen)
{
    gif_src_t src = {buf, len, 0};
    int code = 0;
    GifFileType *g = DGifOpen(&src, gif_read, &code);
    if (!g) {
        const char *msg = GifErrorString(code);
        if (code == D_GIF_ERR_READ_FAILED)
            err_set(err, errlen, "image file is truncated (GIF header: %s)", msg ? msg : "?");
        else
            err_set(err, errlen, "corrupt GIF: %s", msg ? msg : "cannot read the header");
        return NULL;
    }
    image_t *img = first_frame(g, err, errlen);
    DGifCloseFile(g, &code);
    return img;
}
#endif
