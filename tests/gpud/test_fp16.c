/* --precision fp16's numerics (docs/FP16.md): the rounding and the loss
 * scaler.
 *
 *  1. fp16_round is torch's .to(torch.float16): every bit of the golden
 *     tests/golden/fp16_io.safetensors, made by Debian's PyTorch 1.13 with
 *     `/usr/bin/python3 tests/golden/gen_fp16.py` (ties to even at 1, at the
 *     overflow tie 65520 and among the subnormals, +-inf, NaN, float
 *     subnormals, 4096 random bit patterns, 4096 random floats between 2^-30
 *     and 2^17), in place too. NaNs need only be NaN on both sides (torch's
 *     payload is its own); ours are 0x7fc00000 with the sign kept.
 *  2. fp16_round1 is GCC's (float)(_Float16)x (libgcc's conversion, an
 *     implementation independent of ours) on 2^24 bit patterns spread over
 *     all 2^32 and on the 3 * 65536 patterns whose low 16 bits are 0x0000,
 *     0x1000 and 0x0fff (the 13 bits fp16 drops: exact, a tie, just below a
 *     tie, at every exponent and sign).
 *  3. loss_scale follows torch.cuda.amp.GradScaler: growth after `interval`
 *     finite steps in a row, halving and a skipped step on inf/NaN, no
 *     growth to a float overflow; it also stays at or above FLT_MIN (never
 *     0, so 1/S stays finite), and loss_scale_valid takes exactly the powers
 *     of two a normal float holds. */
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpud/fp16.h"
#include "gpud/fp16_math.h"
#include "gpud/loss_scale.h"
#include "golden_io.h"

static const char *GOLDEN = "tests/golden/fp16_io.safetensors";

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* got equals want bit for bit, or both are NaN. */
static bool same(float got, float want)
{
    return bits(got) == bits(want) || (isnan(got) && isnan(want));
}

static void test_golden(const safetensors_t *io)
{
    const st_tensor_t *tx = safetensors_get(io, "round_x"), *ty = safetensors_get(io, "round_y");
    REQUIRE(tx && ty && tx->numel == ty->numel && tx->dtype == ST_F32 && ty->dtype == ST_F32,
            "round_x / round_y");
    size_t n = (size_t)tx->numel;
    /* the hand-picked cases and both random sets: a shorter golden lost some */
    REQUIRE(n > 8192, "golden of %zu values", n);
    float *x = malloc(n * sizeof *x), *want = malloc(n * sizeof *want), *got = malloc(n * 4);
    REQUIRE(x && want && got && st_tensor_to_f32(tx, x, n) == 0 &&
            st_tensor_to_f32(ty, want, n) == 0, "read");
    fp16_round(got, x, n);
    size_t bad = 0, nans = 0, badnan = 0;
    for (size_t i = 0; i < n; i++) {
        if (!same(got[i], want[i]) && bad++ < 5)
            fprintf(stderr, "  x %08x: got %08x, torch %08x\n", bits(x[i]), bits(got[i]),
                    bits(want[i]));
        if (isnan(x[i])) {
            nans++;
            badnan += bits(got[i]) != ((bits(x[i]) & 0x80000000u) | 0x7fc00000u);
        }
    }
    printf("fp16_round: %zu values (%zu NaNs), %zu differ from torch\n", n, nans, bad);
    CHECK(bad == 0, "fp16_round differs from torch on %zu of %zu values", bad, n);
    CHECK(nans >= 10 && badnan == 0, "%zu of %zu NaNs not 0x7fc00000 with their sign", badnan,
          nans);
    fp16_round(x, x, n);   /* in place */
    CHECK(memcmp(x, got, n * sizeof *x) == 0, "fp16_round in place differs");
    free(x);
    free(want);
    free(got);
}

/* One pattern against GCC's conversion; prints the first few differences. */
static size_t vs_gcc(uint32_t u, size_t bad)
{
    float x = from_bits(u), got = fp16_round1(x), want = (float)(_Float16)x;
    if (!same(got, want)) {
        if (bad < 5)
            fprintf(stderr, "  x %08x: got %08x, _Float16 %08x\n", u, bits(got), bits(want));
        bad++;
    }
    return bad;
}

static void test_vs_gcc(void)
{
    size_t bad = 0, n = 0;
    /* i * 256 walks all 2^32 patterns in even steps; + i % 251 varies the
     * low bits that the step alone would keep at 0 */
    for (uint32_t i = 0; i < (1u << 24); i++, n++)
        bad = vs_gcc(i * 256u + i % 251u, bad);
    static const uint32_t low[] = {0x0000u, 0x1000u, 0x0fffu};
    for (size_t l = 0; l < sizeof low / sizeof low[0]; l++)
        for (uint32_t hi = 0; hi < 65536u; hi++, n++)
            bad = vs_gcc(hi << 16 | low[l], bad);
    printf("fp16_round1: %zu patterns, %zu differ from (float)(_Float16)x\n", n, bad);
    CHECK(bad == 0, "fp16_round1 differs from GCC's _Float16 on %zu of %zu patterns", bad, n);
}

static void test_loss_scale(void)
{
    loss_scale_t s = loss_scale_new(65536.0, 3);
    CHECK(s.scale == 65536.0f && s.interval == 3 && s.tracker == 0 && s.skipped == 0,
          "new: scale %g interval %lld", s.scale, (long long)s.interval);
    loss_scale_update(&s, false);
    CHECK(s.scale == 65536.0f && s.tracker == 1, "1 finite: %g, tracker %lld", s.scale,
          (long long)s.tracker);
    loss_scale_update(&s, false);
    CHECK(s.scale == 65536.0f && s.tracker == 2, "2 finite: %g, tracker %lld", s.scale,
          (long long)s.tracker);
    loss_scale_update(&s, false);
    CHECK(s.scale == 131072.0f && s.tracker == 0 && s.skipped == 0,
          "3 finite: grows to %g, tracker %lld", s.scale, (long long)s.tracker);
    loss_scale_update(&s, true);
    CHECK(s.scale == 65536.0f && s.skipped == 1 && s.tracker == 0,
          "inf: halves to %g, skipped %lld, tracker %lld", s.scale, (long long)s.skipped,
          (long long)s.tracker);
    /* growth needs `interval` finite steps in a row: an inf restarts the count */
    loss_scale_update(&s, false);
    loss_scale_update(&s, false);
    loss_scale_update(&s, true);
    loss_scale_update(&s, false);
    loss_scale_update(&s, false);
    CHECK(s.scale == 32768.0f && s.tracker == 2 && s.skipped == 2,
          "inf between finite steps: %g, tracker %lld", s.scale, (long long)s.tracker);

    /* a long run of infs: down to FLT_MIN and no further, never 0 (1/S finite) */
    bool halving = true;
    for (int i = 0; i < 300; i++) {
        float before = s.scale;
        loss_scale_update(&s, true);
        halving &= s.scale == (before > FLT_MIN ? before * 0.5f : before) &&
                   loss_scale_valid(s.scale);
    }
    CHECK(halving && s.scale == FLT_MIN && s.scale == 0x1p-126f && s.skipped == 302,
          "300 infs: %a (FLT_MIN %a), skipped %lld", s.scale, FLT_MIN, (long long)s.skipped);
    for (int i = 0; i < 3; i++)
        loss_scale_update(&s, false);
    CHECK(s.scale == 0x1p-125f, "grows again from FLT_MIN: %a", s.scale);

    /* GradScaler keeps S when 2S is not a finite float */
    loss_scale_t top = loss_scale_new(0x1p127, 1);
    for (int i = 0; i < 3; i++)
        loss_scale_update(&top, false);
    CHECK(top.scale == 0x1p127f && isfinite(top.scale) && top.tracker == 0 &&
          top.skipped == 0, "2^127, interval 1: %a", top.scale);
    loss_scale_t below = loss_scale_new(0x1p126, 1);
    loss_scale_update(&below, false);
    CHECK(below.scale == 0x1p127f, "2^126 grows to 2^127: %a", below.scale);

    static const double valid[] = {1.0, 65536.0, 0.5, 0x1p-126, 0x1p127, LOSS_SCALE_INIT};
    static const double invalid[] = {0.0, -0.0, -2.0, 3.0, 1000.0, 0x1p128, 0x1p-127,
                                     NAN, INFINITY, -INFINITY};
    for (size_t i = 0; i < sizeof valid / sizeof valid[0]; i++)
        CHECK(loss_scale_valid(valid[i]), "%a is a valid scale", valid[i]);
    for (size_t i = 0; i < sizeof invalid / sizeof invalid[0]; i++)
        CHECK(!loss_scale_valid(invalid[i]), "%a is not a valid scale", invalid[i]);
    printf("loss_scale: checked growth, halving, skips, floor FLT_MIN, cap 2^127, valid scales\n");
}

int main(void)
{
    safetensors_t *io = golden_open(GOLDEN);
    test_golden(io);
    safetensors_destroy(&io);
    test_vs_gcc();
    test_loss_scale();
    return tc_done("test_fp16");
}
