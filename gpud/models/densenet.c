/* densenet — torchvision's DenseNet-121 (growth 32, bn_size 4, blocks
 * 6/12/24/16, 64 initial features) with its exact state_dict names:
 *
 *   features.conv0, features.norm0, (relu0, pool0: max 3/2/1)
 *   features.denseblockB.denselayerL.{norm1, conv1 (1x1, 128), norm2,
 *                                     conv2 (3x3, 32)}
 *       each layer: cat(block input, earlier layers' outputs) -> norm1 ->
 *       relu -> conv1 -> norm2 -> relu -> conv2
 *   features.transitionT.{norm, conv (1x1, c/2)}, then AvgPool2d(2, 2)
 *   features.norm5; forward: relu -> adaptive_avg_pool(1) -> classifier
 *
 * num_classes comes from classifier.weight (a transfer-learning head of N
 * classes loads as such). Every BatchNorm sits between a concatenation and
 * a ReLU + conv, so it cannot be folded into a convolution. */
#include <stdio.h>

#include "gpud/models/layers.h"

#define DN_GROWTH 32
#define DN_BN_SIZE 4
#define DN_INIT 64

static const int DN_BLOCKS[4] = {6, 12, 24, 16};

static int densenet_resolve(const model_opts_t *o, const safetensors_t *st, arch_info_t *a,
                            char *err, size_t errlen)
{
    (void)err, (void)errlen;
    *a = (arch_info_t){.in_channels = o->in_channels > 0 ? o->in_channels : 3,
                       .num_classes = arch_classes(o, st, "classifier.weight", 1000),
                       .nat_h = 224, .nat_w = 224, .hw_fixed = 0};
    return 0;
}

/* One _DenseLayer on the concatenation of xs[0..k): its 32 new channels. */
static bk_tensor_t *dense_layer(pstore_t *ps, bk_graph_t *g, const char *p, int k,
                              bk_tensor_t *const *xs)
{
    char n[128];
    bk_tensor_t *t = xs[0];
    if (k > 1) {
        snprintf(n, sizeof n, "%s.cat", p);
        bk_graph_set_name(g, n);
        t = bk_concat(g, k, xs);
    }
    snprintf(n, sizeof n, "%s.norm1", p);
    t = tl_bn_relu(g, ps, n, t);
    snprintf(n, sizeof n, "%s.conv1", p);
    t = tl_conv(g, ps, n, t, DN_BN_SIZE * DN_GROWTH, 1, 1, 0, 0);
    snprintf(n, sizeof n, "%s.norm2", p);
    t = tl_bn_relu(g, ps, n, t);
    snprintf(n, sizeof n, "%s.conv2", p);
    return tl_conv(g, ps, n, t, DN_GROWTH, 3, 1, 1, 0);
}

/* _DenseBlock b: the block input followed by every layer's output. */
static bk_tensor_t *dense_block(pstore_t *ps, bk_graph_t *g, int b, bk_tensor_t *x)
{
    bk_tensor_t *xs[1 + 24];
    int k = 0;
    xs[k++] = x;
    for (int l = 0; l < DN_BLOCKS[b - 1]; l++, k++) {
        char p[96];
        snprintf(p, sizeof p, "features.denseblock%d.denselayer%d", b, l + 1);
        xs[k] = dense_layer(ps, g, p, k, xs);
    }
    char n[64];
    snprintf(n, sizeof n, "features.denseblock%d.cat", b);
    bk_graph_set_name(g, n);
    return bk_concat(g, k, xs);
}

static bk_tensor_t *transition(pstore_t *ps, bk_graph_t *g, int b, bk_tensor_t *x)
{
    char n[64];
    int c = 0, unused;
    if (x)
        bk_tensor_dims(x, &unused, &c, &unused, &unused);
    snprintf(n, sizeof n, "features.transition%d.norm", b);
    x = tl_bn_relu(g, ps, n, x);
    snprintf(n, sizeof n, "features.transition%d.conv", b);
    x = tl_conv(g, ps, n, x, c / 2, 1, 1, 0, 0);
    snprintf(n, sizeof n, "features.transition%d.pool", b);
    bk_graph_set_name(g, n);
    bk_pool_t ap = {BK_POOL_AVG, 2, 2, 2, 2, 0, 0};
    return bk_pool2d(g, x, &ap);
}

static bk_tensor_t *densenet_describe(const arch_info_t *a, pstore_t *ps, bk_graph_t *g,
                                    bk_tensor_t *x)
{
    bk_tensor_t *t = tl_conv(g, ps, "features.conv0", x, DN_INIT, 7, 2, 3, 0);
    t = tl_bn_relu(g, ps, "features.norm0", t);
    bk_graph_set_name(g, "features.pool0");
    bk_pool_t mp = {BK_POOL_MAX, 3, 3, 2, 2, 1, 1};
    t = bk_pool2d(g, t, &mp);
    for (int b = 1; b <= 4; b++) {
        t = dense_block(ps, g, b, t);
        if (b < 4)
            t = transition(ps, g, b, t);
    }
    /* features end with norm5; forward() applies the ReLU: one fused op */
    t = tl_bn_relu(g, ps, "features.norm5", t);
    bk_graph_set_name(g, "avgpool");
    t = bk_global_avg_pool(g, t);
    pstore_hint(ps, "check --classes");
    return tl_linear(g, ps, "classifier", t, a->num_classes);
}

const arch_t ARCH_DENSENET121 = {"densenet121", "check --model", densenet_resolve,
                                 densenet_describe};
