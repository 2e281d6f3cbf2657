/* resize — PIL's Image.resize(size, Image.BILINEAR) for uint8 images.
 *
 * Same arithmetic as Pillow's libImaging/Resample.c (9.x): a triangle filter
 * whose support grows with the downscale factor (antialias), coefficients
 * normalised per output pixel in double and rounded to 22-bit fixed point,
 * a horizontal pass to an 8-bit intermediate image, then a vertical pass,
 * each rounding like PIL's clip8. A pass whose size does not change is
 * skipped, as PIL does. Results equal PIL's (the tests allow ±1).
 *
 * resize_region computes only a window of the resized image — resize then
 * center crop without the pixels the crop throws away — and can write the
 * window channel-planar (CHW) for the batch. */
#ifndef DDP_RESIZE_H
#define DDP_RESIZE_H

#include "common/image/decode.h"

#include <stddef.h>
#include <stdint.h>

/* torchvision 0.14 Resize(size) for an image of w x h: the shorter side
 * becomes SIZE, the longer int(size * long / short). */
void resize_shorter_side(int w, int h, int size, int *out_w, int *out_h);

typedef struct {
    int x, y, w, h; /* window of the dst_w x dst_h result; parts outside it read as 0 */
} resize_window_t;

/* Resizes SRC to dst_w x dst_h and writes the window WIN into OUT:
 * win.h x win.w x src->c interleaved (planar = 0) or src->c x win.h x win.w
 * (planar = 1). Returns 0, or -1 with a reason (bad sizes, out of memory). */
int resize_region(const image_t *src, int dst_w, int dst_h, const resize_window_t *win,
                  uint8_t *out, int planar, char *err, size_t errlen);

/* The rectangle of a src_w x src_h source (clipped to it) that resizing to
 * dst_w x dst_h and keeping WIN reads, so a decoder can produce only that
 * part; w = h = 0 when WIN lies wholly outside the result (all padding).
 * 0, or -1 with a reason (bad sizes, out of memory). */
int resize_source_rect(int src_w, int src_h, int dst_w, int dst_h, const resize_window_t *win,
                       resize_window_t *rect, char *err, size_t errlen);

/* resize_region when SRC holds only part of the image: the src->w x src->h
 * pixels at (src_x, src_y) of a full_w x full_h image. The result is
 * identical to resizing the full image, provided SRC covers the rectangle
 * resize_source_rect gives (else -1). */
int resize_region_at(const image_t *src, int src_x, int src_y, int full_w, int full_h,
                     int dst_w, int dst_h, const resize_window_t *win, uint8_t *out, int planar,
                     char *err, size_t errlen);

/* One axis of a window's filter, for a device's resize (gpud/cuda):
 * pixel i of the window's clipped span reads source pixels lo[i] ..
 * lo[i] + ksize - 1 (all inside the source) with the weights k[i * ksize
 * ...], 22-bit fixed point as PIL's, and is clip8 of (1 << 21) plus the
 * products' sum, shifted right by 22, clamped to 0..255. An axis whose
 * size does not change has the identity (ksize 1, weight 1 << 22), which
 * gives every pixel back unchanged, so both passes can always run. */
typedef struct {
    int count, ksize;
    int32_t *lo;   /* count first source indices */
    int32_t *k;    /* count x ksize weights */
} resize_axis_t;

/* Everything resize_region computes for WIN, as tables: the clipped
 * span [x0, x1) x [y0, y1) of the result that lies inside it (the rest of
 * the window is zero padding), the horizontal taps h over the span's
 * columns, the vertical taps v over its rows, and the source rows [sy0,
 * sy1) the vertical taps read (the horizontal pass's rows). With them the
 * two passes — h into an 8-bit buffer of (sy1 - sy0) x (x1 - x0) pixels,
 * then v — give resize_region's pixels exactly. */
typedef struct {
    int x0, x1, y0, y1;
    int sy0, sy1;
    resize_axis_t h, v;
} resize_taps_t;

/* The tables of resizing a src_w x src_h image to dst_w x dst_h, keeping
 * WIN. An empty span (all padding): x0 == x1 or y0 == y1, no taps. 0, or
 * -1 with a reason (bad sizes, out of memory). Free with resize_taps_free. */
int resize_taps(int src_w, int src_h, int dst_w, int dst_h, const resize_window_t *win,
                resize_taps_t *t, char *err, size_t errlen);
void resize_taps_free(resize_taps_t *t);

/* Whole-image convenience: a new dst_w x dst_h image, NULL on error. */
image_t *resize_image(const image_t *src, int dst_w, int dst_h, char *err, size_t errlen);

/* Tests: 0 forces the portable loops, 1 (the default) lets the AVX2 ones
 * run where the CPU has them. Returns whether AVX2 is now in use. Call
 * before any resize runs, not concurrently with one. */
int resize_use_simd(int on);

#endif
