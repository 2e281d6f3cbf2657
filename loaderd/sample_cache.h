/* sample_cache — training samples kept decoded (loaderd --cache, issue 14
 * item 5), so the epochs after the first decode no image file.
 *
 *   sample_cache_t *c = sample_cache_new("memory", n, 4 << 30, key, err, sizeof err);
 *   cached_t e;
 *   if (sample_cache_get(c, id, &src, &e)) ... use e.px (e.w x e.h x e.c) ...
 *   else { decode; sample_cache_put(c, id, &src, w, h, ch, px); }
 *
 * What an entry holds is the caller's (loaderd: the whole decoded image
 * before RandomResizedCrop, or the resized and cropped sample before flip
 * and rotation): the augmentations stay per (seed, epoch, id) and are drawn
 * after the cache, so a job's pixels are the same with and without it.
 *
 * WHERE is "memory" (this run only) or a folder: DIR/samples.cache, a
 * memory-mapped file that the next run with the same key (dataset, sample
 * count, transform) reuses; another key starts it afresh. Each entry also
 * records its source file's size and mtime, and a file changed since is a
 * miss. The budget bounds the pixels kept: entries are never evicted, a
 * full cache just stops taking new ones. One loaderd per folder (flock).
 *
 * Threads: get and put may run on every decode thread at once; an entry is
 * written once (its state goes empty -> writing -> ready with C11 atomics,
 * readers see only ready ones) and never changes after. */
#ifndef DDP_SAMPLE_CACHE_H
#define DDP_SAMPLE_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sample_cache sample_cache_t;

typedef struct {
    int64_t size;                 /* the source file's, as stat says */
    int64_t mtime_ns;
} cache_source_t;

typedef struct {
    int w, h, c;
    const uint8_t *px;            /* w * h * c bytes, valid while the cache lives */
} cached_t;

sample_cache_t *sample_cache_new(const char *where, uint64_t nsamples, uint64_t budget,
                                 const char *key, char *err, size_t errlen);
void sample_cache_destroy(sample_cache_t **self_p);

bool sample_cache_get(sample_cache_t *self, uint64_t id, const cache_source_t *src, cached_t *out);
/* A copy of px; false when the cache is full or id is taken (nothing kept). */
bool sample_cache_put(sample_cache_t *self, uint64_t id, const cache_source_t *src, int w, int h,
                      int c, const uint8_t *px);

typedef struct {
    uint64_t hits, misses, entries, bytes, budget;
    bool reused;                  /* a folder cache of an earlier run was taken up */
} sample_cache_stats_t;
sample_cache_stats_t sample_cache_stats(const sample_cache_t *self);

#endif
