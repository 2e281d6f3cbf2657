/* wino — 3x3 stride-1 convolutions of the cpu backend's inference plan by
 * Winograd's minimal filtering F(2x2, 3x3) (Lavin and Gray, "Fast
 * Algorithms for Convolutional Neural Networks", 2016): each 4x4 input
 * tile and 3x3 filter go to 16 points where one multiplication per
 * (input channel, output channel) pair replaces 2.25 of the direct
 * convolution's; the 16 products are 16 matrix products [tiles x C] x
 * [C x K]. oneDNN 3.x has no Winograd on x64, and its direct kernels run
 * at the FMA units' peak, so fewer multiplications are the only way to a
 * faster eval (bench/RESULTS.md, "Winograd F(2x2,3x3)").
 *
 * Layout: NHWC activations (the training tape's, and the inference plan's
 * with oneDNN 3.2 on AVX2 and AVX-512) in and out;
 * the plan keeps the transformed weights U = G g G^T (computed in double,
 * rounded once) and refreshes them when g->params_version moves.
 *
 * Exactness: an output element's arithmetic is fixed by the shapes alone:
 * the input and output transforms are the same additions in the same
 * order on every path; each product is one fmaf chain over the input
 * channels 0..C-1 from zero, a chain per (tile, point, output channel),
 * whatever the tile's place in a block, the block size, the batch or the
 * thread count. The AVX-512 and AVX2 kernels (wino_avx512.c, wino_avx2.c)
 * give the bits of the scalar reference (wino_ref.c); tests/gpud/test_wino.c
 * checks them all, and the reference against a double-precision direct
 * convolution.
 *
 * bf16 (native bf16 on a CPU with avx512_bf16 and without AMX: docs/BF16.md
 * "Winograd in bf16"): the transformed values V and U are rounded to bf16
 * (round to nearest even, as VCVTNEPS2BF16: a denormal to zero), the
 * products run on VDPBF16PS (two channels an instruction, twice the FMA's
 * multiplications) with its arithmetic: per channel pair, acc + odd
 * product, then + even product, each rounded to fp32 (products exact,
 * denormal results zero); the output transform is fp32's. The rounding
 * happens after the transforms rather than before, so these convolutions
 * are not oneDNN's "the same numbers up to the order of fp32 sums":
 * test_wino bounds their error. Channels travel in pairs: point xi's
 * channel c of row r at element v[xi * xs + (c / 2) * 2 * WINO_ROWS + 2 * r
 * + c % 2], U's (ch, j) at u[(ch / 2) * 2 * pw + 2 * j + ch % 2]. */
#ifndef DDP_WINO_H
#define DDP_WINO_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "gpud/backend_impl.h"

/* Tiles travel in groups of WINO_ROWS: the rows of one GEMM micro-kernel. */
#define WINO_ROWS 14

typedef struct {
    int n, h, w, c;           /* input, NHWC memory */
    int k, oh, ow;            /* output, NHWC memory */
    int pad_h, pad_w;         /* the input's top and left padding */
    int th, tw;               /* 2x2 output tiles per image: ceil(oh/2), ceil(ow/2) */
    long ntiles;              /* n * th * tw */
    int x16;                  /* x holds bf16 values, 2 bytes each (the tape's 16-bit
                                 activations): the bf16 kernels only */
    int y16;                  /* y is written as bf16, rounded as the engine rounds
                                 (bf16_pack), after the post-ops */
    bk_post_t post;           /* after the bias, in order */
} wino_geom_t;

/* Where tile t's 4x4 input window starts, before padding: image, top
 * row, left column (each kernel's, one definition). */
static inline void wino_tile_at(const wino_geom_t *s, long t, int *img, int *y0, int *x0)
{
    long per = (long)s->th * s->tw;
    int in_img = (int)(t % per);
    *img = (int)(t / per);
    *y0 = in_img / s->tw * 2;
    *x0 = in_img % s->tw * 2;
}

/* Where each of tile t's 16 input pixels starts in x (-1: padding). */
static inline void wino_tile_pixels(const wino_geom_t *s, long t, long off[16])
{
    int img, y0, x0;
    wino_tile_at(s, t, &img, &y0, &x0);
    for (int i = 0; i < 4; i++) {
        int yy = y0 + i - s->pad_h;
        for (int j = 0; j < 4; j++) {
            int xx = x0 + j - s->pad_w;
            off[i * 4 + j] = yy >= 0 && yy < s->h && xx >= 0 && xx < s->w
                                 ? (long)((((size_t)img * s->h + yy) * s->w + xx) * s->c)
                                 : -1;
        }
    }
}

/* x rounded to bf16 as VCVTNEPS2BF16 rounds it: to nearest even, a
 * denormal to a zero of its sign, a NaN kept quiet. */
static inline uint16_t wino_bf16(float x)
{
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    /* selects, not branches: loops over it vectorise */
    uint32_t r = (b + 0x7fffu + (b >> 16 & 1u)) >> 16;
    r = (b & 0x7f800000u) == 0 ? (b >> 16 & 0x8000u) : r;       /* zero or denormal */
    r = (b & 0x7fffffffu) > 0x7f800000u ? (b >> 16 | 0x0040u) : r;   /* NaN */
    return (uint16_t)r;
}

/* One instruction set's kernels; every one gives its reference's bits
 * (WINO_REF's for fp32, WINO_REF_BF16's for bf16). */
typedef struct {
    const char *name;
    int esz;   /* bytes of a transformed value, in V and U: 4 (fp32) or 2 (bf16) */
    /* Input transform of nr <= WINO_ROWS tiles from tile t0 on: point xi's
     * value of channel c of the group's row r at v[xi * xs + c * WINO_ROWS
     * + r] (bf16: in pairs, above); rows nr.. are zero. */
    void (*in)(const wino_geom_t *s, const void *x, long t0, int nr, void *v, size_t xs);
    /* m[r * ldm + j] = sum over ch < c of v[ch * WINO_ROWS + r] * u[ch * pw
     * + j] (an fmaf chain from ch 0; bf16: VDPBF16PS's, pair by pair), r <
     * WINO_ROWS, j < pw (16 or 32). */
    void (*gemm)(const void *v, const void *u, int c, int pw, float *m, int ldm);
    /* Output transform of tile t: point xi's product of output channel o at
     * m[xi * xs + o]; + bias[o] (NULL: none), the post-ops (a SUM adds
     * what y holds), written to y (bf16 where s->y16, no SUM then) where
     * the 2x2 tile lies inside. */
    void (*out)(const wino_geom_t *s, const float *m, size_t xs, long t, const float *bias,
                void *y);
    /* The weight gradient (wino_wgrad), its reduction over the tiles: point
     * xi's value of channel c of tile t0 + i at v[xi * ps + i * C + c]
     * (fp32), or with the tiles in pairs at v[xi * ps + (i / 2) * 2 * C + 2 *
     * c + i % 2] (bf16, VDPBF16PS's operands). wg_in: the input transform
     * of x (C = s->c) for the nt (even) tiles from t0, tiles past s->ntiles
     * zero; wg_gy: of the output gradient, A gy A^T of each tile's 2x2
     * pixels of gy (NHWC like y, bf16 where s->x16; C = s->k; pixels past
     * the output zero). NULL where a family has no weight gradient. */
    void (*wg_in)(const wino_geom_t *s, const void *x, long t0, int nt, void *v, size_t ps);
    void (*wg_gy)(const wino_geom_t *s, const void *gy, long t0, int nt, void *g, size_t ps);
    /* gu[o * c + ch] (+)= over nt (even) tiles of gm (k channels) x v (c
     * channels), continuing the chain from gu's value (first: from zero),
     * o < k, ch < c: fp32, one fmaf a tile in tile order; bf16, VDPBF16PS's
     * arithmetic a tile pair in order. */
    void (*wgemm)(const void *gm, const void *v, int nt, int k, int c, float *gu, int first);
} wino_kern_t;

extern const wino_kern_t WINO_REF;
extern const wino_kern_t WINO_REF_BF16;
/* NULL where this build has no such kernels (not x86-64, or not GCC or
 * clang); the CPU must also have the instructions. */
extern const wino_kern_t *const WINO_AVX512;        /* avx512f */
extern const wino_kern_t *const WINO_AVX512_BF16;   /* avx512f, avx512_bf16 */
extern const wino_kern_t *const WINO_AVX2;          /* avx2, fma */
/* The fastest kernels this CPU runs, NULL where it has neither AVX-512F nor
 * AVX2 + FMA; under ONEDNN_MAX_CPU_ISA's cap (AVX2: not AVX-512's). */
const wino_kern_t *wino_kernels(void);
/* The bf16 kernels where the CPU has avx512_bf16 (and the cap allows
 * AVX-512), else NULL. */
const wino_kern_t *wino_kernels_bf16(void);

/* The geometry of a 3x3 stride-1 convolution (in, out: NCHW dims) with
 * padding pad_h, pad_w and post-ops post (NULL: none); -1 when F(2x2,3x3)
 * does not apply (channels not multiples of 16, padding over 2). */
int wino_geom(wino_geom_t *s, const int in[4], const int out[4], int pad_h, int pad_w,
              const bk_post_t *post);
/* The transformed weights of w [k, c, 3, 3] (PyTorch's layout) in the
 * panels of kernels kn (fp32 or bf16), into u (wino_u_floats floats, room
 * for either, 64-byte aligned). */
size_t wino_u_floats(int k, int c);
void wino_weights(const wino_kern_t *kn, void *u, const float *w, int k, int c);
/* The same for the backward-data convolution of w (gy's k channels in,
 * gx's c out): the filter turned by 180 degrees, its k and c swapped, run
 * with padding 2 - pad (wino_u_floats(c, k) floats). */
void wino_weights_bwd(const wino_kern_t *kn, void *u, const float *w, int k, int c);
/* The floats of work memory wino_conv needs with `threads` threads. */
size_t wino_work_floats(const wino_geom_t *s, int threads);
/* y = the convolution of x (NHWC) with the weights u (wino_weights) + bias
 * (NULL: none), then s->post; y holds the residual when the post-ops sum.
 * work: wino_work_floats floats, 64-byte aligned. */
void wino_conv(const wino_kern_t *kern, const wino_geom_t *s, const void *u, const void *x,
               const float *bias, void *y, float *work, int threads);

/* The inference plan's op (dnnl_infer.c): a plan when the convolution is
 * 3x3 stride 1, its activations NHWC, its channels multiples of 16, and
 * on fp32 kernels (fp32, or bf16 emulated: docs/BF16.md) this CPU has
 * AVX-512F or AVX2 + FMA (DDPIPE_CONV_ALGO=winograd: also on other CPUs,
 * on the scalar kernels); bf16 native: avx512_bf16 without AMX (whose
 * oneDNN kernels multiply 16x faster), on the bf16 kernels.
 * DDPIPE_CONV_ALGO=direct: never. Else NULL, g untouched (NULL with g
 * failed: out of memory). */
bk_plan_t *wino_plan_new(bk_ctx_t *g, const bk_conv_t *c, const bk_post_t *post,
                         const int in[4], const int out[4]);
int wino_is_plan(const bk_plan_t *p);
int wino_plan_fwd(bk_ctx_t *g, bk_plan_t *p, const void *x, const float *w, const float *b,
                  void *y);

/* A training convolution's forward and backward data (dnnl_train.c; the
 * weight gradient oneDNN's, or below): NULL when the conv is not for
 * Winograd here, as for wino_plan_new (the tape's activations are NHWC).
 * act16: x and gy are the tape's bf16 buffers (native bf16 on 16-bit
 * activations). y16: y (gx) written as bf16, the values the engine would
 * round them to (act16 plans only), else fp32. The forward transforms the
 * step's weights for both. 0, or -1 after bk_ctx_fail. */
typedef struct wino_train wino_train_t;
wino_train_t *wino_train_new(bk_ctx_t *g, const bk_conv_t *c, const int in[4],
                             const int out[4], int act16);
void wino_train_destroy(wino_train_t **t);
int wino_train_fwd(bk_ctx_t *g, wino_train_t *t, const void *x, const float *w,
                   const float *b, void *y, int y16);
int wino_train_bwd_data(bk_ctx_t *g, wino_train_t *t, const void *gy, void *gx, int y16);
/* Whether the weight gradient is Winograd's too: the plan's kernels have
 * one and the conv has no bias (DDPIPE_CONV_ALGO=direct: never). */
int wino_train_has_wgrad(const wino_train_t *t);
/* That gradient gw [k, c, 3, 3] (overwritten) of x and gy (the buffers
 * wino_train_fwd and _bwd_data read). 0, or -1 after bk_ctx_fail. */
int wino_train_bwd_weights(bk_ctx_t *g, wino_train_t *t, const void *x, const void *gy,
                           float *gw);

/* The weight gradient by Winograd (wino_wgrad.c): gU[xi] = sum over tiles
 * of (A gy A^T)[xi] x V[xi] (the tiles in a fixed order, one chain per
 * element whatever the threads), then gw = G^T gU G in double, rounded
 * once. s: the forward's geometry; kn: kernels with a wgemm. work:
 * wino_wgrad_work_bytes bytes, 64-byte aligned. */
size_t wino_wgrad_work_bytes(const wino_kern_t *kn, const wino_geom_t *s);
void wino_wgrad(const wino_kern_t *kn, const wino_geom_t *s, const void *x, const void *gy,
                float *gw, void *work, int threads);

#endif
