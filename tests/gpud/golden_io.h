/* golden_io — reading the committed goldens (tests/golden/, safetensors files)
 * for gpud's parity tests on every backend: the relative error they are
 * judged by, opening a golden, building a model from committed weights, the
 * logits of a golden's uint8 input and the PyTorch logits to compare them
 * with. Failures to read a golden stop the test (REQUIRE): nothing after
 * them could pass. Brings tcheck.h. */
#ifndef DDP_TEST_GOLDEN_IO_H
#define DDP_TEST_GOLDEN_IO_H

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/safetensors.h"
#include "gpud/model.h"
#include "tcheck.h"

/* max_i |a_i - b_i| / max_i |b_i| (the parity metric of docs/DESIGN.md
 * "Quality bars"; b is the reference). A NaN difference wins, so NaN never passes a bound. */
static inline double golden_rel_err(const float *a, const float *b, size_t n)
{
    double maxdiff = 0.0, maxref = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        maxdiff = d > maxdiff || isnan(d) ? d : maxdiff;
        maxref = fabs((double)b[i]) > maxref ? fabs((double)b[i]) : maxref;
    }
    return maxref > 0 ? maxdiff / maxref : maxdiff;
}

/* The index of the largest of v[0, n) (the first of equals): a sample's
 * top-1 class from its logits. */
static inline int golden_argmax(const float *v, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        best = v[i] > v[best] ? i : best;
    return best;
}

/* The golden at `rel` under the source tree (tc_src). */
static inline safetensors_t *golden_open(const char *rel)
{
    char path[1024], err[512] = "";
    safetensors_t *st = safetensors_open(tc_src(rel, path, sizeof path), err, sizeof err);
    REQUIRE(st, "%s", err);
    return st;
}

/* `arch` on `backend` with the committed weights at `weights` (under the
 * source tree); channels: the WideResNet's 4 widths, or NULL. */
static inline model_t *golden_model(const char *arch, const char *backend, const char *weights,
                                    const int *channels, int in_channels, int threads)
{
    char path[1024], err[512] = "";
    model_opts_t o = {.arch = arch, .in_channels = in_channels, .threads = threads};
    if (channels) {
        memcpy(o.channels, channels, sizeof o.channels);
        o.n_channels = 4;
    }
    model_t *m = model_new(&o, backend, tc_src(weights, path, sizeof path), err, sizeof err);
    REQUIRE(m, "model_new(%s, %s, %s): %s", arch, backend, weights, err);
    return m;
}

/* Logits of m on the uint8 NCHW batch `input` of io (n * classes floats,
 * caller frees; *n_out = n), normalised by io's "mean"/"std" when asked. A
 * failed forward is a CHECK failure: the logits stay 0 and the comparison
 * that follows reports it too. */
static inline float *golden_forward(model_t *m, const safetensors_t *io, const char *input,
                                    int normalise, int *n_out)
{
    const st_tensor_t *x = safetensors_get(io, input);
    REQUIRE(x && x->dtype == ST_U8 && x->ndim == 4, "%s: golden uint8 NCHW input", input);
    float mean[3], std[3];
    if (normalise)
        REQUIRE(st_tensor_to_f32(safetensors_get(io, "mean"), mean, 3) == 0 &&
                st_tensor_to_f32(safetensors_get(io, "std"), std, 3) == 0, "mean/std");
    int n = (int)x->shape[0], nc = model_num_classes(m);
    float *got = calloc((size_t)n * nc, sizeof *got);
    REQUIRE(got, "alloc");
    char err[512] = "";
    int rc = model_forward_u8(m, x->data, n, (int)x->shape[1], (int)x->shape[2],
                              (int)x->shape[3], normalise ? mean : NULL, normalise ? std : NULL,
                              got, err, sizeof err);
    CHECK(rc == 0, "%s: forward failed: %s", input, err);
    *n_out = n;
    return got;
}

/* The reference logits `key` of io as n x nc floats (caller frees). */
static inline float *golden_logits(const safetensors_t *io, const char *key, int n, int nc)
{
    const st_tensor_t *y = safetensors_get(io, key);
    REQUIRE(y && y->ndim == 2 && y->shape[0] == n && y->shape[1] == nc,
            "%s: golden logits of %d x %d", key, n, nc);
    float *want = malloc((size_t)n * nc * sizeof *want);
    REQUIRE(want && st_tensor_to_f32(y, want, (size_t)n * nc) == 0, "%s: read", key);
    return want;
}

#endif
