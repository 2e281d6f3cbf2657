/* gpud's ring all-reduce across real processes over real sockets: exact
 * (the ring's fixed order, reproduced here), identical on every rank, any
 * world size and length (empty chunks too), and a dead rank is an error
 * naming it within the timeout, not a hang. The split API (bind to
 * tcp://127.0.0.1:0, publish the resolved endpoint, connect later, as gpud
 * does around JOIN/WELCOME) gives the same bytes, a cancel callback ends a
 * wait at once instead of after the timeout (told apart from a timeout), and
 * a ring of 3 that lost a rank re-forms as a new generation of 2 whose sum is
 * exactly a 2-rank ring's (docs/ELASTIC.md). allreduce_sum_f64 after the
 * float sum: the exact ring-order double sums on every rank. */
#include "gpud/ring.h"
#include "common/errbuf.h"

#include <math.h>
#include <stdbool.h>
#include <signal.h>
#include <time.h>
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
/* Rank r's result file into got (up to n floats); how many were read. */
static size_t read_out(int r, float *got, size_t n)
{
    char path[300];
    snprintf(path, sizeof path, "%s/out%d", s_dir, r);
    FILE *f = fopen(path, "rb");
    size_t got_n = f ? fread(got, sizeof *got, n, f) : 0;
    if (f)
        fclose(f);
    return got_n;
}

/* The chunk element i of an n-array lies in (the ring sums it from there). */
static int chunk_of(int world, size_t n, size_t i)
{
    int c = 0;
    while (allreduce_chunk_offset(n, world, c + 1) <= i)
        c++;
    return c;
}

static float ring_sum(int world, size_t n, size_t i)
{
    int c = chunk_of(world, n, i);
    float acc = value(c, i);
    for (int k = 1; k < world; k++)
        acc = value((c + k) % world, i) + acc;
    return acc;
}

/* allreduce_sum_f64's values: not float-representable, so a float sum on
 * the way would show. */
static double dvalue(int rank, size_t i) { return value(rank, i) * (1.0 + 1e-10 * (rank + 1)); }

static double ring_sum_f64(int world, size_t n, size_t i)
{
    int c = chunk_of(world, n, i);
    double acc = dvalue(c, i);
    for (int k = 1; k < world; k++)
        acc = dvalue((c + k) % world, i) + acc;
    return acc;
}

/* The doubles: rank r's file is exactly the ring-order double sum. */
static int check_f64(int world, size_t n)
{
    double *got = malloc((n ? n : 1) * sizeof *got);
    int fails = 0;
    for (int r = 0; r < world && !fails; r++) {
        char path[300];
        snprintf(path, sizeof path, "%s/out%d.f64", s_dir, r);
        FILE *f = fopen(path, "rb");
        size_t got_n = f ? fread(got, sizeof *got, n, f) : 0;
        if (f)
            fclose(f);
        for (size_t i = 0; got_n == n && i < n && !fails; i++)
            fails += got[i] != ring_sum_f64(world, n, i);
        if (got_n != n || fails) {
            fprintf(stderr, "world %d n %zu: rank %d's double sum differs\n", world, n, r);
            fails = 1;
        }
    }
    free(got);
    return fails;
}

static void ep(char *buf, size_t len, int rank) { snprintf(buf, len, "ipc://%s/ar%d", s_dir, rank); }

static int s_split;                       /* 1: bind tcp port 0 and exchange endpoints */
static volatile sig_atomic_t s_cancel;    /* set by SIGUSR1 in a child */

/* The cancel callback: its ctx is the reason it gives once SIGUSR1 came. */
static const char *cancelled(void *ctx) { return s_cancel ? ctx : NULL; }
static void on_usr1(int sig) { (void)sig; s_cancel = 1; }

/* Publishes rank's resolved endpoint (atomically, via rename) and reads
 * rank next's, waiting for it: what reducerd's JOIN/WELCOME does in gpud. */
static int exchange(int rank, int next, const char *mine, char *theirs, size_t len)
{
    char tmp[300], path[300];
    snprintf(tmp, sizeof tmp, "%s/ep%d.tmp", s_dir, rank);
    snprintf(path, sizeof path, "%s/ep%d", s_dir, rank);
    FILE *f = fopen(tmp, "w");
    if (!f || fprintf(f, "%s", mine) < 0 || fclose(f) != 0 || rename(tmp, path) != 0)
        return -1;
    snprintf(path, sizeof path, "%s/ep%d", s_dir, next);
    for (int tries = 0; tries < 1000; tries++) {   /* 10 s at most */
        f = fopen(path, "r");
        if (f) {
            int ok = fgets(theirs, (int)len, f) != NULL;
            fclose(f);
            return ok ? 0 : -1;
        }
        nanosleep(&(struct timespec){0, 10000000}, NULL);
    }
    return -1;
}

static allreduce_t *open_ring(int rank, int world, char *err, size_t errlen)
{
    char mine[300], next[300];
    if (!s_split) {
        ep(mine, sizeof mine, rank);
        ep(next, sizeof next, (rank + 1) % world);
        return allreduce_new(rank, world, mine, next, err, errlen);
    }
    allreduce_t *ar = allreduce_bind("tcp://127.0.0.1:0", mine, sizeof mine, err, errlen);
    if (!ar)
        return NULL;
    if (strncmp(mine, "tcp://127.0.0.1:", 16) != 0 || atoi(mine + 16) <= 0) {
        err_set(err, errlen, "bind resolved to '%s', want tcp://127.0.0.1:<port>", mine);
        allreduce_destroy(&ar);
        return NULL;
    }
    if (allreduce_rank(ar) != -1 ||
        exchange(rank, (rank + 1) % world, mine, next, sizeof next) < 0 ||
        allreduce_connect(ar, rank, world, next, err, errlen) < 0 ||
        allreduce_rank(ar) != rank || allreduce_world(ar) != world) {
        if (!err[0])
            err_set(err, errlen, "endpoint exchange or connect failed");
        allreduce_destroy(&ar);
        return NULL;
    }
    return ar;
}

/* Child: all-reduce, then write the result to a file for the parent. */
static int child(int rank, int world, size_t n, int die)
{
    char err[512] = "";
    allreduce_t *ar = open_ring(rank, world, err, sizeof err);
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
        int prev = (rank + world - 1) % world;
        int timed_out = strstr(err, "is it dead?") && allreduce_failure(ar) == ALLREDUCE_TIMEOUT &&
                        allreduce_suspect(ar) == prev;
        allreduce_destroy(&ar);
        free(x);
        return timed_out ? 3 : 1;
    }
    char path[300];
    snprintf(path, sizeof path, "%s/out%d", s_dir, rank);
    FILE *f = fopen(path, "wb");
    fwrite(x, sizeof *x, n, f);
    fclose(f);
    free(x);
    /* then the same ring sums doubles (SyncBatchNorm's statistics) */
    double *d = malloc((n ? n : 1) * sizeof *d);
    for (size_t i = 0; i < n; i++)
        d[i] = dvalue(rank, i);
    rc = allreduce_sum_f64(ar, d, n, 20000, err, sizeof err);
    snprintf(path, sizeof path, "%s/out%d.f64", s_dir, rank);
    if (rc == 0 && (f = fopen(path, "wb"))) {
        fwrite(d, sizeof *d, n, f);
        fclose(f);
    } else {
        fprintf(stderr, "rank %d: double sum: %s\n", rank, err);
    }
    allreduce_destroy(&ar);
    free(d);
    return rc < 0 ? 1 : 0;
}

static int run(int world, size_t n, int dead_rank)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -f %s/ep* %s/out*", s_dir, s_dir);
    if (system(cmd) != 0)
        return 1;
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
        size_t got_n = read_out(r, got, n);
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
    return fails + check_f64(world, n);
}

/* Writes rank's result where the parent reads it. */
static void write_out(int rank, const float *x, size_t n)
{
    char path[300];
    snprintf(path, sizeof path, "%s/out%d", s_dir, rank);
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(x, sizeof *x, n, f);
        fclose(f);
    }
}

/* Child of reform_case: old rank 1 vanishes; 0 and 2 time out, re-form as
 * generation 1 (0 -> 0, 2 -> 1, world 2) and sum again. */
static int reform_child(int rank, size_t n)
{
    char err[512] = "", next[300];
    allreduce_t *ar = open_ring(rank, 3, err, sizeof err);
    if (!ar) {
        fprintf(stderr, "rank %d: %s\n", rank, err);
        return 2;
    }
    if (rank == 1)
        _exit(0);
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++)
        x[i] = value(rank, i);
    int code = 0;
    if (allreduce_sum(ar, x, n, 1500, err, sizeof err) == 0 ||
        allreduce_failure(ar) != ALLREDUCE_TIMEOUT)
        code = 4;
    int nr = rank == 0 ? 0 : 1;
    ep(next, sizeof next, rank == 0 ? 2 : 0);
    if (!code && allreduce_reform(ar, 1, nr, 2, next, err, sizeof err) < 0)
        code = 5;
    for (size_t i = 0; i < n; i++)
        x[i] = value(nr, i);
    if (!code && (allreduce_sum(ar, x, n, 20000, err, sizeof err) < 0 || allreduce_gen(ar) != 1))
        code = 6;
    if (code)
        fprintf(stderr, "reform: rank %d failed (%d): %s\n", rank, code, err);
    else
        write_out(nr, x, n);
    allreduce_destroy(&ar);
    free(x);
    return code;
}

/* A reform from 3 ranks to 2 sums exactly as a 2-rank ring does. */
static int reform_case(size_t n)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -f %s/ep* %s/out*", s_dir, s_dir);
    if (system(cmd) != 0)
        return 1;
    pid_t pids[3];
    for (int r = 0; r < 3; r++) {
        pids[r] = fork();
        if (pids[r] == 0)
            exit(reform_child(r, n));
    }
    int fails = 0;
    for (int r = 0; r < 3; r++) {
        int st;
        waitpid(pids[r], &st, 0);
        fails += !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    }
    float *got = malloc(n * sizeof *got);
    for (int r = 0; r < 2 && !fails; r++) {
        size_t got_n = read_out(r, got, n);
        for (size_t i = 0; i < n && got_n == n; i++)
            got_n -= got[i] != ring_sum(2, n, i);
        if (got_n != n) {
            fprintf(stderr, "reform 3 -> 2: new rank %d's sum differs from a 2-rank ring's\n", r);
            fails++;
        }
    }
    free(got);
    if (fails)
        fprintf(stderr, "reform 3 -> 2: %d failures\n", fails);
    return fails;
}

/* A rank whose peer never sends: SIGUSR1 (the cancel callback) must end
 * its wait long before the 30 s timeout, with the callback's reason
 * ("membership changed", as gpud's when MEMBERS arrives), told apart from
 * a timeout by allreduce_failure. */
static int cancel_case(void)
{
    int fds[2];
    if (pipe(fds) < 0)
        return 1;
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGUSR1, on_usr1);
        char mine[300], err[512] = "";
        allreduce_t *ar = allreduce_bind("tcp://127.0.0.1:0", mine, sizeof mine, err, sizeof err);
        /* rank 0 of 2 whose next is itself: nothing is ever sent to it by rank 1 */
        int ok = ar && allreduce_connect(ar, 0, 2, "tcp://127.0.0.1:1", err, sizeof err) == 0;
        if (ar)
            allreduce_set_cancel(ar, cancelled, (void *)"membership changed");
        char c = ok ? 'r' : 'x';
        if (write(fds[1], &c, 1) != 1)
            _exit(5);
        float x[4] = {1, 2, 3, 4};
        int rc = ok ? allreduce_sum(ar, x, 4, 30000, err, sizeof err) : -1;
        bool why = ar && allreduce_failure(ar) == ALLREDUCE_CANCELLED && allreduce_suspect(ar) < 0;
        allreduce_destroy(&ar);
        if (rc == 0 || !why || !strstr(err, "membership changed")) {
            fprintf(stderr, "cancel: rc %d, err '%s', want 'membership changed'\n", rc, err);
            _exit(1);
        }
        _exit(0);
    }
    char c = 0;
    if (read(fds[0], &c, 1) != 1 || c != 'r') {
        fprintf(stderr, "cancel: child could not set up its ring\n");
        kill(pid, SIGKILL);
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    nanosleep(&(struct timespec){0, 300000000}, NULL);
    kill(pid, SIGUSR1);
    int st = 0;
    waitpid(pid, &st, 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double dt = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
    close(fds[0]);
    close(fds[1]);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || dt > 5.0) {
        fprintf(stderr, "cancel: child exit %d after %.2fs, want 0 within 5s\n",
                WIFEXITED(st) ? WEXITSTATUS(st) : -1, dt);
        return 1;
    }
    return 0;
}

/* Errors a caller can make: sum before connect, rank out of range, connect
 * twice, a bind to a bad endpoint. Each fails with a message. */
static int misuse_case(void)
{
    char ep_[300], err[512] = "";
    int fails = 0;
    float x[2] = {0, 0};
    allreduce_t *ar = allreduce_bind("tcp://127.0.0.1:0", ep_, sizeof ep_, err, sizeof err);
    if (!ar)
        return 1;
    err[0] = 0;
    fails += allreduce_sum(ar, x, 2, 100, err, sizeof err) == 0 || !strstr(err, "not connected");
    err[0] = 0;
    fails += allreduce_connect(ar, 2, 2, ep_, err, sizeof err) == 0 || !err[0];
    fails += allreduce_connect(ar, 0, 2, ep_, err, sizeof err) != 0;
    err[0] = 0;
    fails += allreduce_connect(ar, 0, 2, ep_, err, sizeof err) == 0 || !strstr(err, "already");
    allreduce_destroy(&ar);
    err[0] = 0;
    ar = allreduce_bind("bogus://x", ep_, sizeof ep_, err, sizeof err);
    fails += ar != NULL || !strstr(err, "cannot bind");
    allreduce_destroy(&ar);
    if (fails)
        fprintf(stderr, "misuse: %d checks failed (last error '%s')\n", fails, err);
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
    s_split = 1;
    struct { int world; size_t n; } split[] = {{1, 7}, {2, 1000}, {3, 1001}, {4, 3}};
    for (size_t i = 0; i < sizeof split / sizeof split[0]; i++, total++)
        fails += run(split[i].world, split[i].n, -1) != 0;
    fails += cancel_case() != 0;
    total++;
    s_split = 0;
    fails += reform_case(1001) != 0;
    total++;
    fails += misuse_case() != 0;
    total++;
    snprintf(cmd, sizeof cmd, "rm -rf %s", s_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", s_dir);
    printf("%d passed, %d failed\n", total - fails, fails);
    return fails != 0;
}
