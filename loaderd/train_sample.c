#include "loaderd/train_sample.h"

#include "common/errbuf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define SAMPLE_PATH_MAX 4096

/* The sample's file (its path into PATH) as stat sees it: a cache entry is
 * good only for it. */
static bool source_of(const loader_t *self, uint64_t id, char path[SAMPLE_PATH_MAX],
                      cache_source_t *src)
{
    int n = snprintf(path, SAMPLE_PATH_MAX, "%s/%s", dataset_root(self->dataset),
                     dataset_path(self->dataset, id));
    struct stat st;
    if (n < 0 || n >= SAMPLE_PATH_MAX || stat(path, &st) != 0)
        return false;
    *src = (cache_source_t){.size = st.st_size,
                            .mtime_ns = st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec};
    return true;
}

/* RandomResizedCrop from the whole decoded image, kept or decoded now
 * (whole: the crop box is drawn from the image's size, as augment_load
 * does, and a partial decode has the same pixels inside it). */
static int crop_cached(const loader_t *self, uint32_t epoch, uint64_t id, const char *path,
                       const cache_source_t *src, uint8_t *out, char *err, size_t errlen)
{
    const augment_t *aug = &self->augment;
    uint64_t seed = (uint64_t)self->options.seed;
    cached_t e;
    if (sample_cache_get(self->cache, id, src, &e)) {
        image_t view = {e.w, e.h, e.c, (uint8_t *)e.px};
        return augment_sample(aug, seed, epoch, id, &view, out, self->out_h, self->out_w, err,
                              errlen);
    }
    uint8_t *buf = NULL;
    size_t len = 0;
    int src_w, src_h;
    if (decode_read_file(path, &buf, &len, err, errlen) != 0)
        return -1;
    image_t *img = decode_image(buf, len, NULL, &src_w, &src_h, err, errlen);
    free(buf);
    if (!img)
        return -1;
    sample_cache_put(self->cache, id, src, img->w, img->h, img->c, img->px);
    int rc = augment_sample(aug, seed, epoch, id, img, out, self->out_h, self->out_w, err, errlen);
    image_destroy(&img);
    return rc;
}

/* The eval transform's output (resize, center crop), kept or made now. */
static int fixed_sample(const loader_t *self, uint64_t id, uint8_t *out, char *err, size_t errlen)
{
    int h = self->out_h, w = self->out_w, c = self->augment.channels;
    cache_source_t src;
    char path[SAMPLE_PATH_MAX];
    bool cacheable = self->cache && source_of(self, id, path, &src);
    cached_t e;
    if (cacheable && sample_cache_get(self->cache, id, &src, &e) && e.w == w && e.h == h &&
        e.c == c) {
        memcpy(out, e.px, (size_t)c * h * w);
        return 0;
    }
    if (sample_load(self->dataset, id, &self->transform, out, h, w, err, errlen) != 0)
        return -1;
    if (cacheable)
        sample_cache_put(self->cache, id, &src, w, h, c, out);
    return 0;
}

int train_sample_load(const loader_t *self, uint32_t epoch, uint64_t id, uint8_t *out, char *err,
                      size_t errlen)
{
    const augment_t *aug = &self->augment;
    if (aug->crop) {
        cache_source_t src;
        char path[SAMPLE_PATH_MAX];
        if (self->cache && source_of(self, id, path, &src))
            return crop_cached(self, epoch, id, path, &src, out, err, errlen);
        return augment_load(self->dataset, id, aug, (uint64_t)self->options.seed, epoch, out,
                            self->out_h, self->out_w, err, errlen);
    }
    if (fixed_sample(self, id, out, err, errlen) != 0)
        return -1;
    return augment_flip_rotate(&self->augment, (uint64_t)self->options.seed, epoch, id, out,
                               self->out_h, self->out_w, err, errlen);
}
