/* wino_wgrad — the weight gradient of a 3x3 stride-1 convolution by
 * Winograd F(2x2, 3x3) (wino.h): the forward's y = A^T [sum_c U_kc . V_tc] A
 * gives dL/dU_kc = sum_t (A gy_t A^T) . V_tc at each of the 16 points, a
 * matrix product [K x tiles] x [tiles x C] whose reduction runs over the
 * tiles, and dL/dg = G^T (dL/dU) G. 2.25x fewer multiplications than the
 * direct gradient: fp32 FMAs a tile at a time, or the bf16 kernels'
 * VDPBF16PS (tiles in pairs).
 *
 * The driver: the tiles in chunks; per chunk the threads transform their
 * share of the tiles (x's and gy's, every point), then each point's
 * product is one thread's, continuing the chains of gU from the last
 * chunk. An element of gU is one chain over the tiles 0, 1, 2, ... in
 * order whatever the chunk or the thread count, so its bits depend on
 * neither; gw = G^T gU G in double, rounded once. */
#include <omp.h>
#include <stdint.h>

#include "gpud/cpu/wino.h"

/* Tiles a chunk: even. bf16: the transformed values (16 points x (C + K)
 * a tile) about 4 MiB, 64 to 1024 tiles. fp32: about 8 MiB, at least 256
 * tiles, so that the reads and writes of gU (16 x K x C floats) between
 * chunks stay a thirty-second of a byte a multiply-add at most (a layer of
 * 512 channels: 256 tiles, 16 MiB). */
static long chunk_tiles(const wino_kern_t *kn, const wino_geom_t *s)
{
    long lo = kn->esz == 4 ? 256 : 64, budget = kn->esz == 4 ? 8L << 20 : 4L << 20;
    long t = budget / (16L * kn->esz * (s->c + s->k));
    t = t < lo ? lo : t > 1024 ? 1024 : t;
    long all = (s->ntiles + 1) / 2 * 2;
    return (t < all ? t : all) / 2 * 2;
}

static size_t gu_bytes(const wino_geom_t *s)
{
    return ((size_t)16 * s->k * s->c * sizeof(float) + 63) / 64 * 64;
}

size_t wino_wgrad_work_bytes(const wino_kern_t *kn, const wino_geom_t *s)
{
    return gu_bytes(s) + (size_t)16 * chunk_tiles(kn, s) * (s->c + s->k) * kn->esz;
}

/* gw[o][ch] = G^T gu G of the 16 points of (o, ch), in double. */
static void to_taps(const wino_geom_t *s, const float *gu, float *gw, int threads)
{
    size_t kc = (size_t)s->k * s->c;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (long e = 0; e < (long)kc; e++) {
        double x[4][4], a[3][4];
        for (int p = 0; p < 16; p++)
            x[p / 4][p % 4] = gu[(size_t)p * kc + (size_t)e];
        for (int j = 0; j < 4; j++) {   /* G^T x: G's rows (1,0,0) (.5,.5,.5) (.5,-.5,.5) (0,0,1) */
            a[0][j] = x[0][j] + 0.5 * (x[1][j] + x[2][j]);
            a[1][j] = 0.5 * (x[1][j] - x[2][j]);
            a[2][j] = 0.5 * (x[1][j] + x[2][j]) + x[3][j];
        }
        float *o = gw + (size_t)e * 9;   /* [k][c][3][3]: e = o * c + ch */
        for (int i = 0; i < 3; i++) {   /* (G^T x) G */
            o[i * 3 + 0] = (float)(a[i][0] + 0.5 * (a[i][1] + a[i][2]));
            o[i * 3 + 1] = (float)(0.5 * (a[i][1] - a[i][2]));
            o[i * 3 + 2] = (float)(0.5 * (a[i][1] + a[i][2]) + a[i][3]);
        }
    }
}

void wino_wgrad(const wino_kern_t *kn, const wino_geom_t *s, const void *x, const void *gy,
                float *gw, void *work, int threads)
{
    long ct = chunk_tiles(kn, s);
    size_t esz = (size_t)kn->esz;
    float *gu = work;
    char *v = (char *)work + gu_bytes(s);
    size_t vs = (size_t)ct * s->c, gs = (size_t)ct * s->k;   /* a point's slab of each */
    char *gm = v + 16 * vs * esz;
    size_t kc = (size_t)s->k * s->c;
    for (long t0 = 0; t0 < s->ntiles; t0 += ct) {
        long nt = s->ntiles - t0 < ct ? (s->ntiles - t0 + 1) / 2 * 2 : ct;
        /* the transforms, a run of tile pairs per thread; then the products,
         * a point per thread: two regions, not one with a barrier, which
         * ThreadSanitizer's view of libgomp (tests/tsan_omp.c) would miss */
#pragma omp parallel for num_threads(threads) schedule(static)
        for (long i = 0; i < nt; i += 32) {
            int n = (int)(nt - i < 32 ? nt - i : 32);
            kn->wg_in(s, x, t0 + i, n, v + (size_t)i * s->c * esz, vs);
            kn->wg_gy(s, gy, t0 + i, n, gm + (size_t)i * s->k * esz, gs);
        }
#pragma omp parallel for num_threads(threads) schedule(static)
        for (int p = 0; p < 16; p++)
            kn->wgemm(gm + (size_t)p * gs * esz, v + (size_t)p * vs * esz, (int)nt, s->k, s->c,
                      gu + (size_t)p * kc, t0 == 0);
    }
    to_taps(s, gu, gw, threads);
}
