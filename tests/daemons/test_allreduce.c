/* gpud's ring all-reduce across real processes over real sockets: exact
 * (the ring's fixed order, reproduced here), identical on every rank, any
 * world size and length (empty chunks too), and a dead rank is an error
 * naming it within the timeout, not a hang. */
#include "gpud/daemon_allreduce.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char s_dir[256];

static float value(int rank, size_t i)
{
    /* values of mixed magnitude so the order of additions matters */
    uint32_t h = (uint32_t)(rank * 2654435761u) ^ (uint32_t)(i * 40503u);
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    return ((float)(h % 200001) - 100000.0f) * (h & 1 ? 1e-3f : 7.0f);
}

/* The sum exactly as the ring adds it: x[c], + x[c+1], ..., + x[c+W-1]. */
static float ring_sum(int world, size_t n, size_t i)
{
    int c = 0;
    while (allreduce_chunk_offset(n, world, c + 1) <= i)
        c++;
    float acc = value(c, i);
    for (int k = 1; k < world; k++)
        acc = value((c + k) % world, i) + acc;
    return acc;
}

static void ep(char *buf, size_t len, int rank) { snprintf(buf, len, "ipc://%s/ar%d", s_dir, rank); }

/* Child: all-reduce, then write the result to a file for the parent. */
static int child(int rank, int world, size_t n, int die)
{
    char mine[300], next[300], err[512];
    ep(mine, sizeof mine, rank);
    ep(next, sizeof next, (rank + 1) % world);
    allreduce_t *ar = allreduce_new(rank, world, mine, next, err, sizeof err);
    if (!ar) {
        fprintf(stderr, "rank %d: %s\n", rank, err);
        return 2;
    }
    if (die > 0)
        _exit(0); /* a rank that vanishes before the operation */
    float *x = malloc((n ? n : 1) * sizeof *x);
    for (size_t i = 0; i < n; i++)
        x[i] = value(rank, i);
    int rc = allreduce_sum(ar, x, n, die < 0 ? 1500 : 20000, err, sizeof err);
    if (rc < 0) {
        fprintf(stderr, "rank %d: %s\n", rank, err);
        allreduce_destroy(&ar);
        free(x);
        return strstr(err, "is it dead?") ? 3 : 1;
    }
    char path[300];
    snprintf(path, sizeof path, "%s/out%d", s_dir, rank);
    FILE *f = fopen(path, "wb");
    fwrite(x, sizeof *x, n, f);
    fclose(f);
    allreduce_destroy(&ar);
    free(x);
    return 0;
}

static int run(int world, size_t n, int dead_rank)
{
    pid_t pids[16];
    for (int r = 0; r < world; r++) {
        pids[r] = fork();
        if (pids[r] == 0)
            exit(child(r, world, n, dead_rank < 0 ? 0 : (r == dead_rank ? 1 : -1))); /* exit: flush zmq */
    }
    int fails = 0;
    for (int r = 0; r < world; r++) {
        int st;
        waitpid(pids[r], &st, 0);
        int code = WIFEXITED(st) ? WEXITSTATUS(st) : 99;
        int want = dead_rank < 0 ? 0 : (r == dead_rank ? 0 : 3);
        /* with a dead rank, only its ring neighbour is sure to time out; the
         * others may finish their first step or time out too */
        if (dead_rank >= 0 && r != dead_rank && r == (dead_rank + 1) % world && code != 3) {
            fprintf(stderr, "world %d: rank %d after a dead neighbour exited %d, want 3\n", world, r, code);
            fails++;
        } else if (dead_rank < 0 && code != want) {
            fprintf(stderr, "world %d n %zu: rank %d exited %d\n", world, n, r, code);
            fails++;
        }
    }
    if (dead_rank >= 0 || fails)
        return fails;
    float *ref = malloc((n ? n : 1) * sizeof *ref), *got = malloc((n ? n : 1) * sizeof *got);
    for (size_t i = 0; i < n; i++)
        ref[i] = ring_sum(world, n, i);
    for (int r = 0; r < world && !fails; r++) {
        char path[300];
        snprintf(path, sizeof path, "%s/out%d", s_dir, r);
        FILE *f = fopen(path, "rb");
        size_t got_n = f ? fread(got, sizeof *got, n, f) : 0;
        if (f)
            fclose(f);
        if (got_n != n || memcmp(got, ref, n * sizeof *got) != 0) {
            fprintf(stderr, "world %d n %zu: rank %d's sum differs from the ring order\n", world, n, r);
            fails++;
        }
        double worst = 0;
        for (size_t i = 0; i < n; i++) {
            double d = 0, mag = 0;
            for (int k = 0; k < world; k++) {
                d += value(k, i);
                mag += fabs(value(k, i));
            }
            double e = fabs(got[i] - d) / (mag > 0 ? mag : 1);
            worst = e > worst ? e : worst;
        }
        if (worst > 1e-6) {
            fprintf(stderr, "world %d: rank %d off the exact sum by %g (relative)\n", world, r, worst);
            fails++;
        }
    }
    free(ref);
    free(got);
    return fails;
}

int main(void)
{
    snprintf(s_dir, sizeof s_dir, "/tmp/ddpipe-ar-%d", (int)getpid());
    char cmd[300];
    snprintf(cmd, sizeof cmd, "mkdir -p %s", s_dir);
    if (system(cmd) != 0)
        return 1;
    struct { int world; size_t n; } cases[] = {{1, 10}, {2, 1}, {2, 1000}, {3, 2}, {3, 1001},
                                              {4, 100003}, {5, 3}, {3, 0}};
    int fails = 0, total = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++, total++)
        fails += run(cases[i].world, cases[i].n, -1) != 0;
    fails += run(3, 5000, 1) != 0; /* rank 1 dies: rank 2 times out naming it */
    total++;
    snprintf(cmd, sizeof cmd, "rm -rf %s", s_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", s_dir);
    printf("%d passed, %d failed\n", total - fails, fails);
    return fails != 0;
}
