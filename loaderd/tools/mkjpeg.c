/* ddpipe-mkjpeg — writes an ImageFolder of JPEGs for tests and benchmarks.
 *
 *   ddpipe-mkjpeg idx:PREFIX OUTDIR [--count N] [--quality Q] [--size WxH] [--rgb]
 *       sample i of the IDX dataset -> OUTDIR/<class>/<i as %05d>.jpg
 *       (gray; --rgb: 3 channels; --size: upscaled with the PIL-bilinear
 *       resize). Class directories are the class names with '/' -> '_'; when
 *       sorting those would not keep the label order (Fashion-MNIST), each
 *       gets a "NN-" prefix so ImageFolder labels equal the IDX labels (as
 *       long as every class gets a sample: only those get a directory).
 *   ddpipe-mkjpeg --synthetic N OUTDIR [--size 500x375] [--classes K]
 *                 [--quality Q] [--seed S]
 *       N colourful photo-like JPEGs (gradients, shapes, grain), sample i in
 *       OUTDIR/classKK/<i as %05d>.jpg with KK = i % K; deterministic for a
 *       seed. ImageNet-sized by default, for loader benchmarks. */
#include "common/dataset.h"
#include "common/flags.h"
#include "common/image/decode.h"
#include "common/image/resize.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <turbojpeg.h>

typedef struct {
    const char *spec, *outdir;
    long synthetic, count, quality, classes, seed;
    int w, h, rgb;
} opts_t;

static void usage(void)
{
    fprintf(stderr,
            "usage: ddpipe-mkjpeg idx:PREFIX OUTDIR [--count N] [--quality Q] [--size WxH] [--rgb]\n"
            "       ddpipe-mkjpeg --synthetic N OUTDIR [--size WxH] [--classes K] [--quality Q] "
            "[--seed S]\n");
}

static int parse_size(const char *v, int *w, int *h)
{
    char tail;
    if (!v || sscanf(v, "%dx%d%c", w, h, &tail) != 2 || *w < 1 || *h < 1 || *w > 16384 ||
        *h > 16384) {
        fprintf(stderr, "ddpipe-mkjpeg: --size: '%s' is not WxH with sides in 1..16384\n",
                v ? v : "");
        return -1;
    }
    return 0;
}

static int parse_args(int argc, char **argv, opts_t *o)
{
    *o = (opts_t){.quality = 90, .classes = 4, .seed = 1, .count = -1};
    const char *pos[2];
    int npos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int rc = 0;
        if (!strcmp(a, "--rgb")) {
            o->rgb = 1;
            continue;
        } else if (!strcmp(a, "--synthetic"))
            rc = flags_long("synthetic", v, 1, 10000000, &o->synthetic);
        else if (!strcmp(a, "--count"))
            rc = flags_long("count", v, 1, 100000000, &o->count);
        else if (!strcmp(a, "--quality"))
            rc = flags_long("quality", v, 1, 100, &o->quality);
        else if (!strcmp(a, "--classes"))
            rc = flags_long("classes", v, 1, 1000, &o->classes);
        else if (!strcmp(a, "--seed"))
            rc = flags_long("seed", v, 0, 1L << 30, &o->seed);
        else if (!strcmp(a, "--size"))
            rc = parse_size(v, &o->w, &o->h);
        else if (a[0] == '-' && a[1] == '-') {
            fprintf(stderr, "ddpipe-mkjpeg: unknown option %s\n", a);
            return -1;
        } else if (npos < 2) {
            pos[npos++] = a;
            continue;
        } else {
            fprintf(stderr, "ddpipe-mkjpeg: unexpected argument %s\n", a);
            return -1;
        }
        if (rc != 0)
            return -1;
        i++;
    }
    if (npos != (o->synthetic ? 1 : 2)) {
        usage();
        return -1;
    }
    o->spec = o->synthetic ? NULL : pos[0];
    o->outdir = pos[npos - 1];
    if (o->synthetic && !o->w) {
        o->w = 500;
        o->h = 375;
    }
    return 0;
}

static int mkdir_p(const char *path)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            if (mkdir(buf, 0777) != 0 && errno != EEXIST)
                return -1;
            *p = '/';
        }
    return mkdir(buf, 0777) != 0 && errno != EEXIST ? -1 : 0;
}

static int write_jpeg(tjhandle tj, const char *dir, const char *cls, long idx, const uint8_t *px,
                      int w, int h, int c, int quality)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s/%05ld.jpg", dir, cls, idx);
    unsigned char *jpg = NULL;
    unsigned long len = 0;
    if (tjCompress2(tj, px, w, 0, h, c == 1 ? TJPF_GRAY : TJPF_RGB, &jpg, &len,
                    c == 1 ? TJSAMP_GRAY : TJSAMP_420, quality, 0) != 0) {
        fprintf(stderr, "ddpipe-mkjpeg: %s: compress failed: %s\n", path, tjGetErrorStr2(tj));
        return -1;
    }
    FILE *f = fopen(path, "wb");
    int rc = f && fwrite(jpg, 1, len, f) == len ? 0 : -1;
    if (f && fclose(f) != 0)
        rc = -1;
    if (rc != 0)
        fprintf(stderr, "ddpipe-mkjpeg: %s: cannot write: %s\n", path, strerror(errno));
    tjFree(jpg);
    return rc;
}

/* ---- from an IDX dataset -------------------------------------------------- */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Directory names for the classes, in label order (see the file comment). */
static char **class_dirs(const dataset_t *ds)
{
    uint32_t n = dataset_num_classes(ds);
    char **names = calloc(n, sizeof *names), **sorted = calloc(n, sizeof *sorted);
    int ordered = 1;
    for (uint32_t c = 0; names && sorted && c < n; c++) {
        char buf[256];
        snprintf(buf, sizeof buf, "%s", dataset_class_name(ds, c));
        for (char *p = buf; *p; p++)
            if (*p == '/')
                *p = '_';
        names[c] = sorted[c] = strdup(buf);
    }
    if (names && sorted) {
        qsort(sorted, n, sizeof *sorted, cmp_str);
        for (uint32_t c = 0; c < n; c++)
            ordered &= sorted[c] == names[c];
    }
    for (uint32_t c = 0; names && sorted && !ordered && c < n; c++) {
        char buf[300];
        snprintf(buf, sizeof buf, "%02u-%s", c, names[c]);
        free(names[c]);
        names[c] = strdup(buf);
    }
    free(sorted);
    return names;
}

static int from_idx(const opts_t *o, tjhandle tj)
{
    char err[512];
    dataset_t *ds = dataset_open(o->spec, err, sizeof err);
    if (!ds) {
        fprintf(stderr, "ddpipe-mkjpeg: %s\n", err);
        return -1;
    }
    char **dirs = class_dirs(ds);
    uint32_t nc = dataset_num_classes(ds);
    int rc = dirs ? 0 : -1;
    uint64_t n = dataset_size(ds);
    if (o->count > 0 && (uint64_t)o->count < n)
        n = (uint64_t)o->count;
    /* only classes that get a sample have a directory: ImageFolder refuses
     * empty class directories */
    for (uint64_t i = 0; rc == 0 && i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", o->outdir, dirs[dataset_label(ds, i)]);
        if ((rc = mkdir_p(path)) != 0)
            fprintf(stderr, "ddpipe-mkjpeg: cannot create %s: %s\n", path, strerror(errno));
    }
    for (uint64_t i = 0; rc == 0 && i < n; i++) {
        image_t view = {0, 0, 1, NULL}, *big = NULL, *rgb = NULL;
        view.px = (uint8_t *)dataset_idx_pixels(ds, i, &view.h, &view.w);
        const image_t *img = &view;
        if (o->w && !(img = big = resize_image(&view, o->w, o->h, err, sizeof err))) {
            fprintf(stderr, "ddpipe-mkjpeg: %s\n", err);
            rc = -1;
            break;
        }
        if (o->rgb && (rgb = image_new(img->w, img->h, 3))) {
            for (size_t p = 0; p < (size_t)img->w * img->h; p++)
                rgb->px[3 * p] = rgb->px[3 * p + 1] = rgb->px[3 * p + 2] = img->px[p];
            img = rgb;
        }
        rc = o->rgb && !rgb ? -1
                            : write_jpeg(tj, o->outdir, dirs[dataset_label(ds, i)], (long)i,
                                         img->px, img->w, img->h, img->c, (int)o->quality);
        image_destroy(&big);
        image_destroy(&rgb);
    }
    for (uint32_t c = 0; dirs && c < nc; c++)
        free(dirs[c]);
    free(dirs);
    dataset_destroy(&ds);
    if (rc == 0)
        printf("wrote %llu JPEGs in %u classes to %s\n", (unsigned long long)n, nc, o->outdir);
    return rc;
}

/* ---- synthetic ------------------------------------------------------------ */

static uint32_t rng_next(uint64_t *s)
{
    /* splitmix64: small, deterministic everywhere */
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (uint32_t)((z ^ (z >> 31)) >> 32);
}

static uint8_t clamp8(int v) { return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v); }

/* A diagonal two-colour gradient, a few ellipses, fine grain: enough
 * structure and texture for JPEG sizes and decode times like photos. */
static void draw_synthetic(uint8_t *px, int w, int h, uint64_t seed)
{
    uint64_t s = seed;
    int c0[3], c1[3];
    for (int k = 0; k < 3; k++) {
        c0[k] = (int)(rng_next(&s) % 256);
        c1[k] = (int)(rng_next(&s) % 256);
    }
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            int t = (int)(256L * (x + y) / (w + h));
            for (int k = 0; k < 3; k++)
                px[((size_t)y * w + x) * 3 + k] = (uint8_t)((c0[k] * (256 - t) + c1[k] * t) >> 8);
        }
    int shapes = 3 + (int)(rng_next(&s) % 6);
    for (int e = 0; e < shapes; e++) {
        int cx = (int)(rng_next(&s) % (uint32_t)w), cy = (int)(rng_next(&s) % (uint32_t)h);
        int rx = 8 + (int)(rng_next(&s) % (uint32_t)(w / 3 + 1));
        int ry = 8 + (int)(rng_next(&s) % (uint32_t)(h / 3 + 1));
        uint8_t col[3] = {(uint8_t)rng_next(&s), (uint8_t)rng_next(&s), (uint8_t)rng_next(&s)};
        for (int y = cy - ry < 0 ? 0 : cy - ry; y < h && y <= cy + ry; y++)
            for (int x = cx - rx < 0 ? 0 : cx - rx; x < w && x <= cx + rx; x++) {
                double dx = (double)(x - cx) / rx, dy = (double)(y - cy) / ry;
                if (dx * dx + dy * dy <= 1.0)
                    memcpy(px + ((size_t)y * w + x) * 3, col, 3);
            }
    }
    for (size_t i = 0; i < (size_t)w * h * 3; i++)
        px[i] = clamp8(px[i] + (int)(rng_next(&s) % 49) - 24);
}

static int synthetic(const opts_t *o, tjhandle tj)
{
    uint8_t *px = malloc((size_t)o->w * o->h * 3);
    if (!px) {
        fprintf(stderr, "ddpipe-mkjpeg: out of memory\n");
        return -1;
    }
    int rc = 0;
    for (long c = 0; rc == 0 && c < o->classes; c++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/class%02ld", o->outdir, c);
        if ((rc = mkdir_p(path)) != 0)
            fprintf(stderr, "ddpipe-mkjpeg: cannot create %s: %s\n", path, strerror(errno));
    }
    for (long i = 0; rc == 0 && i < o->synthetic; i++) {
        char cls[32];
        snprintf(cls, sizeof cls, "class%02ld", i % o->classes);
        draw_synthetic(px, o->w, o->h, (uint64_t)o->seed * 1000003u + (uint64_t)i);
        rc = write_jpeg(tj, o->outdir, cls, i, px, o->w, o->h, 3, (int)o->quality);
    }
    free(px);
    if (rc == 0)
        printf("wrote %ld synthetic %dx%d JPEGs in %ld classes to %s\n", o->synthetic, o->w,
               o->h, o->classes, o->outdir);
    return rc;
}

int main(int argc, char **argv)
{
    opts_t o;
    if (parse_args(argc, argv, &o) != 0)
        return 2;
    if (!o.synthetic && strncmp(o.spec, "idx:", 4) != 0) {
        fprintf(stderr, "ddpipe-mkjpeg: the source must be idx:PREFIX (or use --synthetic N)\n");
        return 2;
    }
    tjhandle tj = tjInitCompress();
    if (!tj) {
        fprintf(stderr, "ddpipe-mkjpeg: cannot create a TurboJPEG compressor\n");
        return 1;
    }
    int rc = o.synthetic ? synthetic(&o, tj) : from_idx(&o, tj);
    tjDestroy(tj);
    return rc == 0 ? 0 : 1;
}
