/* cuda_sync16 — see cuda_sync16.h. */
#include "gpud/cuda/cuda_sync16.h"
#include "gpud/cuda/cuda_bn16_kernels.h"
#include "gpud/cuda/cuda_infer.h"
#include "gpud/cuda/cuda_priv.h"

#define BN(be) (&cu_be(be)->traffic.bn)

static int npix4(const int s[4])
{
    return s[0] * s[2] * s[3];
}

void cu16_chan_sums(backend_t *be, const void *x, const int s[4], const float *center,
                    double *out)
{
    size_t c = (size_t)s[1];
    const float *dcen;
    double *dsum = cu_sums_scratch(be, BN(be), c, ckb_sum_parts((size_t)npix4(s)), c, center,
                                   &dcen);   /* the sums, then their partials */
    if (!dsum)
        return;
    cu_note(be, ckb_chan_sums(cu_be(be)->stream, cuinf_fp16(be), x, npix4(s), (int)c, dcen, dsum,
                              dsum + c),
            "16-bit channel sums");
    cu_down_be_n(be, BN(be), out, dsum, c * sizeof(double));
}

void cu16_bn_grad_sums(backend_t *be, const void *x, const void *y, const void *gy,
                       const int s[4], int relu, float gscale, const float *center,
                       double *out)
{
    if (!cu_gscale_one(be, gscale))
        return;
    size_t c = (size_t)s[1];
    const float *dcen;
    double *dsum = cu_sums_scratch(be, BN(be), 2 * c, ckb_sum_parts((size_t)npix4(s)), c, center,
                                   &dcen);   /* the 2c sums, then their partials */
    if (!dsum)
        return;
    cu_note(be, ckb_bn_grad_sums(cu_be(be)->stream, cuinf_fp16(be), x, relu ? y : NULL, gy, NULL,
                                 npix4(s), (int)c, dcen, dsum, dsum + 2 * c),
            "16-bit batch-norm gradient sums");
    cu_down_be_n(be, BN(be), out, dsum, 2 * c * sizeof(double));
}

void cu16_bn_grad_apply(backend_t *be, void *gx, const void *x, const void *y, const void *gy,
                        const int s[4], int relu, float gscale, const float *center,
                        const float *scale, const float *a, const float *b)
{
    if (!cu_gscale_one(be, gscale))
        return;
    size_t c = (size_t)s[1];
    const float *v[4] = {center, scale, a, b};
    float *d = cu_vectors_up(be, BN(be), c, 4, v);
    if (!d)
        return;
    cu_note(be, ckb_bn_grad_apply(cu_be(be)->stream, cuinf_fp16(be), gx, x, relu ? y : NULL, NULL,
                                  gy, npix4(s), (int)c, d, d + c, d + 2 * c, d + 3 * c),
            "16-bit batch-norm gradient kernel");
}
