/* cuda_bn16_kernels — see cuda_bn16_kernels.h. Training BatchNorm's passes
 * over 16-bit NHWC, each a template on the 16-bit type T (cuda_half16.h)
 * and on L, the channels a thread takes side by side: L = 8 (one 16-byte
 * load) where the channels are a multiple of 8 and the buffers aligned,
 * else L = 1. Both give the same bits: a channel's values are summed in
 * the same order whichever thread holds them. */
#include "gpud/bn_math.h"
#include "gpud/cuda/cuda_half16.h"
#include "gpud/cuda/cuda_kernels.h"
#include "gpud/cuda/cuda_launch.h"
#include "gpud/cuda/cuda_bn16_kernels.h"

extern "C" {
#include "common/env_switch.h"
}

#include <math.h>

/* A block is ROWS rows x COLS columns of threads. A column takes L
 * channels (a "unit") of one slice of the pixels; the row strides through
 * the slice: pixels lo + row, lo + row + ROWS, ... A channel's sum is
 * therefore fixed by the slicing alone (ckb_sum_parts), whatever the
 * block's shape: each row's partial in pixel order, the ROWS partials in
 * row order, the slices in k16_sum_slices' fixed order.
 *
 * Where a layer has fewer than COLS units (64 channels at L = 8 are 8
 * units), the block's columns take several slices side by side (SPB =
 * COLS / LN of them, LN the units rounded up to a power of two), so that
 * a warp (one row: 32 columns) still reads 512 contiguous bytes of a
 * pixel row and no column idles; ResNet's 64-channel layers had 24 of a
 * warp's 32 lanes reading 2 bytes each. */
#define COLS 32
#define ROWS (THREADS / COLS)
/* Rows whose loads are issued before the first is used: enough bytes in
 * flight for HBM with one or two blocks an SM (ptxas: the 8-channel
 * gradient kernels take 130-190 registers at 4 rows). */
#define UNROLL(L) ((L) == 8 ? 2 : 4)
#define SUM_UNROLL 4   /* the channel sums (one stream, 69 registers at L = 8, 2 rows) */
/* The normalising pass: 4 pixel rows' loads in flight (2 of x and 2 of the
 * residual's where it adds one). Its 32 channel constants in double hold
 * it to two blocks an SM whatever it unrolls (102 registers at 2 rows, 128
 * at 4, no spill: ptxas), so the rows are what puts bytes in flight: 64 a
 * thread, about 4 MB over an H200's 132 SMs, where its HBM wants about 3-4
 * (its bandwidth times a load's latency); 2 rows put half that. */
#define APPLY_UNROLL 4
/* ... and the 8-channel gradient kernels held to 128 registers, two blocks
 * an SM (172 unbounded, one block: 8 warps to hide an SM's latencies); the
 * normalising pass too (its mask's byte took bf16's to 134 unbounded: one
 * block an SM; 128 and no spill bounded, ptxas) */
#define TWO_BLOCKS __launch_bounds__(THREADS, 2)

/* The order a pass walks the memory. A GPU starts a grid's blocks in
 * index order, so a pass over a tensor larger than L2 (50 MB on an
 * H100/H200) finds there only the last part the pass before it touched:
 * a pass that walks backwards (rev: block b does the work of block
 * blocks - 1 - b) starts where its predecessor ended and reads up to an
 * L2's worth from it instead of from HBM. The chains alternate: forward,
 * the conv writes x (forward), the mean's sums walk back, the variance's
 * forward, the normalising pass back, so the next conv, reading forward,
 * starts on its tail; backward, the dgrad conv writes gy, the gradient
 * sums walk back, their apply forward. A block's work is the same
 * whichever index runs it: the same bits either way (the emulator's
 * reverse block order, gpud_cuemu_reverse, checks the same).
 * DDPIPE_CUDA_BN_ORDER=0 in the environment: every pass forward. */
enum { BN16_FWD = 0, BN16_REV = 1 };

typedef struct {
    int ln;      /* units side by side in a block: a power of two <= COLS */
    int slots;   /* blocks along the slices: ceil(parts / (COLS / ln)) */
    int rev;     /* BN16_REV: the blocks' work in reverse order */
} bn16_grid_t;

static bn16_grid_t bn16_grid(int units, int parts, int rev, unsigned *blocks)
{
    /* DDPIPE_CUDA_BN_ORDER=0: every pass forward (an A/B of the order) */
    bn16_grid_t g = {1, 0, rev == BN16_REV && env_switch_on("DDPIPE_CUDA_BN_ORDER")};
    while (g.ln < units && g.ln < COLS)
        g.ln *= 2;
    int spb = COLS / g.ln;
    g.slots = (parts + spb - 1) / spb;
    *blocks = (unsigned)((units + g.ln - 1) / g.ln) * (unsigned)g.slots;
    return g;
}

/* This thread's slice [lo, hi) of cnt pixels (empty where the block's last
 * slot runs past parts) and its first channel; -1: no unit. */
template <int L>
__device__ static int bn16_place(bn16_grid_t g, size_t cnt, int c, int parts, size_t *lo,
                                 size_t *hi, int *sl)
{
    int col = (int)(threadIdx.x % COLS), spb = COLS / g.ln;
    unsigned b = g.rev ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
    *sl = (int)(b % g.slots) * spb + col / g.ln;
    size_t len = (cnt + parts - 1) / parts;
    *lo = *sl < parts ? (size_t)*sl * len : cnt;
    *hi = *lo + len < cnt ? *lo + len : cnt;
    int ch = ((int)(b / g.slots) * g.ln + col % g.ln) * L;
    return ch < c && *sl < parts ? ch : -1;
}

/* The ROWS partials of each column's L channels summed in row order into
 * out (valid in row 0, where *lead; 0 elsewhere). Every thread of the
 * block calls it. */
template <int L>
__device__ static void bn16_rows(double (*sh)[THREADS], const double *acc, double *out,
                                 int *lead)
{
    for (int l = 0; l < L; l++)
        sh[l][threadIdx.x] = acc[l];
    __syncthreads();
    *lead = threadIdx.x < COLS;
    for (int l = 0; l < L; l++) {
        double s = 0.0;
        for (int r = 0; *lead && r < ROWS; r++)
            s += sh[l][r * COLS + threadIdx.x];
        out[l] = s;
    }
    __syncthreads();   /* sh is reused */
}

/* acc[l] += channel l's term of one pixel: x, or (x - m)^2 if centred */
template <typename T, int L>
__device__ static void sum_terms(double *acc, h16v<T, L> v, const double *m, int centred)
{
    for (int l = 0; l < L; l++) {
        double x = h16<T>::ld(v.v[l]);
        acc[l] += centred ? (x - m[l]) * (x - m[l]) : x;
    }
}

template <typename T, int L>
__device__ static void chan_sums(const void *xv, size_t cnt, int c, const float *center,
                                 int parts, bn16_grid_t g, double *part)
{
    __shared__ double sh[L][THREADS];
    const T *x = (const T *)xv;
    size_t lo, hi;
    int sl, lead, ch = bn16_place<L>(g, cnt, c, parts, &lo, &hi, &sl);
    double acc[L], m[L], out[L];
    for (int l = 0; l < L; l++)
        acc[l] = 0.0, m[l] = center && ch >= 0 ? center[ch + l] : 0.0;
    int centred = center != NULL;
    size_t j = lo + threadIdx.x / COLS;
    for (; ch >= 0 && j + (SUM_UNROLL - 1) * ROWS < hi; j += SUM_UNROLL * ROWS) {
        h16v<T, L> v[SUM_UNROLL];
        for (int u = 0; u < SUM_UNROLL; u++)
            v[u] = ldv<T, L>(x + (j + (size_t)u * ROWS) * c + ch);
        for (int u = 0; u < SUM_UNROLL; u++)
            sum_terms<T, L>(acc, v[u], m, centred);
    }
    for (; ch >= 0 && j < hi; j += ROWS)
        sum_terms<T, L>(acc, ldv<T, L>(x + j * c + ch), m, centred);
    bn16_rows<L>(sh, acc, out, &lead);
    for (int l = 0; lead && ch >= 0 && l < L; l++)
        part[(size_t)sl * c + ch + l] = out[l];
}

template <typename T>
__global__ static void k16_chan_sums(const void *x, size_t cnt, int c, const float *center,
                                     int parts, bn16_grid_t g, double *part)
{
    chan_sums<T, 1>(x, cnt, c, center, parts, g, part);
}

template <typename T>
__global__ static void k16_chan_sums8(const void *x, size_t cnt, int c, const float *center,
                                      int parts, bn16_grid_t g, double *part)
{
    chan_sums<T, 8>(x, cnt, c, center, parts, g, part);
}

/* out[r] = row r's partials summed, from the slice-major partials
 * part[sl * rows + r]: a warp a row (8 rows a block), lane l adding the
 * slices l, l + 32, l + 64, ... in order (8 loads in flight), then lane 0
 * the 32 lanes' sums in lane order. The order is a function of parts
 * alone, as before; a whole row walked by one thread (k_sum_rows, 24 us a
 * call on an H200 at 512 slices: ncu, 2026-11-30) was a chain of
 * dependent loads, and a thread a row over slice-major partials still 128
 * rounds of 8 loads at 1,024 slices. The lanes in order, not in a tree:
 * the order is part of the sums' bits (bn16_checks.c replicates it), and
 * 31 adds once a row are little beside the row's slices. */
#define SLICE_LANES 32

/* This lane's share of row r's sum (0 for r >= rows). */
__device__ static double lane_sum(const double *part, int rows, int parts, int r, int lane)
{
    double acc = 0.0;
    int i = lane;
    for (; r < rows && i + 7 * SLICE_LANES < parts; i += 8 * SLICE_LANES) {
        double v[8];
        for (int u = 0; u < 8; u++)
            v[u] = part[(size_t)(i + u * SLICE_LANES) * rows + r];
        for (int u = 0; u < 8; u++)
            acc += v[u];
    }
    for (; r < rows && i < parts; i += SLICE_LANES)
        acc += part[(size_t)i * rows + r];
    return acc;
}

/* The row's sum from its lanes' shares in sh (written before a barrier),
 * in lane order: lane 0 of the row calls it. */
__device__ static double lanes_total(const double *sh)
{
    double s = sh[threadIdx.x];
    for (int k = 1; k < SLICE_LANES; k++)
        s += sh[threadIdx.x + k];
    return s;
}

/* What the row's lane 0 does with its sum besides storing it: the
 * per-channel kernel that followed each sum (ck_bn_stat, ck_bn_running,
 * ck_bn_grad_finish: bn_math.h's arithmetic, the same bits) done here, a
 * launch of a few thousand threads fewer each (four a training
 * BatchNorm a step: ResNet-50's 53 layers, 212 launches). */
typedef enum { FIN_NONE, FIN_STAT, FIN_GRAD } fin_kind_t;
typedef struct {
    fin_kind_t kind;
    double count;
    /* FIN_STAT: stat[r] = the sum / count; with rm (the variance's sum),
     * the running statistics from mean[r] and it, as ck_bn_running */
    float *stat, *rm, *rv;
    const float *mean;
    double momentum, unbias;
    /* FIN_GRAD: rows r and c + r of the gradient sums, as
     * ck_bn_grad_finish (c: the rows given, their partials 2c a slice) */
    const float *gamma, *var;
    float eps;
    float *ggamma, *gbeta, *coef;
} sums_fin_t;

__global__ static void k16_sum_slices(const double *part, int rows, int parts, double *out,
                                      sums_fin_t f)
{
    __shared__ double sh[THREADS], sh2[THREADS];
    int lane = (int)threadIdx.x % SLICE_LANES;
    int r = (int)blockIdx.x * (THREADS / SLICE_LANES) + (int)threadIdx.x / SLICE_LANES;
    if (f.kind != FIN_GRAD) {
        sh[threadIdx.x] = lane_sum(part, rows, parts, r, lane);
        __syncthreads();
        if (lane != 0 || r >= rows)
            return;
        double sum = lanes_total(sh);
        out[r] = sum;
        if (f.kind == FIN_STAT) {
            float st = bnm_stat(sum, f.count);
            f.stat[r] = st;
            if (f.rm) {
                f.rm[r] = bnm_running(f.rm[r], f.mean[r], f.momentum, 1.0);
                f.rv[r] = bnm_running(f.rv[r], st, f.momentum, f.unbias);
            }
        }
        return;
    }
    /* the two rows of channel r (c = rows channels, 2c rows of partials),
     * each in the order above */
    int c = rows;
    sh[threadIdx.x] = lane_sum(part, 2 * c, parts, r < c ? r : 2 * c, lane);
    sh2[threadIdx.x] = lane_sum(part, 2 * c, parts, r < c ? c + r : 2 * c, lane);
    __syncthreads();
    if (lane != 0 || r >= c)
        return;
    double sdy = lanes_total(sh), sgx = lanes_total(sh2);
    double sdyxh = BNM_DIV(sgx, bnm_std(f.var[r], f.eps));
    out[r] = sdy;
    out[c + r] = sdyxh;
    if (f.ggamma)
        f.ggamma[r] = (float)sdyxh;
    if (f.gbeta)
        f.gbeta[r] = (float)sdy;
    bnm_coeffs(f.gamma[r], f.var[r], f.eps, sdy, sdyxh, f.count, &f.coef[r], &f.coef[c + r],
               &f.coef[2 * c + r]);
}

/* rows sums (FIN_GRAD: c channels' pairs) */
static cudaError_t sum_slices(cudaStream_t s, const double *part, int rows, int parts,
                              double *out, sums_fin_t f)
{
    const int per_block = THREADS / SLICE_LANES;
    k16_sum_slices<<<(unsigned)((rows + per_block - 1) / per_block), THREADS, 0, s>>>(
        part, rows, parts, out, f);
    return cudaGetLastError();
}

/* At least 16 values a thread, at most 1,024 slices: the partials (c x
 * parts doubles) stay small and are summed in an order fixed by parts
 * alone, so the result is a function of the shapes. 1,024 gives
 * ResNet-18's 256 x 112 x 112 x 64 activations 256 blocks of 8 units x 4
 * slices, 4 MB of loads in flight (an H200's HBM wants about its bandwidth
 * times a microsecond). The floor was 64 values: ResNet's 7 x 7 x 512
 * layers at batch 256 took 25 slices, 50 blocks for 132 SMs, and 14 x 14
 * x 256 98 blocks; now 98 and 392 slices. */
int ckb_sum_parts(size_t cnt)
{
    size_t s = (cnt + ROWS * 16 - 1) / (ROWS * 16);
    return s < 1 ? 1 : s > 1024 ? 1024 : (int)s;
}

/* 8 channels a thread where c, and so every pixel row, keeps 16-byte loads
 * aligned */
static int lanes8(int c, const void *a, const void *b, const void *d, const void *e)
{
    return vec8_ok((size_t)c, a, b, d) && vec8_ok((size_t)c, e, e, e);
}

/* the channel sums' main pass: the partials, and their count */
static cudaError_t chan_pass(cudaStream_t s, int fp16, const void *x, int npix, int c,
                             const float *center, double *part, int *parts)
{
    /* the launch's arguments plain values (the emulator's recorded
     * launch keeps them, not what a pointer pointed at) */
    int L = lanes8(c, x, x, x, x) ? 8 : 1, np = ckb_sum_parts((size_t)npix);
    unsigned blocks;
    /* the mean's back from the conv's end, the variance's forward (bn16_grid_t) */
    bn16_grid_t g = bn16_grid(c / L, np, center ? BN16_FWD : BN16_REV, &blocks);
    *parts = np;
    return L == 8 ? LAUNCH16_GRID(fp16, k16_chan_sums8, blocks, x, (size_t)npix, c, center, np,
                                  g, part)
                  : LAUNCH16_GRID(fp16, k16_chan_sums, blocks, x, (size_t)npix, c, center, np,
                                  g, part);
}

cudaError_t ckb_chan_sums(cudaStream_t s, int fp16, const void *x, int npix, int c,
                          const float *center, double *out, double *part)
{
    int parts;
    cudaError_t e = chan_pass(s, fp16, x, npix, c, center, part, &parts);
    sums_fin_t none = {};
    return e != cudaSuccess ? e : sum_slices(s, part, c, parts, out, none);
}

cudaError_t ckb_bn_stats(cudaStream_t s, int fp16, const void *x, int npix, int c, double count,
                         float *stat, float *rm, float *rv, double momentum, double unbias,
                         double *sums, double *part)
{
    int parts;
    sums_fin_t f = {};
    f.kind = FIN_STAT;
    f.count = count;
    f.stat = stat;
    cudaError_t e = chan_pass(s, fp16, x, npix, c, NULL, part, &parts);
    if (e == cudaSuccess)
        e = sum_slices(s, part, c, parts, sums, f);
    if (e == cudaSuccess)
        e = chan_pass(s, fp16, x, npix, c, stat, part, &parts);
    f.stat = stat + c;
    f.rm = rm, f.rv = rv, f.mean = stat;
    f.momentum = momentum, f.unbias = unbias;
    return e != cudaSuccess ? e : sum_slices(s, part, c, parts, sums, f);
}

/* The element-wise passes use the same block layout: a thread keeps its
 * channels for all its pixels, so it works out their constants (a square
 * root and a division in double) once, not per element, and never divides
 * a 64-bit index to find a channel. Each element's arithmetic is the same
 * expression in every layout: the same bits. At least 16 pixels a thread;
 * enough blocks to fill a device. */
static int apply_parts(size_t npix)
{
    size_t s = (npix + ROWS * 16 - 1) / (ROWS * 16);
    return s < 1 ? 1 : s > 4096 ? 4096 : (int)s;
}

/* With a residual r (the residual block's tail fused, tape_fuse.c): the
 * 16-bit value stored without it, then k_add's sum of the two, rounded
 * once more. */
template <typename T, int L>
__device__ static h16v<T, L> bn_terms(h16v<T, L> v, const double *m, const double *inv,
                                      const double *g, const double *b, int relu,
                                      const h16v<T, L> *r)
{
    h16v<T, L> y;
    for (int l = 0; l < L; l++) {
        float f = (float)(((double)h16<T>::ld(v.v[l]) - m[l]) * inv[l] * g[l] + b[l]);
        if (r)
            f = __fadd_rn(h16<T>::ld(h16<T>::st(f)), h16<T>::ld(r->v[l]));
        y.v[l] = h16<T>::st(relu && !(f > 0.0f) ? 0.0f : f);
    }
    return y;
}

/* The fused ReLU's output signs of one pixel's 8 channels as a byte (bit
 * l: lane l > 0), where the backward reads them in place of y; a byte a
 * pixel's unit of 8 channels: (pixel * c + ch) / 8. */
template <typename T, int L>
__device__ static void mask_store(uint8_t *mask, size_t at, const h16v<T, L> &y)
{
    if (L != 8 || !mask)
        return;
    unsigned bits = 0;
    for (int l = 0; l < L; l++)
        bits |= (h16<T>::ld(y.v[l]) > 0.0f ? 1u : 0u) << l;
    mask[at / 8] = (uint8_t)bits;
}

template <typename T, int L>
__device__ static void bn_apply(void *yv, const void *xv, size_t npix, int c, int parts,
                                bn16_grid_t g, const float *gamma, const float *beta,
                                const float *mean, const float *var, float eps, int relu,
                                const void *resv, uint8_t *mask)
{
    T *y = (T *)yv;
    const T *x = (const T *)xv, *res = (const T *)resv;
    size_t lo, hi;
    int sl, ch = bn16_place<L>(g, npix, c, parts, &lo, &hi, &sl);
    if (ch < 0)
        return;
    double inv[L], m[L], ga[L], be[L];
    for (int l = 0; l < L; l++) {
        inv[l] = 1.0 / sqrt((double)var[ch + l] + eps);
        m[l] = mean[ch + l], ga[l] = gamma[ch + l], be[l] = beta[ch + l];
    }
    size_t j = lo + threadIdx.x / COLS;
    if (res) {   /* its own loop: the plain pass keeps its registers */
        for (; j + (APPLY_UNROLL / 2 - 1) * ROWS < hi; j += APPLY_UNROLL / 2 * ROWS) {
            h16v<T, L> v[APPLY_UNROLL / 2], r[APPLY_UNROLL / 2];
            for (int u = 0; u < APPLY_UNROLL / 2; u++) {
                v[u] = ldv<T, L>(x + (j + (size_t)u * ROWS) * c + ch);
                r[u] = ldv<T, L>(res + (j + (size_t)u * ROWS) * c + ch);
            }
            for (int u = 0; u < APPLY_UNROLL / 2; u++) {
                size_t at = (j + (size_t)u * ROWS) * c + ch;
                h16v<T, L> o = bn_terms<T, L>(v[u], m, inv, ga, be, relu, &r[u]);
                stv<T, L>(y + at, o);
                mask_store<T, L>(mask, at, o);
            }
        }
        for (; j < hi; j += ROWS) {
            h16v<T, L> r = ldv<T, L>(res + j * c + ch);
            h16v<T, L> o = bn_terms<T, L>(ldv<T, L>(x + j * c + ch), m, inv, ga, be, relu, &r);
            stv<T, L>(y + j * c + ch, o);
            mask_store<T, L>(mask, j * c + ch, o);
        }
        return;
    }
    for (; j + (APPLY_UNROLL - 1) * ROWS < hi; j += APPLY_UNROLL * ROWS) {
        h16v<T, L> v[APPLY_UNROLL];
        for (int u = 0; u < APPLY_UNROLL; u++)
            v[u] = ldv<T, L>(x + (j + (size_t)u * ROWS) * c + ch);
        for (int u = 0; u < APPLY_UNROLL; u++) {
            size_t at = (j + (size_t)u * ROWS) * c + ch;
            h16v<T, L> o = bn_terms<T, L>(v[u], m, inv, ga, be, relu, (const h16v<T, L> *)NULL);
            stv<T, L>(y + at, o);
            mask_store<T, L>(mask, at, o);
        }
    }
    for (; j < hi; j += ROWS) {
        h16v<T, L> o = bn_terms<T, L>(ldv<T, L>(x + j * c + ch), m, inv, ga, be, relu,
                                      (const h16v<T, L> *)NULL);
        stv<T, L>(y + j * c + ch, o);
        mask_store<T, L>(mask, j * c + ch, o);
    }
}

template <typename T>
__global__ static void k16_bn_apply(void *y, const void *x, size_t npix, int c, int parts,
                                    bn16_grid_t g, const float *gamma, const float *beta,
                                    const float *mean, const float *var, float eps, int relu,
                                    const void *res)
{
    bn_apply<T, 1>(y, x, npix, c, parts, g, gamma, beta, mean, var, eps, relu, res,
                   (uint8_t *)NULL);
}

template <typename T>
__global__ static void TWO_BLOCKS k16_bn_apply8(void *y, const void *x, size_t npix, int c,
                                                int parts, bn16_grid_t g, const float *gamma,
                                                const float *beta, const float *mean,
                                                const float *var, float eps, int relu,
                                                const void *res, uint8_t *mask)
{
    bn_apply<T, 8>(y, x, npix, c, parts, g, gamma, beta, mean, var, eps, relu, res, mask);
}

cudaError_t ckb_bn_apply(cudaStream_t s, int fp16, void *y, const void *x, int npix, int c,
                         const float *gamma, const float *beta, const float *mean,
                         const float *var, float eps, int relu, const void *res, uint8_t *mask,
                         int *masked)
{
    int parts = apply_parts((size_t)npix), L = lanes8(c, y, x, res ? res : x, x) ? 8 : 1;
    unsigned blocks;
    bn16_grid_t g = bn16_grid(c / L, parts, BN16_REV, &blocks);   /* after the variance's */
    if (masked)
        *masked = L == 8 && relu && mask;
    if (L == 8)
        return LAUNCH16_GRID(fp16, k16_bn_apply8, blocks, y, x, (size_t)npix, c, parts, g, gamma,
                             beta, mean, var, eps, relu, res, relu ? mask : (uint8_t *)NULL);
    return LAUNCH16_GRID(fp16, k16_bn_apply, blocks, y, x, (size_t)npix, c, parts, g, gamma,
                         beta, mean, var, eps, relu, res);
}

/* One pixel's L channels of the backward's inputs: x, dy' = gy, or 0 where
 * the fused ReLU's output y is not > 0 (y NULL: no ReLU). With gy2 (the
 * tape's fold of the gradient's last term), gy is gy + gy2 as ckb_acc adds
 * them: in fp32, rounded once. With the forward's mask (8 channels a
 * thread), its byte says which of y's lanes are > 0 and y is not read: 1
 * byte in place of 16. */
template <typename T, int L> struct bn16_in {
    h16v<T, L> x, y, gy;
    unsigned bits;   /* with a mask: its byte (bit l: lane l > 0) */
};

template <typename T, int L>
__device__ static bn16_in<T, L> bn16_load(const T *x, const T *y, const uint8_t *mask,
                                          const T *gy, const T *gy2, size_t at)
{
    bn16_in<T, L> v;
    v.x = ldv<T, L>(x + at);
    v.gy = ldv<T, L>(gy + at);
    v.bits = L == 8 && mask ? mask[at / 8] : 0u;
    if (gy2) {
        h16v<T, L> g2 = ldv<T, L>(gy2 + at);
        for (int l = 0; l < L; l++)
            v.gy.v[l] = h16<T>::st(h16<T>::ld(v.gy.v[l]) + h16<T>::ld(g2.v[l]));
    }
    v.y = y && !(L == 8 && mask) ? ldv<T, L>(y + at) : v.gy;   /* not read without y */
    return v;
}

/* Whether the fused ReLU zeroes lane l's gradient (its output not > 0).
 * relu: 0 none, 1 y's values, 2 the mask's bits. */
template <typename T, int L>
__device__ static bool relu_drops(const bn16_in<T, L> &v, int l, int relu)
{
    if (relu == 2)
        return !((v.bits >> l) & 1u);
    return relu && !(h16<T>::ld(v.y.v[l]) > 0.0f);
}

template <typename T, int L>
__device__ static float masked(const bn16_in<T, L> &v, int l, int relu)
{
    return relu_drops<T, L>(v, l, relu) ? 0.0f : h16<T>::ld(v.gy.v[l]);
}

/* sg[l] += dy', sgx[l] += dy' (x - m); with gout, dy' stored there as
 * ckb_relu_bwd stores it (gy's bits, or +0 where y is not > 0) */
template <typename T, int L>
__device__ static void grad_terms(double *sg, double *sgx, const bn16_in<T, L> &v,
                                  const double *m, int relu, T *gout)
{
    if (gout) {   /* first: its registers free before the double sums */
        h16v<T, L> o;
        for (int l = 0; l < L; l++)
            o.v[l] = relu_drops<T, L>(v, l, relu) ? h16<T>::st(0.0f) : v.gy.v[l];
        stv<T, L>(gout, o);
    }
    for (int l = 0; l < L; l++) {
        double d = masked<T, L>(v, l, relu);
        sg[l] += d;
        sgx[l] += d * (h16<T>::ld(v.x.v[l]) - m[l]);
    }
}

template <typename T, int L>
__device__ static void grad_sums(const void *xv, const void *yv, const uint8_t *mask,
                                 const void *gyv, const void *gy2v, void *goutv, size_t cnt,
                                 int c, const float *center, int parts, bn16_grid_t g,
                                 double *part)
{
    __shared__ double sh[L][THREADS];
    const T *x = (const T *)xv, *y = (const T *)yv, *gy = (const T *)gyv;
    const T *gy2 = (const T *)gy2v;
    T *gout = (T *)goutv;
    size_t lo, hi;
    int sl, lead, relu = !y ? 0 : L == 8 && mask ? 2 : 1;
    int ch = bn16_place<L>(g, cnt, c, parts, &lo, &hi, &sl);
    double sg[L], sgx[L], m[L], o1[L], o2[L];
    for (int l = 0; l < L; l++)
        sg[l] = sgx[l] = 0.0, m[l] = ch >= 0 ? center[ch + l] : 0.0;
    size_t j = lo + threadIdx.x / COLS;
    for (; ch >= 0 && j + (UNROLL(L) - 1) * ROWS < hi; j += UNROLL(L) * ROWS) {
        bn16_in<T, L> v[UNROLL(L)];
        for (int u = 0; u < UNROLL(L); u++)
            v[u] = bn16_load<T, L>(x, y, mask, gy, gy2, (j + (size_t)u * ROWS) * c + ch);
        for (int u = 0; u < UNROLL(L); u++)
            grad_terms<T, L>(sg, sgx, v[u], m, relu,
                             gout ? gout + (j + (size_t)u * ROWS) * c + ch : NULL);
    }
    for (; ch >= 0 && j < hi; j += ROWS)
        grad_terms<T, L>(sg, sgx, bn16_load<T, L>(x, y, mask, gy, gy2, j * c + ch), m, relu,
                         gout ? gout + j * c + ch : NULL);
    bn16_rows<L>(sh, sg, o1, &lead);
    bn16_rows<L>(sh, sgx, o2, &lead);
    for (int l = 0; lead && ch >= 0 && l < L; l++) {   /* rows [0, c): sum dy'; [c, 2c) */
        part[(size_t)sl * 2 * c + ch + l] = o1[l];
        part[(size_t)sl * 2 * c + c + ch + l] = o2[l];
    }
}

template <typename T>
__global__ static void k16_grad_sums(const void *x, const void *y, const void *gy,
                                     const void *gy2, void *gout, size_t cnt, int c,
                                     const float *center, int parts, bn16_grid_t g,
                                     double *part)
{
    grad_sums<T, 1>(x, y, (const uint8_t *)NULL, gy, gy2, gout, cnt, c, center, parts, g, part);
}

template <typename T>
__global__ static void TWO_BLOCKS k16_grad_sums8(const void *x, const void *y,
                                                 const uint8_t *mask, const void *gy,
                                                 const void *gy2, void *gout, size_t cnt, int c,
                                                 const float *center, int parts, bn16_grid_t g,
                                                 double *part)
{
    grad_sums<T, 8>(x, y, mask, gy, gy2, gout, cnt, c, center, parts, g, part);
}

/* the gradient sums' main pass: the partials, and their count */
static cudaError_t grad_pass(cudaStream_t s, int fp16, const void *x, const void *y,
                             const uint8_t *mask, const void *gy, const void *gy2, void *gout,
                             int npix, int c, const float *center, double *part, int *parts)
{
    if (gy2 && !gout)
        return cudaErrorInvalidValue;   /* the apply pass reads dy' from gout */
    int L = lanes8(c, x, y, gy, gout ? gout : gy) && lanes8(c, gy2 ? gy2 : gy, gy, gy, gy) ? 8
                                                                                          : 1;
    int np = ckb_sum_parts((size_t)npix);
    unsigned blocks;
    bn16_grid_t g = bn16_grid(c / L, np, BN16_REV, &blocks);   /* from the dgrad's end */
    *parts = np;
    return L == 8 ? LAUNCH16_GRID(fp16, k16_grad_sums8, blocks, x, y, y ? mask : NULL, gy, gy2,
                                  gout, (size_t)npix, c, center, np, g, part)
                  : LAUNCH16_GRID(fp16, k16_grad_sums, blocks, x, y, gy, gy2, gout,
                                  (size_t)npix, c, center, np, g, part);
}

cudaError_t ckb_bn_grad_sums(cudaStream_t s, int fp16, const void *x, const void *y,
                             const void *gy, void *gout, int npix, int c, const float *center,
                             double *out, double *part)
{
    int parts;
    cudaError_t e = grad_pass(s, fp16, x, y, NULL, gy, NULL, gout, npix, c, center, part,
                              &parts);
    sums_fin_t none = {};
    return e != cudaSuccess ? e : sum_slices(s, part, 2 * c, parts, out, none);
}

cudaError_t ckb_bn_grad(cudaStream_t s, int fp16, const void *x, const void *y,
                        const uint8_t *mask, const void *gy, const void *gy2, void *gout,
                        int npix, int c, const float *center, const float *gamma,
                        const float *var, float eps, double count, float *ggamma, float *gbeta,
                        float *coef, double *sums, double *part)
{
    int parts;
    cudaError_t e = grad_pass(s, fp16, x, y, mask, gy, gy2, gout, npix, c, center, part, &parts);
    sums_fin_t f = {};
    f.kind = FIN_GRAD;
    f.count = count;
    f.gamma = gamma, f.var = var, f.eps = eps;
    f.ggamma = ggamma, f.gbeta = gbeta, f.coef = coef;
    return e != cudaSuccess ? e : sum_slices(s, part, c, parts, sums, f);
}

/* the channel vectors widened once, where the thread starts: kept as
 * floats and widened per element (the same bits), the bf16 8-channel
 * kernel made 194 float-to-double conversions a loop of 24 elements
 * (sm_90 converts 16 a clock an SM: its memory rate needs about 7 an
 * element) and spilled 12 bytes; as doubles, 128 and no spill (ptxas,
 * cuobjdump: 128 registers bf16, 120 fp16) */
template <typename T, int L>
__device__ static h16v<T, L> grad_out(const bn16_in<T, L> &v, const double *sc,
                                      const double *ac, const double *m, const double *bc,
                                      int relu)
{
    h16v<T, L> o;
    for (int l = 0; l < L; l++)
        o.v[l] = h16<T>::st((float)(sc[l] * masked<T, L>(v, l, relu) +
                                    ac[l] * ((double)h16<T>::ld(v.x.v[l]) - m[l]) + bc[l]));
    return o;
}

template <typename T, int L>
__device__ static void grad_apply(void *gxv, const void *xv, const void *yv,
                                  const uint8_t *mask, const void *gyv, size_t npix, int c,
                                  int parts, bn16_grid_t g, const float *center,
                                  const float *scale, const float *a, const float *b)
{
    T *gx = (T *)gxv;
    const T *x = (const T *)xv, *y = (const T *)yv, *gy = (const T *)gyv;
    size_t lo, hi;
    int sl, relu = !y ? 0 : L == 8 && mask ? 2 : 1;
    int ch = bn16_place<L>(g, npix, c, parts, &lo, &hi, &sl);
    if (ch < 0)
        return;
    double sc[L], ac[L], bc[L], m[L];
    for (int l = 0; l < L; l++)
        sc[l] = scale[ch + l], ac[l] = a[ch + l], bc[l] = b[ch + l], m[l] = center[ch + l];
    size_t j = lo + threadIdx.x / COLS;
    for (; j + (UNROLL(L) - 1) * ROWS < hi; j += UNROLL(L) * ROWS) {
        bn16_in<T, L> v[UNROLL(L)];
        for (int u = 0; u < UNROLL(L); u++)
            v[u] = bn16_load<T, L>(x, y, mask, gy, (const T *)NULL,
                                   (j + (size_t)u * ROWS) * c + ch);
        for (int u = 0; u < UNROLL(L); u++)
            stv<T, L>(gx + (j + (size_t)u * ROWS) * c + ch,
                      grad_out<T, L>(v[u], sc, ac, m, bc, relu));
    }
    for (; j < hi; j += ROWS)
        stv<T, L>(gx + j * c + ch,
                  grad_out<T, L>(bn16_load<T, L>(x, y, mask, gy, (const T *)NULL, j * c + ch),
                                 sc, ac, m, bc, relu));
}

template <typename T>
__global__ static void k16_grad_apply(void *gx, const void *x, const void *y, const void *gy,
                                      size_t npix, int c, int parts, bn16_grid_t g,
                                      const float *center, const float *scale, const float *a,
                                      const float *b)
{
    grad_apply<T, 1>(gx, x, y, (const uint8_t *)NULL, gy, npix, c, parts, g, center, scale, a, b);
}

template <typename T>
__global__ static void TWO_BLOCKS k16_grad_apply8(void *gx, const void *x, const void *y,
                                                  const uint8_t *mask, const void *gy,
                                                  size_t npix, int c, int parts, bn16_grid_t g,
                                                  const float *center, const float *scale,
                                                  const float *a, const float *b)
{
    grad_apply<T, 8>(gx, x, y, mask, gy, npix, c, parts, g, center, scale, a, b);
}

cudaError_t ckb_bn_grad_apply(cudaStream_t s, int fp16, void *gx, const void *x, const void *y,
                              const uint8_t *mask, const void *gy, int npix, int c,
                              const float *center, const float *scale, const float *a,
                              const float *b)
{
    int parts = apply_parts((size_t)npix), L = lanes8(c, gx, x, y, gy) ? 8 : 1;
    unsigned blocks;
    bn16_grid_t g = bn16_grid(c / L, parts, BN16_FWD, &blocks);   /* after the sums' */
    if (L == 8)
        return LAUNCH16_GRID(fp16, k16_grad_apply8, blocks, gx, x, y, y ? mask : NULL, gy,
                             (size_t)npix, c, parts, g, center, scale, a, b);
    return LAUNCH16_GRID(fp16, k16_grad_apply, blocks, gx, x, y, gy, (size_t)npix, c, parts, g,
                         center, scale, a, b);
}
