/* resnet — torchvision's ResNet-18/34 (BasicBlock) and ResNet-50
 * (Bottleneck), with torchvision's exact state_dict names:
 * conv1, bn1, layerL.B.{conv1,bn1,conv2,bn2[,conv3,bn3]},
 * layerL.0.downsample.{0,1}, fc. Any input size (adaptive pooling). */
#include <stdio.h>

#include "gpud/models/layers.h"

static int resnet_resolve(const model_opts_t *o, const safetensors_t *st, arch_info_t *a,
                          char *err, size_t errlen)
{
    (void)err, (void)errlen;
    *a = (arch_info_t){.in_channels = o->in_channels > 0 ? o->in_channels : 3,
                       .num_classes = arch_classes(o, st, "fc.weight", 1000), .nat_h = 224,
                       .nat_w = 224, .hw_fixed = 0};
    return 0;
}

/* torchvision's BasicBlock / Bottleneck `p` on inplanes channels:
 * relu(bn2(conv2(relu(bn1(conv1(x))))) + downsample(x)); the bottleneck
 * has conv1 1x1, conv2 3x3 with the stride, conv3 1x1 to planes * 4. */
static bk_tensor_t *block(pstore_t *ps, bk_graph_t *g, const char *p, bk_tensor_t *x, int inplanes,
                        int planes, int stride, int bottleneck)
{
    char cn[96], bn[96];
    int nconv = bottleneck ? 3 : 2, out = bottleneck ? planes * 4 : planes;
    bk_tensor_t *t = x;
    for (int i = 0; i < nconv; i++) {
        int k = bottleneck && i != 1 ? 1 : 3, s = i == (bottleneck ? 1 : 0) ? stride : 1;
        snprintf(cn, sizeof cn, "%s.conv%d", p, i + 1);
        snprintf(bn, sizeof bn, "%s.bn%d", p, i + 1);
        t = tl_conv(g, ps, cn, t, i == nconv - 1 ? out : planes, k, s, k / 2, 0);
        t = i < nconv - 1 ? tl_bn_relu(g, ps, bn, t) : tl_bn(g, ps, bn, t);
    }
    bk_tensor_t *id = x;
    if (stride != 1 || inplanes != out) {
        snprintf(cn, sizeof cn, "%s.downsample.0", p);
        snprintf(bn, sizeof bn, "%s.downsample.1", p);
        id = tl_bn(g, ps, bn, tl_conv(g, ps, cn, x, out, 1, stride, 0, 0));
    }
    snprintf(cn, sizeof cn, "%s.add", p);
    bk_graph_set_name(g, cn);
    return bk_relu(g, bk_add(g, t, id));
}

static bk_tensor_t *resnet(const arch_info_t *a, pstore_t *ps, bk_graph_t *g, bk_tensor_t *x,
                         const int layers[4], int bottleneck)
{
    bk_tensor_t *t = tl_bn_relu(g, ps, "bn1", tl_conv(g, ps, "conv1", x, 64, 7, 2, 3, 0));
    bk_graph_set_name(g, "maxpool");
    bk_pool_t mp = {BK_POOL_MAX, 3, 3, 2, 2, 1, 1};
    t = bk_pool2d(g, t, &mp);
    int inplanes = 64;
    for (int l = 0; l < 4; l++)
        for (int b = 0; b < layers[l]; b++) {
            char p[32];
            int planes = 64 << l, stride = l > 0 && b == 0 ? 2 : 1;
            snprintf(p, sizeof p, "layer%d.%d", l + 1, b);
            t = block(ps, g, p, t, inplanes, planes, stride, bottleneck);
            inplanes = bottleneck ? planes * 4 : planes;
        }
    bk_graph_set_name(g, "avgpool");
    t = bk_global_avg_pool(g, t);
    pstore_hint(ps, "check --classes");
    return tl_linear(g, ps, "fc", t, a->num_classes);
}

static bk_tensor_t *resnet18(const arch_info_t *a, pstore_t *ps, bk_graph_t *g, bk_tensor_t *x)
{
    static const int layers[4] = {2, 2, 2, 2};
    return resnet(a, ps, g, x, layers, 0);
}

static bk_tensor_t *resnet34(const arch_info_t *a, pstore_t *ps, bk_graph_t *g, bk_tensor_t *x)
{
    static const int layers[4] = {3, 4, 6, 3};
    return resnet(a, ps, g, x, layers, 0);
}

static bk_tensor_t *resnet50(const arch_info_t *a, pstore_t *ps, bk_graph_t *g, bk_tensor_t *x)
{
    static const int layers[4] = {3, 4, 6, 3};
    return resnet(a, ps, g, x, layers, 1);
}

const arch_t ARCH_RESNET18 = {"resnet18", "check --model", resnet_resolve, resnet18};
const arch_t ARCH_RESNET34 = {"resnet34", "check --model", resnet_resolve, resnet34};
const arch_t ARCH_RESNET50 = {"resnet50", "check --model", resnet_resolve, resnet50};
