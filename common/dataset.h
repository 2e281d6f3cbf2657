/* dataset — the sample index every daemon agrees on.
 *
 * Two kinds of dataset:
 *  - a directory laid out as torchvision's ImageFolder: classes are the
 *    sorted names of the root's subdirectories (symlinks followed, hidden
 *    ones included, as torchvision does), samples are the files with an
 *    image extension (IMG_EXTENSIONS, case-insensitive) found by walking each
 *    class directory recursively, in the order torchvision 0.14 yields them
 *    (directories sorted by path, files sorted by name). Sample i and its
 *    label are the same as torchvision.datasets.ImageFolder's samples[i].
 *    A root without class directories, or a class without one image file,
 *    is an error, as in torchvision. One deliberate difference: a symlink
 *    back to an ancestor directory is skipped with a warning (os.walk
 *    would follow it until the path gets too long).
 *  - "idx:PREFIX" for MNIST-style IDX files PREFIX-images-idx3-ubyte[.gz] and
 *    PREFIX-labels-idx1-ubyte[.gz], loaded into memory. Classes are
 *    Fashion-MNIST's names when PREFIX contains "fashion", else "0".."9".
 *
 * A dataset is immutable after dataset_open, so any number of threads may
 * read it at once. */
#ifndef DDP_DATASET_H
#define DDP_DATASET_H

#include <stddef.h>
#include <stdint.h>

typedef struct dataset dataset_t;

/* Opens SPEC (a directory or "idx:PREFIX"). NULL with a reason in ERR. */
dataset_t *dataset_open(const char *spec, char *err, size_t errlen);
void dataset_destroy(dataset_t **ds);

uint64_t dataset_size(const dataset_t *ds);
uint32_t dataset_num_classes(const dataset_t *ds);
/* NULL when c is out of range. */
const char *dataset_class_name(const dataset_t *ds, uint32_t c);
/* -1 when i is out of range. */
int32_t dataset_label(const dataset_t *ds, uint64_t i);
/* ImageFolder: the path relative to the root ("cls/img.jpg"); idx: the
 * images file's name and the index ("t10k-images-idx3-ubyte.gz#123").
 * NULL when i is out of range. */
const char *dataset_path(const dataset_t *ds, uint64_t i);
int dataset_is_idx(const dataset_t *ds);

/* ImageFolder: the root directory as given (NULL for idx). */
const char *dataset_root(const dataset_t *ds);
/* idx: the pixels of sample i (row-major uint8, *h x *w, gray); NULL for an
 * ImageFolder or an i out of range. */
const uint8_t *dataset_idx_pixels(const dataset_t *ds, uint64_t i, int *h, int *w);

/* Relabel with a class map (common/classmap.h), right after dataset_open:
 * each sample's label becomes its folder's model output index, the classes
 * become all the model's outputs (named by the map, else by the folder,
 * else by the index) and dataset_present lists the folders' indices. 0, or
 * -1 naming the folder the map does not know. */
struct classmap;
int dataset_apply_classmap(dataset_t *ds, const struct classmap *map, char *err, size_t errlen);
/* The mapped dataset's classes, sorted; NULL (*n 0) without a map. */
const uint32_t *dataset_present(const dataset_t *ds, uint32_t *n);

/* The extensions ImageFolder accepts (torchvision's IMG_EXTENSIONS). */
extern const char *const dataset_img_extensions[];

#endif
