/* ddpipe-mkjpeg: an idx dataset becomes an ImageFolder with the same
 * labels and (JPEG-close) pixels; synthetic images are deterministic. */
#include "common/dataset.h"
#include "common/image/decode.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

static char tool[4096];

static int run(const char *args)
{
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "'%s' %s >/dev/null 2>&1", tool, args);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void put32(gzFile g, uint32_t v)
{
    uint8_t b[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
    gzwrite(g, b, 4);
}

/* 12 gray 28x28 images with smooth content, labels i % 10 (reversed order
 * for the first ten so class directories must keep label order). */
static int write_idx(const char *prefix, uint8_t *pixels, uint8_t *labels)
{
    char path[4400];
    snprintf(path, sizeof path, "%s-images-idx3-ubyte.gz", prefix);
    gzFile g = gzopen(path, "wb");
    if (!g)
        return -1;
    put32(g, 0x803);
    put32(g, 12);
    put32(g, 28);
    put32(g, 28);
    for (int i = 0; i < 12; i++)
        for (int p = 0; p < 784; p++)
            pixels[i * 784 + p] = (uint8_t)((p % 28) * 4 + (p / 28) * 3 + i * 7);
    gzwrite(g, pixels, 12 * 784);
    gzclose(g);
    snprintf(path, sizeof path, "%s-labels-idx1-ubyte.gz", prefix);
    if (!(g = gzopen(path, "wb")))
        return -1;
    put32(g, 0x801);
    put32(g, 12);
    for (int i = 0; i < 12; i++)
        labels[i] = (uint8_t)((9 - i % 10 + 10) % 10);
    gzwrite(g, labels, 12);
    gzclose(g);
    return 0;
}

static void test_from_idx(const char *dir)
{
    char prefix[4200], out[4200], args[9000], err[512];
    uint8_t pixels[12 * 784], labels[12];
    snprintf(prefix, sizeof prefix, "%s/fashion", dir);
    CHECK(tu_mkdirs(prefix) == 0, "mkdir");
    snprintf(prefix, sizeof prefix, "%s/fashion/t", dir);
    CHECK(write_idx(prefix, pixels, labels) == 0, "write idx");
    snprintf(out, sizeof out, "%s/folder", dir);
    snprintf(args, sizeof args, "'idx:%s' '%s' --count 11 --quality 100", prefix, out);
    CHECK(run(args) == 0, "ddpipe-mkjpeg %s failed", args);
    dataset_t *ds = dataset_open(out, err, sizeof err);
    CHECK(ds && dataset_size(ds) == 11 && dataset_num_classes(ds) == 10, "folder: %s",
          ds ? "wrong size" : err);
    CHECK(ds && !strcmp(dataset_class_name(ds, 0), "00-T-shirt_top") &&
              !strcmp(dataset_class_name(ds, 9), "09-Ankle boot"),
          "class dirs keep label order: %s", ds ? dataset_class_name(ds, 0) : "");
    for (uint64_t i = 0; ds && i < dataset_size(ds); i++) {
        const char *p = dataset_path(ds, i);
        int idx = atoi(strchr(p, '/') + 1);
        CHECK(idx >= 0 && idx < 11 && dataset_label(ds, i) == labels[idx],
              "%s: label %d, idx label %d", p, dataset_label(ds, i), labels[idx]);
        char full[8500];
        uint8_t *buf;
        size_t len;
        snprintf(full, sizeof full, "%s/%s", out, p);
        int w, h;
        image_t *img = decode_read_file(full, &buf, &len, err, sizeof err) == 0
                           ? decode_image(buf, len, NULL, &w, &h, err, sizeof err)
                           : NULL;
        CHECK(img && img->w == 28 && img->h == 28 && img->c == 1, "%s: %s", p, err);
        if (img && idx >= 0 && idx < 11) {
            int md = tu_maxdiff(img->px, pixels + idx * 784, 784, NULL);
            CHECK(md <= 4, "%s: max diff %d from the idx pixels at quality 100", p, md);
        }
        image_destroy(&img);
        free(buf);
    }
    dataset_destroy(&ds);

    snprintf(out, sizeof out, "%s/big", dir);
    snprintf(args, sizeof args, "'idx:%s' '%s' --size 56x40 --rgb --count 3", prefix, out);
    CHECK(run(args) == 0, "ddpipe-mkjpeg %s failed", args);
    ds = dataset_open(out, err, sizeof err);
    CHECK(ds && dataset_size(ds) == 3, "big: %s", err);
    for (uint64_t i = 0; ds && i < dataset_size(ds); i++) {
        char full[8500];
        uint8_t *buf;
        size_t len;
        snprintf(full, sizeof full, "%s/%s", out, dataset_path(ds, i));
        int w, h;
        image_t *img = decode_read_file(full, &buf, &len, err, sizeof err) == 0
                           ? decode_image(buf, len, NULL, &w, &h, err, sizeof err)
                           : NULL;
        CHECK(img && img->w == 56 && img->h == 40 && img->c == 3, "upscaled RGB: %s", err);
        image_destroy(&img);
        free(buf);
    }
    dataset_destroy(&ds);
}

static void test_synthetic(const char *dir)
{
    char a[4200], b[4200], args[9000], err[512];
    snprintf(a, sizeof a, "%s/syn_a", dir);
    snprintf(b, sizeof b, "%s/syn_b", dir);
    snprintf(args, sizeof args, "--synthetic 6 '%s' --size 64x48 --classes 3", a);
    CHECK(run(args) == 0, "synthetic a");
    snprintf(args, sizeof args, "--synthetic 6 '%s' --size 64x48 --classes 3", b);
    CHECK(run(args) == 0, "synthetic b");
    dataset_t *ds = dataset_open(a, err, sizeof err);
    CHECK(ds && dataset_size(ds) == 6 && dataset_num_classes(ds) == 3, "synthetic: %s", err);
    for (uint64_t i = 0; ds && i < 6; i++) {
        char pa[8500], pb[8500];
        uint8_t *ba = NULL, *bb = NULL;
        size_t la = 0, lb = 0;
        snprintf(pa, sizeof pa, "%s/%s", a, dataset_path(ds, i));
        snprintf(pb, sizeof pb, "%s/%s", b, dataset_path(ds, i));
        CHECK(decode_read_file(pa, &ba, &la, err, sizeof err) == 0 &&
                  decode_read_file(pb, &bb, &lb, err, sizeof err) == 0 && la == lb &&
                  !memcmp(ba, bb, la),
              "%s: not deterministic", dataset_path(ds, i));
        int w, h;
        image_t *img = ba ? decode_image(ba, la, NULL, &w, &h, err, sizeof err) : NULL;
        CHECK(img && img->w == 64 && img->h == 48 && img->c == 3, "%s: %s", pa, err);
        image_destroy(&img);
        free(ba);
        free(bb);
    }
    dataset_destroy(&ds);
}

static void test_bad_usage(const char *dir)
{
    char args[4400];
    CHECK(run("") == 2, "no arguments must be a usage error");
    CHECK(run("--synthetic 0 x") == 2, "--synthetic 0");
    CHECK(run("--synthetic 2 x --size 0x5") == 2, "--size 0x5");
    CHECK(run("notidx out") == 2, "a non-idx source");
    snprintf(args, sizeof args, "idx:/nonexistent/t '%s/none'", dir);
    CHECK(run(args) == 1, "a missing idx dataset must fail");
}

int main(void)
{
    const char *bin = getenv("DDPIPE_BIN");
    if (bin && *bin) {
        snprintf(tool, sizeof tool, "%s/ddpipe-mkjpeg", bin);
    } else {
        ssize_t n = readlink("/proc/self/exe", tool, sizeof tool - 32);
        tool[n > 0 ? n : 0] = 0;
        char *slash = strrchr(tool, '/');
        snprintf(slash ? slash + 1 : tool, 32, "ddpipe-mkjpeg");
    }
    if (access(tool, X_OK) != 0) {
        fprintf(stderr, "test_mkjpeg: %s is not built\n", tool);
        return 1;
    }
    char *dir = tu_mkdtemp("mkjpeg");
    if (!dir)
        return 1;
    test_from_idx(dir);
    test_synthetic(dir);
    test_bad_usage(dir);
    tu_rmtree(dir);
    free(dir);
    return tu_finish("test_mkjpeg");
}
