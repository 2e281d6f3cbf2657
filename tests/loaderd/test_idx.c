/* The real Fashion-MNIST IDX files (Debian's dataset-fashion-mnist):
 * counts, labels, class names and pixels as torchvision and numpy see them.
 * Skipped (77) when the files are not installed. */
#include "common/dataset.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FASHION "/usr/share/datasets/fashion-mnist"

static uint64_t pixel_sum(const dataset_t *ds, uint64_t i)
{
    int h, w;
    const uint8_t *px = dataset_idx_pixels(ds, i, &h, &w);
    uint64_t s = 0;
    for (int k = 0; px && k < h * w; k++)
        s += px[k];
    return s;
}

int main(void)
{
    if (access(FASHION "/t10k-images-idx3-ubyte.gz", R_OK) != 0) {
        printf("test_idx: %s not installed (apt install dataset-fashion-mnist); skipped\n",
               FASHION);
        return 77;
    }
    char err[512];
    dataset_t *ds = dataset_open("idx:" FASHION "/t10k", err, sizeof err);
    CHECK(ds != NULL, "open t10k: %s", err);
    if (ds) {
        CHECK(dataset_size(ds) == 10000, "t10k has %llu samples",
              (unsigned long long)dataset_size(ds));
        const int32_t first[5] = {9, 2, 1, 1, 6};
        for (int i = 0; i < 5; i++)
            CHECK(dataset_label(ds, (uint64_t)i) == first[i], "label %d = %d, want %d", i,
                  dataset_label(ds, (uint64_t)i), first[i]);
        /* torchvision.datasets.FashionMNIST.classes */
        const char *names[10] = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                 "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
        for (uint32_t c = 0; c < 10; c++)
            CHECK(!strcmp(dataset_class_name(ds, c), names[c]), "class %u = %s", c,
                  dataset_class_name(ds, c));
        int counts[10] = {0};
        for (uint64_t i = 0; i < dataset_size(ds); i++)
            counts[dataset_label(ds, i)]++;
        for (int c = 0; c < 10; c++)
            CHECK(counts[c] == 1000, "class %d has %d test samples, want 1000", c, counts[c]);
        int h, w;
        CHECK(dataset_idx_pixels(ds, 0, &h, &w) && h == 28 && w == 28, "28x28");
        /* numpy on the same file: images[0].sum(), images[9999].sum(), images[0][14, 14] */
        CHECK(pixel_sum(ds, 0) == 33456 && pixel_sum(ds, 9999) == 24390, "pixel sums %llu %llu",
              (unsigned long long)pixel_sum(ds, 0), (unsigned long long)pixel_sum(ds, 9999));
        CHECK(dataset_idx_pixels(ds, 0, &h, &w)[14 * 28 + 14] == 110, "pixel (14, 14)");
        CHECK(!strcmp(dataset_path(ds, 123), "t10k-images-idx3-ubyte.gz#123"), "path %s",
              dataset_path(ds, 123));
        dataset_destroy(&ds);
    }
    ds = dataset_open("idx:" FASHION "/train", err, sizeof err);
    CHECK(ds && dataset_size(ds) == 60000, "train: %s", ds ? "wrong size" : err);
    dataset_destroy(&ds);
    return tu_finish("test_idx");
}
