/* Whole-model training step against PyTorch 1.13 (tests/golden/gen_grads.py,
 * grads/models.safetensors): resnet18 (2x3x64x64, label smoothing 0.1,
 * global batch 3) and the seed WideResNet (channels 8,16,24,32, 4x1x28x28,
 * global batch 5, dropout off). Per-sample losses, logits, the gradient of
 * every parameter and the running stats after the step, each within
 * max|ours - torch| / max|torch| <= 1e-4 (large tensors: the 2048 values
 * the generator sampled). On "cpu"; the WideResNet also on "ref".
 * Frozen parameters (model_freeze: the backbone, or the stem) get no
 * gradient and leave every other gradient as PyTorch's.
 * The same within the same bound when the step runs as bitwise training
 * does (chunks of 1, 2 or 3 samples, SyncBatchNorm over the chunks, the
 * chunks' gradients summed exactly): chunking changes only the rounding.
 * Also: an empty shard (n = 0) gives zero gradients, bad arguments fail
 * with a message, and model_sync_eval of unchanged weights reproduces the
 * eval logits bit for bit. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/safetensors.h"
#include "gpud/model.h"
#include "exact_grads.h"
#include "golden_io.h"

#define TOL 1e-4
#define SAMPLE 2048

static const safetensors_t *gold;
static const float MEAN[3] = {0.485f, 0.456f, 0.406f}, STD[3] = {0.229f, 0.224f, 0.225f};

static float *golden(const char *name, size_t *n)
{
    const st_tensor_t *t = safetensors_get(gold, name);
    REQUIRE(t, "golden tensor %s missing (regenerate with gen_grads.py)", name);
    float *v = malloc((size_t)t->numel * sizeof *v);
    REQUIRE(v && st_tensor_to_f32(t, v, (size_t)t->numel) == 0, "%s", name);
    *n = (size_t)t->numel;
    return v;
}

/* Compare v (numel values) with the golden's full or sampled copy. */
static double cmp_sampled(const char *name, const float *v, size_t numel)
{
    size_t ng;
    float *want = golden(name, &ng), *got = malloc(ng * sizeof *got);
    REQUIRE(got, "alloc");
    REQUIRE(ng == (numel <= SAMPLE ? numel : SAMPLE), "%s: %zu golden values for %zu", name,
            ng, numel);
    for (size_t i = 0; i < ng; i++)
        got[i] = v[numel <= SAMPLE ? i : (size_t)((uint64_t)i * numel / SAMPLE)];
    double e = golden_rel_err(got, want, ng);
    CHECK(e <= TOL, "%s: relative error %.3g > %g", name, e, TOL);
    free(want);
    free(got);
    return e;
}

static model_t *open_model(const char *arch, const char *backend, const char *weights)
{
    char path[512], rel[256], err[512];
    snprintf(rel, sizeof rel, "tests/golden/%s", weights);
    model_opts_t o = {.arch = arch, .threads = 2, .train = 1};
    if (strcmp(arch, "wideresnet") == 0) {
        o.n_channels = 4;
        memcpy(o.channels, (int[4]){8, 16, 24, 32}, sizeof o.channels);
    }
    model_t *m = model_new(&o, backend, tc_src(rel, path, sizeof path), err, sizeof err);
    REQUIRE(m, "%s: %s", arch, err);
    return m;
}

/* chunk > 0: the step as bitwise training runs it, in chunks of that many
 * samples with exact sums: still PyTorch's step up to rounding. */
static void step_case(const char *tag, const char *arch, const char *backend,
                      const char *weights, int G, float smoothing, int normalise,
                      const char *freeze, int chunk)
{
    model_t *m = open_model(arch, backend, weights);
    if (freeze)
        REQUIRE(model_freeze(m, freeze, 1) > 0, "freeze %s", freeze);
    exact_grads_t eg = {0};   /* bitwise training's gradients, as gpud's trainer sums them */
    if (chunk) {
        exact_grads_open(&eg, m);
        /* SyncBatchNorm over the chunks: the statistics of PyTorch's batch */
        REQUIRE(model_set_exact(m, NULL, NULL, 1) == 0 &&
                model_set_grad_ready(m, exact_grads_hook, &eg) == 0, "bitwise hooks");
    }
    char name[256], err[512];
    snprintf(name, sizeof name, "%s.input_u8", tag);
    const st_tensor_t *xt = safetensors_get(gold, name);
    REQUIRE(xt && xt->ndim == 4, "%s", name);
    int n = (int)xt->shape[0], c = (int)xt->shape[1], h = (int)xt->shape[2];
    int w = (int)xt->shape[3], k = model_num_classes(m);
    snprintf(name, sizeof name, "%s.labels", tag);
    const st_tensor_t *lt = safetensors_get(gold, name);
    int32_t labels[8];
    REQUIRE(lt && lt->dtype == ST_I32 && lt->numel == n && n <= 8, "%s", name);
    memcpy(labels, lt->data, (size_t)n * sizeof *labels);
    float *loss = malloc((size_t)n * sizeof *loss), *logits = malloc((size_t)n * k * 4);
    REQUIRE(loss && logits, "alloc");
    model_step_t s = {.global_batch = G, .label_smoothing = smoothing, .no_dropout = 1,
                      .chunk = chunk};
    int rc = model_train_step_u8(m, xt->data, n, c, h, w, normalise ? MEAN : NULL,
                                 normalise ? STD : NULL, labels, &s, loss, logits, err,
                                 sizeof err);
    REQUIRE(rc == 0, "%s train step: %s", tag, err);
    if (chunk) {
        exact_grads_write(&eg);
        exact_grads_close(&eg);
    }
    snprintf(name, sizeof name, "%s.loss", tag);
    double el = cmp_sampled(name, loss, (size_t)n);
    snprintf(name, sizeof name, "%s.logits", tag);
    double eo = cmp_sampled(name, logits, (size_t)n * k);
    double worst = 0.0;
    const char *worst_name = "";
    int np = model_param_count(m), checked = 0;
    for (int i = 0; i < np; i++) {
        model_param_t p;
        REQUIRE(model_param_at(m, i, &p) == 0, "param %d", i);
        int is_buffer = strstr(p.name, "running_") != NULL;
        if (freeze && strncmp(p.name, freeze, strlen(freeze)) == 0 && !is_buffer) {
            CHECK(!p.grad, "%s: frozen but has a gradient", p.name);
            continue;   /* the others' gradients must not change */
        }
        CHECK((p.grad == NULL) == is_buffer, "%s: gradient array %s", p.name, p.grad ? "set" : "NULL");
        snprintf(name, sizeof name, "%s:%s.%s", tag, p.name, p.grad ? "grad" : "after");
        double e = cmp_sampled(name, p.grad ? p.grad : p.value, p.numel);
        if (e > worst) {
            worst = e;
            worst_name = p.name;
        }
        checked++;
    }
    CHECK(checked > 20, "%s: only %d tensors", tag, checked);
    printf("%-9s %-3s %s%s%s loss %.2g logits %.2g; %d grads/running stats, worst %.2g (%s)\n",
           tag, backend, freeze ? "frozen " : "", freeze ? freeze : "",
           chunk ? "chunks " : "", el, eo, checked, worst, worst_name);
    free(loss);
    free(logits);
    model_destroy(&m);
}

/* n = 0: zero gradients; bad global batch: an error. */
static void edge_cases(void)
{
    model_t *m = open_model("wideresnet", "cpu", "wrn_small.safetensors");
    char err[512];
    model_param_t p;
    REQUIRE(model_param_find(m, "fc.weight", &p) == 0 && p.grad, "fc.weight");
    for (size_t i = 0; i < p.numel; i++)
        p.grad[i] = 1.0f;
    model_step_t s = {.global_batch = 4};
    CHECK(model_train_step_u8(m, NULL, 0, 1, 28, 28, NULL, NULL, NULL, &s, NULL, NULL, err,
                              sizeof err) == 0, "n = 0: %s", err);
    int zero = 1;
    for (size_t i = 0; i < p.numel; i++)
        zero &= p.grad[i] == 0.0f;
    CHECK(zero, "an empty shard must leave zero gradients");
    uint8_t px[2 * 28 * 28] = {0};
    int32_t lab[2] = {0, 11};
    s.global_batch = 1;
    CHECK(model_train_step_u8(m, px, 2, 1, 28, 28, NULL, NULL, lab, &s, NULL, NULL, err,
                              sizeof err) < 0 && strstr(err, "global batch"),
          "global batch < n accepted: %s", err);
    s.global_batch = 2;
    CHECK(model_train_step_u8(m, px, 2, 1, 28, 28, NULL, NULL, lab, &s, NULL, NULL, err,
                              sizeof err) < 0 && strstr(err, "label 11"),
          "label 11 of 10 classes accepted: %s", err);
    lab[1] = 9;
    CHECK(model_train_step_u8(m, px, 2, 1, 28, 28, NULL, NULL, lab, &s, NULL, NULL, err,
                              sizeof err) == 0, "a step after errors: %s", err);
    model_destroy(&m);
}

/* Re-folding unchanged parameters gives the same eval network. */
static void sync_eval_roundtrip(void)
{
    model_t *m = open_model("wideresnet", "cpu", "wrn_small.safetensors");
    char err[512];
    uint8_t px[3 * 28 * 28];
    for (size_t i = 0; i < sizeof px; i++)
        px[i] = (uint8_t)(i * 37 % 251);
    float a[30], b[30];
    REQUIRE(model_forward_u8(m, px, 3, 1, 28, 28, NULL, NULL, a, err, sizeof err) == 0, "%s",
            err);
    REQUIRE(model_sync_eval(m, err, sizeof err) == 0, "sync_eval: %s", err);
    REQUIRE(model_forward_u8(m, px, 3, 1, 28, 28, NULL, NULL, b, err, sizeof err) == 0, "%s",
            err);
    CHECK(memcmp(a, b, sizeof a) == 0, "model_sync_eval changed the logits of unchanged weights");
    model_destroy(&m);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    char path[512], err[512];
    safetensors_t *st = safetensors_open(tc_src("tests/golden/grads/models.safetensors", path,
                                                sizeof path), err, sizeof err);
    REQUIRE(st, "%s", err);
    gold = st;
    step_case("resnet18", "resnet18", "cpu", "resnet18.safetensors", 3, 0.1f, 1, NULL, 0);
    step_case("wrn", "wideresnet", "cpu", "wrn_small.safetensors", 5, 0.0f, 0, NULL, 0);
    step_case("wrn", "wideresnet", "ref", "wrn_small.safetensors", 5, 0.0f, 0, NULL, 0);
    /* a frozen backbone: the head's gradients are the same */
    step_case("wrn", "wideresnet", "cpu", "wrn_small.safetensors", 5, 0.0f, 0, "block", 0);
    step_case("wrn", "wideresnet", "cpu", "wrn_small.safetensors", 5, 0.0f, 0, "input_block.",
              0);
    /* bitwise training's chunked step (SyncBatchNorm over the chunks) */
    step_case("resnet18", "resnet18", "cpu", "resnet18.safetensors", 3, 0.1f, 1, NULL, 1);
    step_case("wrn", "wideresnet", "cpu", "wrn_small.safetensors", 5, 0.0f, 0, NULL, 3);
    step_case("wrn", "wideresnet", "ref", "wrn_small.safetensors", 5, 0.0f, 0, NULL, 2);
    edge_cases();
    sync_eval_roundtrip();
    safetensors_destroy(&st);
    return tc_done("test_train_model");
}
