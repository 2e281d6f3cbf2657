/* wino_ref — the scalar kernels of Winograd F(2x2, 3x3) (wino.h): the
 * reference whose bits the vector kernels reproduce, and the kernels of a
 * CPU without AVX-512 (DDPIPE_CONV_ALGO=winograd). The transforms are
 * additions in the order written here; the products fmaf chains. */
#include <math.h>

#include "gpud/cpu/wino.h"

static void ref_in(const wino_geom_t *s, const float *x, long t0, int nr, float *v, size_t xs)
{
    for (int r = 0; r < WINO_ROWS; r++) {
        int img = 0, y0 = 0, x0 = 0;
        if (r < nr)
            wino_tile_at(s, t0 + r, &img, &y0, &x0);
        for (int ch = 0; ch < s->c; ch++) {
            float d[4][4], t[4][4];
            for (int i = 0; i < 4; i++)
                for (int j = 0; j < 4; j++) {
                    int yy = y0 + i - s->pad_h, xx = x0 + j - s->pad_w;
                    d[i][j] = r < nr && yy >= 0 && yy < s->h && xx >= 0 && xx < s->w
                                  ? x[(((size_t)img * s->h + yy) * s->w + xx) * s->c + ch]
                                  : 0.0f;
                }
            for (int j = 0; j < 4; j++) {   /* B^T d */
                t[0][j] = d[0][j] - d[2][j];
                t[1][j] = d[1][j] + d[2][j];
                t[2][j] = d[2][j] - d[1][j];
                t[3][j] = d[1][j] - d[3][j];
            }
            for (int i = 0; i < 4; i++) {   /* (B^T d) B */
                float *o = v + (size_t)ch * WINO_ROWS + r;
                o[(size_t)(i * 4 + 0) * xs] = t[i][0] - t[i][2];
                o[(size_t)(i * 4 + 1) * xs] = t[i][1] + t[i][2];
                o[(size_t)(i * 4 + 2) * xs] = t[i][2] - t[i][1];
                o[(size_t)(i * 4 + 3) * xs] = t[i][1] - t[i][3];
            }
        }
    }
}

static void ref_gemm(const float *v, const float *u, int c, int pw, float *m, int ldm)
{
    for (int r = 0; r < WINO_ROWS; r++)
        for (int j = 0; j < pw; j++) {
            float acc = 0.0f;
            for (int ch = 0; ch < c; ch++)
                acc = fmaf(v[(size_t)ch * WINO_ROWS + r], u[(size_t)ch * pw + j], acc);
            m[(size_t)r * ldm + j] = acc;
        }
}

/* The post-ops of one value whose residual is *res: ReLU as max(0, v)
 * with NaN kept (the vector kernels' _mm512_max_ps(0, v)). */
static float post_ops(const bk_post_t *post, float v, float res)
{
    for (int i = 0; i < post->n; i++)
        v = post->op[i] == BK_PO_RELU ? (0.0f > v ? 0.0f : v) : v + res;
    return v;
}

static void ref_out(const wino_geom_t *s, const float *m, size_t xs, long t, const float *bias,
                    float *y)
{
    int img, y0, x0;
    wino_tile_at(s, t, &img, &y0, &x0);
    for (int o = 0; o < s->k; o++) {
        float a[4][4], q[2][4], r[2][2];
        for (int p = 0; p < 16; p++)
            a[p / 4][p % 4] = m[(size_t)p * xs + o];
        for (int j = 0; j < 4; j++) {   /* A^T a */
            q[0][j] = a[0][j] + a[1][j] + a[2][j];
            q[1][j] = a[1][j] - a[2][j] - a[3][j];
        }
        for (int i = 0; i < 2; i++) {   /* (A^T a) A */
            r[i][0] = q[i][0] + q[i][1] + q[i][2];
            r[i][1] = q[i][1] - q[i][2] - q[i][3];
        }
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++) {
                if (y0 + i >= s->oh || x0 + j >= s->ow)
                    continue;
                float *d = y + (((size_t)img * s->oh + y0 + i) * s->ow + x0 + j) * s->k + o;
                float v = bias ? r[i][j] + bias[o] : r[i][j];
                *d = post_ops(&s->post, v, *d);
            }
    }
}

const wino_kern_t WINO_REF = {"scalar", ref_in, ref_gemm, ref_out};
