#include "common/dataset.h"
#include "common/classmap.h"
#include "common/errbuf.h"

#include "common/idx.h"
#include "common/log.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

const char *const dataset_img_extensions[] = {".jpg", ".jpeg", ".png", ".ppm", ".bmp",
                                              ".pgm", ".tif",  ".tiff", ".webp", NULL};

static const char *const fashion_classes[10] = {"T-shirt/top", "Trouser", "Pullover", "Dress",
                                                "Coat",        "Sandal",  "Shirt",    "Sneaker",
                                                "Bag",         "Ankle boot"};
static const char *const digit_classes[10] = {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"};

/* Deeper class trees than this are almost surely a symlink maze. */
#define WALK_MAX_DEPTH 64

struct dataset {
    int is_idx;
    char *root;
    uint32_t nclasses;
    char **class_names;
    uint64_t n, cap;
    size_t *path_off;  /* into arena */
    int32_t *labels;
    char *arena;
    size_t arena_len, arena_cap;
    idx_file_t images;  /* idx only */
    uint32_t *present;  /* dataset_apply_classmap: the folders' indices, sorted */
    uint32_t npresent;
};

/* ---- growable string list ------------------------------------------------ */

typedef struct {
    char **v;
    size_t n, cap;
} strvec_t;

static int strvec_push(strvec_t *sv, const char *s)
{
    if (sv->n == sv->cap) {
        size_t cap = sv->cap ? sv->cap * 2 : 16;
        char **v = realloc(sv->v, cap * sizeof *v);
        if (!v)
            return -1;
        sv->v = v;
        sv->cap = cap;
    }
    if (!(sv->v[sv->n] = strdup(s)))
        return -1;
    sv->n++;
    return 0;
}

static void strvec_free(strvec_t *sv)
{
    for (size_t i = 0; i < sv->n; i++)
        free(sv->v[i]);
    free(sv->v);
    memset(sv, 0, sizeof *sv);
}

static int cmp_str(const void *a, const void *b)
{
    /* byte order of UTF-8 is code point order, which is Python's str order */
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void strvec_sort(strvec_t *sv)
{
    if (sv->n > 1)
        qsort(sv->v, sv->n, sizeof *sv->v, cmp_str);
}

/* ---- sample table ---------------------------------------------------------- */

static int add_sample(dataset_t *ds, const char *path, int32_t label)
{
    if (ds->n == ds->cap) {
        uint64_t cap = ds->cap ? ds->cap * 2 : 1024;
        size_t *off = realloc(ds->path_off, cap * sizeof *off);
        if (!off)
            return -1;
        ds->path_off = off;
        int32_t *lab = realloc(ds->labels, cap * sizeof *lab);
        if (!lab)
            return -1;
        ds->labels = lab;
        ds->cap = cap;
    }
    size_t len = strlen(path) + 1;
    if (ds->arena_len + len > ds->arena_cap) {
        size_t cap = ds->arena_cap ? ds->arena_cap * 2 : 65536;
        while (cap < ds->arena_len + len)
            cap *= 2;
        char *a = realloc(ds->arena, cap);
        if (!a)
            return -1;
        ds->arena = a;
        ds->arena_cap = cap;
    }
    memcpy(ds->arena + ds->arena_len, path, len);
    ds->path_off[ds->n] = ds->arena_len;
    ds->labels[ds->n] = label;
    ds->arena_len += len;
    ds->n++;
    return 0;
}

static int set_classes(dataset_t *ds, char *const *names, uint32_t n)
{
    ds->class_names = calloc(n ? n : 1, sizeof *ds->class_names);
    if (!ds->class_names)
        return -1;
    ds->nclasses = n;
    for (uint32_t c = 0; c < n; c++)
        if (!(ds->class_names[c] = strdup(names[c])))
            return -1;
    return 0;
}

/* ---- ImageFolder ----------------------------------------------------------- */

static int has_img_extension(const char *name)
{
    size_t len = strlen(name);
    for (int i = 0; dataset_img_extensions[i]; i++) {
        size_t el = strlen(dataset_img_extensions[i]);
        if (len >= el && strcasecmp(name + len - el, dataset_img_extensions[i]) == 0)
            return 1;
    }
    return 0;
}

static char *join(const char *a, const char *b)
{
    size_t len = strlen(a) + strlen(b) + 2;
    char *p = malloc(len);
    if (p)
        snprintf(p, len, "%s%s%s", a, *a && *b ? "/" : "", b);
    return p;
}

/* Splits the entries of DIR into directories and the rest, following
 * symlinks like Python's DirEntry.is_dir(). -1 with errno when DIR cannot be
 * listed. */
static int list_dir(const char *dir, strvec_t *dirs, strvec_t *files)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    struct dirent *e;
    int rc = 0;
    while (rc == 0 && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char *full = join(dir, e->d_name);
        struct stat st;
        if (!full) {
            rc = -1;
            break;
        }
        int is_dir = stat(full, &st) == 0 && S_ISDIR(st.st_mode);
        free(full);
        rc = strvec_push(is_dir ? dirs : files, e->d_name);
    }
    closedir(d);
    return rc;
}

typedef struct {
    char *rel;       /* directory relative to the dataset root */
    strvec_t files;  /* its image files, sorted */
} walked_t;

typedef struct {
    walked_t *v;
    size_t n, cap;
    dev_t dev[WALK_MAX_DEPTH];
    ino_t ino[WALK_MAX_DEPTH];
} walk_t;

static int cmp_walked(const void *a, const void *b)
{
    return strcmp(((const walked_t *)a)->rel, ((const walked_t *)b)->rel);
}

static int walk_push(walk_t *w, const char *rel)
{
    if (w->n == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 16;
        walked_t *v = realloc(w->v, cap * sizeof *v);
        if (!v)
            return -1;
        w->v = v;
        w->cap = cap;
    }
    memset(&w->v[w->n], 0, sizeof w->v[w->n]);
    if (!(w->v[w->n].rel = strdup(rel)))
        return -1;
    w->n++;
    return 0;
}

static void walk_free(walk_t *w)
{
    for (size_t i = 0; i < w->n; i++) {
        free(w->v[i].rel);
        strvec_free(&w->v[i].files);
    }
    free(w->v);
}

/* os.walk(followlinks=True) of ROOT/REL: records every directory with its
 * image files. Unreadable directories are skipped as os.walk does; a symlink
 * back to an ancestor is skipped (os.walk would loop until the path is too
 * long) with a warning. */
static int walk_dir(walk_t *w, const char *root, const char *rel, int depth)
{
    char *full = join(root, rel);
    if (!full)
        return -1;
    struct stat st;
    if (stat(full, &st) != 0) {
        free(full);
        return 0;
    }
    for (int i = 0; i < depth; i++)
        if (w->dev[i] == st.st_dev && w->ino[i] == st.st_ino) {
            log_warn("dataset: %s: symlink loop, not followed", full);
            free(full);
            return 0;
        }
    if (depth >= WALK_MAX_DEPTH) {
        log_warn("dataset: %s: deeper than %d levels, not followed", full, WALK_MAX_DEPTH);
        free(full);
        return 0;
    }
    w->dev[depth] = st.st_dev;
    w->ino[depth] = st.st_ino;
    strvec_t dirs = {0}, files = {0};
    int rc = 0;
    if (list_dir(full, &dirs, &files) != 0) {
        rc = errno == ENOMEM ? -1 : 0;  /* unreadable: skipped, like os.walk */
    } else if ((rc = walk_push(w, rel)) == 0) {
        size_t me = w->n - 1;
        for (size_t i = 0; rc == 0 && i < files.n; i++)
            if (has_img_extension(files.v[i]))
                rc = strvec_push(&w->v[me].files, files.v[i]);
        strvec_sort(&w->v[me].files);
        for (size_t i = 0; rc == 0 && i < dirs.n; i++) {
            char *sub = join(rel, dirs.v[i]);
            rc = sub ? walk_dir(w, root, sub, depth + 1) : -1;
            free(sub);
        }
    }
    strvec_free(&dirs);
    strvec_free(&files);
    free(full);
    return rc;
}

static int add_class_samples(dataset_t *ds, const char *cls, int32_t label, int *found)
{
    walk_t w = {0};
    int rc = walk_dir(&w, ds->root, cls, 0);
    if (rc == 0 && w.n > 1)
        qsort(w.v, w.n, sizeof *w.v, cmp_walked);
    for (size_t d = 0; rc == 0 && d < w.n; d++)
        for (size_t f = 0; rc == 0 && f < w.v[d].files.n; f++) {
            char *path = join(w.v[d].rel, w.v[d].files.v[f]);
            rc = path ? add_sample(ds, path, label) : -1;
            free(path);
            *found = 1;
        }
    walk_free(&w);
    return rc;
}

static void empty_classes_error(const dataset_t *ds, const int *found, char *err,
                                size_t errlen)
{
    size_t off = (size_t)snprintf(err, errlen, "%s: found no valid file for the classes ",
                                  ds->root);
    int first = 1;
    for (uint32_t c = 0; c < ds->nclasses && off < errlen; c++)
        if (!found[c]) {
            off += (size_t)snprintf(err + off, errlen - off, "%s%s", first ? "" : ", ",
                                    ds->class_names[c]);
            first = 0;
        }
    if (off < errlen)
        off += (size_t)snprintf(err + off, errlen - off, ". Supported extensions are:");
    for (int i = 0; dataset_img_extensions[i] && off < errlen; i++)
        off += (size_t)snprintf(err + off, errlen - off, " %s", dataset_img_extensions[i]);
}

static int open_folder(dataset_t *ds, const char *dir, char *err, size_t errlen)
{
    strvec_t classes = {0}, files = {0};
    if (!(ds->root = strdup(dir)))
        goto oom;
    if (list_dir(dir, &classes, &files) != 0) {
        if (errno == ENOMEM)
            goto oom;
        err_set(err, errlen, "%s: cannot open dataset directory: %s", dir, strerror(errno));
        goto fail;
    }
    if (classes.n == 0) {
        err_set(err, errlen,
                 "%s: couldn't find any class folder (ImageFolder wants ROOT/CLASS/IMAGE)", dir);
        goto fail;
    }
    strvec_sort(&classes);
    if (classes.n > INT32_MAX || set_classes(ds, classes.v, (uint32_t)classes.n) != 0)
        goto oom;
    int *found = calloc(classes.n, sizeof *found);
    if (!found)
        goto oom;
    int rc = 0, missing = 0;
    for (uint32_t c = 0; rc == 0 && c < ds->nclasses; c++) {
        rc = add_class_samples(ds, ds->class_names[c], (int32_t)c, &found[c]);
        missing += !found[c];
    }
    if (rc == 0 && missing)
        empty_classes_error(ds, found, err, errlen);
    free(found);
    if (rc != 0)
        goto oom;
    if (missing)
        goto fail;
    strvec_free(&classes);
    strvec_free(&files);
    return 0;
oom:
    err_set(err, errlen, "%s: out of memory while indexing the dataset", dir);
fail:
    strvec_free(&classes);
    strvec_free(&files);
    return -1;
}

/* ---- IDX ------------------------------------------------------------------- */

static int idx_check(const idx_file_t *im, const idx_file_t *lb, const char *ipath,
                     const char *lpath, char *err, size_t errlen)
{
    if (im->dims[0] != lb->dims[0]) {
        err_set(err, errlen, "%s has %" PRIu32 " images but %s has %" PRIu32 " labels", ipath,
                 im->dims[0], lpath, lb->dims[0]);
        return -1;
    }
    if (im->dims[1] > 65535 || im->dims[2] > 65535) {
        err_set(err, errlen, "%s: images of %" PRIu32 "x%" PRIu32 " are too large", ipath,
                 im->dims[2], im->dims[1]);
        return -1;
    }
    for (uint32_t i = 0; i < lb->dims[0]; i++)
        if (lb->data[i] >= 10) {
            err_set(err, errlen, "%s: label %d of sample %" PRIu32 " is not in 0..9", lpath,
                     lb->data[i], i);
            return -1;
        }
    return 0;
}

static int idx_index(dataset_t *ds, const char *prefix, const char *ipath, const idx_file_t *lb)
{
    const char *base = strrchr(ipath, '/');
    base = base ? base + 1 : ipath;
    int fashion = strcasestr(prefix, "fashion") != NULL;
    if (set_classes(ds, (char *const *)(fashion ? fashion_classes : digit_classes), 10) != 0)
        return -1;
    char path[4096];
    for (uint32_t i = 0; i < lb->dims[0]; i++) {
        snprintf(path, sizeof path, "%s#%" PRIu32, base, i);
        if (add_sample(ds, path, lb->data[i]) != 0)
            return -1;
    }
    return 0;
}

static int open_idx(dataset_t *ds, const char *prefix, char *err, size_t errlen)
{
    if (!*prefix) {
        err_set(err, errlen, "idx: empty prefix (want idx:DIR/t10k for DIR/t10k-images-idx3-ubyte[.gz])");
        return -1;
    }
    ds->is_idx = 1;
    idx_file_t labels = {0};
    char *ipath = idx_find(prefix, "images-idx3-ubyte", err, errlen);
    char *lpath = ipath ? idx_find(prefix, "labels-idx1-ubyte", err, errlen) : NULL;
    int rc = lpath ? 0 : -1;
    if (rc == 0)
        rc = idx_file_read(ipath, 3, &ds->images, err, errlen);
    if (rc == 0)
        rc = idx_file_read(lpath, 1, &labels, err, errlen);
    if (rc == 0)
        rc = idx_check(&ds->images, &labels, ipath, lpath, err, errlen);
    if (rc == 0 && idx_index(ds, prefix, ipath, &labels) != 0) {
        err_set(err, errlen, "%s: out of memory while indexing", ipath);
        rc = -1;
    }
    idx_file_free(&labels);
    free(ipath);
    free(lpath);
    return rc;
}

/* ---- public ---------------------------------------------------------------- */

dataset_t *dataset_open(const char *spec, char *err, size_t errlen)
{
    dataset_t *ds = calloc(1, sizeof *ds);
    if (!ds) {
        err_set(err, errlen, "out of memory");
        return NULL;
    }
    int rc = strncmp(spec, "idx:", 4) == 0 ? open_idx(ds, spec + 4, err, errlen)
                                           : open_folder(ds, spec, err, errlen);
    if (rc != 0)
        dataset_destroy(&ds);
    return ds;
}

void dataset_destroy(dataset_t **dsp)
{
    dataset_t *ds = dsp ? *dsp : NULL;
    if (!ds)
        return;
    for (uint32_t c = 0; c < ds->nclasses; c++)
        free(ds->class_names[c]);
    free(ds->class_names);
    free(ds->path_off);
    free(ds->labels);
    free(ds->arena);
    free(ds->root);
    free(ds->present);
    idx_file_free(&ds->images);
    free(ds);
    *dsp = NULL;
}

uint64_t dataset_size(const dataset_t *ds) { return ds->n; }
uint32_t dataset_num_classes(const dataset_t *ds) { return ds->nclasses; }
int dataset_is_idx(const dataset_t *ds) { return ds->is_idx; }
const char *dataset_root(const dataset_t *ds) { return ds->is_idx ? NULL : ds->root; }

const char *dataset_class_name(const dataset_t *ds, uint32_t c)
{
    return c < ds->nclasses ? ds->class_names[c] : NULL;
}

int32_t dataset_label(const dataset_t *ds, uint64_t i) { return i < ds->n ? ds->labels[i] : -1; }

const char *dataset_path(const dataset_t *ds, uint64_t i)
{
    return i < ds->n ? ds->arena + ds->path_off[i] : NULL;
}

const uint8_t *dataset_idx_pixels(const dataset_t *ds, uint64_t i, int *h, int *w)
{
    if (!ds->is_idx || i >= ds->n)
        return NULL;
    size_t plane = (size_t)ds->images.dims[1] * ds->images.dims[2];
    *h = (int)ds->images.dims[1];
    *w = (int)ds->images.dims[2];
    return ds->images.data + plane * i;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* The names of all the model's outputs: the map's (label, else folder),
 * a present folder's own name for "numeric", else the index itself. */
static char **mapped_names(const dataset_t *ds, const classmap_t *map, const int32_t *idx)
{
    uint32_t outputs = classmap_outputs(map);
    char **names = calloc(outputs, sizeof *names);
    for (uint32_t c = 0; names && c < ds->nclasses; c++)
        if (!classmap_name(map, (uint32_t)idx[c]) && !(names[idx[c]] = strdup(ds->class_names[c])))
            goto oom;
    for (uint32_t j = 0; names && j < outputs; j++) {
        if (names[j])
            continue;
        const char *name = classmap_name(map, j);
        char num[16];
        snprintf(num, sizeof num, "%u", j);
        if (!(names[j] = strdup(name ? name : num)))
            goto oom;
    }
    return names;
oom:
    for (uint32_t j = 0; j < outputs; j++)
        free(names[j]);
    free(names);
    return NULL;
}

int dataset_apply_classmap(dataset_t *ds, const classmap_t *map, char *err, size_t errlen)
{
    int32_t *idx = calloc(ds->nclasses ? ds->nclasses : 1, sizeof *idx);
    uint32_t *present = calloc(ds->nclasses ? ds->nclasses : 1, sizeof *present);
    if (!idx || !present) {
        free(idx), free(present);
        err_set(err, errlen, "out of memory");
        return -1;
    }
    char why[512];
    for (uint32_t c = 0; c < ds->nclasses; c++) {
        if ((idx[c] = classmap_index(map, ds->class_names[c], why, sizeof why)) < 0) {
            err_set(err, errlen, "class folder '%s' of %s: %s", ds->class_names[c],
                    ds->root ? ds->root : "the dataset", why);
            free(idx), free(present);
            return -1;
        }
        present[c] = (uint32_t)idx[c];
    }
    char **names = mapped_names(ds, map, idx);
    if (!names) {
        free(idx), free(present);
        err_set(err, errlen, "out of memory");
        return -1;
    }
    for (uint64_t i = 0; i < ds->n; i++)
        ds->labels[i] = idx[ds->labels[i]];
    qsort(present, ds->nclasses, sizeof *present, cmp_u32);
    for (uint32_t c = 0; c < ds->nclasses; c++)
        free(ds->class_names[c]);
    free(ds->class_names);
    free(ds->present);
    ds->present = present;
    ds->npresent = ds->nclasses;
    ds->class_names = names;
    ds->nclasses = classmap_outputs(map);
    free(idx);
    return 0;
}

const uint32_t *dataset_present(const dataset_t *ds, uint32_t *n)
{
    *n = ds->npresent;
    return ds->present;
}
