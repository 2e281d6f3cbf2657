/* decode_limit — the machine's JPEG decode limit: read each file of an
 * ImageFolder and decode it with libjpeg-turbo at the DCT scale the loader
 * would use for Resize(R), on T threads, doing nothing else (no resize, no
 * crop, no batching, no socket). The loader's throughput is judged as a
 * fraction of this rate, measured in the same run (≥ 90 %: docs/DESIGN.md
 * "Quality bars").
 *
 *   decode_limit DATA [--threads T] [--resize R] [--epochs E]
 *
 * The scale rule is the loader's (loaderd/decode.c pick_scale): the
 * smallest TurboJPEG factor whose output still covers the resized size,
 * used only when the source is at least twice that size. One warm-up epoch
 * (page cache), then E timed epochs. Prints the wall-clock rate and the CPU
 * time per image of the whole process (the steadier figure on a shared
 * machine). Each thread keeps one decompressor and reuses its buffers: the
 * limit is the decode, not the allocator. */
#include "common/clock.h"
#include "common/dataset.h"
#include "common/flags.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>

typedef struct {
    const dataset_t *ds;
    long resize;
    atomic_ullong next;     /* the next sample id to decode, shared by the threads */
    uint64_t n;
    atomic_int failed;
} job_t;

typedef struct {
    uint8_t *file, *px;
    size_t file_cap, px_cap;
} bufs_t;

static int read_file(const char *path, bufs_t *b, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    if (size <= 0) {
        fclose(f);
        return -1;
    }
    if ((size_t)size > b->file_cap) {
        free(b->file);
        b->file_cap = (size_t)size;
        if (!(b->file = malloc(b->file_cap))) {
            fclose(f);
            return -1;
        }
    }
    *len = fread(b->file, 1, (size_t)size, f);
    fclose(f);
    return *len == (size_t)size ? 0 : -1;
}

/* The loader's rule: smallest factor still covering the shorter side's
 * target (and the longer side's, scaled alike), only from twice the size. */
static tjscalingfactor pick_scale(int w, int h, long resize)
{
    tjscalingfactor best = {1, 1};
    if (resize <= 0)
        return best;
    long mw = w <= h ? resize : (long)((double)w * resize / h);
    long mh = w <= h ? (long)((double)h * resize / w) : resize;
    if (w < 2 * mw || h < 2 * mh)
        return best;
    int n = 0;
    tjscalingfactor *sf = tjGetScalingFactors(&n);
    for (int i = 0; sf && i < n; i++) {
        int sw = TJSCALED(w, sf[i]), sh = TJSCALED(h, sf[i]);
        if (sf[i].num < sf[i].denom && sw >= mw && sh >= mh &&
            (long long)sw * sh < (long long)TJSCALED(w, best) * TJSCALED(h, best))
            best = sf[i];
    }
    return best;
}

static int decode_one(tjhandle tj, job_t *j, uint64_t id, bufs_t *b)
{
    char path[4096];
    size_t len;
    snprintf(path, sizeof path, "%s/%s", dataset_root(j->ds), dataset_path(j->ds, id));
    int w, h, ss, cs;
    if (read_file(path, b, &len) != 0 ||
        tjDecompressHeader3(tj, b->file, (unsigned long)len, &w, &h, &ss, &cs) != 0)
        return -1;
    tjscalingfactor sf = pick_scale(w, h, j->resize);
    int ow = TJSCALED(w, sf), oh = TJSCALED(h, sf);
    size_t need = (size_t)ow * oh * 3;
    if (need > b->px_cap) {
        free(b->px);
        b->px_cap = need;
        if (!(b->px = malloc(need)))
            return -1;
    }
    int pf = cs == TJCS_GRAY ? TJPF_GRAY : TJPF_RGB;
    int rc = tjDecompress2(tj, b->file, (unsigned long)len, b->px, ow, 0, oh, pf, 0);
    return rc != 0 && tjGetErrorCode(tj) != TJERR_WARNING ? -1 : 0;
}

static void *worker(void *arg)
{
    job_t *j = arg;
    tjhandle tj = tjInitDecompress();
    bufs_t b = {0};
    for (uint64_t id; tj && (id = atomic_fetch_add(&j->next, 1)) < j->n;)
        if (decode_one(tj, j, id, &b) != 0)
            atomic_fetch_add(&j->failed, 1);
    if (tj)
        tjDestroy(tj);
    else
        atomic_fetch_add(&j->failed, 1);
    free(b.file);
    free(b.px);
    return NULL;
}

static int run_epoch(job_t *j, long threads)
{
    pthread_t tid[256];
    atomic_store(&j->next, 0);
    for (long t = 0; t < threads; t++)
        if (pthread_create(&tid[t], NULL, worker, j) != 0)
            return -1;
    for (long t = 0; t < threads; t++)
        pthread_join(tid[t], NULL);
    return 0;
}

int main(int argc, char **argv)
{
    long threads = 1, resize = 0, epochs = 3;
    for (int i = 2; i + 1 < argc; i += 2) {
        int rc = strcmp(argv[i], "--threads") == 0  ? flags_long("threads", argv[i + 1], 1, 256, &threads)
                 : strcmp(argv[i], "--resize") == 0 ? flags_long("resize", argv[i + 1], 0, 16384, &resize)
                 : strcmp(argv[i], "--epochs") == 0 ? flags_long("epochs", argv[i + 1], 1, 1000, &epochs)
                                                     : -1;
        if (rc != 0)
            argc = 0;
    }
    if (argc < 2 || argc % 2 != 0) {
        fprintf(stderr, "usage: decode_limit DATA [--threads T] [--resize R] [--epochs E]\n");
        return 2;
    }
    char err[512];
    dataset_t *ds = dataset_open(argv[1], err, sizeof err);
    if (!ds) {
        fprintf(stderr, "decode_limit: %s\n", err);
        return 1;
    }
    job_t j = {.ds = ds, .resize = resize, .n = dataset_size(ds)};
    run_epoch(&j, threads);   /* warm-up: page cache */
    atomic_store(&j.failed, 0);
    double c0 = clock_cpu_s(), t0 = clock_mono_s();
    for (long e = 0; e < epochs; e++)
        if (run_epoch(&j, threads) != 0) {
            fprintf(stderr, "decode_limit: cannot start threads\n");
            return 1;
        }
    double wall = clock_mono_s() - t0, cpu = clock_cpu_s() - c0;
    double imgs = (double)j.n * (double)epochs;
    printf("decode limit (%ld threads, Resize(%ld) DCT scale): %.1f img/s, %.3f CPU ms/img, "
           "%d failed\n", threads, resize, imgs / wall, 1e3 * cpu / imgs, atomic_load(&j.failed));
    dataset_destroy(&ds);
    return atomic_load(&j.failed) ? 1 : 0;
}
