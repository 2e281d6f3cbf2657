/* The plan of a cuda training step's per-op parameter copies
 * (bk_graph_copy_plan, gpud/tape_copies.c; model_copy_plan) against a hand
 * count of what gpud/cuda/cuda_train.c copies for a tiny graph: input
 * (no gradient) -> conv 1->2 3x3 + bias -> training BN 2 + ReLU -> conv
 * 2->2 1x1 -> frozen eval-mode BN 2 -> flatten -> linear 32->3 + bias ->
 * cross-entropy. The figures do not depend on the batch size; a frozen
 * layer downloads no gradient; the model-level plan of a small WideResNet
 * agrees with itself across batch sizes. (The cuda backend's counted
 * bytes are compared with the plan on a GPU: scripts/gpu-check.sh.) */
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

static void plan_of(int n, int frozen_linear, bk_copy_plan_t *p)
{
    bk_graph_t *g = bk_graph_new(NULL);
    REQUIRE(g, "bk_graph_new");
    bk_tensor_t *x = bk_input(g, n, 1, 4, 4, 0);
    bk_conv_t c1 = {.ic = 1, .oc = 2, .kh = 3, .kw = 3, .stride_h = 1, .stride_w = 1,
                    .pad_h = 1, .pad_w = 1, .weight = w1, .grad_weight = gw1, .bias = b1,
                    .grad_bias = gb1};
    bk_bn_t n2 = {.c = 2, .weight = g2, .grad_weight = gg2, .bias = be2, .grad_bias = gbe2,
                  .running_mean = m2, .running_var = v2, .momentum = 0.1f, .eps = 1e-5f,
                  .relu = 1};
    bk_conv_t c3 = {.ic = 2, .oc = 2, .kh = 1, .kw = 1, .stride_h = 1, .stride_w = 1,
                    .weight = w3, .grad_weight = gw3};
    bk_bn_t n4 = {.c = 2, .weight = g4, .bias = be4, .running_mean = m4, .running_var = v4,
                  .momentum = 0.1f, .eps = 1e-5f, .eval = 1};
    x = bk_conv2d(g, x, &c1);
    x = x ? bk_batchnorm(g, x, &n2) : NULL;
    x = x ? bk_conv2d(g, x, &c3) : NULL;
    x = x ? bk_batchnorm(g, x, &n4) : NULL;
    x = x ? bk_flatten(g, x) : NULL;
    x = x ? bk_linear(g, x, 3, wl, frozen_linear ? NULL : gwl, bl,
                      frozen_linear ? NULL : gbl) : NULL;
    bk_tensor_t *loss = x ? bk_softmax_ce(g, x, 0.0f) : NULL;
    REQUIRE(loss, "building the graph: %s", bk_graph_error(g) ? bk_graph_error(g) : "?");
    bk_graph_copy_plan(g, loss, p);
    bk_graph_destroy(&g);
}

/* ndim of the parameter "prefix.leaf", or -1 when the model has none */
static int sibling_ndim(model_t *m, const char *prefix, const char *leaf)
{
    char want[300];
    snprintf(want, sizeof want, "%s.%s", prefix, leaf);
    for (int i = 0; i < model_param_count(m); i++) {
        model_param_t p;
        if (model_param_at(m, i, &p) == 0 && strcmp(p.name, want) == 0)
            return p.ndim;
    }
    return -1;
}

int main(void)
{
    /* conv1: forward w 18 + b 2 floats up; backward: the input needs no
     * gradient (no second upload), w 18 floats + b 2 doubles down. */
    uint64_t c1_up = 18 * 4 + 2 * 4, c1_down = 18 * 4 + 2 * 8;
    /* BN 2 in training mode: sums 2 doubles down, mean 2 floats up + centred
     * sums 2 doubles down, gamma/beta/mean/var 8 floats up; backward: mean
     * up, 4 doubles down, then mean/scale/a/b 8 floats up. */
    uint64_t bn2 = (16 + 8 + 16 + 32) + (8 + 32 + 32);
    /* conv3 (no bias): w 4 floats up, again for the input's gradient, down. */
    uint64_t c3_up = 16 + 16, c3_down = 16;
    /* frozen BN 2 (eval mode, no gradients): 8 floats up; backward
     * gamma/mean/var 6 floats up, no sums down. */
    uint64_t bn4 = 32 + 24;
    /* linear 32->3: w 96 + b 3 floats up, w again for the input's
     * gradient; w 96 + b 3 floats down. */
    uint64_t l_up = 96 * 4 + 3 * 4 + 96 * 4, l_down = 96 * 4 + 3 * 4;

    bk_copy_plan_t p, q;
    plan_of(2, 0, &p);
    CHECK(p.weights_up == c1_up + c3_up + l_up, "weights up %llu, hand count %llu",
          (unsigned long long)p.weights_up, (unsigned long long)(c1_up + c3_up + l_up));
    CHECK(p.grads_down == c1_down + c3_down + l_down, "gradients down %llu, hand count %llu",
          (unsigned long long)p.grads_down, (unsigned long long)(c1_down + c3_down + l_down));
    CHECK(p.bn == bn2 + bn4, "BatchNorm %llu, hand count %llu", (unsigned long long)p.bn,
          (unsigned long long)(bn2 + bn4));

    plan_of(5, 0, &q);
    CHECK(memcmp(&p, &q, sizeof p) == 0, "the plan depends on the batch size");

    plan_of(2, 1, &q);   /* a frozen linear: no gradient of it comes down */
    CHECK(q.weights_up == p.weights_up && q.bn == p.bn && q.grads_down == p.grads_down - l_down,
          "frozen linear: gradients down %llu, want %llu", (unsigned long long)q.grads_down,
          (unsigned long long)(p.grads_down - l_down));

    bk_graph_copy_plan(NULL, NULL, &q);
    CHECK(q.weights_up == 0 && q.grads_down == 0 && q.bn == 0, "NULL graph: not zero");

    /* the model-level plan: the model's training graph, any batch size */
    model_opts_t o = {.arch = "wideresnet", .train = 1, .init = 1, .init_seed = 3,
                      .threads = 1, .channels = {4, 8, 8, 12}, .n_channels = 4};
    char err[512];
    model_t *m = model_new(&o, "ref", NULL, err, sizeof err);
    REQUIRE(m, "model_new: %s", err);
    REQUIRE(model_copy_plan(m, 1, 1, 28, 28, &p, err, sizeof err) == 0, "%s", err);
    REQUIRE(model_copy_plan(m, 3, 1, 28, 28, &q, err, sizeof err) == 0, "%s", err);
    CHECK(p.weights_up > 0 && p.grads_down > 0 && p.bn > 0, "wideresnet: an empty plan");
    CHECK(memcmp(&p, &q, sizeof p) == 0, "wideresnet: the plan depends on the batch size");
    /* every trainable non-BatchNorm tensor comes down once as a gradient,
     * a conv's bias as doubles */
    uint64_t grads = 0;
    for (int i = 0; i < model_param_count(m); i++) {
        model_param_t mp;
        REQUIRE(model_param_at(m, i, &mp) == 0, "param %d", i);
        if (!mp.grad)
            continue;
        char prefix[256];
        snprintf(prefix, sizeof prefix, "%s", mp.name);
        char *dot = strrchr(prefix, '.');
        REQUIRE(dot, "%s: no module prefix", mp.name);
        *dot = '\0';
        if (sibling_ndim(m, prefix, "running_mean") > 0)
            continue;   /* BatchNorm: counted in bn */
        int conv_bias = mp.ndim == 1 && sibling_ndim(m, prefix, "weight") == 4;
        grads += (uint64_t)mp.numel * (conv_bias ? 8 : 4);
    }
    CHECK(p.grads_down == grads, "wideresnet: gradients down %llu, its non-BN gradients %llu",
          (unsigned long long)p.grads_down, (unsigned long long)grads);
    model_destroy(&m);
    return tc_done("test_copy_plan");
}
