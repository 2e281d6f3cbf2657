/* model_new's refusals (each names the tensor and both shapes, with a hint;
 * a non-finite weight, the tensor and element),
 * forward's input checks, and model_topk_ce. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/safetensors.h"
#include "gpud/model.h"
#include "tcheck.h"

static char golden_wrn[1024], golden_r18[1024], tmpdir[256];

/* model_new must fail with every string of `want` in the message. */
static void expect_fail(const model_opts_t *o, const char *path, const char *want1,
                        const char *want2)
{
    char err[512] = "";
    model_t *m = model_new(o, "cpu", path, err, sizeof err);
    CHECK(m == NULL, "model_new(%s, %s) accepted", o->arch, path);
    CHECK(strstr(err, want1) && (!want2 || strstr(err, want2)),
          "error '%s' lacks '%s' / '%s'", err, want1, want2 ? want2 : "");
    printf("refused as expected: %s\n", err);
    model_destroy(&m);
}

static model_opts_t wrn_opts(int c0, int c1, int c2, int c3)
{
    model_opts_t o = {.arch = "wideresnet", .threads = 1, .n_channels = 4,
                      .channels = {c0, c1, c2, c3}};
    return o;
}

/* Copy of wrn_small without `drop` and with an extra tensor `add`. */
static const char *variant(const char *name, const char *drop, const char *add,
                           st_dtype_t add_dtype, char *out, size_t len)
{
    char err[512] = "";
    safetensors_t *st = safetensors_open(golden_wrn, err, sizeof err);
    st_writer_t *w = st_writer_new();
    REQUIRE(st && w, "%s", err);
    for (size_t i = 0; i < safetensors_count(st); i++) {
        const st_tensor_t *t = safetensors_at(st, i);
        if (drop && strcmp(t->name, drop) == 0)
            continue;
        REQUIRE(st_writer_add(w, t->name, t->dtype, t->ndim, t->shape, t->data, err,
                              sizeof err) == 0, "%s", err);
    }
    if (add) {   /* F32 [2,2], or I64 [10] (the shape of fc.bias) */
        int64_t shape[2] = {2, 2}, shape10[1] = {10};
        int64_t data[10] = {1, 2, 3, 4};
        int i64 = add_dtype == ST_I64;
        REQUIRE(st_writer_add(w, add, add_dtype, i64 ? 1 : 2, i64 ? shape10 : shape, data, err,
                              sizeof err) == 0, "%s", err);
    }
    snprintf(out, len, "%s/%s", tmpdir, name);
    REQUIRE(st_writer_save(w, out, err, sizeof err) == 0, "%s", err);
    st_writer_destroy(&w);
    safetensors_destroy(&st);
    return out;
}

/* wrn_small with one tensor replaced by `vals` (same shape, F32). */
static const char *patched(const char *name, const char *tensor, float value, char *out,
                           size_t len)
{
    char err[512] = "";
    safetensors_t *st = safetensors_open(golden_wrn, err, sizeof err);
    st_writer_t *w = st_writer_new();
    REQUIRE(st && w, "%s", err);
    for (size_t i = 0; i < safetensors_count(st); i++) {
        const st_tensor_t *t = safetensors_at(st, i);
        float *v = NULL;
        if (strcmp(t->name, tensor) == 0) {
            v = malloc((size_t)t->numel * sizeof *v);
            REQUIRE(v && st_tensor_to_f32(t, v, (size_t)t->numel) == 0, "patch");
            v[0] = value;
        }
        REQUIRE(st_writer_add(w, t->name, v ? ST_F32 : t->dtype, t->ndim, t->shape,
                              v ? (const void *)v : t->data, err, sizeof err) == 0, "%s", err);
        free(v);
    }
    snprintf(out, len, "%s/%s", tmpdir, name);
    REQUIRE(st_writer_save(w, out, err, sizeof err) == 0, "%s", err);
    st_writer_destroy(&w);
    safetensors_destroy(&st);
    return out;
}

static void test_refusals(void)
{
    char p[1024];
    model_opts_t o = {.arch = "wideresnet", .threads = 1};
    expect_fail(&o, golden_wrn, "input_block.cbr.0.weight: file has [8,1,3,3], model wants "
                "[16,1,3,3] (check --channels)", NULL);
    o = wrn_opts(8, 16, 32, 32);
    expect_fail(&o, golden_wrn, "block3.scale.weight: file has [24,16,1,1], model wants "
                "[32,16,1,1] (check --channels)", NULL);
    o = wrn_opts(8, 16, 24, 32);
    o.num_classes = 5;
    expect_fail(&o, golden_wrn, "fc.weight: file has [10,32], model wants [5,32] (check --classes)", NULL);
    o.num_classes = 0;
    o.in_channels = 3;
    expect_fail(&o, golden_wrn, "input_block.cbr.0.weight: file has [8,1,3,3], model wants "
                "[8,3,3,3]", NULL);
    o.in_channels = 0;
    expect_fail(&o, golden_r18, "input_block.cbr.0.weight: missing from",
                "resnet18.safetensors (not a wideresnet state_dict? check --model)");
    expect_fail(&o, variant("extra.safetensors", NULL, "foo.weight", ST_F32, p, sizeof p),
                "unexpected tensor foo.weight (shape [2,2]) is not part of wideresnet",
                "wrong --model?");
    expect_fail(&o, variant("missing.safetensors", "block3.scale.bias", NULL, 0, p, sizeof p),
                "block3.scale.bias: missing from", "missing.safetensors");
    expect_fail(&o, variant("int.safetensors", "fc.bias", "fc.bias", ST_I64, p, sizeof p),
                "fc.bias: dtype I64 is not a float type", NULL);
    expect_fail(&o, patched("var.safetensors", "block2.layer1.cbr.1.running_var", -1.0f, p,
                            sizeof p), "block2.layer1.cbr.1.running_var[0] = -1", NULL);
    /* non-finite weights are refused at load (gpud/finite.h), naming the element */
    expect_fail(&o, patched("nan.safetensors", "input_block.cbr.0.weight", NAN, p, sizeof p),
                "input_block.cbr.0.weight: element 0 of 72 is nan", "must be finite");
    expect_fail(&o, patched("inf.safetensors", "fc.bias", -INFINITY, p, sizeof p),
                "fc.bias: element 0 of 10 is -inf", NULL);
    expect_fail(&o, patched("rv.safetensors", "block2.layer1.cbr.1.running_var", INFINITY, p,
                            sizeof p), "block2.layer1.cbr.1.running_var: element 0 of", NULL);
    o.n_channels = 3;
    expect_fail(&o, golden_wrn, "4 widths", NULL);
    o = (model_opts_t){.arch = "resnet18"};
    expect_fail(&o, golden_wrn, "conv1.weight: missing from", "wrn_small.safetensors");
    o.num_classes = 10;
    expect_fail(&o, golden_r18, "fc.weight: file has [1000,512], model wants [10,512] (check --classes)",
                NULL);
    o = (model_opts_t){.arch = "vgg16"};
    expect_fail(&o, golden_r18, "unknown model 'vgg16'", NULL);
    o = (model_opts_t){.arch = "resnet18"};
    expect_fail(&o, "/nonexistent/w.safetensors", "cannot open", "/nonexistent/w.safetensors");

    /* num_batches_tracked is optional: a file without it loads */
    o = wrn_opts(8, 16, 24, 32);
    char err[512] = "";
    model_t *m = model_new(&o, "cpu", variant("nbt.safetensors",
                                              "block1.layer1.cbr.1.num_batches_tracked", NULL,
                                              0, p, sizeof p), err, sizeof err);
    CHECK(m != NULL, "file without num_batches_tracked: %s", err);
    model_destroy(&m);
}

static void test_forward_checks(void)
{
    model_opts_t o = wrn_opts(8, 16, 24, 32);
    char err[512] = "";
    model_t *m = model_new(&o, "cpu", golden_wrn, err, sizeof err);
    REQUIRE(m, "%s", err);
    uint8_t px[3 * 32 * 32] = {0};
    float logits[10], mean = 0.5f, zero = 0.0f;
    CHECK(model_forward_u8(m, px, 1, 3, 28, 28, NULL, NULL, logits, err, sizeof err) < 0 &&
          strstr(err, "3 channels, the model wants 1"), "channels: %s", err);
    CHECK(model_forward_u8(m, px, 1, 1, 32, 32, NULL, NULL, logits, err, sizeof err) < 0 &&
          strstr(err, "32x32, the model wants 28x28"), "size: %s", err);
    CHECK(model_forward_u8(m, px, 1, 1, 28, 28, &mean, &zero, logits, err, sizeof err) < 0 &&
          strstr(err, "std[0]=0"), "zero std: %s", err);
    CHECK(model_forward_u8(m, px, 1, 1, 28, 28, &mean, NULL, logits, err, sizeof err) < 0,
          "mean without std");
    CHECK(model_forward_u8(m, px, 0, 1, 28, 28, NULL, NULL, logits, err, sizeof err) == 0,
          "n=0 is a no-op: %s", err);
    CHECK(model_forward_u8(m, px, 1, 1, 28, 28, NULL, NULL, logits, err, sizeof err) == 0,
          "forward: %s", err);
    CHECK(model_micro_batch(m) == MODEL_DEFAULT_MICRO_BATCH, "default micro-batch");
    CHECK(strcmp(model_arch(m), "wideresnet") == 0, "arch name");
    model_destroy(&m);

    /* resnet18 takes any size, down to 1x1, as PyTorch's does */
    o = (model_opts_t){.arch = "resnet18", .threads = 1, .micro_batch = 1};
    m = model_new(&o, "cpu", golden_r18, err, sizeof err);
    REQUIRE(m, "%s", err);
    float l1000[1000];
    uint8_t tiny[3] = {0, 128, 255};
    CHECK(model_forward_u8(m, tiny, 1, 3, 1, 1, NULL, NULL, l1000, err, sizeof err) == 0,
          "1x1 input: %s", err);
    model_destroy(&m);
}

static void test_topk_ce(void)
{
    const float l[2 * 5] = {1.0f, 3.0f, 3.0f, 2.0f, NAN, 1000.0f, 0.0f, -1.0f, 0.0f, 2.0f};
    int32_t labels[2] = {2, 1}, topk[2 * 6];
    float loss[2];
    model_topk_ce(l, 2, 5, labels, 6, topk, loss);
    const int32_t want[12] = {4, 1, 2, 3, 0, -1, 0, 4, 1, 3, 2, -1};
    CHECK(memcmp(topk, want, sizeof want) == 0,
          "top-k (ties by lower id, NaN first as torch.topk, -1 past the classes): %d %d %d %d %d %d | "
          "%d %d %d %d %d %d", topk[0], topk[1], topk[2], topk[3], topk[4], topk[5], topk[6],
          topk[7], topk[8], topk[9], topk[10], topk[11]);
    CHECK(isnan(loss[0]), "NaN logit gives NaN loss");
    CHECK(fabs(loss[1] - 1000.0) < 1e-3, "stable log-sum-exp: %g", (double)loss[1]);

    const float m[3] = {0.5f, -1.0f, 2.0f};
    int32_t lab[3] = {0, 2, -1};
    float ce[3];
    int32_t t1[3];
    model_topk_ce(m, 1, 3, lab, 1, t1, ce);
    double lse = log(exp(0.5) + exp(-1.0) + exp(2.0));
    CHECK(t1[0] == 2 && fabs(ce[0] - (lse - 0.5)) < 1e-6, "ce %g vs %g", (double)ce[0],
          lse - 0.5);
    model_topk_ce(m, 1, 3, lab + 2, 0, NULL, ce);
    CHECK(isnan(ce[0]), "label -1 gives NaN");
    lab[0] = 3;
    model_topk_ce(m, 1, 3, lab, 0, NULL, ce);
    CHECK(isnan(ce[0]), "label out of range gives NaN");
}

int main(void)
{
    tc_src("tests/golden/wrn_small.safetensors", golden_wrn, sizeof golden_wrn);
    tc_src("tests/golden/resnet18.safetensors", golden_r18, sizeof golden_r18);
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ddp_ml_XXXXXX");
    REQUIRE(mkdtemp(tmpdir), "mkdtemp");
    test_refusals();
    test_forward_checks();
    test_topk_ce();
    const char *files[] = {"extra", "missing", "int", "var", "nbt"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        char p[512];
        snprintf(p, sizeof p, "%s/%s.safetensors", tmpdir, files[i]);
        unlink(p);
    }
    rmdir(tmpdir);
    return tc_done("test_model_load");
}
