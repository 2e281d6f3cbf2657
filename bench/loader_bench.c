/* loader_bench — ddpipe's loader pipeline (read, decode, resize, center crop
 * to uint8 CHW batches) on a pool of T threads, in images per second.
 *
 *   loader_bench DATA [--threads T] [--batch B] [--resize R] [--crop C]
 *                [--channels 1|3] [--dct 0|1] [--epochs E]
 *
 * One warm-up epoch (page cache, allocator), then E timed epochs. Prints
 * one line with the wall-clock rate (img/s), the CPU time per image of the
 * whole process (fair on a shared machine, where T threads and T + 1
 * processes get different shares), and a checksum of the pixels (the
 * same as loader_torch.py's, so equal numbers mean equal pixels). */
#include "common/clock.h"
#include "common/dataset.h"
#include "common/flags.h"
#include "loaderd/pool.h"
#include "common/image/transform.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

typedef struct {
    const dataset_t *ds;
    const transform_t *t;
    uint8_t *batch;
    size_t sample_bytes;
    uint64_t first;
    int h, w;
    int *fail_slot; /* one per batch slot, so workers never share a counter */
} batch_ctx_t;

static void load_one(void *arg, int i)
{
    batch_ctx_t *b = arg;
    char err[512];
    uint64_t id = b->first + (uint64_t)i;
    if (sample_load(b->ds, id, b->t, b->batch + (size_t)i * b->sample_bytes, b->h, b->w, err,
                    sizeof err) != 0) {
        fprintf(stderr, "loader_bench: %s: %s\n", dataset_path(b->ds, id), err);
        b->fail_slot[i] = 1;
    }
}

/* CPU seconds of the whole process (all threads), user + system. */
static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec * 1e-6;
}

/* Sum of every 7th row and column of every channel: the same number as
 * loader_torch.py's x[:, :, ::7, ::7].sum(), so equal checksums show equal
 * pixels (with --dct 0). */
static uint64_t checksum(const batch_ctx_t *b, int count)
{
    uint64_t sum = 0;
    size_t plane = (size_t)b->h * b->w;
    for (int i = 0; i < count; i++)
        for (size_t c = 0; c < b->sample_bytes / plane; c++) {
            const uint8_t *p = b->batch + (size_t)i * b->sample_bytes + c * plane;
            for (int y = 0; y < b->h; y += 7)
                for (int x = 0; x < b->w; x += 7)
                    sum += p[(size_t)y * b->w + x];
        }
    return sum;
}

/* One pass over the dataset; returns failed samples, adds pixels to *sum. */
static int run_epoch(pool_t *pool, batch_ctx_t *b, int bs, uint64_t *sum)
{
    uint64_t n = dataset_size(b->ds);
    int failed = 0;
    for (b->first = 0; b->first < n; b->first += (uint64_t)bs) {
        int count = n - b->first < (uint64_t)bs ? (int)(n - b->first) : bs;
        memset(b->fail_slot, 0, (size_t)bs * sizeof *b->fail_slot);
        pool_for(pool, count, load_one, b);
        for (int i = 0; i < count; i++)
            failed += b->fail_slot[i];
        *sum += checksum(b, count);
    }
    return failed;
}

int main(int argc, char **argv)
{
    long threads = 2, bs = 32, resize = 256, crop = 224, channels = 3, dct = 0, epochs = 3;
    const char *data = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int rc = 0;
        if (!strcmp(a, "--threads"))
            rc = flags_long("threads", v, 1, 256, &threads);
        else if (!strcmp(a, "--batch"))
            rc = flags_long("batch", v, 1, 4096, &bs);
        else if (!strcmp(a, "--resize"))
            rc = flags_long("resize", v, 0, 65535, &resize);
        else if (!strcmp(a, "--crop"))
            rc = flags_long("crop", v, 0, 65535, &crop);
        else if (!strcmp(a, "--channels"))
            rc = flags_long("channels", v, 1, 3, &channels);
        else if (!strcmp(a, "--dct"))
            rc = flags_long("dct", v, 0, 1, &dct);
        else if (!strcmp(a, "--epochs"))
            rc = flags_long("epochs", v, 1, 1000, &epochs);
        else if (!data && a[0] != '-') {
            data = a;
            continue;
        } else {
            fprintf(stderr, "usage: loader_bench DATA [--threads T] [--batch B] [--resize R] "
                            "[--crop C] [--channels 1|3] [--dct 0|1] [--epochs E]\n");
            return 2;
        }
        if (rc != 0)
            return 2;
        i++;
    }
    if (!data) {
        fprintf(stderr, "loader_bench: DATA is required\n");
        return 2;
    }
    char err[512];
    dataset_t *ds = dataset_open(data, err, sizeof err);
    if (!ds) {
        fprintf(stderr, "loader_bench: %s\n", err);
        return 1;
    }
    transform_t t = {(int)resize, (int)crop, (int)crop, (int)channels, (int)dct};
    batch_ctx_t b = {.ds = ds, .t = &t};
    pool_t *pool = pool_new((int)threads);
    int rc = 1;
    if (!pool)
        fprintf(stderr, "loader_bench: cannot start %ld threads\n", threads);
    else if (transform_output_hw(&t, ds, &b.h, &b.w, err, sizeof err) != 0)
        fprintf(stderr, "loader_bench: %s\n", err);
    else {
        b.sample_bytes = (size_t)channels * b.h * b.w;
        b.batch = malloc((size_t)bs * b.sample_bytes);
        b.fail_slot = calloc((size_t)bs, sizeof *b.fail_slot);
        if (b.batch && b.fail_slot) {
            uint64_t sum = 0;
            int failed = run_epoch(pool, &b, (int)bs, &sum); /* warm-up */
            double t0 = clock_mono_s(), c0 = cpu_seconds();
            for (long e = 0; e < epochs; e++)
                failed += run_epoch(pool, &b, (int)bs, &sum);
            double dt = clock_mono_s() - t0, cpu = cpu_seconds() - c0;
            double n = (double)dataset_size(ds) * epochs;
            printf("ddpipe loader: %llu images x %ld epochs, %ld threads, batch %ld, %dx%d: "
                   "%.1f img/s, %.2f CPU ms/img (checksum %" PRIu64 ", failed %d)\n",
                   (unsigned long long)dataset_size(ds), epochs, threads, bs, b.w, b.h, n / dt,
                   cpu / n * 1e3, sum, failed);
            rc = failed ? 1 : 0;
        } else {
            fprintf(stderr, "loader_bench: out of memory\n");
        }
        free(b.batch);
        free(b.fail_slot);
    }
    pool_destroy(&pool);
    dataset_destroy(&ds);
    return rc;
}
