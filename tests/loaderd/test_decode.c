/* Decoder parity with PIL's Image.open(f).convert("RGB") (goldens from
 * tests/golden/gen_loader_decode.py), DCT scaling, and clean errors for
 * broken input. */
#include "common/image/decode.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static uint8_t *load(const char *name, size_t *len)
{
    char rel[256], err[256];
    uint8_t *buf;
    snprintf(rel, sizeof rel, "tests/golden/loader/decode/%s", name);
    if (decode_read_file(tu_src(rel), &buf, len, err, sizeof err) != 0) {
        CHECK(0, "%s: %s", rel, err);
        return NULL;
    }
    return buf;
}

/* Our gray output is one channel; PIL's convert("RGB") replicates it. */
static int compare(const image_t *got, const image_t *want, const char *name)
{
    if (got->w != want->w || got->h != want->h) {
        CHECK(0, "%s: %dx%d, PIL %dx%d", name, got->w, got->h, want->w, want->h);
        return -1;
    }
    int md = 0;
    for (size_t p = 0; p < (size_t)got->w * got->h; p++)
        for (int c = 0; c < 3; c++) {
            int a = got->px[p * got->c + (got->c == 3 ? c : 0)], b = want->px[p * 3 + c];
            md = abs(a - b) > md ? abs(a - b) : md;
        }
    CHECK(md <= 1, "%s: max diff %d vs PIL", name, md);
    return md;
}

static void test_goldens(void)
{
    FILE *f = fopen(tu_src("tests/golden/loader/decode/manifest.txt"), "r");
    CHECK(f != NULL, "decode manifest missing: run tests/golden/gen_loader_decode.py");
    if (!f)
        return;
    char src[128], gold[128];
    int n = 0, exact = 0, png = 0;
    while (fscanf(f, "%127s %127s", src, gold) == 2) {
        size_t len;
        uint8_t *buf = load(src, &len);
        char rel[256], err[256] = "";
        snprintf(rel, sizeof rel, "tests/golden/loader/decode/%s", gold);
        image_t *want = tu_read_pnm(tu_src(rel));
        int w = 0, h = 0;
        image_t *got = buf ? decode_image(buf, len, NULL, &w, &h, err, sizeof err) : NULL;
        int is_png = strstr(src, ".png") != NULL;
        if (is_png && !decode_has_png()) {
            CHECK(!got && strstr(err, "PNG"), "%s: want a clear no-PNG error, got '%s'", src, err);
        } else {
            CHECK(got && want, "%s: %s", src, err);
            if (got && want) {
                CHECK(w == want->w && h == want->h, "%s: source size %dx%d", src, w, h);
                exact += compare(got, want, src) == 0;
                png += is_png;
            }
        }
        n++;
        free(buf);
        image_destroy(&want);
        image_destroy(&got);
    }
    fclose(f);
    CHECK(n >= 17, "only %d decode cases", n);
    printf("decode vs PIL: %d files (%d PNG), %d bit-exact\n", n, png, exact);
}

static void test_channels(void)
{
    const char *gray[] = {"gray.jpg", "gray.png", "gray_alpha.png", "bilevel.png", "gray16.png"};
    const char *rgb[] = {"base420.jpg", "cmyk.jpg", "ycck.jpg", "palette.png", "rgba.png"};
    for (int i = 0; i < 5; i++)
        for (int k = 0; k < 2; k++) {
            const char *name = k ? rgb[i] : gray[i];
            if (strstr(name, ".png") && !decode_has_png())
                continue;
            size_t len;
            uint8_t *buf = load(name, &len);
            char err[256];
            int w, h;
            image_t *img = buf ? decode_image(buf, len, NULL, &w, &h, err, sizeof err) : NULL;
            CHECK(img && img->c == (k ? 3 : 1), "%s: want %d channel(s)", name, k ? 3 : 1);
            image_destroy(&img);
            free(buf);
        }
}

static void test_dct_scaling(void)
{
    size_t len;
    uint8_t *buf = load("base420.jpg", &len); /* 64x48 */
    if (!buf)
        return;
    char err[256];
    int w, h;
    decode_opts_t o = {20, 15};
    image_t *img = decode_image(buf, len, &o, &w, &h, err, sizeof err);
    /* the smallest of libjpeg-turbo's n/8 scales covering 20x15 is 3/8 */
    CHECK(img && img->w == 24 && img->h == 18 && w == 64 && h == 48,
          "scaled decode: %dx%d of %dx%d", img ? img->w : 0, img ? img->h : 0, w, h);
    image_destroy(&img);
    o = (decode_opts_t){40, 30}; /* less than 2x smaller: no scaling */
    img = decode_image(buf, len, &o, &w, &h, err, sizeof err);
    CHECK(img && img->w == 64 && img->h == 48, "no scaling below 2x");
    image_destroy(&img);
    o = (decode_opts_t){32, 24}; /* exactly 2x: 1/2 */
    img = decode_image(buf, len, &o, &w, &h, err, sizeof err);
    CHECK(img && img->w == 32 && img->h == 24, "2x: %dx%d", img ? img->w : 0, img ? img->h : 0);
    image_destroy(&img);
    free(buf);
}

/* Must fail with a message containing WANT (and never crash). */
static void expect_fail(const char *what, const uint8_t *buf, size_t len, const char *want)
{
    char err[256] = "";
    int w, h;
    image_t *img = decode_image(buf, len, NULL, &w, &h, err, sizeof err);
    CHECK(img == NULL, "%s: decoded, want an error", what);
    CHECK(err[0] && strstr(err, want), "%s: error '%s' lacks '%s'", what, err, want);
    image_destroy(&img);
}

/* Offset of the SOF0/SOF2 segment's height field. */
static size_t sof_dims(const uint8_t *b, size_t len)
{
    for (size_t i = 2; i + 9 < len; i++)
        if (b[i] == 0xFF && (b[i + 1] == 0xC0 || b[i + 1] == 0xC2))
            return i + 5;
    return 0;
}

static void test_broken(void)
{
    size_t len;
    uint8_t *jpg = load("base420.jpg", &len);
    if (!jpg)
        return;
    uint8_t *tmp = malloc(len + 16);
    if (!tmp) {
        free(jpg);
        return;
    }
    expect_fail("empty", jpg, 0, "empty");
    const char *text = "class,label\ncat,1\n";
    expect_fail("text file", (const uint8_t *)text, strlen(text), "not an image");
    expect_fail("truncated JPEG", jpg, len / 2, "truncated");
    expect_fail("JPEG without EOI", jpg, len - 2, "truncated");
    expect_fail("JPEG header only", jpg, 3, "corrupt JPEG");
    memcpy(tmp, jpg, len);
    memset(tmp + 4, 0x5A, 40);
    expect_fail("garbage after SOI", tmp, len, "corrupt JPEG");
    size_t d = sof_dims(jpg, len);
    CHECK(d != 0, "no SOF in base420.jpg");
    if (d) {
        memcpy(tmp, jpg, len);
        tmp[d + 2] = tmp[d + 3] = 0; /* width 0 */
        expect_fail("zero width", tmp, len, "JPEG");
        memcpy(tmp, jpg, len);
        tmp[d] = tmp[d + 1] = tmp[d + 2] = tmp[d + 3] = 0xFF; /* 65535 x 65535 */
        expect_fail("huge dims", tmp, len, "");
    }
    expect_fail("BMP", (const uint8_t *)"BM\x36\x00\x00\x00", 6, "BMP");
    expect_fail("GIF", (const uint8_t *)"GIF89a\x01\x00", 8, "GIF");
    /* a warning PIL ignores (bytes before EOI) is not a failure */
    memcpy(tmp, jpg, len - 2);
    memcpy(tmp + len - 2, "\x00\x00\xFF\xD9", 4);
    char err[256] = "";
    int w, h;
    image_t *img = decode_image(tmp, len + 2, NULL, &w, &h, err, sizeof err);
    CHECK(img != NULL, "extraneous bytes before EOI: %s", err);
    image_destroy(&img);
    free(tmp);
    free(jpg);
}

static void test_broken_png(void)
{
    size_t len;
    uint8_t *png = load("rgb.png", &len);
    if (!png)
        return;
    const char *want = decode_has_png() ? "truncated" : "PNG";
    expect_fail("truncated PNG", png, len / 2, want);
    expect_fail("PNG signature only", png, 8, decode_has_png() ? "" : "PNG");
    uint8_t *tmp = malloc(len);
    if (tmp) {
        memcpy(tmp, png, len);
        tmp[len / 2] ^= 0xFF; /* bad CRC / zlib data */
        expect_fail("corrupt PNG", tmp, len, decode_has_png() ? "PNG" : "PNG");
        free(tmp);
    }
    free(png);
}

/* Random corruption of valid files: any result but a crash (ASan) is fine. */
static void test_mutations(void)
{
    const char *names[] = {"base420.jpg", "progressive.jpg", "cmyk.jpg", "palette.png"};
    unsigned seed = 12345;
    for (int k = 0; k < 4; k++) {
        size_t len;
        uint8_t *buf = load(names[k], &len);
        uint8_t *m = buf ? malloc(len) : NULL;
        for (int r = 0; m && r < 150; r++) {
            memcpy(m, buf, len);
            for (int j = 0; j < 1 + r % 8; j++) {
                seed = seed * 1103515245u + 12345u;
                m[(seed >> 8) % len] = (uint8_t)(seed >> 3);
            }
            char err[256];
            int w, h;
            image_t *img = decode_image(m, len - (r % 3 == 0 ? r % 50 : 0), NULL, &w, &h, err,
                                        sizeof err);
            image_destroy(&img);
        }
        free(m);
        free(buf);
    }
}

static void test_read_file(void)
{
    uint8_t *buf;
    size_t len;
    char err[256];
    CHECK(decode_read_file("/nonexistent/x.jpg", &buf, &len, err, sizeof err) == -1 &&
              strstr(err, "cannot open"),
          "missing file: %s", err);
    CHECK(decode_read_file(tu_src("tests"), &buf, &len, err, sizeof err) == -1 &&
              strstr(err, "not a regular file"),
          "directory: %s", err);
    char *dir = tu_mkdtemp("decode");
    if (dir) {
        char fifo[4200];
        snprintf(fifo, sizeof fifo, "%s/pipe.jpg", dir);
        if (mkfifo(fifo, 0600) == 0)
            CHECK(decode_read_file(fifo, &buf, &len, err, sizeof err) == -1,
                  "a FIFO must be refused, not read");
        tu_rmtree(dir);
        free(dir);
    }
}

static void test_probe(void)
{
    const char *names[] = {"odd420.jpg", "progressive.jpg", "rgb.png"};
    for (int k = 0; k < 3; k++) {
        size_t len;
        uint8_t *buf = load(names[k], &len);
        char err[256];
        int w = 0, h = 0;
        if (buf && (strstr(names[k], ".jpg") || decode_has_png()))
            CHECK(decode_probe(buf, len, &w, &h, err, sizeof err) == 0 && w == 61 && h == 37,
                  "%s: probe %dx%d", names[k], w, h);
        free(buf);
    }
}

int main(void)
{
    printf("PNG support: %s\n", decode_has_png() ? "yes" : "no");
    test_goldens();
    test_channels();
    test_dct_scaling();
    test_broken();
    test_broken_png();
    test_mutations();
    test_read_file();
    test_probe();
    return tu_finish("test_decode");
}
