/* --precision fp16's numerics (docs/FP16.md): the rounding, the loss
 * scaler and the eval logits.
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
 *     of two a normal float holds.
 *  4. Eval (the recorded ops, never a fused plan): the logits of the parity
 *     goldens' models and inputs with precision fp16 against PyTorch's
 *     models with autocast(float16)'s rounding points done by hooks
 *     (gen_fp16.py, gen_bf16.py's emulated_logits), two WideResNets on the
 *     ref and cpu backends, each on its golden input and on a 32-image
 *     batch, and resnet18 (224x224 and 97x131) on the cpu backend:
 *     - max|a-b| / max|b| against the golden with fp32 sums <= TOL_EMULATED;
 *     - the ref backend (double accumulators): every bit of the golden
 *       with float64 sums (<key>_f64): the same rounding points with sums
 *       too exact for any order to matter. This is the check that sees a
 *       missing or extra rounding point (TOL_EMULATED below);
 *     - the cpu backend (oneDNN's fp32 sums, in its own order): on the
 *       batches at most MAX_DIFFER of the logits off the float64-sum bits;
 *     - every logit an fp16 value, and (golden inputs) ours as far from
 *       PyTorch's fp32 logits as its fp16 is (<key>.fp32_vs_fp16), within
 *       FP32_FAR times either way: the rounding happened, and no more.
 *     resnet18 is not run on the ref backend: 140 s under ASan (its ref
 *     logits are the _f64 golden's bits too; DDPIPE_TEST_FP16_SLOW=1 runs
 *     it).
 *
 * TOL_EMULATED 2.5e-3: 4x the worst measured, 6.59e-4 (resnet18 97x131, ref
 * and cpu alike; wrn 8,16,24,32 4.9e-4). That is one fp16 step of the
 * largest logit (a step is 2^-11..2^-10 of it): at fp16's precision a
 * rounding point's whole effect on the logits is about one step (PyTorch's
 * fp16 is 2.6e-4..6.1e-4 from its fp32), and so is a different sum order's
 * (torch's own fp32 and float64 sums differ by 6.59e-4 there). So this
 * bound catches the wrong format (bf16's steps are 8x larger: bf16 in
 * fp16's place measured 1.8e-3 to 7.7e-3, and FP32_FAR's check caught it on
 * every model) or a broken model, not one missing rounding point: skipping the rounding of BN, add,
 * pool or conv outputs measured at most 9.5e-4. The exact ref check catches
 * each of those (1 to 6 of the 14 logits of wrn rgb, 46 to 99 of a batch's
 * 224 / 320).
 * MAX_DIFFER 1/8: the cpu backend's batches measured 21 of 320 (6.6%) and 8
 * of 224 (3.6%) logits off the float64-sum bits (torch's fp32 sums: 8.1%
 * and 5.4%), a skipped rounding point 20% to 41%. On the golden inputs (9
 * of wrn 8,16,24,32's 30) and on resnet18 (half of them: every small
 * difference grows through its random BatchNorm statistics) there are too
 * few logits, or too much growth, for a count. */
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

#define TOL_EMULATED 2.5e-3
#define MAX_DIFFER (1.0 / 8)
#define FP32_FAR 3.0

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

static model_t *fp16_model(const char *arch, const char *backend, const char *weights,
                           const int *channels, int in_channels)
{
    char path[1024], err[512] = "";
    model_opts_t o = {.arch = arch, .in_channels = in_channels, .threads = 2, .fp16 = 1};
    if (channels) {
        memcpy(o.channels, channels, sizeof o.channels);
        o.n_channels = 4;
    }
    model_t *m = model_new(&o, backend, tc_src(weights, path, sizeof path), err, sizeof err);
    REQUIRE(m, "model_new(%s, %s, fp16): %s", arch, backend, err);
    CHECK(strcmp(model_precision(m), "fp16 (fp32 kernels)") == 0, "%s on %s: precision %s", arch,
          backend, model_precision(m));
    return m;
}

/* `input` of io through m (fp16), against `key` (fp32 sums) and key_f64
 * (float64 sums) of the fp16 golden `ref`: max|a-b| / max|b| <= TOL_EMULATED;
 * at most max_differ of the logits off key_f64's bits (0: the ref backend,
 * exact; 1: no bound). fp32_key: PyTorch's fp32 logits of the input in io
 * (the parity golden), whose distance to ours must be fp16's (the golden's
 * <key>.fp32_vs_fp16) within FP32_FAR times; NULL for the batches, whose
 * fp32 logits no golden holds. */
static void check_case(model_t *m, const safetensors_t *io, const char *input, int normalise,
                       const char *fp32_key, const safetensors_t *ref, const char *key,
                       double max_differ, const char *label)
{
    int n = 0, nc = model_num_classes(m);
    float *got = golden_forward(m, io, input, normalise, &n);
    char k64[96];
    snprintf(k64, sizeof k64, "%s_f64", key);
    float *emu = golden_logits(ref, key, n, nc), *f64 = golden_logits(ref, k64, n, nc);
    size_t total = (size_t)n * nc;
    double ee = golden_rel_err(got, emu, total);
    int off16 = 0, differ = 0;
    for (size_t i = 0; i < total; i++) {
        off16 += !same(fp16_round1(got[i]), got[i]);
        differ += !same(got[i], f64[i]);
    }
    printf("%-22s emulated: max|a-b|/max|b| %.3g (tol %.1e); float64 sums: %d of %zu logits "
           "differ", label, ee, TOL_EMULATED, differ, total);
    CHECK(ee <= TOL_EMULATED, "%s: %.3g from the emulated golden > %g", label, ee, TOL_EMULATED);
    if (max_differ == 0)
        CHECK(differ == 0, "%s: %d of %zu logits differ from autocast's rounding points with "
              "exact sums (%s), which the ref backend's double sums give bit for bit", label,
              differ, total, k64);
    else
        CHECK(differ <= max_differ * (double)total, "%s: %d of %zu logits differ from %s: more "
              "than a sum order moves (%g of them)", label, differ, total, k64, max_differ);
    CHECK(off16 == 0, "%s: %d logits are not fp16 values", label, off16);
    if (fp32_key) {
        float *f32 = golden_logits(io, fp32_key, n, nc);
        char mk[96];
        snprintf(mk, sizeof mk, "%s.fp32_vs_fp16", key);
        const char *meta = safetensors_meta(ref, mk);
        REQUIRE(meta, "%s: no metadata %s", GOLDEN, mk);
        double torch16 = strtod(meta, NULL), ef = golden_rel_err(got, f32, total);
        printf("; from fp32 %.3g (torch's fp16 %.3g)", ef, torch16);
        CHECK(ef >= torch16 / FP32_FAR && ef <= torch16 * FP32_FAR,
              "%s: %.3g from PyTorch's fp32 logits, its fp16 is %.3g from them: not within %gx",
              label, ef, torch16, FP32_FAR);
        free(f32);
    }
    printf("\n");
    free(got);
    free(emu);
    free(f64);
}

/* The WideResNets on both backends (the golden inputs and the 32-image
 * batches), resnet18 on the cpu backend (and on ref if asked). */
static void test_models(const safetensors_t *ref)
{
    static const int small[4] = {8, 16, 24, 32}, rgb[4] = {4, 8, 8, 12};
    static const struct {
        const char *name, *label;
        const int *channels;
        int in_channels;
    } wrn[] = {{"wrn_small", "wrn 8,16,24,32", small, 1}, {"wrn_rgb", "wrn rgb", rgb, 3}};
    static const char *const backends[] = {"ref", "cpu"};
    const char *slow = getenv("DDPIPE_TEST_FP16_SLOW");
    for (int b = 0; b < 2; b++) {
        int exact = b == 0;
        for (size_t w = 0; w < sizeof wrn / sizeof wrn[0]; w++) {
            char path[96], key[96], input[96], label[64];
            snprintf(path, sizeof path, "tests/golden/%s_io.safetensors", wrn[w].name);
            safetensors_t *io = golden_open(path);
            snprintf(path, sizeof path, "tests/golden/%s.safetensors", wrn[w].name);
            model_t *m = fp16_model("wideresnet", backends[b], path, wrn[w].channels,
                                    wrn[w].in_channels);
            snprintf(key, sizeof key, "%s.emulated", wrn[w].name);
            snprintf(label, sizeof label, "%s %s", wrn[w].label, backends[b]);
            check_case(m, io, "input_u8", 0, "logits", ref, key, exact ? 0 : 1, label);
            snprintf(input, sizeof input, "%s.batch_u8", wrn[w].name);
            snprintf(key, sizeof key, "%s.batch_emulated", wrn[w].name);
            snprintf(label, sizeof label, "%s %s x32", wrn[w].label, backends[b]);
            check_case(m, ref, input, 0, NULL, ref, key, exact ? 0 : MAX_DIFFER, label);
            model_destroy(&m);
            safetensors_destroy(&io);
        }
        if (exact && !(slow && strcmp(slow, "1") == 0))
            continue;
        char label[64];
        safetensors_t *io = golden_open("tests/golden/resnet18_io.safetensors");
        model_t *m = fp16_model("resnet18", backends[b], "tests/golden/resnet18.safetensors",
                                NULL, 0);
        snprintf(label, sizeof label, "resnet18 %s 224x224", backends[b]);
        check_case(m, io, "input_u8", 1, "logits", ref, "resnet18.emulated", exact ? 0 : 1,
                   label);
        snprintf(label, sizeof label, "resnet18 %s 97x131", backends[b]);
        check_case(m, io, "input2_u8", 1, "logits2", ref, "resnet18.emulated2", exact ? 0 : 1,
                   label);
        model_destroy(&m);
        safetensors_destroy(&io);
    }
}

int main(void)
{
    safetensors_t *io = golden_open(GOLDEN);
    test_golden(io);
    test_models(io);
    safetensors_destroy(&io);
    test_vs_gcc();
    test_loss_scale();
    return tc_done("test_fp16");
}
