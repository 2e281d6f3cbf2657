/* Ring all-reduce bandwidth of gpud's CPU path (ZeroMQ over ipc:// or tcp://)
 * against a plain memcpy of the same bytes, in the same run.
 *   allreduce_bench [WORLD] [FLOATS] [ITERS] [ipc|tcp]
 * Prints per-op time, algorithm bandwidth (bytes/time) and NCCL-style bus
 * bandwidth (2(W-1)/W bytes/time), and memcpy GB/s. */
#include "gpud/ring.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void endpoint(char *buf, size_t len, const char *kind, int base, int rank)
{
    if (strcmp(kind, "tcp") == 0)
        snprintf(buf, len, "tcp://127.0.0.1:%d", base + rank);
    else
        snprintf(buf, len, "ipc:///tmp/ddpipe-arbench-%d-%d", base, rank);
}

static int rank_main(int rank, int world, size_t n, int iters, const char *kind, int base, int out_fd)
{
    char mine[128], next[128], err[512];
    endpoint(mine, sizeof mine, kind, base, rank);
    endpoint(next, sizeof next, kind, base, (rank + 1) % world);
    allreduce_t *ar = allreduce_new(rank, world, mine, next, err, sizeof err);
    float *x = malloc(n * sizeof *x);
    if (!ar || !x) {
        fprintf(stderr, "rank %d: %s\n", rank, ar ? "out of memory" : err);
        return 1;
    }
    for (size_t i = 0; i < n; i++)
        x[i] = 1.0f / (float)(1 + (i + rank) % 97);
    if (allreduce_sum(ar, x, n, 60000, err, sizeof err) < 0) { /* warm-up: connections, pages */
        fprintf(stderr, "rank %d: %s\n", rank, err);
        return 1;
    }
    double t0 = now();
    for (int it = 0; it < iters; it++)
        if (allreduce_sum(ar, x, n, 60000, err, sizeof err) < 0) {
            fprintf(stderr, "rank %d: %s\n", rank, err);
            return 1;
        }
    double dt = (now() - t0) / iters;
    if (write(out_fd, &dt, sizeof dt) != sizeof dt)
        return 1;
    allreduce_destroy(&ar);
    free(x);
    return 0;
}

int main(int argc, char **argv)
{
    int world = argc > 1 ? atoi(argv[1]) : 2;
    size_t n = argc > 2 ? strtoull(argv[2], NULL, 10) : 11689512; /* resnet18's parameters */
    int iters = argc > 3 ? atoi(argv[3]) : 10;
    const char *kind = argc > 4 ? argv[4] : "ipc";
    int base = 20000 + getpid() % 20000;
    int fds[2];
    if (world < 1 || world > 16 || pipe(fds) < 0)
        return 2;
    for (int r = 0; r < world; r++)
        if (fork() == 0)
            exit(rank_main(r, world, n, iters, kind, base, fds[1]));
    double worst = 0;
    for (int r = 0; r < world; r++) {
        double dt;
        if (read(fds[0], &dt, sizeof dt) != sizeof dt) {
            fprintf(stderr, "a rank failed\n");
            return 1;
        }
        worst = dt > worst ? dt : worst;
    }
    for (int r = 0; r < world; r++)
        wait(NULL);
    double bytes = (double)n * sizeof(float);
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    memset(a, 1, n * sizeof *a);
    memset(b, 0, n * sizeof *b);
    memcpy(b, a, n * sizeof *a);
    double t0 = now();
    for (int it = 0; it < iters; it++) {
        memcpy(it % 2 ? a : b, it % 2 ? b : a, n * sizeof *a);
    }
    double mc = (now() - t0) / iters;
    printf("allreduce world %d, %zu floats (%.1f MB) over %s: %.1f ms/op, algbw %.2f GB/s, busbw %.2f GB/s; "
           "memcpy of the same bytes %.2f ms = %.2f GB/s; allreduce/memcpy time %.1fx\n",
           world, n, bytes / 1e6, kind, worst * 1e3, bytes / worst / 1e9,
           bytes / worst / 1e9 * 2.0 * (world - 1) / world, mc * 1e3, bytes / mc / 1e9, worst / mc);
    free(a);
    free(b);
    return 0;
}
