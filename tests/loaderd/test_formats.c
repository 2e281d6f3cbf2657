/* Every format torchvision's ImageFolder accepts, and GIF, against PIL:
 * each file of tests/golden/formats (tests/golden/make_formats.py) decodes
 * to exactly PIL's Image.open(f).convert("RGB") bytes; cut to half its
 * length it fails with a reason wherever PIL fails too; random corruption
 * never crashes (ASan/UBSan build) and always says why it failed. A file
 * whose library this build lacks must fail naming the package. */
#include "common/image/decode.h"
#include "common/image/transform.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

#define DIR "tests/golden/formats/"

static uint8_t *load(const char *name, size_t *len)
{
    char rel[256], err[256];
    uint8_t *buf;
    snprintf(rel, sizeof rel, DIR "%s", name);
    if (decode_read_file(tu_src(rel), &buf, len, err, sizeof err) != 0) {
        CHECK(0, "%s: %s", rel, err);
        return NULL;
    }
    return buf;
}

/* The library a file needs, by its extension; NULL: always built in. */
static const char *library_of(const char *name)
{
    const char *ext = strrchr(name, '.');
    if (!ext)
        return NULL;
    if (!strcmp(ext, ".tif") || !strcmp(ext, ".tiff"))
        return "tiff";
    if (!strcmp(ext, ".webp"))
        return "webp";
    if (!strcmp(ext, ".gif"))
        return "gif";
    if (!strcmp(ext, ".png") || strstr(name, "png_named"))
        return "png";
    return NULL;
}

/* Bit for bit: gray output is one channel, PIL's convert("RGB") repeats it. */
static void compare(const char *name, const image_t *got, const uint8_t *want, size_t wlen,
                    int w, int h)
{
    if (got->w != w || got->h != h || wlen != (size_t)w * h * 3) {
        CHECK(0, "%s: %dx%d, PIL %dx%d (%zu golden bytes)", name, got->w, got->h, w, h, wlen);
        return;
    }
    size_t ndiff = 0, first = 0;
    for (size_t i = 0; i < (size_t)w * h * 3; i++) {
        uint8_t a = got->px[(i / 3) * got->c + (got->c == 3 ? i % 3 : 0)];
        if (a != want[i] && !ndiff++)
            first = i;
    }
    CHECK(ndiff == 0, "%s: %zu of %d bytes differ from PIL (first at pixel %zu: %u vs PIL %u)",
          name, ndiff, w * h * 3, first / 3, got->px[(first / 3) * got->c], want[first]);
}

/* Random byte changes and cuts: a result or a reason, never a crash. */
static void mutate(const char *name, const uint8_t *buf, size_t len, unsigned seed)
{
    uint8_t *m = malloc(len);
    for (int r = 0; m && r < 60; r++) {
        memcpy(m, buf, len);
        for (int j = 0; j < 1 + r % 6; j++) {
            seed = seed * 1103515245u + 12345u;
            m[(seed >> 8) % len] = (uint8_t)(seed >> 3);
        }
        size_t cut = r % 3 == 0 ? (seed >> 4) % len : len;
        char err[256] = "";
        int w, h;
        image_t *img = decode_image(m, cut, NULL, &w, &h, err, sizeof err);
        CHECK(img || err[0], "%s mutation %d: failed without a reason", name, r);
        CHECK(!img || (img->w == w && img->h == h), "%s mutation %d: size mismatch", name, r);
        image_destroy(&img);
    }
    free(m);
}

/* The loader's own path (decode_image_part, then the eval transform's
 * centre crop without a resize) gives the golden's pixels, channel-planar. */
static void through_transform(const char *name, const uint8_t *buf, size_t len,
                              const uint8_t *want, int w, int h)
{
    enum { S = 8 };
    transform_t t = {.crop_h = S, .crop_w = S, .channels = 3};
    uint8_t out[3 * S * S];
    char err[256] = "";
    if (w < S || h < S)
        return;
    if (sample_load_buffer(buf, len, &t, out, S, S, err, sizeof err) != 0) {
        CHECK(0, "%s through the transform: %s", name, err);
        return;
    }
    int x0 = center_crop_offset(w, S), y0 = center_crop_offset(h, S), bad = 0;
    for (int c = 0; c < 3; c++)
        for (int y = 0; y < S; y++)
            for (int x = 0; x < S; x++)
                bad += out[(c * S + y) * S + x] != want[((size_t)(y0 + y) * w + x0 + x) * 3 + c];
    CHECK(bad == 0, "%s through the transform: %d of %d bytes differ from PIL", name, bad, 3 * S * S);
}

static void test_goldens(void)
{
    FILE *f = fopen(tu_src(DIR "manifest.txt"), "r");
    CHECK(f != NULL, "manifest missing: run tests/golden/make_formats.py");
    if (!f)
        return;
    char name[128];
    int w, h, trunc, n = 0, skipped = 0;
    while (fscanf(f, "%127s %d %d %d", name, &w, &h, &trunc) == 4) {
        size_t len, glen;
        char gold[160], err[256] = "";
        snprintf(gold, sizeof gold, "%s.rgb", name);
        uint8_t *buf = load(name, &len), *want = load(gold, &glen);
        const char *lib = library_of(name);
        int sw = 0, sh = 0;
        image_t *img = buf ? decode_image(buf, len, NULL, &sw, &sh, err, sizeof err) : NULL;
        if (buf && lib && !decode_has_format(lib)) {
            CHECK(!img && strstr(err, "this build has no"), "%s: want a no-%s error, got '%s'",
                  name, lib, err);
            skipped++;
        } else if (buf && want) {
            CHECK(img != NULL, "%s: %s", name, err);
            int pw = 0, ph = 0;
            CHECK(decode_probe(buf, len, &pw, &ph, err, sizeof err) == 0 && pw == w && ph == h,
                  "%s: probe says %dx%d (%s), PIL %dx%d", name, pw, ph, err, w, h);
            if (img) {
                CHECK(sw == w && sh == h, "%s: source size %dx%d", name, sw, sh);
                compare(name, img, want, glen, w, h);
                through_transform(name, buf, len, want, w, h);
            }
            image_t *half = decode_image(buf, len / 2, NULL, &sw, &sh, err, sizeof err);
            CHECK(!trunc || (!half && err[0]), "%s: cut in half must fail like PIL", name);
            image_destroy(&half);
            mutate(name, buf, len, (unsigned)n * 7919u + 1);
            n++;
        }
        image_destroy(&img);
        free(buf);
        free(want);
    }
    fclose(f);
    /* BMP and PNM are always built in (27 files); the rest may be refused */
    CHECK(n >= 25 && n + skipped >= 60, "only %d golden files checked (%d refused)", n, skipped);
    printf("formats: %d files bit-identical to PIL, %d refused (library not built)\n", n, skipped);
}

static void test_reasons(void)
{
    struct {
        const char *what;
        const char *data;
        size_t len;
        const char *want;
    } cases[] = {
        {"BMP header only", "BM\x36\x00\x00\x00", 6, "BMP"},
        {"BMP unknown header", "BM\0\0\0\0\0\0\0\0\x36\0\0\0\x99\0\0\0", 18, "BMP header"},
        {"PPM no size", "P6\n", 3, "truncated"},
        {"PPM bad size", "P6\n-3 4\n255\n", 12, "PNM"},
        {"PPM zero maxval", "P6\n1 1\n0\n\0\0\0", 12, "maxval"},
        {"PPM short data", "P6\n2 2\n255\n\1\2\3", 14, "truncated"},
        {"PBM bad char", "P1\n2 1\n1 x", 10, "PBM"},
        {"PGM plain above maxval", "P2\n1 1\n7\n9\n", 11, "above maxval"},
        {"GIF header only", "GIF89a\x01\x00", 8, "GIF"},
        {"TIFF header only", "II*\0\x08\0\0\0", 8, "TIFF"},
        {"WebP header only", "RIFF\x10\0\0\0WEBPVP8 ", 16, "WebP"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char err[256] = "";
        int w, h;
        image_t *img = decode_image((const uint8_t *)cases[i].data, cases[i].len, NULL, &w, &h,
                                    err, sizeof err);
        CHECK(!img && strstr(err, cases[i].want), "%s: want '%s' in the reason, got '%s'",
              cases[i].what, cases[i].want, err);
        image_destroy(&img);
    }
}

int main(void)
{
    test_goldens();
    test_reasons();
    return tu_finish("loaderd.formats");
}
