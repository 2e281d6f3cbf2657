/* host_kernels — see host_kernels.h. */
#include "gpud/cpu/host_kernels.h"

#include <stdlib.h>
#include <string.h>

#include "gpud/cpu/ref_ops.h"

void *hk_alloc(bk_graph_t *g, size_t count)
{
    void *p = NULL;
    size_t bytes = (count ? count : 1) * sizeof(float);
    if (posix_memalign(&p, 64, bytes) != 0)
        return bk_fail(g, "out of memory (%zu floats)", count);
    memset(p, 0, bytes);
    return p;
}

void hk_release(backend_t *be, void *buf)
{
    (void)be;
    free(buf);
}

void hk_zero(backend_t *be, void *y, size_t count)
{
    (void)be;
    memset(y, 0, count * sizeof(float));
}

void hk_copy(backend_t *be, void *y, const void *x, size_t count)
{
    (void)be;
    memcpy(y, x, count * sizeof(float));
}

void hk_add(backend_t *be, void *y, const void *a, const void *b, size_t count)
{
    float *py = y;
    const float *pa = a, *pb = b;
#pragma omp parallel for schedule(static) num_threads(be->threads)
    for (size_t i = 0; i < count; i++)
        py[i] = pa[i] + pb[i];
}

void hk_acc(backend_t *be, void *y, const void *x, size_t count)
{
    float *py = y;
    const float *px = x;
#pragma omp parallel for schedule(static) num_threads(be->threads)
    for (size_t i = 0; i < count; i++)
        py[i] += px[i];
}

void hk_ce_fwd(backend_t *be, const void *logits, const int32_t *labels, int n, int k,
               float eps, void *loss)
{
    (void)be;
    ref_ce_fwd(logits, labels, n, k, eps, loss);
}

void hk_ce_bwd(backend_t *be, const void *logits, const int32_t *labels, int n, int k,
               float eps, const void *dloss, void *glogits)
{
    (void)be;
    ref_ce_bwd(logits, labels, n, k, eps, dloss, glogits);
}

void hk_concat(void *y, int cy, void *x, const int xs[4], int off, int to_y, int nhwc)
{
    float *py = y, *px = x;
    int n = xs[0], cx = xs[1];
    size_t hw = (size_t)xs[2] * xs[3];
    if (nhwc) {   /* runs of cx channels per pixel */
        for (size_t p = 0; p < (size_t)n * hw; p++) {
            float *a = py + p * cy + off, *b = px + p * cx;
            memcpy(to_y ? a : b, to_y ? b : a, (size_t)cx * sizeof(float));
        }
        return;
    }
    for (int b = 0; b < n; b++) {   /* one block of cx planes per sample */
        float *a = py + ((size_t)b * cy + off) * hw, *s = px + (size_t)b * cx * hw;
        memcpy(to_y ? a : s, to_y ? s : a, (size_t)cx * hw * sizeof(float));
    }
}

void hk_flatten(void *y, const void *x, const int xs[4], int backward, int nhwc)
{
    size_t per = (size_t)xs[1] * xs[2] * xs[3], hw = (size_t)xs[2] * xs[3];
    if (!nhwc || hw == 1) {   /* same bytes: NCHW order already */
        memcpy(y, x, (size_t)xs[0] * per * sizeof(float));
        return;
    }
    const float *px = x;
    float *py = y;
    /* forward: y[b][c*hw + p] = x[b][p*C + c]; backward the reverse */
    for (int b = 0; b < xs[0]; b++)
        for (int c = 0; c < xs[1]; c++)
            for (size_t p = 0; p < hw; p++) {
                size_t flat = b * per + c * hw + p, hwc = b * per + p * xs[1] + c;
                if (backward)
                    py[hwc] = px[flat];
                else
                    py[flat] = px[hwc];
            }
}

void hk_dropout(void *y, const void *x, const int s[4], float p, uint64_t seed,
                uint64_t step, uint32_t op, const int64_t *ids, int nhwc)
{
    const float *px = x;
    float *py = y;
    size_t per = (size_t)s[1] * s[2] * s[3], hw = (size_t)s[2] * s[3];
    if (p == 0.0f) {
        if (py != px)
            memcpy(py, px, (size_t)s[0] * per * sizeof(float));
        return;
    }
    float scale = 1.0f / (1.0f - p);
    for (int b = 0; b < s[0]; b++) {
        uint64_t key = ref_dropout_key(seed, step, ids ? ids[b] : b, op);
        for (size_t i = 0; i < per; i++) {
            /* i walks memory; the mask is drawn by the logical NCHW index */
            size_t logical = nhwc ? (i % s[1]) * hw + i / s[1] : i;
            size_t at = b * per + i;
            py[at] = ref_dropout_keep(key, logical, p) ? px[at] * scale : 0.0f;
        }
    }
}
