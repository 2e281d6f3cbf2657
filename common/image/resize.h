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

/* Whole-image convenience: a new dst_w x dst_h image, NULL on error. */
image_t *resize_image(const image_t *src, int dst_w, int dst_h, char *err, size_t errlen);

/* Tests: 0 forces the portable loops, 1 (the default) lets the AVX2 ones
 * run where the CPU has them. Returns whether AVX2 is now in use. Call
 * before any resize runs, not concurrently with one. */
int resize_use_simd(int on);

#endif
