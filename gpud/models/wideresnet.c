/* wideresnet — the seed WideResNet of NVIDIA's DDP course (Fashion-MNIST):
 *
 *   cbrblock(in, out) = Conv2d(in, out, 3, padding='same', bias=False),
 *                       BatchNorm2d(out), ReLU()           -> "<p>.cbr.{0,1}"
 *   conv_block(in, out, scale_input):
 *       out = layer2(dropout(layer1(x))) + (scale(x) if scale_input else x)
 *       scale = Conv2d(in, out, 1) with bias                -> "<p>.scale"
 *   input_block = cbrblock(C_in, C0)
 *   block1 = conv_block(C0, C1, 1), block2 = conv_block(C1, C1, 0), MaxPool2d(2)
 *   block3 = conv_block(C1, C2, 1), block4 = conv_block(C2, C2, 0), MaxPool2d(2)
 *   block5 = conv_block(C2, C3, 1), block6 = conv_block(C3, C3, 0)
 *   AvgPool2d(7), flatten, fc = Linear(C3, classes)
 *
 * Channels C0..C3 default to 16,160,320,640, C_in to 1, classes to 10 (or
 * the weights' fc). Input 28x28. Dropout is the identity in eval.
 */
#include <stdio.h>
#include <string.h>

#include "gpud/models/layers.h"
#include "common/errbuf.h"

/* The seed's dropout (nn.Dropout(p=0.01) between layer1 and layer2). */
#define WRN_DROPOUT 0.01f

static int channels_from_opts(arch_info_t *a, const model_opts_t *o, char *err, size_t errlen)
{
    static const int def[4] = {16, 160, 320, 640};
    if (o->n_channels == 0) {
        memcpy(a->ch, def, sizeof a->ch);
        return 0;
    }
    if (o->n_channels != 4) {
        err_set(err, errlen, "wideresnet: --channels needs 4 widths (e.g. 16,160,320,640), "
                 "got %d", o->n_channels);
        return -1;
    }
    for (int i = 0; i < 4; i++) {
        if (o->channels[i] < 1 || o->channels[i] > 65536) {
            err_set(err, errlen, "wideresnet: channel width %d out of range 1..65536",
                     o->channels[i]);
            return -1;
        }
        a->ch[i] = o->channels[i];
    }
    return 0;
}

static int wrn_resolve(const model_opts_t *o, const safetensors_t *st, arch_info_t *a,
                       char *err, size_t errlen)
{
    *a = (arch_info_t){.in_channels = o->in_channels > 0 ? o->in_channels : 1,
                       .num_classes = arch_classes(o, st, "fc.weight", 10), .nat_h = 28,
                       .nat_w = 28, .hw_fixed = 1};
    return channels_from_opts(a, o, err, errlen);
}

static bk_tensor_t *cbr(pstore_t *ps, bk_graph_t *g, const char *p, bk_tensor_t *x, int oc)
{
    char cn[96], bn[96];
    snprintf(cn, sizeof cn, "%s.cbr.0", p);
    snprintf(bn, sizeof bn, "%s.cbr.1", p);
    return tl_bn_relu(g, ps, bn, tl_conv(g, ps, cn, x, oc, 3, 1, 1, 0));
}

/* conv_block idx on ic channels. The scale is bound first, as the seed
 * registers it (state_dict order: a bad file is reported at its first
 * tensor), but runs after layer2: ops stay in forward order, and a
 * dropout's mask follows its op index. */
static bk_tensor_t *block(pstore_t *ps, bk_graph_t *g, int idx, bk_tensor_t *x, int ic, int oc,
                        int scale)
{
    char sn[64], name[64];
    bk_conv_t sp;
    snprintf(sn, sizeof sn, "block%d.scale", idx);
    if (scale && tl_conv_bind(g, ps, sn, ic, oc, 1, 1, 0, 1, &sp) < 0)
        return NULL;
    snprintf(name, sizeof name, "block%d.layer1", idx);
    bk_tensor_t *t = cbr(ps, g, name, x, oc);
    snprintf(name, sizeof name, "block%d.dropout", idx);
    bk_graph_set_name(g, name);
    t = bk_dropout(g, t, WRN_DROPOUT);
    snprintf(name, sizeof name, "block%d.layer2", idx);
    t = cbr(ps, g, name, t, oc);
    bk_tensor_t *res = scale ? tl_conv_on(g, sn, x, &sp) : x;
    snprintf(name, sizeof name, "block%d.add", idx);
    bk_graph_set_name(g, name);
    return bk_add(g, t, res);
}

/* AvgPool2d(7) must leave 1x1 for the fc. */
static bk_tensor_t *head_pool(bk_graph_t *g, bk_tensor_t *t)
{
    bk_pool_t avg7 = {BK_POOL_AVG, 7, 7, 7, 7, 0, 0};
    bk_graph_set_name(g, "pool");
    t = bk_pool2d(g, t, &avg7);
    int n, c, h, w;
    if (t)
        bk_tensor_dims(t, &n, &c, &h, &w);
    if (t && (h != 1 || w != 1))
        return bk_fail(g, "AvgPool2d(7) leaves %dx%d, the fc needs 1x1: wideresnet wants "
                        "28x28 inputs", h, w);
    return t;
}

static bk_tensor_t *wrn_describe(const arch_info_t *a, pstore_t *ps, bk_graph_t *g, bk_tensor_t *x)
{
    const int *C = a->ch;
    /* (in, out, scale) of block1..6, as in the seed's __init__ */
    const int spec[6][3] = {{C[0], C[1], 1}, {C[1], C[1], 0}, {C[1], C[2], 1},
                            {C[2], C[2], 0}, {C[2], C[3], 1}, {C[3], C[3], 0}};
    bk_pool_t max2 = {BK_POOL_MAX, 2, 2, 2, 2, 0, 0};
    bk_tensor_t *t = cbr(ps, g, "input_block", x, C[0]);
    for (int i = 0; i < 6; i++) {
        t = block(ps, g, i + 1, t, spec[i][0], spec[i][1], spec[i][2]);
        if (i == 1 || i == 3) {
            bk_graph_set_name(g, i == 1 ? "pool1" : "pool2");
            t = bk_pool2d(g, t, &max2);
        }
    }
    t = head_pool(g, t);
    bk_graph_set_name(g, "flat");
    t = bk_flatten(g, t);
    pstore_hint(ps, "check --classes");
    return tl_linear(g, ps, "fc", t, a->num_classes);
}

const arch_t ARCH_WIDERESNET = {"wideresnet", "check --channels", wrn_resolve, wrn_describe};
