/* wino_conv — Winograd F(2x2, 3x3) convolution (wino.h): the geometry, the
 * weight transform, the blocked driver and the inference plan's op.
 *
 * The driver: each thread an equal run of the 14-tile groups, in blocks
 * of up to 16 groups. A block's tiles are transformed (V: 16 points x
 * [groups][C][14]), the 16 products taken panel by panel of 32 output
 * channels (M: 16 x [tiles][K]) and transformed back into y. A block is
 * sized so that a point's slab of V (read once per panel) and of M stay
 * in L2. */
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/env_switch.h"
#include "common/log.h"
#include "gpud/cpu/dnnl_priv.h"
#include "gpud/cpu/wino.h"
#include "gpud/simd_clones.h"

int wino_geom(wino_geom_t *s, const int in[4], const int out[4], int pad_h, int pad_w,
              const bk_post_t *post)
{
    memset(s, 0, sizeof *s);
    if (in[1] % 16 || out[1] % 16 || in[1] < 16 || pad_h < 0 || pad_h > 2 || pad_w < 0 ||
        pad_w > 2 || out[0] != in[0] || out[2] != in[2] + 2 * pad_h - 2 ||
        out[3] != in[3] + 2 * pad_w - 2 || out[2] < 1 || out[3] < 1)
        return -1;
    s->n = in[0], s->c = in[1], s->h = in[2], s->w = in[3];
    s->k = out[1], s->oh = out[2], s->ow = out[3];
    s->pad_h = pad_h, s->pad_w = pad_w;
    s->th = (s->oh + 1) / 2, s->tw = (s->ow + 1) / 2;
    s->ntiles = (long)s->n * s->th * s->tw;
    if (post)
        s->post = *post;
    return 0;
}

size_t wino_u_floats(int k, int c)
{
    return (size_t)16 * k * c;
}

/* Output channels [o0, o0 + pw) are panel o0 / 32 (the last 16 wide when
 * k % 32 == 16): point p's panel at u + (p * k + o0) * c, [c][pw]. */
static int panel_width(int k, int o0)
{
    return k - o0 >= 32 ? 32 : 16;
}

/* t[p][j] = point p of U = G g G^T of filter j (g[i][j]: its tap i), in
 * double, rounded once. Lane-wise: the same bits at any vector width. */
SIMD_CLONES static void transform_taps(float t[16][32], const float g[9][32])
{
    for (int j = 0; j < 32; j++) {
        double a[4][3];
        for (int q = 0; q < 3; q++) {   /* G g */
            a[0][q] = g[q][j];
            a[1][q] = 0.5 * ((double)g[q][j] + g[3 + q][j] + g[6 + q][j]);
            a[2][q] = 0.5 * ((double)g[q][j] - g[3 + q][j] + g[6 + q][j]);
            a[3][q] = g[6 + q][j];
        }
        for (int i = 0; i < 4; i++) {   /* (G g) G^T */
            t[i * 4 + 0][j] = (float)a[i][0];
            t[i * 4 + 1][j] = (float)(0.5 * (a[i][0] + a[i][1] + a[i][2]));
            t[i * 4 + 2][j] = (float)(0.5 * (a[i][0] - a[i][1] + a[i][2]));
            t[i * 4 + 3][j] = (float)a[i][2];
        }
    }
}

/* The taps of filters o0..o0+pw-1 at input channel ch (flip: of the
 * backward-data convolution's filter, below), t: their 16 points. */
static void filter_points(const float *w, int k, int c, int flip, int o0, int pw, int ch,
                          float t[16][32])
{
    float g[9][32] = {{0}};
    for (int j = 0; j < pw; j++)
        for (int i = 0; i < 9; i++)
            g[i][j] = flip ? w[((size_t)ch * k + o0 + j) * 9 + 8 - i]
                           : w[((size_t)(o0 + j) * c + ch) * 9 + i];
    transform_taps(t, (const float(*)[32])g);
}

/* Two channels' points rounded to bf16 and interleaved: o[2j] = e[j],
 * o[2j + 1] = d[j] (vectorised). */
SIMD_CLONES static void pack_pair(uint16_t *o, const float *e, const float *d, int n)
{
    for (int j = 0; j < n; j++) {
        o[2 * j] = wino_bf16(e[j]);
        o[2 * j + 1] = wino_bf16(d[j]);
    }
}

/* flip: the filter of the backward-data convolution, w'[ch][o] = w[o][ch]
 * turned by 180 degrees, k and c swapped (k its outputs). A panel's
 * output channels innermost, in vectors: each point's row of a panel is
 * written whole (the taps gathered first), where one float every k * c
 * made the transforms 4.3 % of a ResNet-18 training step's CPU time (2
 * threads; 1.5 % now). bf16: channels in pairs. */
static void weights(const wino_kern_t *kn, void *u, const float *w, int k, int c, int flip)
{
    int np = (k + 31) / 32, step = kn->esz == 4 ? 1 : 2;
    /* the threads oneDNN was given (omp's default): every element alone */
#pragma omp parallel for schedule(static)
    for (int pi = 0; pi < np; pi++) {
        int o0 = pi * 32, pw = panel_width(k, o0);
        float t[2][16][32];
        for (int ch = 0; ch < c; ch += step) {
            for (int h = 0; h < step; h++)
                filter_points(w, k, c, flip, o0, pw, ch + h, t[h]);
            for (int p = 0; p < 16; p++) {
                size_t at = ((size_t)p * k + o0) * c;
                if (step == 1)
                    memcpy((float *)u + at + (size_t)ch * pw, t[0][p], pw * sizeof(float));
                else   /* (ch, j) at (ch / 2) * 2 * pw + 2 * j + ch % 2 */
                    pack_pair((uint16_t *)u + at + (size_t)ch * pw, t[0][p], t[1][p], pw);
            }
        }
    }
}

void wino_weights(const wino_kern_t *kn, void *u, const float *w, int k, int c)
{
    weights(kn, u, w, k, c, 0);
}

void wino_weights_bwd(const wino_kern_t *kn, void *u, const float *w, int k, int c)
{
    weights(kn, u, w, c, k, 1);
}

/* Groups of WINO_ROWS tiles per block: V and M of a block about 2 MiB
 * (16 points x (c + k) floats a tile; a point's slab of either, what the
 * GEMM reads, well inside L2), at most 16. */
static int block_groups(const wino_geom_t *s)
{
    int g = 32768 / (s->c + s->k) / WINO_ROWS;
    return g < 1 ? 1 : g > 16 ? 16 : g;
}

static size_t block_floats(const wino_geom_t *s)
{
    return ((size_t)16 * block_groups(s) * WINO_ROWS * (s->c + s->k) + 15) / 16 * 16;
}

size_t wino_work_floats(const wino_geom_t *s, int threads)
{
    /* 64-byte multiples: each thread's part stays aligned */
    return block_floats(s) * (size_t)threads;
}

/* V and U in the kernels' values (fp32 or bf16): offsets in values, the
 * pointers in bytes. */
static void run_block(const wino_kern_t *kn, const wino_geom_t *s, const void *u,
                      const void *x, const float *bias, void *y, long t0, int nt, float *work)
{
    int ng = (nt + WINO_ROWS - 1) / WINO_ROWS, tp = ng * WINO_ROWS;
    size_t xs = (size_t)tp * s->c, ms = (size_t)tp * s->k, e = (size_t)kn->esz;
    char *v = (char *)work;
    float *m = work + 16 * xs;   /* where fp32's V would end: bf16's is half of it */
    for (int gi = 0; gi < ng; gi++) {
        int nr = nt - gi * WINO_ROWS;
        kn->in(s, x, t0 + (long)gi * WINO_ROWS, nr < WINO_ROWS ? nr : WINO_ROWS,
               v + (size_t)gi * s->c * WINO_ROWS * e, xs);
    }
    for (int p = 0; p < 16; p++)
        for (int o0 = 0; o0 < s->k; o0 += 32) {
            int pw = panel_width(s->k, o0);
            const char *up = (const char *)u + ((size_t)p * s->k + o0) * s->c * e;
            for (int gi = 0; gi < ng; gi++)
                kn->gemm(v + (p * xs + (size_t)gi * s->c * WINO_ROWS) * e, up, s->c, pw,
                         m + p * ms + (size_t)gi * WINO_ROWS * s->k + o0, s->k);
        }
    for (int i = 0; i < nt; i++)
        kn->out(s, m + (size_t)i * s->k, ms, t0 + i, bias, y);
}

void wino_conv(const wino_kern_t *kn, const wino_geom_t *s, const void *u, const void *x,
               const float *bias, void *y, float *work, int threads)
{
    /* each thread an equal run of groups (within one), in blocks: a
     * balanced split whatever the tile count (ResNet-18's 7x7 layers have
     * 16 tiles an image) */
    int bg = block_groups(s);
    long ng = (s->ntiles + WINO_ROWS - 1) / WINO_ROWS, per = (ng + threads - 1) / threads;
#pragma omp parallel num_threads(threads)
    {
        int id = omp_get_thread_num();
        float *v = work + block_floats(s) * (size_t)id;
        long g1 = (id + 1) * per < ng ? (id + 1) * per : ng;
        for (long g = id * per; g < g1; g += bg) {
            long t0 = g * WINO_ROWS, t1 = (g + bg < g1 ? g + bg : g1) * WINO_ROWS;
            run_block(kn, s, u, x, bias, y, t0, (int)((t1 < s->ntiles ? t1 : s->ntiles) - t0),
                      v);
        }
    }
}

/* wino_conv on the backend's shared scratchpad. 0, or -1 after
 * bk_ctx_fail. */
static int conv_run(bk_ctx_t *g, const wino_kern_t *kn, int threads, const wino_geom_t *s,
                    const void *u, const void *x, const float *bias, void *y)
{
    float *work = cpu_scratch(g, wino_work_floats(s, threads) * sizeof(float));
    if (!work)
        return -1;
    wino_conv(kn, s, u, x, bias, y, work, threads);
    return 0;
}

/* ------------------------------------------------------------- the plan */

typedef struct {
    bk_plan_t base;
    wino_geom_t s;
    const wino_kern_t *kern;
    int threads;
    void *u;             /* transformed weights (kern's values), of params_version wver */
    unsigned wver;
    int wset;
} wplan_t;

static void wplan_destroy(bk_plan_t *bp)
{
    wplan_t *p = (wplan_t *)bp;
    free(p->u);
    free(p);
}

int wino_is_plan(const bk_plan_t *p)
{
    return p && p->destroy == wplan_destroy;
}

/* DDPIPE_CONV_ALGO: 0 auto, 1 direct, 2 winograd. */
static int algo(void)
{
    const char *e = getenv("DDPIPE_CONV_ALGO");
    if (!e || !*e || strcmp(e, "auto") == 0)
        return 0;
    if (strcmp(e, "direct") == 0)
        return 1;
    if (strcmp(e, "winograd") == 0)
        return 2;
    static int warned;
    if (!warned++)
        log_warn("DDPIPE_CONV_ALGO=%s: not auto, direct or winograd; using auto", e);
    return 0;
}

/* The instruction-set cap an operator set for oneDNN (ONEDNN_MAX_CPU_ISA)
 * holds for these kernels too, so a run capped to AVX2 compares like with
 * like: 2 AVX-512, 1 AVX2, 0 neither. */
static int isa_cap(void)
{
    const char *e = getenv("ONEDNN_MAX_CPU_ISA");
    if (!e || !*e || strncasecmp(e, "avx512", 6) == 0 || strncasecmp(e, "avx10", 5) == 0 ||
        strncasecmp(e, "all", 3) == 0 || strncasecmp(e, "default", 7) == 0)
        return 2;
    return strncasecmp(e, "avx2", 4) == 0 ? 1 : 0;
}

const wino_kern_t *wino_kernels(void)
{
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    int cap = isa_cap();
    if (cap >= 2 && WINO_AVX512 && __builtin_cpu_supports("avx512f"))
        return WINO_AVX512;
    if (cap >= 1 && WINO_AVX2 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return WINO_AVX2;
#endif
    return NULL;
}

const wino_kern_t *wino_kernels_bf16(void)
{
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (isa_cap() >= 2 && WINO_AVX512_BF16 && __builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512bf16"))
        return WINO_AVX512_BF16;
#endif
    return NULL;
}

static const wino_kern_t *kernels(int forced)
{
    const wino_kern_t *kn = wino_kernels();
    return kn ? kn : forced ? &WINO_REF : NULL;
}

/* Native bf16's kernels: avx512_bf16 where oneDNN's bf16 kernels are not
 * AMX's (AMX multiplies 16x more a cycle than VDPBF16PS: oneDNN's direct
 * convolutions stay; not measured against these), else none. */
static const wino_kern_t *kernels_bf16(void)
{
    const char *isa = "";
    if (cpu_bf16_native(&isa) < 2 || strncmp(isa, "amx", 3) == 0)
        return NULL;
    return wino_kernels_bf16();
}

/* The kernels for conv c (in -> out) and its geometry s; NULL: not by
 * Winograd here. */
static const wino_kern_t *eligible(bk_ctx_t *g, const bk_conv_t *c, const bk_post_t *post,
                                   const int in[4], const int out[4], wino_geom_t *s)
{
    int a = algo();
    bk_precision_t pr = g->be->precision;
    /* fp32 kernels: fp32, or bf16 emulated on them; bf16 kernels: native */
    const wino_kern_t *kn = a == 1                                           ? NULL
                            : pr == BK_FP32 || pr == BK_BF16_EMULATED ? kernels(a == 2)
                            : pr == BK_BF16_NATIVE                    ? kernels_bf16()
                                                                      : NULL;
    if (!kn || c->kh != 3 || c->kw != 3 || c->stride_h != 1 || c->stride_w != 1 ||
        wino_geom(s, in, out, c->pad_h, c->pad_w, post) < 0)
        return NULL;
    return kn;
}

static void *u_new(int k, int c)
{
    return aligned_alloc(64, (wino_u_floats(k, c) * sizeof(float) + 63) / 64 * 64);
}

bk_plan_t *wino_plan_new(bk_ctx_t *g, const bk_conv_t *c, const bk_post_t *post,
                         const int in[4], const int out[4])
{
    wino_geom_t s;
    const wino_kern_t *kn = eligible(g, c, post, in, out, &s);
    if (!kn)
        return NULL;
    wplan_t *p = calloc(1, sizeof *p);
    if (p)
        p->u = u_new(s.k, s.c);
    if (!p || !p->u) {
        free(p);
        return bk_ctx_fail(g, "out of memory for a Winograd convolution's weights");
    }
    p->base.destroy = wplan_destroy;
    p->s = s;
    p->kern = kn;
    p->threads = g->be->threads > 0 ? g->be->threads : 1;
    log_debug("cpu inference plan: conv %d->%d 3x3 %dx%d by Winograd F(2x2,3x3) (%s)", s.c, s.k,
              s.h, s.w, kn->name);
    return &p->base;
}

int wino_plan_fwd(bk_ctx_t *g, bk_plan_t *bp, const void *x, const float *w, const float *b,
                  void *y)
{
    wplan_t *p = (wplan_t *)bp;
    if (!p->wset || p->wver != g->params_version) {
        wino_weights(p->kern, p->u, w, p->s.k, p->s.c);
        p->wset = 1;
        p->wver = g->params_version;
    }
    return conv_run(g, p->kern, p->threads, &p->s, p->u, x, b, y);
}

/* ------------------------------------------------------------ training */

struct wino_train {
    wino_geom_t fwd, bwd;      /* x -> y; gy -> gx (the flipped filter, padding 2 - pad) */
    const wino_kern_t *kern;
    int threads;
    int wgrad;                 /* the weight gradient too (wino_train_has_wgrad) */
    void *uf, *ub;             /* the step's weights, transformed by the forward */
};

wino_train_t *wino_train_new(bk_ctx_t *g, const bk_conv_t *c, const int in[4],
                             const int out[4], int act16)
{
    wino_geom_t f, b;
    const wino_kern_t *kn = eligible(g, c, NULL, in, out, &f);
    /* 16-bit buffers: the bf16 kernels read them */
    if (!kn || (act16 && kn->esz != 2) ||
        wino_geom(&b, out, in, 2 - c->pad_h, 2 - c->pad_w, NULL) < 0)
        return NULL;
    f.x16 = b.x16 = act16;
    wino_train_t *t = calloc(1, sizeof *t);
    if (t) {
        t->uf = u_new(f.k, f.c);
        t->ub = u_new(f.c, f.k);
    }
    if (!t || !t->uf || !t->ub) {
        wino_train_destroy(&t);
        return bk_ctx_fail(g, "out of memory for a Winograd convolution's weights");
    }
    t->fwd = f, t->bwd = b, t->kern = kn;
    /* DDPIPE_WINO_WGRAD=0: oneDNN's weight gradient (comparisons) */
    t->wgrad = kn->wgemm && !c->bias && env_switch_on("DDPIPE_WINO_WGRAD");
    t->threads = g->be->threads > 0 ? g->be->threads : 1;
    log_debug("cpu training: conv %d->%d 3x3 %dx%d forward, backward data%s by Winograd "
              "F(2x2,3x3) (%s)", f.c, f.k, f.h, f.w, t->wgrad ? " and weights" : "", kn->name);
    return t;
}

void wino_train_destroy(wino_train_t **tp)
{
    if (!*tp)
        return;
    free((*tp)->uf);
    free((*tp)->ub);
    free(*tp);
    *tp = NULL;
}

int wino_train_fwd(bk_ctx_t *g, wino_train_t *t, const void *x, const float *w,
                   const float *b, void *y, int y16)
{
    wino_geom_t s = t->fwd;
    s.y16 = y16;
    wino_weights(t->kern, t->uf, w, t->fwd.k, t->fwd.c);
    wino_weights_bwd(t->kern, t->ub, w, t->fwd.k, t->fwd.c);
    return conv_run(g, t->kern, t->threads, &s, t->uf, x, b, y);
}

int wino_train_bwd_data(bk_ctx_t *g, wino_train_t *t, const void *gy, void *gx, int y16)
{
    wino_geom_t s = t->bwd;
    s.y16 = y16;
    return conv_run(g, t->kern, t->threads, &s, t->ub, gy, NULL, gx);
}

int wino_train_has_wgrad(const wino_train_t *t)
{
    return t->wgrad;
}

int wino_train_bwd_weights(bk_ctx_t *g, wino_train_t *t, const void *x, const void *gy,
                           float *gw)
{
    void *work = cpu_scratch(g, wino_wgrad_work_bytes(t->kern, &t->fwd));
    if (!work)
        return -1;
    wino_wgrad(t->kern, &t->fwd, x, gy, gw, work, t->threads);
    return 0;
}
