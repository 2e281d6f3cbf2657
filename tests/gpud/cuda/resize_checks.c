/* resize_checks — see resize_checks.h. Each case runs alone and with the
 * others of its source as one batch's launch (the block -> job lookup). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/image/augment.h"
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

typedef struct {
    int dw, dh;
    resize_window_t win;
    int flip;
} rz_case_t;

/* the device's: every case of SRC as one job of one batch (both passes one
 * launch each, as cuda_decode.c runs a batch), padding zero; OUT[c] gets
 * case c's sample */
static void kernels(const image_t *src, int oc, const rz_case_t *cs, int n, uint8_t **out)
{
    char err[256];
    ck_rz_job_t *jobs = calloc((size_t)n, sizeof *jobs);
    resize_taps_t *t = calloc((size_t)n, sizeof *t);
    uint8_t **mid = calloc((size_t)n, sizeof *mid);
    REQUIRE(jobs && t && mid, "alloc");
    int m = 0;
    unsigned hb = 0, vb = 0;
    for (int c = 0; c < n; c++) {
        const resize_window_t *w = &cs[c].win;
        REQUIRE(resize_taps(src->w, src->h, cs[c].dw, cs[c].dh, w, &t[c], err, sizeof err) == 0,
                "%s", err);
        memset(out[c], 0, (size_t)w->w * w->h * oc);   /* cuda_decode.c's cudaMemsetAsync */
        int cols = t[c].x1 - t[c].x0, rows = t[c].sy1 - t[c].sy0;
        if (cols <= 0 || t[c].y1 <= t[c].y0)
            continue;   /* all padding: no job */
        mid[c] = malloc((size_t)rows * cols * oc);
        REQUIRE(mid[c], "alloc");
        jobs[m++] = (ck_rz_job_t){
            .src = src->px, .mid = mid[c], .out = out[c], .hlo = t[c].h.lo, .hk = t[c].h.k,
            .vlo = t[c].v.lo, .vk = t[c].v.k, .pitch = src->w * src->c, .sc = src->c,
            .y0 = t[c].sy0, .rows = rows, .cols = cols, .hks = t[c].h.ksize,
            .vks = t[c].v.ksize, .vrows = t[c].v.count, .ox = t[c].x0 - w->x,
            .oy = t[c].y0 - w->y, .flip = cs[c].flip, .hb0 = hb, .vb0 = vb};
        hb += ck_resize_blocks((size_t)rows * cols * oc);
        vb += ck_resize_blocks((size_t)t[c].v.count * cols * oc);
    }
    /* one out_w and plane a launch: a batch's samples are one size */
    for (int c = 1; c < n; c++)
        REQUIRE(cs[c].win.w == cs[0].win.w && cs[c].win.h == cs[0].win.h, "case sizes");
    size_t plane = (size_t)cs[0].win.w * cs[0].win.h;
    CHECK(ck_resize_h(0, jobs, m, oc, hb) == cudaSuccess, "launch");
    CHECK(ck_resize_v(0, jobs, m, oc, cs[0].win.w, plane, vb) == cudaSuccess, "launch");
    for (int c = 0; c < n; c++) {
        free(mid[c]);
        resize_taps_free(&t[c]);
    }
    free(mid);
    free(t);
    free(jobs);
}

/* the cases (windows of one size, as a batch's samples) against the CPU */
static void batch(const image_t *src, int oc, const rz_case_t *cs, int n)
{
    size_t bytes = (size_t)cs[0].win.w * cs[0].win.h * oc;
    uint8_t **got = calloc((size_t)n, sizeof *got), *want = malloc(bytes);
    REQUIRE(got && want, "alloc");
    for (int c = 0; c < n; c++)
        REQUIRE((got[c] = malloc(bytes)), "alloc");
    kernels(src, oc, cs, n, got);
    for (int c = 0; c < n; c++) {
        reference(src, oc, cs[c].dw, cs[c].dh, cs[c].win, want);
        if (cs[c].flip)   /* training's flip, after the resize (augment.c) */
            augment_flip_planes(want, oc, cs[c].win.h, cs[c].win.w);
        size_t bad = 0;
        for (size_t i = 0; i < bytes; i++)
            bad += want[i] != got[c][i];
        CHECK(bad == 0, "resize %dx%dx%d -> %dx%d, window %d,%d %dx%d, %d channels (job %d of "
              "%d): %zu of %zu values differ from resize_region", src->w, src->h, src->c,
              cs[c].dw, cs[c].dh, cs[c].win.x, cs[c].win.y, cs[c].win.w, cs[c].win.h, oc, c, n,
              bad, bytes);
        free(got[c]);
    }
    free(got);
    free(want);
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
            /* windows of 32 x 32 as one batch: the crop; down, no crop;
             * rows only, padded; up one way; the source as it is; all
             * padding */
            const rz_case_t cs[] = {
                {rw, rh, win, 0},
                {32, 32, {0, 0, 32, 32}, 0},
                {src->w, 20, {-3, -6, 32, 32}, 0},
                {64, 200, {10, -5, 32, 32}, 0},
                {src->w, src->h, {1, 0, 32, 32}, 0},
                {20, 20, {25, 25, 32, 32}, 0},
                {rw, rh, win, 1},                    /* flipped */
                {src->w, 20, {-3, -6, 32, 32}, 1},   /* flipped, padding too */
            };
            int n = (int)(sizeof cs / sizeof *cs);
            batch(src, oc, cs, n);
            for (int c = 0; c < n; c++)   /* each alone */
                batch(src, oc, &cs[c], 1);
        }
        image_destroy(&src);
    }
    printf("resize kernels: resize_region's pixels, %d checks failed\n", tc_failures - before);
    return tc_failures - before;
}
