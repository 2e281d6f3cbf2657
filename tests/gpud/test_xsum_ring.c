/* gpud/xsum_ring: exact sums across ranks (issue 31). The same multiset of
 * contributions (12 "chunks" of random float vectors of a wide range, into
 * 3 segments) is split over W = 1, 2, 3, 4 ranks in threads over a real
 * ring (ipc) in several ways (contiguous runs of chunks as loaderd deals
 * them, round-robin, random with empty ranks); each rank adds its chunks
 * into an xsum and calls xsum_allreduce. Every rank's xsum_get_f32 must be
 * bitwise equal for every W and split, and equal to one process adding all
 * the chunks. The same data summed as floats and all-reduced with
 * allreduce_sum must differ between some W: the data shows the order, so
 * the test could fail. A chunk with an infinity on one rank makes that
 * segment NaN on every rank and leaves the others exact.
 */
#include "gpud/xsum_ring.h"

#include <czmq.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tcheck.h"

#define MAXW 4
#define NCHUNK 12
#define NSEG 3
static const size_t LEN[NSEG] = {257, 9, 1};
#define NTOT (257 + 9 + 1)

static char s_dir[128];
static int s_run;   /* endpoint names of each ring apart */

static uint64_t mix(uint64_t z)
{
    z += 0x9e3779b97f4a7c15u;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/* Chunk c's value for element i of segment g: a float of 2^-60 .. 2^64,
 * either sign, some zeros; chunk `inf_chunk` puts an infinity in segment 1. */
static float value(int c, int g, size_t i, int inf_chunk)
{
    if (c == inf_chunk && g == 1 && i == 3)
        return -INFINITY;
    uint64_t h = mix((uint64_t)c << 40 ^ (uint64_t)g << 32 ^ i);
    if (h % 13 == 0)
        return 0.0f;
    float m = 1.0f + (float)(h >> 40 & 0xffffff) / 16777216.0f;
    float v = ldexpf(m, (int)(h >> 8 & 127) - 60);
    return h & 1 ? -v : v;
}

static void chunk_vec(int c, int g, float *out, int inf_chunk)
{
    for (size_t i = 0; i < LEN[g]; i++)
        out[i] = value(c, g, i, inf_chunk);
}

typedef struct {
    int rank, world, rc, inf_chunk;
    uint64_t sent;         /* xsum_allreduce_sent */
    int chunks[NCHUNK], nchunks;
    float exact[NTOT];     /* xsum_get_f32 of every segment, concatenated */
    float naive[NTOT];     /* float sums all-reduced with allreduce_sum */
    char err[512];
} rank_t;

static void ep(char *buf, size_t len, int run, int rank)
{
    snprintf(buf, len, "ipc://%s/run%d_r%d", s_dir, run, rank);
}

static void *rank_main(void *arg)
{
    rank_t *r = arg;
    char mine[300], next[300];
    ep(mine, sizeof mine, s_run, r->rank);
    ep(next, sizeof next, s_run, (r->rank + 1) % r->world);
    r->rc = -1;
    allreduce_t *ar = r->world == 1
                          ? allreduce_new(0, 1, NULL, NULL, r->err, sizeof r->err)
                          : allreduce_new(r->rank, r->world, mine, next, r->err, sizeof r->err);
    xsum_t *x = xsum_new(LEN, NSEG);
    if (!ar || !x)
        goto out;
    float v[257];
    memset(r->naive, 0, sizeof r->naive);
    for (int k = 0; k < r->nchunks; k++) {
        size_t o = 0;
        for (int g = 0; g < NSEG; g++) {
            chunk_vec(r->chunks[k], g, v, r->inf_chunk);
            xsum_add_f32(x, g, v);
            for (size_t i = 0; i < LEN[g]; i++)
                r->naive[o + i] += v[i];
            o += LEN[g];
        }
    }
    r->sent = xsum_allreduce_sent(x, ar);
    if (xsum_allreduce(x, ar, 20000, r->err, sizeof r->err) < 0 ||
        allreduce_sum(ar, r->naive, NTOT, 20000, r->err, sizeof r->err) < 0)
        goto out;
    size_t o = 0;
    for (int g = 0; g < NSEG; g++) {
        xsum_get_f32(x, g, r->exact + o);
        o += LEN[g];
    }
    r->rc = 0;
out:
    xsum_destroy(&x);
    allreduce_destroy(&ar);
    return NULL;
}

/* The chunks of each rank: split 0 as loaderd deals them (contiguous runs,
 * the first nch % W ranks one more), 1 round-robin, 2 random (ranks may
 * get none). */
static void split(rank_t *r, int world, int how)
{
    for (int k = 0; k < world; k++)
        r[k].nchunks = 0;
    int base = NCHUNK / world, rem = NCHUNK % world;
    for (int c = 0; c < NCHUNK; c++) {
        int k;
        if (how == 0) {
            for (k = 0; k < world; k++) {
                int lo = k * base + (k < rem ? k : rem), n = base + (k < rem);
                if (c >= lo && c < lo + n)
                    break;
            }
        } else if (how == 1) {
            k = c % world;
        } else {
            k = (int)(mix((uint64_t)c * 31 + (uint64_t)world * 7 + 5) % (uint64_t)world);
        }
        r[k].chunks[r[k].nchunks++] = c;
    }
    /* a rank's own order does not matter either: reverse it on odd ranks */
    for (int k = 1; k < world; k += 2)
        for (int a = 0, b = r[k].nchunks - 1; a < b; a++, b--) {
            int t = r[k].chunks[a];
            r[k].chunks[a] = r[k].chunks[b], r[k].chunks[b] = t;
        }
}

/* Runs one ring of world ranks; the ranks' results in r. */
static void run(rank_t *r, int world, int how, int inf_chunk)
{
    pthread_t th[MAXW];
    split(r, world, how);
    s_run++;
    for (int k = 0; k < world; k++) {
        r[k].rank = k, r[k].world = world, r[k].inf_chunk = inf_chunk;
        REQUIRE(pthread_create(&th[k], NULL, rank_main, &r[k]) == 0, "pthread_create");
    }
    for (int k = 0; k < world; k++)
        pthread_join(th[k], NULL);
    for (int k = 0; k < world; k++)
        REQUIRE(r[k].rc == 0, "W=%d split %d rank %d: %s", world, how, k, r[k].err);
    for (int k = 1; k < world; k++) {
        CHECK(memcmp(r[k].exact, r[0].exact, sizeof r[0].exact) == 0,
              "W=%d split %d: rank %d's exact sums differ from rank 0's", world, how, k);
        CHECK(memcmp(r[k].naive, r[0].naive, sizeof r[0].naive) == 0,
              "W=%d split %d: rank %d's float sums differ from rank 0's", world, how, k);
    }
}

static uint64_t xsum_allreduce_bytes_of(int nseg, size_t n)
{
    return (uint64_t)nseg * 4 + (uint64_t)n * XSUM_LIMBS * 8;
}

/* One process, every chunk in order. */
static void single(float *out, int inf_chunk)
{
    xsum_t *x = xsum_new(LEN, NSEG);
    REQUIRE(x, "xsum_new");
    float v[257];
    for (int c = 0; c < NCHUNK; c++)
        for (int g = 0; g < NSEG; g++) {
            chunk_vec(c, g, v, inf_chunk);
            xsum_add_f32(x, g, v);
        }
    size_t o = 0;
    for (int g = 0; g < NSEG; g++) {
        xsum_get_f32(x, g, out + o);
        o += LEN[g];
    }
    xsum_destroy(&x);
}

static void test_worlds(void)
{
    static rank_t r[MAXW];
    float want[NTOT], naive_w1[NTOT];
    single(want, -1);
    int configs = 0, naive_differ = 0;
    for (int world = 1; world <= MAXW; world++)
        for (int how = 0; how < (world == 1 ? 1 : 3); how++) {
            run(r, world, how, -1);
            CHECK(memcmp(r[0].exact, want, sizeof want) == 0,
                  "W=%d split %d: the exact sums differ from one process's", world, how);
            /* over all ranks: every chunk twice but two per rank, each
             * operation's 2 (W - 1) headers per rank */
            uint64_t sent = 0, pay = xsum_allreduce_bytes_of(NSEG, NTOT);
            for (int k = 0; k < world; k++)
                sent += r[k].sent;
            CHECK(sent == 2 * (uint64_t)(world - 1) * pay + 4 * (uint64_t)(world * (world - 1)) * 32,
                  "W=%d: the ranks send %llu bytes", world, (unsigned long long)sent);
            CHECK(world != 2 || r[0].sent == pay + 4 * 32, "W=2: rank 0 sends %llu bytes",
                  (unsigned long long)r[0].sent);
            if (world == 1)
                memcpy(naive_w1, r[0].naive, sizeof naive_w1);
            else
                naive_differ += memcmp(r[0].naive, naive_w1, sizeof naive_w1) != 0;
            configs++;
        }
    /* the float ring's bytes depend on W and the split: the data shows it */
    CHECK(naive_differ > 0, "float all-reduces of every W and split gave W=1's bytes: the data "
          "cannot tell an order-dependent sum");
    printf("worlds: %d rings (W = 1..4, 3 splits) give one process's exact bytes; float "
           "all-reduce bytes differ from W=1's in %d of %d\n", configs, naive_differ,
           configs - 1);
    /* the sums are near the double sum: xsum is not just deterministic */
    for (size_t i = 0; i < NTOT; i++) {
        int g = i < LEN[0] ? 0 : i < LEN[0] + LEN[1] ? 1 : 2;
        size_t e = g == 0 ? i : g == 1 ? i - LEN[0] : i - LEN[0] - LEN[1];
        double d = 0, mag = 0;
        for (int c = 0; c < NCHUNK; c++) {
            d += value(c, g, e, -1);
            mag += fabs(value(c, g, e, -1));
        }
        CHECK(fabs(want[i] - d) <= 1e-6 * mag, "element %zu: xsum %g, double sum %g", i,
              (double)want[i], d);
    }
}

static void test_nonfinite(void)
{
    static rank_t r[MAXW];
    float want[NTOT];
    single(want, 7);
    run(r, 3, 0, 7);
    CHECK(memcmp(r[0].exact, want, LEN[0] * sizeof(float)) == 0 &&
          r[0].exact[NTOT - 1] == want[NTOT - 1], "W=3: finite segments differ");
    for (int k = 0; k < 3; k++)
        for (size_t i = LEN[0]; i < LEN[0] + LEN[1]; i++)
            CHECK(isnan(r[k].exact[i]), "W=3 rank %d: element %zu of the segment with an "
                  "infinity is %g", k, i, (double)r[k].exact[i]);
    printf("nonfinite: an infinity on one rank makes its segment NaN on all\n");
}

static void test_bytes(void)
{
    xsum_t *x = xsum_new(LEN, NSEG);
    REQUIRE(x, "xsum_new");
    CHECK(xsum_allreduce_bytes(x) == xsum_allreduce_bytes_of(NSEG, NTOT), "payload %llu",
          (unsigned long long)xsum_allreduce_bytes(x));
    char err[256];
    allreduce_t *one = allreduce_new(0, 1, NULL, NULL, err, sizeof err);
    REQUIRE(one, "allreduce_new: %s", err);
    CHECK(xsum_allreduce_sent(x, one) == 0, "a ring of one sends nothing");
    CHECK(xsum_allreduce(x, one, 1000, err, sizeof err) == 0, "W=1: %s", err);
    CHECK(xsum_allreduce(x, NULL, 1000, err, sizeof err) == 0, "no ring: %s", err);
    allreduce_destroy(&one);
    xsum_destroy(&x);
}

int main(void)
{
    zsys_init();   /* before the rank threads' first sockets (test_buckets.c) */
    REQUIRE(mkdtemp(strcpy(s_dir, "/tmp/ddp-xsum-ring-XXXXXX")) != NULL, "mkdtemp");
    test_worlds();
    test_nonfinite();
    test_bytes();
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", s_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", s_dir);
    return tc_done("test_xsum_ring");
}
