/* model_input — a batch's pixels to the network's input: uint8 CHW to
 * normalised floats exactly as torchvision's ToTensor + Normalize, and the
 * checks of a batch's shape against the architecture, the record of a batch
 * staged ahead. */
#include "gpud/model_priv.h"

#include "common/errbuf.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* torchvision: ToTensor divides by 255 in float, Normalize subtracts the
 * mean and divides by the std, each step rounded to float. A byte has only
 * 256 values, so each channel's results are tabulated once per call: the
 * same floats, without a division per pixel. */
float *model_u8_table(const model_t *m, int c, const float *mean, const float *std, char *err,
                      size_t errlen)
{
    if ((mean == NULL) != (std == NULL)) {
        err_set(err, errlen, "%s: mean and std must both be given or both NULL",
                m->arch->name);
        return NULL;
    }
    if (c < 1 || c > 64) {
        err_set(err, errlen, "%s: %d input channels", m->arch->name, c);
        return NULL;
    }
    for (int ch = 0; std && ch < c; ch++)
        if (!(fabsf(std[ch]) > 0.0f) || !isfinite(std[ch]) || !isfinite(mean[ch])) {
            err_set(err, errlen, "%s: normalisation std[%d]=%g / mean[%d]=%g is not usable",
                    m->arch->name, ch, (double)std[ch], ch, (double)mean[ch]);
            return NULL;
        }
    float *lut = malloc((size_t)c * 256 * sizeof *lut);
    if (!lut) {
        err_set(err, errlen, "%s: out of memory", m->arch->name);
        return NULL;
    }
    for (int ch = 0; ch < c; ch++)
        for (int p = 0; p < 256; p++)
            lut[ch * 256 + p] = mean ? ((float)p / 255.0f - mean[ch]) / std[ch]
                                     : (float)p / 255.0f;
    return lut;
}

void model_fill_u8(const void *ctx, int first, int k, float *dst)
{
    const model_u8_src_t *u = ctx;
    size_t per = (size_t)u->c * u->hw;
    const uint8_t *src = u->px + (size_t)first * per;
#pragma omp parallel for schedule(static) num_threads(u->threads)
    for (int sc = 0; sc < k * u->c; sc++) {
        const float *lut = u->lut + (sc % u->c) * 256;
        const uint8_t *p = src + (size_t)sc * u->hw;
        float *d = dst + (size_t)sc * u->hw;
        for (int i = 0; i < u->hw; i++)
            d[i] = lut[p[i]];
    }
}

void model_fill_f32(const void *ctx, int first, int k, float *dst)
{
    const model_f32_src_t *f = ctx;
    memcpy(dst, f->x + (size_t)first * f->per, (size_t)k * f->per * sizeof *dst);
}

int model_check_input(const model_t *m, int n, int c, int h, int w, char *err, size_t errlen)
{
    if (n < 0 || h < 1 || w < 1 || h > 8192 || w > 8192) {
        err_set(err, errlen, "%s: bad input shape n=%d %dx%d", m->arch->name, n, h, w);
        return -1;
    }
    if (c != m->info.in_channels) {
        err_set(err, errlen, "%s: input has %d channels, the model wants %d "
                "(check --in-channels or the loader's color conversion)", m->arch->name, c,
                m->info.in_channels);
        return -1;
    }
    if (m->info.hw_fixed && (h != m->info.nat_h || w != m->info.nat_w)) {
        err_set(err, errlen, "%s: input is %dx%d, the model wants %dx%d", m->arch->name, h,
                w, m->info.nat_h, m->info.nat_w);
        return -1;
    }
    return 0;
}

int model_train_staging(model_t *m, int nx, int n, int c, int h, int w, char *err,
                        size_t errlen)
{
    size_t need = (size_t)nx * c * h * w;
    if (need > m->t_cap) {
        float *x = realloc(m->t_x, need * sizeof *x);
        if (!x) {
            err_set(err, errlen, "%s: out of memory for a %dx%dx%dx%d batch", m->arch->name,
                    nx, c, h, w);
            return -1;
        }
        m->t_x = x;
        m->t_cap = need;
    }
    float *dl = realloc(m->t_dl, (size_t)(n > 0 ? n : 1) * sizeof *dl);
    if (!dl) {
        err_set(err, errlen, "%s: out of memory", m->arch->name);
        return -1;
    }
    m->t_dl = dl;
    return 0;
}

int model_staged_match(const staged_input_t *t, const uint8_t *px, int n, int c, int h, int w,
                       const float *mean, const float *std)
{
    return t->px && t->px == px && t->n == n && t->c == c && t->h == h && t->w == w &&
           t->norm == (mean != NULL) &&
           (!mean || (memcmp(t->mean, mean, (size_t)c * sizeof *mean) == 0 &&
                      memcmp(t->std, std, (size_t)c * sizeof *std) == 0));
}

void model_staged_set(staged_input_t *t, const uint8_t *px, int n, int c, int h, int w,
                      const float *mean, const float *std)
{
    *t = (staged_input_t){.px = px, .n = n, .c = c, .h = h, .w = w, .norm = mean != NULL};
    if (mean) {
        memcpy(t->mean, mean, (size_t)c * sizeof *mean);
        memcpy(t->std, std, (size_t)c * sizeof *std);
    }
}
