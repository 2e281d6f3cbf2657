/* Dataset index: ImageFolder order and labels equal torchvision's (expected
 * list from tests/golden/gen_imagefolder.py), torchvision's errors, and the
 * IDX reader on small files written here (valid, gz, and every kind of
 * broken). The real Fashion-MNIST files are test_idx.c's. */
#include "common/dataset.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

/* Builds tree.txt's tree under ROOT. */
static int build_tree(const char *root)
{
    FILE *f = fopen(tu_src("tests/golden/loader/imagefolder/tree.txt"), "r");
    CHECK(f != NULL, "tree.txt missing");
    if (!f)
        return -1;
    char line[1024];
    int rc = 0;
    while (rc == 0 && fgets(line, sizeof line, f)) {
        char kind[4], rel[512], target[512], path[2048];
        int n = sscanf(line, "%3s %511s %511s", kind, rel, target);
        if (n < 2 || kind[0] == '#')
            continue;
        snprintf(path, sizeof path, "%s/%s", root, rel);
        if (kind[0] == 'd') {
            rc = tu_mkdirs(path);
        } else if (kind[0] == 'f') {
            rc = tu_write_file(path, "", 0);
        } else if (kind[0] == 'l' && n == 3) {
            char dir[2048];
            snprintf(dir, sizeof dir, "%s", path);
            *strrchr(dir, '/') = 0;
            rc = tu_mkdirs(dir) == 0 && symlink(target, path) == 0 ? 0 : -1;
        }
        CHECK(rc == 0, "cannot create %s", path);
    }
    fclose(f);
    return rc;
}

static void test_imagefolder_order(void)
{
    char *root = tu_mkdtemp("imagefolder");
    if (!root || build_tree(root) != 0) {
        CHECK(0, "cannot build the test tree");
        tu_rmtree(root);
        free(root);
        return;
    }
    char err[512];
    dataset_t *ds = dataset_open(root, err, sizeof err);
    CHECK(ds != NULL, "open: %s", err);
    FILE *f = fopen(tu_src("tests/golden/loader/imagefolder/expected.txt"), "r");
    CHECK(f != NULL, "expected.txt missing: run tests/golden/gen_imagefolder.py");
    uint32_t classes = 0;
    uint64_t samples = 0;
    char line[1024];
    while (ds && f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        unsigned long long idx;
        int label, off = 0;
        if (line[0] == 'c' && sscanf(line, "c %llu %n", &idx, &off) == 1 && off) {
            const char *name = dataset_class_name(ds, (uint32_t)idx);
            CHECK(name && !strcmp(name, line + off), "class %llu: '%s', torchvision '%s'", idx,
                  name ? name : "(none)", line + off);
            classes++;
        } else if (sscanf(line, "s %llu %d %n", &idx, &label, &off) == 2 && off) {
            const char *path = dataset_path(ds, idx);
            CHECK(path && !strcmp(path, line + off) && dataset_label(ds, idx) == label,
                  "sample %llu: %s (label %d), torchvision %s (label %d)", idx,
                  path ? path : "(none)", dataset_label(ds, idx), line + off, label);
            samples++;
        }
    }
    if (ds) {
        CHECK(dataset_num_classes(ds) == classes, "%u classes, torchvision %u",
              dataset_num_classes(ds), classes);
        CHECK(dataset_size(ds) == samples && samples > 20, "%llu samples, torchvision %llu",
              (unsigned long long)dataset_size(ds), (unsigned long long)samples);
        CHECK(!dataset_is_idx(ds) && !strcmp(dataset_root(ds), root), "root");
        CHECK(dataset_path(ds, samples) == NULL && dataset_label(ds, samples) == -1 &&
                  dataset_class_name(ds, classes) == NULL,
              "out-of-range lookups must fail");
    }
    if (f)
        fclose(f);
    dataset_destroy(&ds);
    dataset_destroy(&ds); /* idempotent */
    tu_rmtree(root);
    free(root);
}

/* dataset_open(ROOT) must fail with a message containing WANT. */
static void expect_open_fail(const char *what, const char *spec, const char *want)
{
    char err[1024] = "";
    dataset_t *ds = dataset_open(spec, err, sizeof err);
    CHECK(ds == NULL, "%s: opened, want an error", what);
    CHECK(strstr(err, want) != NULL, "%s: error '%s' lacks '%s'", what, err, want);
    dataset_destroy(&ds);
}

static void test_imagefolder_errors(void)
{
    char *root = tu_mkdtemp("badfolder");
    if (!root)
        return;
    char path[4200];
    expect_open_fail("missing root", "/nonexistent/ddpipe/data", "cannot open dataset directory");
    expect_open_fail("no classes", root, "couldn't find any class folder");
    snprintf(path, sizeof path, "%s/loose.jpg", root);
    tu_write_file(path, "", 0);
    expect_open_fail("only loose files", root, "couldn't find any class folder");
    expect_open_fail("root is a file", path, "Not a directory");
    snprintf(path, sizeof path, "%s/good/x.jpg", root);
    tu_write_file(path, "", 0);
    snprintf(path, sizeof path, "%s/empty", root);
    tu_mkdirs(path);
    snprintf(path, sizeof path, "%s/textonly/readme.txt", root);
    tu_write_file(path, "", 0);
    /* torchvision: FileNotFoundError naming every class without images */
    expect_open_fail("empty classes", root, "no valid file for the classes empty, textonly");
    tu_rmtree(root);
    free(root);
}

/* A symlink back to an ancestor is not followed (os.walk would loop until
 * the path is too long): the index stays finite and has each file once. */
static void test_symlink_loop(void)
{
    char *root = tu_mkdtemp("loop");
    if (!root)
        return;
    char path[4200], err[512];
    snprintf(path, sizeof path, "%s/cls/a.jpg", root);
    tu_write_file(path, "", 0);
    snprintf(path, sizeof path, "%s/cls/sub/b.jpg", root);
    tu_write_file(path, "", 0);
    snprintf(path, sizeof path, "%s/cls/sub/up", root);
    CHECK(symlink("..", path) == 0, "symlink");
    dataset_t *ds = dataset_open(root, err, sizeof err);
    CHECK(ds && dataset_size(ds) == 2, "loop: %s, %llu samples", ds ? "" : err,
          ds ? (unsigned long long)dataset_size(ds) : 0ULL);
    dataset_destroy(&ds);
    tu_rmtree(root);
    free(root);
}

/* ---- IDX ------------------------------------------------------------------ */

static void be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* An IDX file of NDIMS dims DIMS whose data is DATA (LEN bytes, may differ
 * from the header on purpose), plain or gzip. */
static void write_idx(const char *path, uint32_t magic, int ndims, const uint32_t *dims,
                      const uint8_t *data, size_t len, int gz)
{
    uint8_t hdr[20];
    be32(hdr, magic);
    for (int d = 0; d < ndims; d++)
        be32(hdr + 4 + 4 * d, dims[d]);
    size_t hl = 4 + 4 * (size_t)ndims;
    if (!gz) {
        uint8_t *all = malloc(hl + len + 1);
        memcpy(all, hdr, hl);
        if (len)
            memcpy(all + hl, data, len);
        CHECK(tu_write_file(path, all, hl + len) == 0, "write %s", path);
        free(all);
        return;
    }
    char dir[4400];
    snprintf(dir, sizeof dir, "%s", path);
    *strrchr(dir, '/') = 0;
    tu_mkdirs(dir);
    gzFile g = gzopen(path, "wb");
    CHECK(g != NULL, "gzopen %s", path);
    if (g) {
        gzwrite(g, hdr, (unsigned)hl);
        if (len)
            gzwrite(g, data, (unsigned)len);
        gzclose(g);
    }
}

static void write_pair(const char *prefix, int gz, uint32_t n_img, uint32_t n_lab,
                       const uint8_t *labels)
{
    char path[4200];
    uint8_t px[5 * 8];
    for (int i = 0; i < 40; i++)
        px[i] = (uint8_t)(i * 6);
    uint32_t idims[3] = {n_img, 2, 4}, ldims[1] = {n_lab};
    snprintf(path, sizeof path, "%s-images-idx3-ubyte%s", prefix, gz ? ".gz" : "");
    write_idx(path, 0x803, 3, idims, px, (size_t)n_img * 8, gz);
    snprintf(path, sizeof path, "%s-labels-idx1-ubyte%s", prefix, gz ? ".gz" : "");
    write_idx(path, 0x801, 1, ldims, labels, n_lab, gz);
}

static void test_idx_valid(const char *dir)
{
    const uint8_t labels[5] = {3, 0, 9, 9, 1};
    char prefix[4200], spec[4300], err[512];
    for (int gz = 0; gz < 2; gz++) {
        snprintf(prefix, sizeof prefix, "%s/%s/t", dir, gz ? "fashion" : "digits");
        write_pair(prefix, gz, 5, 5, labels);
        snprintf(spec, sizeof spec, "idx:%s", prefix);
        dataset_t *ds = dataset_open(spec, err, sizeof err);
        CHECK(ds != NULL, "%s: %s", spec, err);
        if (!ds)
            continue;
        CHECK(dataset_is_idx(ds) && dataset_size(ds) == 5 && dataset_num_classes(ds) == 10,
              "idx shape");
        CHECK(dataset_label(ds, 2) == 9 && dataset_label(ds, 4) == 1, "labels");
        const char *want0 = gz ? "T-shirt/top" : "0", *want9 = gz ? "Ankle boot" : "9";
        CHECK(!strcmp(dataset_class_name(ds, 0), want0) &&
                  !strcmp(dataset_class_name(ds, 9), want9),
              "class names %s..%s", dataset_class_name(ds, 0), dataset_class_name(ds, 9));
        const char *wantp = gz ? "t-images-idx3-ubyte.gz#3" : "t-images-idx3-ubyte#3";
        CHECK(!strcmp(dataset_path(ds, 3), wantp), "path %s", dataset_path(ds, 3));
        int h, w;
        const uint8_t *px = dataset_idx_pixels(ds, 3, &h, &w);
        CHECK(px && h == 2 && w == 4 && px[0] == 3 * 8 * 6 && px[7] == (uint8_t)(31 * 6),
              "pixels of sample 3");
        CHECK(dataset_idx_pixels(ds, 5, &h, &w) == NULL && dataset_root(ds) == NULL, "bounds");
        dataset_destroy(&ds);
    }
}

static void test_idx_broken(const char *dir)
{
    const uint8_t labels[5] = {3, 0, 9, 9, 1}, bad_label[3] = {1, 10, 2};
    char prefix[4200], spec[4300], path[4300];
    snprintf(prefix, sizeof prefix, "%s/broken/t", dir);
    snprintf(spec, sizeof spec, "idx:%s", prefix);
    expect_open_fail("missing files", spec, "neither");
    expect_open_fail("empty prefix", "idx:", "empty prefix");

    write_pair(prefix, 0, 3, 2, labels);
    expect_open_fail("count mismatch", spec, "has 3 images but");
    write_pair(prefix, 0, 3, 3, bad_label);
    expect_open_fail("label out of range", spec, "label 10 of sample 1");

    uint8_t px[64] = {0};
    uint32_t dims[3] = {3, 2, 4};
    snprintf(path, sizeof path, "%s-images-idx3-ubyte", prefix);
    write_pair(prefix, 0, 3, 3, labels);
    write_idx(path, 0x801, 3, dims, px, 24, 0);
    expect_open_fail("bad magic", spec, "bad IDX magic");
    expect_open_fail("error names the file", spec, path);
    write_idx(path, 0x803, 3, dims, px, 20, 0);
    expect_open_fail("short data", spec, "truncated");
    write_idx(path, 0x803, 3, dims, px, 25, 0);
    expect_open_fail("extra data", spec, "more data than the header");
    dims[1] = 0;
    write_idx(path, 0x803, 3, dims, px, 0, 0);
    expect_open_fail("zero dimension", spec, "dimension 1 is zero");
    write_idx(path, 0x803, 1, dims, px, 0, 0); /* header cut after the magic */
    expect_open_fail("short header", spec, "truncated IDX header");
    tu_write_file(path, "", 0);
    expect_open_fail("empty file", spec, "too short");

    /* gzip that breaks off in the middle */
    unlink(path);
    char gzpath[4400];
    snprintf(gzpath, sizeof gzpath, "%s.gz", path);
    dims[1] = 2;
    write_idx(gzpath, 0x803, 3, dims, px, 24, 1);
    uint8_t *buf;
    size_t len;
    FILE *f = fopen(gzpath, "rb");
    buf = malloc(4096);
    len = f ? fread(buf, 1, 4096, f) : 0;
    if (f)
        fclose(f);
    tu_write_file(gzpath, buf, len / 2);
    free(buf);
    expect_open_fail("truncated gzip", spec, gzpath);
}

int main(void)
{
    test_imagefolder_order();
    test_imagefolder_errors();
    test_symlink_loop();
    char *dir = tu_mkdtemp("idx");
    if (dir) {
        test_idx_valid(dir);
        test_idx_broken(dir);
        tu_rmtree(dir);
        free(dir);
    }
    return tu_finish("test_dataset");
}
