/* gpud/finite: the first NaN or infinity of an F32 array — every position
 * of a block and across blocks, every NaN/inf bit pattern, unaligned data,
 * finite extremes (FLT_MAX, subnormals, -0) accepted — and the message. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpud/finite.h"
#include "tcheck.h"

#define N 1000

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static void test_positions(void)
{
    static float a[N];
    for (int i = 0; i < N; i++)   /* finite extremes everywhere */
        a[i] = i % 4 == 0 ? FLT_MAX : i % 4 == 1 ? -FLT_MAX : i % 4 == 2 ? FLT_MIN / 8 : -0.0f;
    CHECK(finite_first_bad(a, N) == -1, "finite extremes reported as non-finite");
    CHECK(finite_first_bad(a, 0) == -1, "an empty array is finite");
    const uint32_t bad[] = {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7fffffffu,
                            0x7f800000u, 0xff800000u};   /* NaNs, +inf, -inf */
    const int at[] = {0, 1, 255, 256, 257, 511, 512, N - 1};
    for (size_t b = 0; b < sizeof bad / sizeof *bad; b++)
        for (size_t k = 0; k < sizeof at / sizeof *at; k++) {
            float keep = a[at[k]];
            a[at[k]] = from_bits(bad[b]);
            int64_t got = finite_first_bad(a, N);
            CHECK(got == at[k], "0x%08x at %d: found at %lld", bad[b], at[k], (long long)got);
            CHECK(finite_first_bad(a, (size_t)at[k]) == -1, "0x%08x at %d: seen before it",
                  bad[b], at[k]);
            a[at[k]] = keep;
        }
    a[700] = NAN;   /* the first of two */
    a[300] = INFINITY;
    CHECK(finite_first_bad(a, N) == 300, "two bad values: not the first");
}

static void test_unaligned(void)
{
    unsigned char raw[4 * 40 + 1];
    float v[40];
    for (int i = 0; i < 40; i++)
        v[i] = (float)i;
    v[33] = -INFINITY;
    memcpy(raw + 1, v, sizeof v);   /* as in a mapped file: any offset */
    CHECK(finite_first_bad(raw + 1, 40) == 33, "unaligned: wrong index");
}

static void test_message(void)
{
    float w[6] = {1, 2, 3, NAN, 5, INFINITY};
    char err[256] = "";
    CHECK(finite_check("fc.weight", w, 3, err, sizeof err) == 0, "finite prefix refused: %s", err);
    CHECK(finite_check("fc.weight", w, 6, err, sizeof err) == -1, "NaN accepted");
    CHECK(strcmp(err, "fc.weight: element 3 of 6 is nan") == 0, "message: %s", err);
    w[3] = -INFINITY;
    CHECK(finite_check("b", w, 6, err, sizeof err) == -1 && strcmp(err, "b: element 3 of 6 is -inf") == 0,
          "message: %s", err);
}

int main(void)
{
    test_positions();
    test_unaligned();
    test_message();
    return tc_done("test_finite");
}
