/* The plan of what a cuda training step copies besides its batch and
 * outputs (bk_graph_copy_plan, gpud/tape_copies.c; model_copy_plan) with
 * device-resident arenas: only training BatchNorm's per-channel vectors
 * that the kernels take from / hand to the host (bn_kernels), against a
 * hand count of what gpud/cuda/cuda_train.c copies for a tiny graph:
 * input (no gradient) -> conv 1->2 3x3 + bias -> training BN 2 + ReLU ->
 * conv 2->2 1x1 -> frozen eval-mode BN 2 -> flatten -> linear 32->3 + bias
 * -> cross-entropy. Conv, linear and eval-mode BN copy nothing (their
 * parameters are device memory); the figures do not depend on the batch
 * size; a BN whose input needs no gradient skips bn_grad_apply, one whose
 * output needs none has no backward at all; the model-level plan of a
 * small WideResNet is its BN channels times the per-channel bytes. (The
 * cuda backend's counted bytes are compared with the plan on a GPU:
 * scripts/gpu-check.sh.) */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "gpud/backend.h"
#include "gpud/model.h"
#include "tcheck.h"

static float w1[18], b1[2], gw1[18], gb1[2];
static float g2[2], be2[2], gg2[2], gbe2[2], m2[2], v2[2] = {1, 1};
static float w3[4], gw3[4];
static float g4[2] = {1, 1}, be4[2], m4[2], v4[2] = {1, 1};
static float wl[96], bl[3], gwl[96], gbl[3];

enum { TRAIN_ALL = 0, FROZEN_CONV1 = 1, FROZEN_CONV1_BN2 = 2, FROZEN_LINEAR = 3 };

/* be NULL: the host path's plan (host_sums as SyncBatchNorm sets it) */
static void plan_of(int n, int variant, bk_copy_plan_t *p)
{
    int fc1 = variant == FROZEN_CONV1 || variant == FROZEN_CONV1_BN2;
    int fbn2 = variant == FROZEN_CONV1_BN2, flin = variant == FROZEN_LINEAR;
    bk_graph_t *g = bk_graph_new(NULL);
    REQUIRE(g, "bk_graph_new");
    bk_tensor_t *x = bk_input(g, n, 1, 4, 4, 0);
    bk_conv_t c1 = {.ic = 1, .oc = 2, .kh = 3, .kw = 3, .stride_h = 1, .stride_w = 1,
                    .pad_h = 1, .pad_w = 1, .weight = w1, .grad_weight = fc1 ? NULL : gw1,
                    .bias = b1, .grad_bias = fc1 ? NULL : gb1};
    /* fbn2: affine frozen (no gamma/beta gradients) but still training mode */
    bk_bn_t n2 = {.c = 2, .weight = g2, .grad_weight = fbn2 ? NULL : gg2, .bias = be2,
                  .grad_bias = fbn2 ? NULL : gbe2, .running_mean = m2, .running_var = v2,
                  .momentum = 0.1f, .eps = 1e-5f, .relu = 1};
    bk_conv_t c3 = {.ic = 2, .oc = 2, .kh = 1, .kw = 1, .stride_h = 1, .stride_w = 1,
                    .weight = w3, .grad_weight = gw3};
    bk_bn_t n4 = {.c = 2, .weight = g4, .bias = be4, .running_mean = m4, .running_var = v4,
                  .momentum = 0.1f, .eps = 1e-5f, .eval = 1};
    x = bk_conv2d(g, x, &c1);
    x = x ? bk_batchnorm(g, x, &n2) : NULL;
    x = x ? bk_conv2d(g, x, &c3) : NULL;
    x = x ? bk_batchnorm(g, x, &n4) : NULL;
    x = x ? bk_flatten(g, x) : NULL;
    x = x ? bk_linear(g, x, 3, wl, flin ? NULL : gwl, bl, flin ? NULL : gbl) : NULL;
    bk_tensor_t *loss = x ? bk_softmax_ce(g, x, 0.0f) : NULL;
    REQUIRE(loss, "building the graph: %s", bk_graph_error(g) ? bk_graph_error(g) : "?");
    bk_graph_copy_plan(g, loss, NULL, 1, p);
    bk_copy_plan_t q;   /* a backend without BatchNorm on the device: the same */
    bk_graph_copy_plan(g, loss, NULL, 0, &q);
    CHECK(memcmp(p, &q, sizeof q) == 0, "no backend: host_sums changed the plan");
    bk_graph_destroy(&g);
}

static int fake_sum(void *ctx, double *data, size_t n, char *err, size_t errlen)
{
    (void)ctx, (void)data, (void)n, (void)err, (void)errlen;
    return 0;
}

/* The model-level plan on backend bk: its per-channel bytes (0 on a
 * backend that keeps BatchNorm on the device, unless SyncBatchNorm is set). */
static void model_plan(const char *bk, int sync, bk_copy_plan_t *p, uint64_t *channels)
{
    model_opts_t o = {.arch = "wideresnet", .train = 1, .init = 1, .init_seed = 3,
                      .threads = 1, .channels = {4, 8, 8, 12}, .n_channels = 4};
    char err[512];
    model_t *m = model_new(&o, bk, NULL, err, sizeof err);
    REQUIRE(m, "model_new(%s): %s", bk, err);
    REQUIRE(!sync || model_set_sync_bn(m, fake_sum, NULL) == 0, "model_set_sync_bn");
    bk_copy_plan_t q;
    REQUIRE(model_copy_plan(m, 1, 1, 28, 28, p, err, sizeof err) == 0, "%s", err);
    REQUIRE(model_copy_plan(m, 3, 1, 28, 28, &q, err, sizeof err) == 0, "%s", err);
    CHECK(memcmp(p, &q, sizeof q) == 0, "wideresnet: the plan depends on the batch size");
    *channels = 0;
    for (int i = 0; i < model_param_count(m); i++) {
        model_param_t mp;
        REQUIRE(model_param_at(m, i, &mp) == 0, "param %d", i);
        const char *dot = strrchr(mp.name, '.');
        if (dot && strcmp(dot, ".running_mean") == 0)
            *channels += (uint64_t)mp.numel;
    }
    model_destroy(&m);
}

int main(void)
{
    /* BN 2 in training mode, forward: chan_sums(x, NULL) 2 doubles down;
     * chan_sums(x, mean) 2 floats up + 2 doubles down. */
    uint64_t fwd = 16 + (8 + 16);
    /* backward: bn_grad_sums mean 2 floats up + 4 doubles down; then
     * bn_grad_apply (conv1's output needs a gradient) centre, scale, a, b
     * 8 floats up. */
    uint64_t sums = 8 + 32, apply = 32;
    /* conv1, conv3, the frozen BN 4 and the linear layer: 0. The tape's
     * own copies (tape_bn.c) of BN 2: the statistics put (4 floats), the
     * running stats read and written (8 floats); backward the gamma/beta
     * gradients put (4 floats) and, for the input's gradient, gamma read
     * (2 floats). */
    uint64_t tfwd = 16 + 32, tgrads = 16, tgamma = 8;

    bk_copy_plan_t p, q;
    plan_of(2, TRAIN_ALL, &p);
    CHECK(p.bn_kernels == fwd + sums + apply, "BatchNorm kernels %llu, hand count %llu",
          (unsigned long long)p.bn_kernels, (unsigned long long)(fwd + sums + apply));
    CHECK(p.bn_tape == tfwd + tgrads + tgamma, "BatchNorm tape %llu, hand count %llu",
          (unsigned long long)p.bn_tape, (unsigned long long)(tfwd + tgrads + tgamma));

    plan_of(5, TRAIN_ALL, &q);
    CHECK(memcmp(&p, &q, sizeof p) == 0, "the plan depends on the batch size");

    plan_of(2, FROZEN_LINEAR, &q);   /* parameters are device memory: no change */
    CHECK(q.bn_kernels == p.bn_kernels, "frozen linear: %llu, want %llu",
          (unsigned long long)q.bn_kernels, (unsigned long long)p.bn_kernels);

    plan_of(2, FROZEN_CONV1, &q);    /* BN 2's input needs no gradient: no apply */
    CHECK(q.bn_kernels == fwd + sums, "frozen conv1: %llu, want %llu",
          (unsigned long long)q.bn_kernels, (unsigned long long)(fwd + sums));
    CHECK(q.bn_tape == tfwd + tgrads, "frozen conv1: tape %llu, want %llu",
          (unsigned long long)q.bn_tape, (unsigned long long)(tfwd + tgrads));

    plan_of(2, FROZEN_CONV1_BN2, &q);   /* nothing before conv3 needs a gradient */
    CHECK(q.bn_kernels == fwd, "frozen conv1 and BN 2's affine: %llu, want %llu",
          (unsigned long long)q.bn_kernels, (unsigned long long)fwd);
    CHECK(q.bn_tape == tfwd, "frozen conv1 and BN 2's affine: tape %llu, want %llu",
          (unsigned long long)q.bn_tape, (unsigned long long)tfwd);

    bk_graph_copy_plan(NULL, NULL, NULL, 1, &q);
    CHECK(q.bn_kernels == 0 && q.bn_tape == 0, "NULL graph: not zero");

    /* the model-level plan: the model's training graph, any batch size;
     * every BatchNorm of it trains and follows a conv: per channel 8 + 12
     * bytes forward, 4 + 16 + 16 backward, where the host computes them */
    uint64_t channels;
    model_plan("ref", 0, &p, &channels);
    CHECK(channels > 0, "wideresnet: no BatchNorm found");
    CHECK(p.bn_kernels == channels * 56, "wideresnet: BatchNorm kernels %llu, %llu channels x "
          "56 = %llu", (unsigned long long)p.bn_kernels, (unsigned long long)channels,
          (unsigned long long)(channels * 56));
    /* a device arena whose kernels keep BatchNorm there: nothing crosses,
     * unless SyncBatchNorm's all-reduce brings the sums to the host */
    model_plan("ref-device", 0, &q, &channels);
    CHECK(q.bn_kernels == 0 && q.bn_tape == 0, "ref-device: BatchNorm plan %llu + %llu, want 0",
          (unsigned long long)q.bn_kernels, (unsigned long long)q.bn_tape);
    model_plan("ref-device", 1, &q, &channels);
    CHECK(memcmp(&p, &q, sizeof q) == 0, "ref-device with SyncBatchNorm: not the host plan");
    return tc_done("test_copy_plan");
}
