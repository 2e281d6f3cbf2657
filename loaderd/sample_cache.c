#include "loaderd/sample_cache.h"

#include "common/errbuf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define CACHE_MAGIC "ddpipe-samples1"
#define CACHE_KEY_MAX 2048
#define CACHE_HEADER 4096

enum { ENTRY_EMPTY = 0, ENTRY_WRITING = 1, ENTRY_READY = 2 };

/* One sample's place; the same bytes in memory and in the file. */
typedef struct {
    _Atomic uint32_t state;
    uint32_t w, h, c;
    uint64_t offset;              /* into the data area */
    int64_t src_size, src_mtime_ns;
} entry_t;

/* The file's (and the memory cache's) first page. */
typedef struct {
    char magic[16];
    char key[CACHE_KEY_MAX];
    uint64_t nsamples, budget;
    _Atomic uint64_t used;        /* data bytes handed out */
} header_t;

struct sample_cache {
    uint8_t *base;                /* header page, entries, data */
    size_t total;
    int fd;                       /* -1: memory */
    header_t *hdr;
    entry_t *entries;
    uint8_t *data;
    bool reused;
    _Atomic uint64_t hits, misses, entries_ready;
};

static size_t index_bytes(uint64_t n)
{
    size_t b = (size_t)n * sizeof(entry_t);
    return (b + 4095) & ~(size_t)4095;
}

static void layout(sample_cache_t *self, uint64_t n)
{
    self->hdr = (header_t *)self->base;
    self->entries = (entry_t *)(self->base + CACHE_HEADER);
    self->data = self->base + CACHE_HEADER + index_bytes(n);
}

static void init_header(sample_cache_t *self, uint64_t n, uint64_t budget, const char *key)
{
    memset(self->base, 0, CACHE_HEADER + index_bytes(n));
    snprintf(self->hdr->magic, sizeof self->hdr->magic, "%s", CACHE_MAGIC);
    snprintf(self->hdr->key, sizeof self->hdr->key, "%s", key);
    self->hdr->nsamples = n;
    self->hdr->budget = budget;
    atomic_store(&self->hdr->used, 0);
}

/* An earlier run's file with the same key, size and budget is taken up;
 * its half-written entries (a crash) are dropped. */
static bool take_up(sample_cache_t *self, uint64_t n, uint64_t budget, const char *key)
{
    header_t *h = self->hdr;
    if (strncmp(h->magic, CACHE_MAGIC, sizeof h->magic) != 0 || h->nsamples != n ||
        h->budget != budget || strncmp(h->key, key, sizeof h->key) != 0)
        return false;
    uint64_t ready = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint32_t s = atomic_load(&self->entries[i].state);
        if (s == ENTRY_READY)
            ready++;
        else if (s != ENTRY_EMPTY)
            atomic_store(&self->entries[i].state, ENTRY_EMPTY);
    }
    atomic_store(&self->entries_ready, ready);
    return true;
}

static int open_file(sample_cache_t *self, const char *dir, char *err, size_t errlen)
{
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        err_set(err, errlen, "--cache %s: cannot create the folder: %s", dir, strerror(errno));
        return -1;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/samples.cache", dir);
    self->fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (self->fd < 0 || flock(self->fd, LOCK_EX | LOCK_NB) != 0) {
        err_set(err, errlen, "--cache %s: %s", path,
                self->fd < 0 ? strerror(errno) : "used by another loaderd (one per folder)");
        return -1;
    }
    struct stat st;
    bool fresh = fstat(self->fd, &st) != 0 || (size_t)st.st_size != self->total;
    if (fresh && (ftruncate(self->fd, 0) != 0 || ftruncate(self->fd, (off_t)self->total) != 0)) {
        err_set(err, errlen, "--cache %s: cannot size it to %zu bytes: %s", path, self->total,
                strerror(errno));
        return -1;
    }
    self->base = mmap(NULL, self->total, PROT_READ | PROT_WRITE, MAP_SHARED, self->fd, 0);
    if (self->base == MAP_FAILED) {
        self->base = NULL;
        err_set(err, errlen, "--cache %s: mmap of %zu bytes: %s", path, self->total,
                strerror(errno));
        return -1;
    }
    return 0;
}

sample_cache_t *sample_cache_new(const char *where, uint64_t nsamples, uint64_t budget,
                                 const char *key, char *err, size_t errlen)
{
    if (strlen(key) >= CACHE_KEY_MAX || nsamples == 0 || nsamples > ((uint64_t)1 << 36)) {
        err_set(err, errlen, "--cache: %llu samples or a key of %zu bytes is out of range",
                (unsigned long long)nsamples, strlen(key));
        return NULL;
    }
    sample_cache_t *self = calloc(1, sizeof *self);
    if (!self) {
        err_set(err, errlen, "--cache: out of memory");
        return NULL;
    }
    self->fd = -1;
    self->total = CACHE_HEADER + index_bytes(nsamples) + (size_t)budget;
    bool memory = strcmp(where, "memory") == 0;
    if (memory) {
        /* anonymous pages: only what is written is ever backed */
        self->base = mmap(NULL, self->total, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (self->base == MAP_FAILED) {
            self->base = NULL;
            err_set(err, errlen, "--cache memory: cannot reserve %zu bytes: %s", self->total,
                    strerror(errno));
        }
    } else if (open_file(self, where, err, errlen) < 0) {
        sample_cache_destroy(&self);
        return NULL;
    }
    if (!self->base) {
        sample_cache_destroy(&self);
        return NULL;
    }
    layout(self, nsamples);
    self->reused = !memory && take_up(self, nsamples, budget, key);
    if (!self->reused)
        init_header(self, nsamples, budget, key);
    return self;
}

void sample_cache_destroy(sample_cache_t **self_p)
{
    sample_cache_t *self = *self_p;
    if (!self)
        return;
    if (self->base) {
        if (self->fd >= 0)
            msync(self->base, self->total, MS_SYNC);   /* the next run takes it up */
        munmap(self->base, self->total);
    }
    if (self->fd >= 0)
        close(self->fd);
    free(self);
    *self_p = NULL;
}

bool sample_cache_get(sample_cache_t *self, uint64_t id, const cache_source_t *src, cached_t *out)
{
    entry_t *e = id < self->hdr->nsamples ? &self->entries[id] : NULL;
    if (!e || atomic_load_explicit(&e->state, memory_order_acquire) != ENTRY_READY ||
        e->src_size != src->size || e->src_mtime_ns != src->mtime_ns) {
        atomic_fetch_add(&self->misses, 1);
        return false;
    }
    *out = (cached_t){(int)e->w, (int)e->h, (int)e->c, self->data + e->offset};
    atomic_fetch_add(&self->hits, 1);
    return true;
}

bool sample_cache_put(sample_cache_t *self, uint64_t id, const cache_source_t *src, int w, int h,
                      int c, const uint8_t *px)
{
    if (id >= self->hdr->nsamples || w <= 0 || h <= 0 || c <= 0)
        return false;
    entry_t *e = &self->entries[id];
    uint32_t empty = ENTRY_EMPTY;
    if (!atomic_compare_exchange_strong(&e->state, &empty, ENTRY_WRITING))
        return false;   /* another thread has it (or it is there: a changed file stays uncached) */
    uint64_t len = (uint64_t)w * (uint64_t)h * (uint64_t)c;
    uint64_t at = atomic_fetch_add(&self->hdr->used, len);
    if (at + len > self->hdr->budget) {
        atomic_fetch_sub(&self->hdr->used, len);
        atomic_store(&e->state, ENTRY_EMPTY);
        return false;
    }
    memcpy(self->data + at, px, len);
    e->w = (uint32_t)w;
    e->h = (uint32_t)h;
    e->c = (uint32_t)c;
    e->offset = at;
    e->src_size = src->size;
    e->src_mtime_ns = src->mtime_ns;
    atomic_store_explicit(&e->state, ENTRY_READY, memory_order_release);
    atomic_fetch_add(&self->entries_ready, 1);
    return true;
}

sample_cache_stats_t sample_cache_stats(const sample_cache_t *self)
{
    sample_cache_t *s = (sample_cache_t *)self;   /* atomic loads of const data */
    return (sample_cache_stats_t){.hits = atomic_load(&s->hits),
                                  .misses = atomic_load(&s->misses),
                                  .entries = atomic_load(&s->entries_ready),
                                  .bytes = atomic_load(&s->hdr->used),
                                  .budget = s->hdr->budget,
                                  .reused = s->reused};
}
