/* wire_decode: a --wire jpeg batch decoded at gpud gives, sample for
 * sample, the bytes loaderd's sample_load gives for the same files (every
 * format in tests/golden/formats and the JPEG goldens, DCT scaling on and
 * off, gray and RGB outputs, down- and upscaling), on several threads; a
 * truncated JPEG is flagged failed with a reason and zero pixels. A train
 * shard (its augmentation as config + seed) gives loaderd's augmented
 * samples: RandomResizedCrop/flip/rotation drawn per (seed, epoch, id). */
#include "common/dataset.h"
#include "common/image/augment.h"
#include "common/image/decode.h"
#include "common/image/transform.h"
#include "gpud/wire_decode.h"
#include "tests/proto/check.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SEED 0x5eedULL

#ifndef DDP_SRC
#define DDP_SRC "."
#endif

static int copy_file(const char *from, const char *to)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    char err[256];
    if (decode_read_file(from, &buf, &len, err, sizeof err) != 0)
        return -1;
    FILE *f = fopen(to, "wb");
    int rc = f && fwrite(buf, 1, len, f) == len ? 0 : -1;
    if (f && fclose(f) != 0)
        rc = -1;
    free(buf);
    return rc;
}

/* Every image of DIR (not the .rgb/.ppm goldens' references) into CLS. */
static int copy_dir(const char *dir, const char *cls, const char *skip_suffix)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    struct dirent *e;
    int copied = 0;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        size_t sl = strlen(skip_suffix);
        if (e->d_name[0] == '.' || (l > sl && strcmp(e->d_name + l - sl, skip_suffix) == 0) ||
            (l > 4 && strcmp(e->d_name + l - 4, ".rgb") == 0))
            continue;
        char from[1024], to[1024];
        snprintf(from, sizeof from, "%s/%s", dir, e->d_name);
        snprintf(to, sizeof to, "%s/%s", cls, e->d_name);
        copied += copy_file(from, to) == 0;
    }
    closedir(d);
    return copied;
}

/* loaderd's sample I: the eval transform, or (AUG) the train sample of
 * (SEED, EPOCH) as train_sample_load makes it without --cache. */
static int reference(const dataset_t *ds, uint64_t i, const transform_t *t, const augment_t *aug,
                     uint32_t epoch, uint8_t *out, int h, int w, char *err, size_t errlen)
{
    if (aug && aug->crop)
        return augment_load(ds, i, aug, SEED, epoch, out, h, w, err, errlen);
    if (sample_load(ds, i, t, out, h, w, err, errlen) != 0)
        return -1;
    return aug ? augment_flip_rotate(aug, SEED, epoch, i, out, h, w, err, errlen) : 0;
}

static void check_transform(const dataset_t *ds, const transform_t *t, const augment_t *aug,
                            uint32_t epoch, int h, int w)
{
    uint64_t n = dataset_size(ds);
    size_t sb = (size_t)t->channels * h * w;
    uint8_t *ref = calloc(n, sb), *got = malloc(n * sb), *failed = malloc(n);
    int *ok = calloc(n, sizeof *ok);
    char(*why)[DDP_MAX_WHY] = calloc(n, sizeof *why);
    uint32_t *sizes = calloc(n, sizeof *sizes);
    uint8_t **files = calloc(n, sizeof *files);
    size_t total = 0;
    char err[512];
    int nok = 0;
    for (uint64_t i = 0; i < n; i++) {
        ok[i] = reference(ds, i, t, aug, epoch, ref + i * sb, h, w, err, sizeof err) == 0;
        if (!ok[i])
            memset(ref + i * sb, 0, sb);
        nok += ok[i];
        char path[1024];
        size_t len = 0;
        snprintf(path, sizeof path, "%s/%s", dataset_root(ds), dataset_path(ds, i));
        CHECK(decode_read_file(path, &files[i], &len, err, sizeof err) == 0 && len > 0);
        sizes[i] = (uint32_t)len;
        total += len;
    }
    zframe_t *frame = zframe_new(NULL, total);
    for (uint64_t i = 0, at = 0; i < n; i++) {
        memcpy(zframe_data(frame) + at, files[i], sizes[i]);
        at += sizes[i];
    }
    ddp_batch_t b = {.phase = DDP_PHASE_EVAL, .n = (uint32_t)n, .c = (uint16_t)t->channels,
                     .h = (uint16_t)h, .w = (uint16_t)w, .pixels = frame,
                     .wire = DDP_WIRE_ENCODED, .sizes = sizes, .resize = (uint16_t)t->resize,
                     .crop = t->crop_h > 0, .dct = (uint8_t)t->dct_scaling};
    uint64_t *ids = calloc(n, sizeof *ids);
    for (uint64_t i = 0; i < n; i++)
        ids[i] = i;
    if (aug) { /* a train shard: the augmentation travels as config + seed */
        b.phase = DDP_PHASE_TRAIN;
        b.epoch = epoch;
        b.ids = ids;
        b.aug_seed = SEED;
        b.aug_flags = (uint8_t)((aug->crop ? DDP_AUG_CROP : 0) | (aug->rotate ? DDP_AUG_ROTATE : 0));
        memcpy(b.aug_scale, aug->scale, sizeof b.aug_scale);
        memcpy(b.aug_ratio, aug->ratio, sizeof b.aug_ratio);
        b.aug_flip_p = aug->flip_p;
        memcpy(b.aug_degrees, aug->degrees, sizeof b.aug_degrees);
    }
    int nfailed = wire_decode_batch(&b, 4, got, failed, why, err, sizeof err);
    CHECK_MSG(nfailed == (int)n - nok, "%d failed at gpud, %d at loaderd", nfailed,
              (int)n - nok);
    for (uint64_t i = 0; i < n; i++) {
        CHECK_MSG(failed[i] == !ok[i], "%s: gpud %s, loaderd %s", dataset_path(ds, i),
                  failed[i] ? "failed" : "decoded", ok[i] ? "decoded" : "failed");
        CHECK_MSG(memcmp(got + i * sb, ref + i * sb, sb) == 0,
                  "%s: gpud's pixels differ from loaderd's (resize %d crop %dx%d c %d dct %d, %s)",
                  dataset_path(ds, i), t->resize, h, w, t->channels, t->dct_scaling,
                  aug ? (aug->crop ? "train crop" : "train flip/rotate") : "eval");
        if (failed[i])
            CHECK_MSG(why[i][0] != '\0', "%s failed without a reason", dataset_path(ds, i));
    }
    CHECK_MSG(nok >= 20 && nok < (int)n, "%d of %llu decodable: want >= 20 and one bad", nok,
              (unsigned long long)n);
    zframe_destroy(&frame);
    for (uint64_t i = 0; i < n; i++)
        free(files[i]);
    free(files), free(sizes), free(why), free(ok), free(failed), free(got), free(ref), free(ids);
}

int main(void)
{
    char root[] = "/tmp/ddp-wire-decode-XXXXXX";
    CHECK(mkdtemp(root) != NULL);
    char cls[1100], trunc[1200];
    snprintf(cls, sizeof cls, "%s/a", root);
    mkdir(cls, 0700);
    int formats = copy_dir(DDP_SRC "/tests/golden/formats", cls, ".txt");
    int jpegs = copy_dir(DDP_SRC "/tests/golden/loader/decode", cls, ".ppm");
    CHECK_MSG(formats > 20 && jpegs > 5, "copied %d format and %d decode goldens", formats, jpegs);
    /* a JPEG whose header is fine, cut in the middle of its scan */
    uint8_t *buf = NULL;
    size_t len = 0;
    char err[256];
    CHECK(decode_read_file(DDP_SRC "/tests/golden/loader/decode/base420.jpg", &buf, &len, err,
                           sizeof err) == 0);
    snprintf(trunc, sizeof trunc, "%s/zz_truncated.jpg", cls);
    FILE *f = fopen(trunc, "wb");
    CHECK(f && fwrite(buf, 1, len / 2, f) == len / 2);
    if (f)
        fclose(f);
    free(buf);
    dataset_t *ds = dataset_open(root, err, sizeof err);
    CHECK_MSG(ds != NULL, "dataset_open: %s", err);
    if (ds) {
        check_transform(ds, &(transform_t){48, 32, 32, 3, 1}, NULL, 0, 32, 32);
        check_transform(ds, &(transform_t){40, 24, 36, 1, 0}, NULL, 0, 24, 36);
        check_transform(ds, &(transform_t){300, 64, 64, 3, 1}, NULL, 0, 64, 64);
        /* training: RandomResizedCrop + flip (+ rotation), two epochs; no crop:
         * the eval transform then flip + rotation */
        augment_t crop = augment_default(3), crop_gray = augment_default(1);
        crop_gray.rotate = 1;
        crop_gray.degrees[0] = -20, crop_gray.degrees[1] = 20;
        augment_t fixed = crop_gray;
        fixed.crop = 0, fixed.channels = 3;
        check_transform(ds, &(transform_t){0, 0, 0, 3, 0}, &crop, 0, 28, 28);
        check_transform(ds, &(transform_t){0, 0, 0, 3, 0}, &crop, 1, 28, 28);
        check_transform(ds, &(transform_t){0, 0, 0, 1, 0}, &crop_gray, 3, 20, 24);
        check_transform(ds, &(transform_t){36, 32, 32, 3, 0}, &fixed, 2, 32, 32);
        dataset_destroy(&ds);
    }
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    CHECK(system(cmd) == 0);
    return check_exit("test_wire_decode");
}
