/* resize_checks — see resize_checks.h. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/image/resize.h"
#include "common/image/transform.h"
#include "gpud/cuda/cuda_resize_kernels.h"
#include "../tcheck.h"
#include "resize_checks.h"

/* a w x h image of c channels from a fixed LCG: noise, the hardest case
 * for a filter's sums */
static image_t *noise(int w, int h, int c, uint32_t seed)
{
    image_t *img = image_new(w, h, c);
    REQUIRE(img, "alloc");
    for (size_t i = 0; i < (size_t)w * h * c; i++) {
        seed = seed * 1664525u + 1013904223u;
        img->px[i] = (uint8_t)(seed >> 24);
    }
    return img;
}

/* the CPU's sample: resize_region of SRC (its L first when oc is 1 of 3;
 * its gray plane copied when oc is 3 of 1), planar */
static void reference(const image_t *src, int oc, int dw, int dh, resize_window_t win,
                      uint8_t *out)
{
    char err[256];
    const image_t *in = src;
    image_t *gray = NULL;
    if (oc == 1 && src->c == 3) {
        gray = image_new(src->w, src->h, 1);
        REQUIRE(gray, "alloc");
        rgb_to_gray(src->px, gray->px, (size_t)src->w * src->h);
        in = gray;
    }
    REQUIRE(resize_region(in, dw, dh, &win, out, 1, err, sizeof err) == 0, "%s", err);
    size_t plane = (size_t)win.w * win.h;
    if (oc == 3 && src->c == 1) {
        memcpy(out + plane, out, plane);
        memcpy(out + 2 * plane, out, plane);
    }
    image_destroy(&gray);
}

/* the device's: both passes from resize_taps' tables, padding zero */
static void kernels(const image_t *src, int oc, int dw, int dh, resize_window_t win,
                    uint8_t *out)
{
    char err[256];
    resize_taps_t t;
    REQUIRE(resize_taps(src->w, src->h, dw, dh, &win, &t, err, sizeof err) == 0, "%s", err);
    size_t plane = (size_t)win.w * win.h;
    memset(out, 0xAB, plane * oc);   /* what a kernel does not write shows */
    if (t.x1 - t.x0 != win.w || t.y1 - t.y0 != win.h)
        memset(out, 0, plane * oc);   /* cuda_decode.c's cudaMemsetAsync */
    int cols = t.x1 - t.x0;
    if (cols > 0 && t.y1 > t.y0) {
        uint8_t *mid = malloc((size_t)(t.sy1 - t.sy0) * cols * oc);
        REQUIRE(mid, "alloc");
        CHECK(ck_resize_h(0, src->px, (size_t)src->w * src->c, src->c, oc, t.sy0, t.sy1 - t.sy0,
                          cols, t.h.lo, t.h.k, t.h.ksize, mid) == cudaSuccess, "launch");
        CHECK(ck_resize_v(0, mid, cols, oc, t.sy0, t.v.count, t.v.lo, t.v.k, t.v.ksize, out,
                          win.w, plane, t.x0 - win.x, t.y0 - win.y) == cudaSuccess, "launch");
        free(mid);
    }
    resize_taps_free(&t);
}

static void one(const image_t *src, int oc, int dw, int dh, resize_window_t win)
{
    size_t n = (size_t)win.w * win.h * oc;
    uint8_t *want = malloc(n), *got = malloc(n);
    REQUIRE(want && got, "alloc");
    reference(src, oc, dw, dh, win, want);
    kernels(src, oc, dw, dh, win, got);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += want[i] != got[i];
    CHECK(bad == 0, "resize %dx%dx%d -> %dx%d, window %d,%d %dx%d, %d channels: %zu of %zu "
          "values differ from resize_region", src->w, src->h, src->c, dw, dh, win.x, win.y,
          win.w, win.h, oc, bad, n);
    free(want);
    free(got);
}

int check_resize_kernels(void)
{
    int before = tc_failures;
    const int srcs[][3] = {{97, 61, 3}, {151, 233, 1}, {3, 2, 3}, {500, 375, 3}};
    for (size_t s = 0; s < sizeof srcs / sizeof *srcs; s++) {
        image_t *src = noise(srcs[s][0], srcs[s][1], srcs[s][2], 77u + (uint32_t)s);
        for (int oc = 1; oc <= 3; oc += 2) {
            /* torchvision's eval transform of it: Resize(36) + CenterCrop(32) */
            transform_t t = {.resize = 36, .crop_h = 32, .crop_w = 32, .channels = oc};
            int rw, rh;
            resize_window_t win;
            char err[256];
            REQUIRE(transform_window(&t, src->w, src->h, 32, 32, &rw, &rh, &win, err,
                                     sizeof err) == 0, "%s", err);
            one(src, oc, rw, rh, win);
            one(src, oc, 48, 30, (resize_window_t){0, 0, 48, 30});          /* no crop */
            one(src, oc, src->w, 30, (resize_window_t){-3, 2, src->w + 5, 20});   /* rows only, padded */
            one(src, oc, 64, 200, (resize_window_t){10, -5, 30, 40});       /* up one way */
            one(src, oc, src->w, src->h, (resize_window_t){0, 0, src->w, src->h});   /* identity */
            one(src, oc, 20, 20, (resize_window_t){25, 25, 4, 4});          /* all padding */
        }
        image_destroy(&src);
    }
    printf("resize kernels: resize_region's pixels, %d checks failed\n", tc_failures - before);
    return tc_failures - before;
}
