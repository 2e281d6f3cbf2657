/* image — the pixel buffer every decoder fills and every transform reads:
 * image_t (h x w x c uint8, c 1 or 3), its allocators and the size limits
 * shared by every decoder. Below decode.c and the decode_<format>.c files,
 * which all allocate through it. */
#ifndef DDP_IMAGE_H
#define DDP_IMAGE_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    int w, h, c;   /* c: 1 (gray) or 3 (RGB) */
    uint8_t *px;   /* h * w * c bytes, rows top to bottom, channels interleaved */
} image_t;

/* NULL when out of memory or the size is not positive / too large. */
image_t *image_new(int w, int h, int c);
void image_destroy(image_t **img);

/* An image whose pixel buffer (cap bytes, owned) is reused from image to
 * image: per-thread reuse keeps the heap from growing and shrinking with
 * every image. All zero is an empty one; free(b.img.px) releases it. */
typedef struct {
    image_t img;
    size_t cap;
} image_buf_t;

/* Makes B's image w x h x c, keeping its buffer when it is big enough. 0,
 * or -1 with B unchanged (bad size, out of memory). */
int image_buf_reshape(image_buf_t *b, int w, int h, int c);

/* Largest accepted width or height (PIL's default decompression-bomb limit
 * is ~89 Mpixel; JPEG's own limit is 65500). */
#define DECODE_MAX_DIM 65500
#define DECODE_MAX_PIXELS (89478485LL)

/* The size limits above, for a size read from a header: 0, or -1 with a
 * reason ("image has no pixels", "larger than the ... limit"). */
int image_check_dims(long long w, long long h, char *err, size_t errlen);

/* image_new with an "out of memory" reason on failure. */
image_t *image_alloc(int w, int h, int c, char *err, size_t errlen);

#endif
