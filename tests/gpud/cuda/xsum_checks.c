/* xsum_checks — see xsum_checks.h. */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/xsum.h"
#include "common/xsum_f32.h"
#include "gpud/backend_arena.h"
#include "gpud/cuda/cuda_arena.h"
#include "../tcheck.h"
#include "../trand.h"
#include "xsum_checks.h"

/* LONGEST and TOTAL: LEN's largest and its sum */
enum { NSEG = 5, CHUNKS = 6, LONGEST = 3000, TOTAL = 4072 };
/* segment 3 spans several strides of a grid-stride launch on the emulator
 * (CK_GRID_CAP 3 x 256 threads) */
static const size_t LEN[NSEG] = {1, 7, 1000, LONGEST, 64};
static uint64_t rng = 0x9E3779B97F4A7C15ull;

/* Chunk k's values of segment s, chosen so that the window's top moves up
 * by 0, 1, 2 and more bins between adds (scale), both signs, subnormals
 * (segment 1), an all-zero chunk (segment 2's chunk 2), exact zeros
 * throughout, a magnitude below the window's reach (segment 4: 2^-70
 * under its top, truncated), and an infinity (segment 0's chunk 4: the
 * segment is NaN from then on). */
static void values(int s, int k, float *x)
{
    static const float scale[CHUNKS] = {1e-3f, 2e-3f, 8e6f, 1.0f, 3e9f, 1e-2f};
    for (size_t i = 0; i < LEN[s]; i++) {
        float v = trand(&rng) * scale[k];
        if (s == 1)
            v = trand(&rng) * 1e-39f * (float)(k + 1);   /* subnormals */
        if (s == 2 && k == 2)
            v = 0.0f;
        if (i % 5 == 3)
            v = 0.0f;
        if (s == 4 && i % 2)
            v = ldexpf(v, -70);
        x[i] = v;
    }
    if (s == 0 && k == 4)
        x[0] = INFINITY;
}

/* One step: the chunks added in the order given, on the device (through
 * the arena's ops) and on the host; then the device's sums read and
 * compared, limb for limb. */
static void one_step(const bk_arena_ops_t *a, void *xs, float *dev, const int *order,
                     const char *what)
{
    void *cx = a->ctx;
    static float val[CHUNKS][NSEG][LONGEST];
    for (int k = 0; k < CHUNKS; k++)
        for (int s = 0; s < NSEG; s++)
            values(s, k, val[k][s]);
    xsum_t *host = xsum_new(LEN, NSEG), *back = xsum_new(LEN, NSEG);
    REQUIRE(host && back, "xsum_new");
    CHECK(a->xsum->clear(cx, xs) == 0, "%s: xsum_clear", what);
    size_t off[NSEG + 1] = {0};
    for (int s = 0; s < NSEG; s++)
        off[s + 1] = off[s] + LEN[s];
    for (int j = 0; j < CHUNKS; j++) {
        int k = order[j];
        for (int s = 0; s < NSEG; s++) {
            /* each chunk overwrites the "gradient", as a chunk's backward does */
            CHECK(a->write(cx, dev, off[s], LEN[s], val[k][s]) == 0, "%s: write", what);
            CHECK(a->xsum->add(cx, xs, s, dev + off[s]) == 0, "%s: xsum_add", what);
            xsum_add_f32(host, s, val[k][s]);
        }
    }
    CHECK(a->xsum->read(cx, xs, back) == 0, "%s: xsum_read", what);
    CHECK(memcmp(xsum_tops(host), xsum_tops(back), NSEG * sizeof(int32_t)) == 0,
          "%s: tops differ: host %d %d %d %d %d, device %d %d %d %d %d", what,
          xsum_tops(host)[0], xsum_tops(host)[1], xsum_tops(host)[2], xsum_tops(host)[3],
          xsum_tops(host)[4], xsum_tops(back)[0], xsum_tops(back)[1], xsum_tops(back)[2],
          xsum_tops(back)[3], xsum_tops(back)[4]);
    CHECK(xsum_tops(back)[0] == XSUM_NONFINITE, "%s: segment 0 got an infinity: top %d", what,
          xsum_tops(back)[0]);
    size_t diff = 0, nl = xsum_count(host) * XSUM_LIMBS;
    for (int s = 1; s < NSEG; s++) {   /* a non-finite segment's limbs do not count */
        const int64_t *h = xsum_limbs(host) + off[s] * XSUM_LIMBS;
        const int64_t *d = xsum_limbs(back) + off[s] * XSUM_LIMBS;
        for (size_t i = 0; i < LEN[s] * XSUM_LIMBS; i++)
            diff += h[i] != d[i];
    }
    CHECK(diff == 0, "%s: %zu of %zu limbs differ from xsum_add_f32's", what, diff, nl);
    static float rh[LONGEST], rd[LONGEST];
    size_t bad = 0, nonzero = 0;
    for (int s = 0; s < NSEG; s++) {
        xsum_get_f32(host, s, rh);
        xsum_get_f32(back, s, rd);
        for (size_t i = 0; i < LEN[s]; i++) {
            bad += memcmp(&rh[i], &rd[i], sizeof rh[i]) != 0;
            nonzero += rd[i] != 0.0f;
        }
    }
    CHECK(bad == 0, "%s: %zu rounded sums differ", what, bad);
    CHECK(nonzero > 3000, "%s: only %zu nonzero sums (the check sums nothing?)", what, nonzero);
    printf("device exact sums (%s): %d segments, %d chunks: tops, %zu limbs and the rounded "
           "sums equal to xsum_add_f32's\n", what, NSEG, CHUNKS, nl);
    xsum_destroy(&host);
    xsum_destroy(&back);
}

/* --- two ranks' sums through a collective (xsum_reduce), the peer faked:
 * its tops' bits and its limbs (aligned to the ranks' window) are what a
 * second rank would contribute */
typedef struct {
    xsum_t *peer;                 /* the other rank's sums (host) */
    uint32_t bits[NSEG];          /* its magnitude maxima per segment */
    int maxes, sums;
} peer_t;

static int fake_max(void *ctx, uint32_t *dev, size_t n, int timeout_ms, char *err,
                    size_t errlen)
{
    (void)timeout_ms, (void)err, (void)errlen;
    peer_t *p = ctx;
    uint32_t h[NSEG];
    int32_t tops[NSEG];
    REQUIRE(n == NSEG && cudaMemcpy(h, dev, sizeof h, cudaMemcpyDeviceToHost) == cudaSuccess,
            "fake max: %zu tops", n);
    for (int s = 0; s < NSEG; s++) {
        h[s] = h[s] > p->bits[s] ? h[s] : p->bits[s];
        tops[s] = xsum_top_f32(h[s]);
    }
    xsum_align(p->peer, tops);   /* the peer aligns to the same window */
    p->maxes++;
    return cudaMemcpy(dev, h, sizeof h, cudaMemcpyHostToDevice) == cudaSuccess ? 0 : -1;
}

static int fake_sum(void *ctx, int64_t *dev, size_t n, int timeout_ms, char *err, size_t errlen)
{
    (void)timeout_ms, (void)err, (void)errlen;
    peer_t *p = ctx;
    static int64_t h[TOTAL * XSUM_LIMBS];
    REQUIRE(n == xsum_count(p->peer) * XSUM_LIMBS && n <= sizeof h / sizeof h[0] &&
            cudaMemcpy(h, dev, n * sizeof *h, cudaMemcpyDeviceToHost) == cudaSuccess,
            "fake sum: %zu limbs", n);
    for (size_t i = 0; i < n; i++)
        h[i] += xsum_limbs(p->peer)[i];
    p->sums++;
    return cudaMemcpy(dev, h, n * sizeof *h, cudaMemcpyHostToDevice) == cudaSuccess ? 0 : -1;
}

/* Rank 0 adds chunks 0-2 on the device, the peer 3-5 on the host; the
 * reduced, rounded sums (written to the arena) against one host xsum of
 * all six chunks, bit for bit. */
static void check_reduce(const bk_arena_ops_t *a, void *xs, float *dev)
{
    void *cx = a->ctx;
    static float val[CHUNKS][NSEG][LONGEST], got[TOTAL], want[TOTAL];
    for (int k = 0; k < CHUNKS; k++)
        for (int s = 0; s < NSEG; s++)
            values(s, k, val[k][s]);
    peer_t p = {.peer = xsum_new(LEN, NSEG)};
    xsum_t *all = xsum_new(LEN, NSEG);
    REQUIRE(p.peer && all, "xsum_new");
    size_t off[NSEG + 1] = {0};
    for (int s = 0; s < NSEG; s++)
        off[s + 1] = off[s] + LEN[s];
    CHECK(a->xsum->clear(cx, xs) == 0, "reduce: xsum_clear");
    for (int k = 0; k < CHUNKS; k++)
        for (int s = 0; s < NSEG; s++) {
            xsum_add_f32(all, s, val[k][s]);
            if (k >= 3) {
                xsum_add_f32(p.peer, s, val[k][s]);
                for (size_t i = 0; i < LEN[s]; i++) {
                    uint32_t b;
                    memcpy(&b, &val[k][s][i], sizeof b);
                    b &= 0x7fffffffu;
                    p.bits[s] = b > p.bits[s] ? b : p.bits[s];
                }
                continue;
            }
            CHECK(a->write(cx, dev, off[s], LEN[s], val[k][s]) == 0 &&
                  a->xsum->add(cx, xs, s, dev + off[s]) == 0, "reduce: add");
        }
    bk_xsum_coll_t coll = {fake_max, fake_sum, &p, 1000};
    char err[256] = "";
    CHECK(a->xsum->reduce(cx, xs, &coll, dev, err, sizeof err) == 0, "xsum_reduce: %s", err);
    CHECK(p.maxes == 1 && p.sums == 1, "xsum_reduce: %d maxes, %d sums (want one each)",
          p.maxes, p.sums);
    CHECK(a->read(cx, dev, 0, off[NSEG], got) == 0, "reading the reduced sums");
    size_t bad = 0, nan = 0;
    for (int s = 0; s < NSEG; s++) {
        xsum_get_f32(all, s, want + off[s]);
        for (size_t i = off[s]; i < off[s + 1]; i++) {
            bad += memcmp(&got[i], &want[i], sizeof got[i]) != 0 &&
                   !(isnan(got[i]) && isnan(want[i]));
            nan += isnan(got[i]);
        }
    }
    CHECK(bad == 0, "two ranks through xsum_reduce: %zu of %zu sums differ from one xsum of "
          "every chunk", bad, off[NSEG]);
    CHECK(nan == LEN[0], "%zu NaN sums, want segment 0's %zu", nan, LEN[0]);
    printf("device exact sums, two ranks through a collective (the peer faked): %zu sums "
           "equal to one xsum of all the chunks\n", off[NSEG]);
    xsum_destroy(&p.peer);
    xsum_destroy(&all);
}

int check_device_xsum(void)
{
    int before = tc_failures;
    char err[256] = "";
    cuda_arena_t *arena = cuda_arena_new(NULL, err, sizeof err);
    REQUIRE(arena, "cuda_arena_new: %s", err);
    const bk_arena_ops_t *a = cuda_arena_ops(arena);
    REQUIRE(a->xsum, "the cuda arena has no exact-sum ops (DDPIPE_CUDA_XSUM=0 set?)");
    size_t total = 0;
    for (int s = 0; s < NSEG; s++)
        total += LEN[s];
    REQUIRE(total == TOTAL, "LEN sums to %zu floats, TOTAL says %d", total, (int)TOTAL);
    float *dev = a->alloc(a->ctx, total);
    void *xs = a->xsum->new(a->ctx, LEN, NSEG);
    REQUIRE(dev && xs, "the arena or its sums");
    static const int fwd[CHUNKS] = {0, 1, 2, 3, 4, 5}, rev[CHUNKS] = {5, 3, 4, 1, 2, 0};
    uint64_t seed = rng;
    one_step(a, xs, dev, fwd, "in order");
    rng = seed;   /* the same values, added in another order, after a clear */
    one_step(a, xs, dev, rev, "reordered");
    REQUIRE(a->xsum->reduce, "the cuda arena cannot reduce its exact sums");
    rng = seed;
    check_reduce(a, xs, dev);
    a->xsum->free(a->ctx, xs);
    a->free(a->ctx, dev);
    cuda_arena_destroy(&arena);
    return tc_failures - before;
}
