/* Dropout's mask kernel (host_kernels.c hk_dropout, both layouts) draws
 * exactly the reference's decision (ref_dropout_keep) for every element:
 * the kernel's split hash (the index half once per call, an integer
 * threshold) must not change a single mask bit, or training runs would no
 * longer repeat across versions and backends. Probabilities include ones
 * that sit exactly on a 2^-24 step and ones between steps. */
#include "gpud/cpu/host_kernels.h"
#include "gpud/cpu/ref_ops.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static int s_fail;

static float expected(const float *x, const int s[4], int b, size_t logical, size_t at, float p,
                      uint64_t key)
{
    (void)s, (void)b;
    return ref_dropout_keep(key, logical, p) ? x[at] * (1.0f / (1.0f - p)) : 0.0f;
}

static void check_case(const int s[4], float p, int nhwc)
{
    size_t per = (size_t)s[1] * s[2] * s[3], hw = (size_t)s[2] * s[3], n = (size_t)s[0] * per;
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    int64_t ids[8] = {7, 3, 1000000007, 0, 42, 5, 6, 9};
    for (size_t i = 0; i < n; i++)
        x[i] = (float)((i * 2654435761u) % 1000) / 997.0f - 0.5f;
    uint64_t keys[8];
    for (int b = 0; b < 8; b++)
        keys[b] = dropout_sample_key(1234, 77, ids[b]);
    hk_dropout(y, x, s, p, 5, keys, nhwc);
    size_t bad = 0, kept = 0;
    for (int b = 0; b < s[0]; b++) {
        uint64_t key = ref_dropout_key(1234, 77, ids[b], 5);
        for (size_t i = 0; i < per; i++) {
            size_t logical = nhwc ? (i % s[1]) * hw + i / s[1] : i, at = b * per + i;
            float want = expected(x, s, b, logical, at, p, key);
            bad += y[at] != want;
            kept += y[at] != 0.0f;
        }
    }
    if (bad) {
        fprintf(stderr, "FAIL shape %dx%dx%dx%d p %.9g %s: %zu of %zu elements differ\n", s[0], s[1],
                s[2], s[3], p, nhwc ? "nhwc" : "nchw", bad, n);
        s_fail++;
    }
    if (n >= 100 && p > 0.05f && p < 0.95f && (kept == 0 || kept == n)) {
        fprintf(stderr, "FAIL p %.3g: kept %zu of %zu\n", p, kept, n);
        s_fail++;
    }
    free(x);
    free(y);
}

int main(void)
{
    const int shapes[][4] = {{3, 16, 7, 5}, {8, 3, 11, 13}, {1, 1, 1, 1}, {2, 64, 4, 4}};
    const float ps[] = {0.3f, 0.5f, 0.1f, 0.0f, 1e-7f, 3.0f / 16777216.0f, 0.9f,
                        (float)(8388609.0 / 16777216.0), nextafterf(0.25f, 1.0f)};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (size_t j = 0; j < sizeof ps / sizeof ps[0]; j++)
            for (int nhwc = 0; nhwc < 2; nhwc++)
                check_case(shapes[i], ps[j], nhwc);
    /* the threshold against the reference's double comparison, bit by bit
     * at the boundary of a few probabilities */
    for (size_t j = 0; j < sizeof ps / sizeof ps[0]; j++) {
        uint64_t t = ref_dropout_threshold(ps[j]);
        for (uint64_t bits = t ? t - 1 : 0; bits <= t + 1 && bits < (1u << 24); bits++)
            if ((bits >= t) != ((double)bits / 16777216.0 >= (double)ps[j])) {
                fprintf(stderr, "FAIL threshold p %.9g bits %llu\n", ps[j], (unsigned long long)bits);
                s_fail++;
            }
    }
    printf("%s\n", s_fail ? "FAILED" : "1 passed, 0 failed");
    return s_fail ? 1 : 0;
}
