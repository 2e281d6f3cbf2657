/* Resize parity with PIL (goldens from tests/golden/gen_resize.py), windows
 * of the resize equal the same crop of the whole resize (and resize_taps'
 * tables give them too), torchvision's
 * Resize(size) output size and CenterCrop offsets, RGB -> L. */
#include "common/image/resize.h"
#include "common/image/transform.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

static void test_pil_goldens(void)
{
    FILE *f = fopen(tu_src("tests/golden/loader/resize/manifest.txt"), "r");
    CHECK(f != NULL, "resize manifest missing: run tests/golden/gen_resize.py");
    if (!f)
        return;
    char src[256], out[256];
    int w, h, cases = 0, exact = 0;
    while (fscanf(f, "%255s %d %d %255s", src, &w, &h, out) == 4) {
        char path[512];
        snprintf(path, sizeof path, "tests/golden/loader/resize/%s", src);
        image_t *in = tu_read_pnm(tu_src(path));
        snprintf(path, sizeof path, "tests/golden/loader/resize/%s", out);
        image_t *want = tu_read_pnm(tu_src(path));
        char err[256];
        image_t *got = in ? resize_image(in, w, h, err, sizeof err) : NULL;
        CHECK(in && want && got, "%s -> %dx%d: cannot run the case", src, w, h);
        if (in && want && got) {
            CHECK(want->w == w && want->h == h && want->c == got->c, "%s: golden shape", out);
            size_t nd;
            int md = tu_maxdiff(got->px, want->px, (size_t)w * h * got->c, &nd);
            CHECK(md <= 1, "%s -> %dx%d: max diff %d vs PIL (%zu values differ)", src, w, h, md,
                  nd);
            exact += md == 0;
        }
        cases++;
        image_destroy(&in);
        image_destroy(&want);
        image_destroy(&got);
    }
    fclose(f);
    CHECK(cases >= 40, "only %d resize cases in the manifest", cases);
    printf("resize vs PIL: %d cases, %d bit-exact, all within +-1\n", cases, exact);
}

static uint8_t clip22(int32_t s)
{
    s >>= 22;
    return (uint8_t)(s < 0 ? 0 : s > 255 ? 255 : s);
}

/* resize_taps' tables applied as a device applies them (the horizontal
 * pass over rows [sy0, sy1) into an 8-bit buffer, then the vertical one;
 * both always, an identity where the size stays) give resize_region's
 * planar window, zero padding included. */
static void check_taps(const image_t *src, int dst_w, int dst_h, resize_window_t win,
                       const uint8_t *want_chw)
{
    char err[256];
    resize_taps_t t;
    int c = src->c;
    CHECK(resize_taps(src->w, src->h, dst_w, dst_h, &win, &t, err, sizeof err) == 0, "%s", err);
    size_t n = (size_t)win.w * win.h * c;
    uint8_t *got = calloc(n, 1);
    int cols = t.x1 - t.x0, rows = t.sy1 - t.sy0;
    uint8_t *mid = malloc((size_t)(rows > 0 ? rows : 1) * (cols > 0 ? cols : 1) * c);
    CHECK(got && mid, "oom");
    if (got && mid && cols > 0 && t.y1 > t.y0) {
        CHECK(t.h.count == cols && t.v.count == t.y1 - t.y0 && t.sy0 >= 0 && t.sy1 <= src->h,
              "taps' shape: %d cols, %d rows, source rows [%d, %d)", t.h.count, t.v.count,
              t.sy0, t.sy1);
        for (int y = 0; y < rows; y++)
            for (int x = 0; x < cols; x++)
                for (int ch = 0; ch < c; ch++) {
                    int32_t s = 1 << 21;
                    for (int j = 0; j < t.h.ksize; j++) {
                        int sx = t.h.lo[x] + j;
                        CHECK(sx >= 0 && sx < src->w, "a tap outside the source: %d", sx);
                        s += src->px[((size_t)(t.sy0 + y) * src->w + sx) * c + ch] *
                             t.h.k[(size_t)x * t.h.ksize + j];
                    }
                    mid[((size_t)y * cols + x) * c + ch] = clip22(s);
                }
        for (int i = 0; i < t.v.count; i++)
            for (int x = 0; x < cols; x++)
                for (int ch = 0; ch < c; ch++) {
                    int32_t s = 1 << 21;
                    for (int j = 0; j < t.v.ksize; j++)
                        s += mid[((size_t)(t.v.lo[i] + j - t.sy0) * cols + x) * c + ch] *
                             t.v.k[(size_t)i * t.v.ksize + j];
                    got[(size_t)ch * win.w * win.h +
                        (size_t)(t.y0 + i - win.y) * win.w + (t.x0 + x - win.x)] = clip22(s);
                }
    }
    size_t nd = 0;
    int md = got ? tu_maxdiff(got, want_chw, n, &nd) : 255;
    CHECK(md == 0, "taps of %dx%d -> %dx%d, window %d,%d %dx%d: max diff %d (%zu values)",
          src->w, src->h, dst_w, dst_h, win.x, win.y, win.w, win.h, md, nd);
    resize_taps_free(&t);
    free(got);
    free(mid);
}

/* Every window of the resized image (inside, overlapping the border, or
 * larger than it) equals that part of the whole result, zero outside, in
 * both layouts. */
static void check_window(const image_t *src, const image_t *full, resize_window_t win)
{
    char err[256];
    size_t n = (size_t)win.w * win.h * src->c;
    uint8_t *hwc = malloc(n), *chw = malloc(n);
    CHECK(hwc && chw, "oom");
    if (!hwc || !chw)
        goto out;
    int rc1 = resize_region(src, full->w, full->h, &win, hwc, 0, err, sizeof err);
    int rc2 = resize_region(src, full->w, full->h, &win, chw, 1, err, sizeof err);
    CHECK(rc1 == 0 && rc2 == 0, "window %d,%d %dx%d: %s", win.x, win.y, win.w, win.h, err);
    check_taps(src, full->w, full->h, win, chw);
    int bad = 0;
    for (int y = 0; y < win.h && !bad; y++)
        for (int x = 0; x < win.w && !bad; x++)
            for (int c = 0; c < src->c && !bad; c++) {
                int fx = win.x + x, fy = win.y + y;
                int want = fx >= 0 && fy >= 0 && fx < full->w && fy < full->h
                               ? full->px[((size_t)fy * full->w + fx) * src->c + c]
                               : 0;
                int a = hwc[((size_t)y * win.w + x) * src->c + c];
                int b = chw[(size_t)c * win.w * win.h + (size_t)y * win.w + x];
                bad = a != want || b != want;
                CHECK(!bad, "window %d,%d %dx%d of %dx%d: pixel %d,%d c%d = %d/%d, want %d",
                      win.x, win.y, win.w, win.h, full->w, full->h, x, y, c, a, b, want);
            }
out:
    free(hwc);
    free(chw);
}

static void test_windows(void)
{
    const char *srcs[] = {"rgb97x61.ppm", "gray151x233.pgm", "rgb3x2.ppm"};
    const int sizes[][2] = {{48, 30}, {150, 100}, {97, 61}, {7, 5}, {64, 200}, {97, 30}};
    for (size_t s = 0; s < sizeof srcs / sizeof *srcs; s++) {
        char path[256];
        snprintf(path, sizeof path, "tests/golden/loader/resize/%s", srcs[s]);
        image_t *src = tu_read_pnm(tu_src(path));
        CHECK(src != NULL, "%s", path);
        for (size_t z = 0; src && z < sizeof sizes / sizeof *sizes; z++) {
            char err[256];
            int w = sizes[z][0], h = sizes[z][1];
            image_t *full = resize_image(src, w, h, err, sizeof err);
            CHECK(full != NULL, "%s", err);
            if (!full)
                continue;
            check_window(src, full, (resize_window_t){0, 0, w, h});
            check_window(src, full, (resize_window_t){w / 4, h / 3, w / 2 + 1, h / 2 + 1});
            check_window(src, full, (resize_window_t){w - 1, h - 1, 1, 1});
            check_window(src, full, (resize_window_t){-3, -2, w + 7, h + 4});
            check_window(src, full, (resize_window_t){w / 2, -5, w, 3});
            check_window(src, full, (resize_window_t){w + 2, h + 2, 4, 4}); /* all padding */
            image_destroy(&full);
        }
        image_destroy(&src);
    }
}

static void test_bad_args(void)
{
    image_t *src = image_new(4, 4, 3);
    char err[256] = "";
    uint8_t out[64];
    CHECK(src != NULL, "oom");
    if (!src)
        return;
    memset(src->px, 7, 48);
    resize_window_t win = {0, 0, 2, 2};
    CHECK(resize_region(src, 0, 4, &win, out, 0, err, sizeof err) == -1 && err[0],
          "zero width accepted");
    win.w = 0;
    CHECK(resize_region(src, 4, 4, &win, out, 0, err, sizeof err) == -1, "empty window accepted");
    CHECK(resize_image(src, 70000, 2, err, sizeof err) == NULL, "huge size accepted");
    image_destroy(&src);
}

static void test_sizes(void)
{
    FILE *f = fopen(tu_src("tests/golden/loader/resize/sizes.txt"), "r");
    CHECK(f != NULL, "sizes.txt missing");
    if (!f)
        return;
    int w, h, size, ow, oh, n = 0;
    while (fscanf(f, "%d %d %d %d %d", &w, &h, &size, &ow, &oh) == 5) {
        int gw, gh;
        resize_shorter_side(w, h, size, &gw, &gh);
        CHECK(gw == ow && gh == oh, "Resize(%d) of %dx%d: %dx%d, torchvision %dx%d", size, w, h,
              gw, gh, ow, oh);
        n++;
    }
    fclose(f);
    CHECK(n > 100, "only %d size cases", n);
}

static void test_center_crop(void)
{
    /* torchvision 0.14 F.center_crop, checked case by case with torch:
     * offsets use Python's round (half to even); a larger crop pads
     * (crop - size) // 2 on the left/top. */
    const int cases[][3] = {{256, 224, 16}, {257, 224, 16}, {259, 224, 18}, {225, 224, 0},
                            {227, 224, 2},  {224, 224, 0},  {5, 2, 2},      {6, 3, 2},
                            {7, 2, 2},      {200, 224, -12}, {201, 224, -11}, {1, 4, -1},
                            {2, 5, -1}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        CHECK(center_crop_offset(cases[i][0], cases[i][1]) == cases[i][2],
              "center_crop_offset(%d, %d) = %d, torchvision %d", cases[i][0], cases[i][1],
              center_crop_offset(cases[i][0], cases[i][1]), cases[i][2]);
}

static void test_gray(void)
{
    /* want: Pillow 9.4's Image.fromarray(rgb).convert("L") of these pixels */
    const uint8_t rgb[] = {0, 0, 0, 255, 255, 255, 255, 0, 0, 0, 255, 0, 0, 0, 255, 10, 200, 30,
                           1, 1, 1, 128, 64, 32};
    const uint8_t want[] = {0, 255, 76, 150, 29, 124, 1, 79};
    uint8_t got[8];
    rgb_to_gray(rgb, got, 8);
    for (int i = 0; i < 8; i++)
        CHECK(got[i] == want[i], "L of pixel %d = %d, PIL %d", i, got[i], want[i]);
}

int main(void)
{
    /* both code paths must give PIL's pixels */
    for (int simd = 1; simd >= 0; simd--) {
        printf("%s loops\n", resize_use_simd(simd) ? "AVX2" : "portable");
        test_pil_goldens();
        test_windows();
    }
    test_bad_args();
    test_sizes();
    test_center_crop();
    test_gray();
    return tu_finish("test_resize");
}
