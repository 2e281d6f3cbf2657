/* The whole sample pipeline (read, decode, Grayscale, Resize, CenterCrop,
 * CHW) against torchvision (goldens from tests/golden/gen_loader_transform.py),
 * idx samples through the same path, and the errors a caller sees. */
#include "common/dataset.h"
#include "common/image/transform.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GOLD "tests/golden/loader/transform"
#define FASHION "/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz"

/* Compares OUT (c x h x w) with the golden PGM of w x (c*h). */
static int compare_golden(const uint8_t *out, int c, int h, int w, const char *name)
{
    char rel[256];
    snprintf(rel, sizeof rel, GOLD "/%s", name);
    image_t *want = tu_read_pnm(tu_src(rel));
    CHECK(want && want->w == w && want->h == c * h, "%s: golden shape", name);
    int md = -1;
    if (want && want->w == w && want->h == c * h) {
        size_t nd;
        md = tu_maxdiff(out, want->px, (size_t)c * h * w, &nd);
        CHECK(md <= 1, "%s: max diff %d vs torchvision (%zu values differ)", name, md, nd);
    }
    image_destroy(&want);
    return md;
}

static void run_config(dataset_t *ds, int k, const transform_t *t, int *exact, int *total)
{
    char err[512];
    int h, w;
    CHECK(transform_output_hw(t, ds, &h, &w, err, sizeof err) == 0 && h == t->crop_h &&
              w == t->crop_w,
          "cfg %d: output size %dx%d (%s)", k, w, h, err);
    uint8_t *out = malloc((size_t)t->channels * h * w);
    for (uint64_t i = 0; out && i < dataset_size(ds); i++) {
        memset(out, 0xAB, (size_t)t->channels * h * w);
        int rc = sample_load(ds, i, t, out, h, w, err, sizeof err);
        CHECK(rc == 0, "cfg %d sample %llu (%s): %s", k, (unsigned long long)i,
              dataset_path(ds, i), err);
        char name[64];
        snprintf(name, sizeof name, "cfg%d_%llu.pgm", k, (unsigned long long)i);
        if (rc == 0) {
            *exact += compare_golden(out, t->channels, h, w, name) == 0;
            (*total)++;
        }
    }
    free(out);
}

static void test_goldens(void)
{
    char err[512];
    dataset_t *ds = dataset_open(tu_src(GOLD "/folder"), err, sizeof err);
    CHECK(ds != NULL, "open the golden folder: %s", err);
    FILE *f = fopen(tu_src(GOLD "/manifest.txt"), "r");
    CHECK(f != NULL, "manifest missing: run tests/golden/gen_loader_transform.py");
    char line[512];
    int exact = 0, total = 0, configs = 0;
    while (ds && f && fgets(line, sizeof line, f)) {
        int k, resize, crop, ch, label, off = 0;
        unsigned long long i;
        if (sscanf(line, "cfg %d %d %d %d", &k, &resize, &crop, &ch) == 4) {
            transform_t t = {resize, crop, crop, ch, 0};
            run_config(ds, k, &t, &exact, &total);
            configs++;
        } else if (sscanf(line, "sample %llu %d %n", &i, &label, &off) == 2 && off) {
            line[strcspn(line, "\n")] = 0;
            CHECK(!strcmp(dataset_path(ds, i), line + off) && dataset_label(ds, i) == label,
                  "sample %llu: %s, torchvision %s", i, dataset_path(ds, i), line + off);
        }
    }
    CHECK(configs >= 6 && total >= 30, "only %d configs / %d samples ran", configs, total);
    printf("pipeline vs torchvision: %d samples in %d configs, %d bit-exact\n", total, configs,
           exact);
    if (f)
        fclose(f);
    dataset_destroy(&ds);
}

static void test_idx(void)
{
    if (access(FASHION, R_OK) != 0) {
        printf("Fashion-MNIST not installed: idx pipeline case skipped\n");
        return;
    }
    char err[512];
    dataset_t *ds = dataset_open("idx:/usr/share/datasets/fashion-mnist/t10k", err, sizeof err);
    CHECK(ds != NULL, "%s", err);
    transform_t t = {40, 36, 36, 3, 0};
    uint8_t out[3 * 36 * 36];
    int h, w;
    CHECK(ds && transform_output_hw(&t, ds, &h, &w, err, sizeof err) == 0 && h == 36 && w == 36,
          "idx output size");
    for (int i = 0; ds && i < 3; i++) {
        CHECK(sample_load(ds, (uint64_t)i, &t, out, 36, 36, err, sizeof err) == 0, "%s", err);
        char name[32];
        snprintf(name, sizeof name, "idx_%d.pgm", i);
        compare_golden(out, 3, 36, 36, name);
    }
    /* plain 28x28 gray, as the Fashion-MNIST seed feeds it */
    transform_t plain = {0, 0, 0, 1, 0};
    CHECK(ds && transform_output_hw(&plain, ds, &h, &w, err, sizeof err) == 0 && h == 28 &&
              w == 28,
          "idx plain size");
    int hh, ww;
    const uint8_t *px = ds ? dataset_idx_pixels(ds, 7, &hh, &ww) : NULL;
    CHECK(ds && sample_load(ds, 7, &plain, out, 28, 28, err, sizeof err) == 0 && px &&
              !memcmp(out, px, 28 * 28),
          "idx plain sample must be the raw pixels");
    CHECK(ds && sample_load(ds, 7, &plain, out, 30, 28, err, sizeof err) == -1 &&
              strstr(err, "image is 28x28, batch needs 28x30"),
          "size mismatch message: %s", err);
    dataset_destroy(&ds);
}

static void test_errors(void)
{
    char err[512] = "";
    transform_t bad[] = {{0, 0, 0, 2, 0}, {0, 10, 0, 3, 0}, {-1, 0, 0, 3, 0}, {0, 0, 70000, 1, 0}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECK(transform_check(&bad[i], err, sizeof err) == -1 && err[0], "bad transform %zu", i);

    dataset_t *ds = dataset_open(tu_src(GOLD "/folder"), err, sizeof err);
    if (!ds)
        return;
    /* no crop: every image must come out at the first image's size */
    transform_t t = {33, 0, 0, 3, 0};
    int h, w;
    CHECK(transform_output_hw(&t, ds, &h, &w, err, sizeof err) == 0 && w == 44 && h == 33,
          "first image 120x90 resized to 44x33, got %dx%d", w, h);
    uint8_t *out = malloc((size_t)3 * 64 * 64);
    CHECK(out && sample_load(ds, 0, &t, out, h, w, err, sizeof err) == 0, "sample 0: %s", err);
    CHECK(out && sample_load(ds, 1, &t, out, h, w, err, sizeof err) == -1 &&
              strstr(err, "image is 33x48 after resize, batch needs 44x33; use --crop/--resize"),
          "mismatch message: '%s'", err);
    CHECK(out && sample_load(ds, 99, &t, out, h, w, err, sizeof err) == -1 &&
              strstr(err, "out of range"),
          "index out of range: %s", err);
    /* the crop decides the batch size: asking for another is an error */
    transform_t c = {0, 16, 16, 3, 0};
    CHECK(out && sample_load(ds, 0, &c, out, 17, 16, err, sizeof err) == -1, "crop vs out size");
    free(out);
    dataset_destroy(&ds);
}

/* A corrupt file in a folder fails with the decoder's reason; the rest load. */
static void test_broken_sample(void)
{
    char *dir = tu_mkdtemp("transform");
    if (!dir)
        return;
    char path[4300], err[512];
    uint8_t *jpg;
    size_t len;
    CHECK(decode_read_file(tu_src(GOLD "/folder/a/land.jpg"), &jpg, &len, err, sizeof err) == 0,
          "%s", err);
    snprintf(path, sizeof path, "%s/cls/a.jpg", dir);
    tu_write_file(path, jpg, len);
    snprintf(path, sizeof path, "%s/cls/b.jpg", dir);
    tu_write_file(path, "not a jpeg\n", 11);
    snprintf(path, sizeof path, "%s/cls/c.jpg", dir);
    tu_write_file(path, jpg, len / 3);
    snprintf(path, sizeof path, "%s/cls/d.jpg", dir);
    tu_write_file(path, "", 0);
    free(jpg);
    dataset_t *ds = dataset_open(dir, err, sizeof err);
    transform_t t = {32, 28, 28, 3, 1};
    uint8_t out[3 * 28 * 28];
    CHECK(ds && dataset_size(ds) == 4, "4 samples");
    CHECK(ds && sample_load(ds, 0, &t, out, 28, 28, err, sizeof err) == 0, "a.jpg: %s", err);
    CHECK(ds && sample_load(ds, 1, &t, out, 28, 28, err, sizeof err) == -1 &&
              strstr(err, "not an image"),
          "b.jpg: %s", err);
    CHECK(ds && sample_load(ds, 2, &t, out, 28, 28, err, sizeof err) == -1 &&
              strstr(err, "truncated"),
          "c.jpg: %s", err);
    CHECK(ds && sample_load(ds, 3, &t, out, 28, 28, err, sizeof err) == -1 &&
              strstr(err, "empty file"),
          "d.jpg: %s", err);
    /* without a crop the first image whose header decodes sets the size:
     * c.jpg is cut short but its header is whole */
    dataset_destroy(&ds);
    snprintf(path, sizeof path, "%s/cls/a.jpg", dir);
    unlink(path);
    ds = dataset_open(dir, err, sizeof err);
    transform_t none = {0, 0, 0, 3, 0};
    int h, w;
    CHECK(ds && transform_output_hw(&none, ds, &h, &w, err, sizeof err) == 0 && w == 120 &&
              h == 90,
          "size from the truncated file's header: %s", err);
    dataset_destroy(&ds);
    snprintf(path, sizeof path, "%s/cls/c.jpg", dir);
    unlink(path);
    ds = dataset_open(dir, err, sizeof err);
    CHECK(ds && transform_output_hw(&none, ds, &h, &w, err, sizeof err) == -1 &&
              strstr(err, "no image in the dataset can be decoded"),
          "all broken: %s", err);
    dataset_destroy(&ds);
    tu_rmtree(dir);
    free(dir);
}

/* DCT scaling: same shape, close to (not equal to) PIL's pixels. */
static void test_dct_scaling(void)
{
    char err[512];
    dataset_t *ds = dataset_open(tu_src(GOLD "/folder"), err, sizeof err);
    if (!ds)
        return;
    transform_t exact = {20, 16, 16, 3, 0}, fast = exact;
    fast.dct_scaling = 1;
    uint8_t a[3 * 16 * 16], b[3 * 16 * 16];
    for (uint64_t i = 0; i < dataset_size(ds); i++) {
        int rc = sample_load(ds, i, &exact, a, 16, 16, err, sizeof err) |
                 sample_load(ds, i, &fast, b, 16, 16, err, sizeof err);
        CHECK(rc == 0, "%s", err);
        long sum = 0;
        for (size_t k = 0; k < sizeof a; k++)
            sum += abs(a[k] - b[k]);
        double mean = (double)sum / sizeof a;
        printf("dct scaling, %s: mean |diff| %.2f vs PIL-exact\n", dataset_path(ds, i), mean);
        CHECK(mean < 12.0, "%s: DCT-scaled mean diff %.2f is too large", dataset_path(ds, i),
              mean);
    }
    dataset_destroy(&ds);
}

int main(void)
{
    test_goldens();
    test_idx();
    test_errors();
    test_broken_sample();
    test_dct_scaling();
    return tu_finish("test_transform");
}
