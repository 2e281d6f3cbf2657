#include "common/image/image.h"
#include "common/errbuf.h"

#include <stdlib.h>

image_t *image_new(int w, int h, int c)
{
    if (w <= 0 || h <= 0 || (c != 1 && c != 3) || (long long)w * h > DECODE_MAX_PIXELS)
        return NULL;
    image_t *img = calloc(1, sizeof *img);
    if (!img)
        return NULL;
    img->px = malloc((size_t)w * h * c);
    if (!img->px) {
        free(img);
        return NULL;
    }
    img->w = w;
    img->h = h;
    img->c = c;
    return img;
}

int image_buf_reshape(image_buf_t *b, int w, int h, int c)
{
    if (w <= 0 || h <= 0 || (c != 1 && c != 3) || (long long)w * h > DECODE_MAX_PIXELS)
        return -1;
    size_t need = (size_t)w * h * c;
    if (need > b->cap) {
        uint8_t *px = malloc(need);
        if (!px)
            return -1;
        free(b->img.px);
        b->img.px = px;
        b->cap = need;
    }
    b->img.w = w;
    b->img.h = h;
    b->img.c = c;
    return 0;
}

void image_destroy(image_t **imgp)
{
    if (!imgp || !*imgp)
        return;
    free((*imgp)->px);
    free(*imgp);
    *imgp = NULL;
}

int image_check_dims(long long w, long long h, char *err, size_t errlen)
{
    if (w <= 0 || h <= 0) {
        err_set(err, errlen, "image has no pixels (%lldx%lld)", w, h);
        return -1;
    }
    if (w > DECODE_MAX_DIM || h > DECODE_MAX_DIM || w * h > DECODE_MAX_PIXELS) {
        err_set(err, errlen, "image of %lldx%lld is larger than the %lld-pixel limit", w, h,
                 (long long)DECODE_MAX_PIXELS);
        return -1;
    }
    return 0;
}

image_t *image_alloc(int w, int h, int c, char *err, size_t errlen)
{
    image_t *img = image_new(w, h, c);
    if (!img)
        err_set(err, errlen, "out of memory for a %dx%d image", w, h);
    return img;
}
