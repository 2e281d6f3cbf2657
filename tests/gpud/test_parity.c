/* Parity with PyTorch: logits of resnet18 and the seed WideResNet on the
 * committed goldens (tests/golden/gen_parity.py) must match PyTorch 1.13's.
 * Metric, per output tensor: max_i |ours_i - torch_i| / max_i |torch_i|,
 * which must be <= 1e-4 (docs/DESIGN.md "Quality bars"). resnet34, resnet50 and
 * the seed WideResNet at its default widths use synthesised weights (see
 * synth.h): only their logits are committed. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "golden_io.h"
#include "synth.h"

#define TOL 1e-4

/* Run `input` of io through m and compare with `logits`. */
static void check_case(model_t *m, const safetensors_t *io, const char *input,
                       const char *logits, const char *label, int normalise)
{
    int n = 0, nc = model_num_classes(m);
    float *got = golden_forward(m, io, input, normalise, &n);
    float *want = golden_logits(io, logits, n, nc);
    const st_tensor_t *x = safetensors_get(io, input);
    double e = golden_rel_err(got, want, (size_t)n * nc);
    printf("%-28s n=%d %dx%d  max|a-b|/max|b| = %.3g (tol %.0e)\n", label, n,
           (int)x->shape[2], (int)x->shape[3], e, TOL);
    CHECK(e <= TOL, "%s: relative error %.3g > %g (got[0]=%g want[0]=%g)", label, e, TOL,
          (double)got[0], (double)want[0]);
    free(want);
    free(got);
}

static void test_resnet18(void)
{
    safetensors_t *io = golden_open("tests/golden/resnet18_io.safetensors");
    model_t *m = golden_model("resnet18", "cpu", "tests/golden/resnet18.safetensors", NULL, 0, 2);
    int h, w;
    CHECK(model_input_hw(m, &h, &w) == 0 && h == 224 && w == 224, "resnet18 natural size");
    CHECK(model_in_channels(m) == 3 && model_num_classes(m) == 1000, "resnet18 info");
    check_case(m, io, "input_u8", "logits", "resnet18 cpu 224x224", 1);
    check_case(m, io, "input2_u8", "logits2", "resnet18 cpu 97x131", 1);
    model_destroy(&m);
    CHECK(m == NULL, "destroy nulls the pointer");
    safetensors_destroy(&io);
}

static void test_wrn(const char *backend)
{
    static const int small[4] = {8, 16, 24, 32}, rgb[4] = {4, 8, 8, 12};
    char label[64];
    safetensors_t *io = golden_open("tests/golden/wrn_small_io.safetensors");
    model_t *m = golden_model("wideresnet", backend, "tests/golden/wrn_small.safetensors", small,
                              0, 2);
    int h, w;
    CHECK(model_input_hw(m, &h, &w) == 1 && h == 28 && w == 28, "wrn natural size");
    CHECK(model_in_channels(m) == 1 && model_num_classes(m) == 10, "wrn info");
    snprintf(label, sizeof label, "wrn 8,16,24,32 %s", backend);
    check_case(m, io, "input_u8", "logits", label, 0);
    model_destroy(&m);
    safetensors_destroy(&io);

    io = golden_open("tests/golden/wrn_rgb_io.safetensors");
    m = golden_model("wideresnet", backend, "tests/golden/wrn_rgb.safetensors", rgb, 3, 1);
    CHECK(model_in_channels(m) == 3 && model_num_classes(m) == 7, "wrn rgb info");
    snprintf(label, sizeof label, "wrn rgb bf16 %s", backend);
    check_case(m, io, "input_u8", "logits", label, 0);
    model_destroy(&m);
    safetensors_destroy(&io);
}

/* A model of synth_io.safetensors: rebuild its weights and input from the
 * manifest, run, compare. */
static void test_synth(const char *arch)
{
    safetensors_t *io = golden_open("tests/golden/synth_io.safetensors");
    char path[256], err[512] = "", key[128];
    snprintf(path, sizeof path, "/tmp/ddp_synth_%s_%d.safetensors", arch, (int)getpid());
    REQUIRE(synth_weights(io, arch, path, err, sizeof err) == 0, "%s: %s", arch, err);
    model_opts_t o = {.arch = arch, .threads = 2};
    model_t *m = model_new(&o, "cpu", path, err, sizeof err);
    unlink(path);
    REQUIRE(m, "%s: %s", arch, err);
    snprintf(key, sizeof key, "%s.input", arch);
    int64_t in[4];
    REQUIRE(safetensors_meta(io, key) && synth_shape(safetensors_meta(io, key), in, 4) == 4,
            "%s", key);
    snprintf(key, sizeof key, "%s.normalize", arch);
    int norm = safetensors_meta(io, key) && strcmp(safetensors_meta(io, key), "imagenet") == 0;
    snprintf(key, sizeof key, "%s.logits", arch);
    const st_tensor_t *y = safetensors_get(io, key);
    REQUIRE(y && y->ndim == 2 && y->shape[0] == in[0], "%s", key);
    size_t npx = (size_t)(in[0] * in[1] * in[2] * in[3]), nl = (size_t)y->numel;
    uint8_t *px = malloc(npx);
    float *want = malloc(nl * sizeof *want), *got = malloc(nl * sizeof *got);
    REQUIRE(px && want && got && st_tensor_to_f32(y, want, nl) == 0, "alloc");
    snprintf(key, sizeof key, "input.%s", arch);
    synth_pixels(key, px, npx);
    static const float mean[3] = {0.485f, 0.456f, 0.406f}, std[3] = {0.229f, 0.224f, 0.225f};
    int rc = model_forward_u8(m, px, (int)in[0], (int)in[1], (int)in[2], (int)in[3],
                              norm ? mean : NULL, norm ? std : NULL, got, err, sizeof err);
    CHECK(rc == 0, "%s forward: %s", arch, err);
    double e = golden_rel_err(got, want, nl);
    printf("%-28s n=%d %dx%d  max|a-b|/max|b| = %.3g (tol %.0e, synthesised weights)\n", arch,
           (int)in[0], (int)in[2], (int)in[3], e, TOL);
    CHECK(e <= TOL, "%s: relative error %.3g > %g", arch, e, TOL);
    free(px);
    free(want);
    free(got);
    model_destroy(&m);
    safetensors_destroy(&io);
}

int main(void)
{
    test_wrn("cpu");
    test_wrn("ref");
    test_resnet18();
    test_synth("resnet34");
    test_synth("resnet50");
    test_synth("wideresnet");
    return tc_done("test_parity");
}
