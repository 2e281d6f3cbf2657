/* Partial JPEG decoding (decode_image_part, transform_part) must give the
 * same pixels as decoding the whole image: on the decode goldens and on
 * random JPEGs (sizes, subsamplings, qualities) with random rectangles and
 * random Resize + CenterCrop transforms. Also: truncation is still an error
 * when the missing data lies below the rectangle, trailing bytes after EOI
 * are fine, and the partial path really decodes less. */
#include "common/image/decode.h"
#include "common/image/resize.h"
#include "common/image/transform.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>

static uint64_t rng = 0x9E3779B97F4A7C15ull;

/* decode_image_part's REUSE buffer, used by every other check_rect call so
 * it grows and shrinks across images of all sizes. */
static image_buf_t reuse_img;
static int reuse_turn;

static int rnd(int n) /* 0..n-1 */
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (int)(rng % (uint64_t)n);
}

typedef struct {
    decode_rect_t rect;
    int calls;
} fixed_need_t;

static int give_rect(void *arg, int w, int h, decode_rect_t *need, char *err, size_t errlen)
{
    (void)w;
    (void)h;
    (void)err;
    (void)errlen;
    fixed_need_t *f = arg;
    f->calls++;
    *need = f->rect;
    return 0;
}

/* Decodes RECT of BUF partially; every pixel of RECT (clipped) must equal
 * FULL's. Returns 1 when the decoded window was smaller than the image. */
static int check_rect(const uint8_t *buf, size_t len, const image_t *full, decode_rect_t rect,
                      const char *what)
{
    fixed_need_t f = {rect, 0};
    decode_part_t part;
    int sw = 0, sh = 0;
    char err[256];
    image_buf_t *reuse = reuse_turn++ % 2 ? &reuse_img : NULL;
    image_t *img = decode_image_part(buf, len, NULL, give_rect, &f, reuse, &part, &sw, &sh, err,
                                     sizeof err);
    CHECK(img != NULL, "%s: partial decode failed: %s", what, err);
    if (!img)
        return 0;
    CHECK(sw == full->w && sh == full->h && part.full_w == full->w && part.full_h == full->h,
          "%s: sizes %dx%d / %dx%d, want %dx%d", what, sw, sh, part.full_w, part.full_h, full->w,
          full->h);
    CHECK(img->c == full->c, "%s: %d channels, full decode %d", what, img->c, full->c);
    int x0 = rect.x < 0 ? 0 : rect.x, y0 = rect.y < 0 ? 0 : rect.y;
    int x1 = rect.x + rect.w > full->w ? full->w : rect.x + rect.w;
    int y1 = rect.y + rect.h > full->h ? full->h : rect.y + rect.h;
    CHECK(part.x <= x0 && part.y <= y0 && part.x + img->w >= x1 && part.y + img->h >= y1,
          "%s: window %dx%d at (%d,%d) misses [%d,%d)x[%d,%d)", what, img->w, img->h, part.x,
          part.y, x0, x1, y0, y1);
    int bad = 0;
    for (int y = y0; !bad && y < y1 && img->c == full->c; y++) {
        const uint8_t *a = img->px + ((size_t)(y - part.y) * img->w + (x0 - part.x)) * img->c;
        const uint8_t *b = full->px + ((size_t)y * full->w + x0) * full->c;
        if (y - part.y < img->h && memcmp(a, b, (size_t)(x1 - x0) * img->c) != 0) {
            CHECK(0, "%s: row %d of [%d,%d)x[%d,%d) differs from the full decode", what, y, x0,
                  x1, y0, y1);
            bad = 1;
        }
    }
    int smaller = (size_t)img->w * img->h < (size_t)full->w * full->h;
    if (img != &reuse_img.img)
        image_destroy(&img);
    return smaller;
}

static decode_rect_t random_rect(int w, int h)
{
    int x = rnd(w), y = rnd(h);
    decode_rect_t r = {x, y, 1 + rnd(w - x), 1 + rnd(h - y)};
    if (rnd(8) == 0) { /* edges and the whole image */
        r.x = rnd(2) ? 0 : r.x;
        r.w = rnd(2) ? w - r.x : r.w;
    }
    return r;
}

/* Resize(s) + CenterCrop(c) through sample_load's path (partial decode,
 * transform_part) against the full decode and transform_image. */
static void check_transform(const uint8_t *buf, size_t len, const image_t *full, int channels,
                            const char *what)
{
    int s = 1 + rnd(full->w < full->h ? full->w * 2 : full->h * 2);
    int c = 1 + rnd(s + 8); /* sometimes larger than the resized image: padding */
    transform_t t = {rnd(6) ? s : 0, c, c, channels, 0};
    uint8_t *a = malloc((size_t)channels * c * c), *b = malloc((size_t)channels * c * c);
    char err[256];
    CHECK(a && b, "out of memory");
    if (!a || !b || transform_image(full, full->w, full->h, &t, b, c, c, err, sizeof err) != 0) {
        CHECK(!a || !b, "%s: full transform failed: %s", what, err);
        free(a);
        free(b);
        return;
    }
    /* the callback sample_load uses, through the public API: the rectangle
     * resize_source_rect names for this transform */
    int rw = full->w, rh = full->h;
    if (t.resize)
        resize_shorter_side(full->w, full->h, t.resize, &rw, &rh);
    resize_window_t win = {center_crop_offset(rw, c), center_crop_offset(rh, c), c, c}, rect;
    CHECK(resize_source_rect(full->w, full->h, rw, rh, &win, &rect, err, sizeof err) == 0, "%s",
          err);
    fixed_need_t f = {{rect.x, rect.y, rect.w, rect.h}, 0};
    if (rect.w == 0)
        f.rect = (decode_rect_t){0, 0, 1, 1};
    decode_part_t part;
    int sw, sh;
    image_t *img = decode_image_part(buf, len, NULL, give_rect, &f, NULL, &part, &sw, &sh, err,
                                     sizeof err);
    CHECK(img != NULL, "%s: %s", what, err);
    if (img) {
        int rc = transform_part(img, &part, sw, sh, &t, a, c, c, err, sizeof err);
        CHECK(rc == 0, "%s: transform_part: %s", what, err);
        size_t nd = 0;
        int md = rc == 0 ? tu_maxdiff(a, b, (size_t)channels * c * c, &nd) : 0;
        CHECK(md == 0, "%s: Resize(%d) CenterCrop(%d) ch %d: %zu bytes differ (max %d)", what,
              t.resize, c, channels, nd, md);
    }
    image_destroy(&img);
    free(a);
    free(b);
}

static void test_goldens(void)
{
    FILE *f = fopen(tu_src("tests/golden/loader/decode/manifest.txt"), "r");
    CHECK(f != NULL, "decode manifest missing");
    if (!f)
        return;
    char src[128], gold[128];
    int files = 0, cropped = 0;
    while (fscanf(f, "%127s %127s", src, gold) == 2) {
        if (!strstr(src, ".jpg"))
            continue;
        char rel[256], err[256];
        uint8_t *buf;
        size_t len;
        int w, h;
        snprintf(rel, sizeof rel, "tests/golden/loader/decode/%s", src);
        if (decode_read_file(tu_src(rel), &buf, &len, err, sizeof err) != 0) {
            CHECK(0, "%s: %s", rel, err);
            continue;
        }
        image_t *full = decode_image(buf, len, NULL, &w, &h, err, sizeof err);
        CHECK(full != NULL, "%s: %s", src, err);
        for (int i = 0; full && i < 60; i++) {
            cropped += check_rect(buf, len, full, random_rect(w, h), src);
            check_transform(buf, len, full, 1 + 2 * rnd(2), src);
        }
        files++;
        image_destroy(&full);
        free(buf);
    }
    fclose(f);
    CHECK(files >= 8, "only %d golden JPEGs", files);
    CHECK(!decode_has_partial_jpeg() || cropped > 0, "no golden JPEG was decoded partially");
    printf("goldens: %d JPEGs x 60 rectangles and transforms, %d partial decodes\n", files,
           cropped);
}

/* A w x h photo-like RGB image: gradients, a few edges and noise, so
 * chroma varies at every scale the upsamplers look at. */
static uint8_t *synth(int w, int h)
{
    uint8_t *px = malloc((size_t)w * h * 3);
    int fx = 1 + rnd(7), fy = 1 + rnd(7), edge = rnd(w);
    for (int y = 0; px && y < h; y++)
        for (int x = 0; x < w; x++) {
            uint8_t *p = px + ((size_t)y * w + x) * 3;
            p[0] = (uint8_t)((x * 255 / w) ^ (y * fx) ^ (uint8_t)rnd(24));
            p[1] = (uint8_t)(x > edge ? 220 - (y * 200 / h) : (x * fy) & 0xff);
            p[2] = (uint8_t)(((x / 3 + y / 5) & 1 ? 200 : 40) + rnd(40));
        }
    return px;
}

static uint8_t *encode(const uint8_t *px, int w, int h, int samp, int q, unsigned long *len)
{
    tjhandle tj = tjInitCompress();
    unsigned char *jpg = NULL;
    if (!tj || tjCompress2(tj, px, w, 0, h, TJPF_RGB, &jpg, len, samp, q, 0) != 0) {
        CHECK(0, "tjCompress2 %dx%d samp %d: %s", w, h, samp, tjGetErrorStr2(tj));
        if (jpg)
            tjFree(jpg);
        jpg = NULL;
    }
    if (tj)
        tjDestroy(tj);
    return jpg;
}

static void test_random(void)
{
    const int samps[] = {TJSAMP_444, TJSAMP_422, TJSAMP_420, TJSAMP_440, TJSAMP_411, TJSAMP_GRAY};
    int n = 0, cropped = 0;
    for (int i = 0; i < 120; i++) {
        int w = 1 + rnd(i < 20 ? 40 : 330), h = 1 + rnd(i < 20 ? 40 : 330);
        int samp = samps[rnd(6)], q = 50 + rnd(50);
        uint8_t *px = synth(w, h);
        unsigned long len = 0;
        uint8_t *jpg = px ? encode(px, w, h, samp, q, &len) : NULL;
        free(px);
        if (!jpg)
            continue;
        char what[96], err[256];
        snprintf(what, sizeof what, "%dx%d samp %d q%d", w, h, samp, q);
        int sw, sh;
        image_t *full = decode_image(jpg, len, NULL, &sw, &sh, err, sizeof err);
        CHECK(full != NULL, "%s: %s", what, err);
        for (int k = 0; full && k < 12; k++) {
            cropped += check_rect(jpg, len, full, random_rect(w, h), what);
            check_transform(jpg, len, full, 1 + 2 * rnd(2), what);
        }
        n++;
        image_destroy(&full);
        tjFree(jpg);
    }
    CHECK(!decode_has_partial_jpeg() || cropped > 100, "only %d partial decodes", cropped);
    printf("random: %d JPEGs x 12 rectangles and transforms, %d partial decodes\n", n, cropped);
}

/* Data missing below the rectangle is still a truncated file; bytes after
 * EOI are not an error. */
static void test_truncation(void)
{
    int w = 300, h = 240;
    uint8_t *px = synth(w, h);
    unsigned long len = 0;
    uint8_t *jpg = px ? encode(px, w, h, TJSAMP_420, 90, &len) : NULL;
    free(px);
    if (!jpg)
        return;
    fixed_need_t top = {{100, 10, 50, 20}, 0};
    decode_part_t part;
    int sw, sh;
    char err[256] = "";
    image_t *img = decode_image_part(jpg, len * 3 / 4, NULL, give_rect, &top, NULL, &part, &sw,
                                     &sh, err, sizeof err);
    CHECK(!img && strstr(err, "truncated"), "cut at 3/4, rectangle at the top: want "
          "'truncated', got %s '%s'", img ? "an image" : "error", err);
    image_destroy(&img);
    img = decode_image_part(jpg, 300, NULL, give_rect, &top, NULL, &part, &sw, &sh, err,
                            sizeof err);
    CHECK(!img && err[0], "cut in the header: want an error");
    image_destroy(&img);

    uint8_t *tail = malloc(len + 5);
    if (tail) {
        memcpy(tail, jpg, len);
        memcpy(tail + len, "junk\n", 5);
        image_t *full = decode_image(jpg, len, NULL, &sw, &sh, err, sizeof err);
        CHECK(full != NULL, "full decode: %s", err);
        if (full)
            check_rect(tail, len + 5, full, top.rect, "trailing bytes after EOI");
        image_destroy(&full);
        free(tail);
    }
    tjFree(jpg);
}

int main(void)
{
    test_goldens();
    test_random();
    test_truncation();
    free(reuse_img.img.px);
    return tu_finish("loaderd.partial");
}
