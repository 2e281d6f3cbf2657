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
#include <stdlib.h>
#include <string.h>

#include "gpud/models/layers.h"
#include "common/errbuf.h"

typedef struct {
    fconv_t l1, l2, scale;
    int has_scale;
} wblock_t;

typedef struct {
    int ch[4];
    fconv_t input;
    wblock_t blocks[6];
    float *fc_w, *fc_b;
    int classes;
} wrn_t;

static void wrn_destroy(void *state)
{
    wrn_t *r = state;
    if (!r)
        return;
    fconv_free(&r->input);
    for (int i = 0; i < 6; i++) {
        fconv_free(&r->blocks[i].l1);
        fconv_free(&r->blocks[i].l2);
        fconv_free(&r->blocks[i].scale);
    }
    free(r->fc_w);
    free(r->fc_b);
    free(r);
}

static int load_cbr(fconv_t *c, wloader_t *wl, const char *prefix, int in, int out)
{
    char cn[96], bn[96];
    snprintf(cn, sizeof cn, "%s.cbr.0", prefix);
    snprintf(bn, sizeof bn, "%s.cbr.1", prefix);
    return fconv_load(c, wl, cn, 0, bn, out, in, 3, 1, 1);
}

static int load_block(wblock_t *b, wloader_t *wl, int idx, int in, int out, int scale)
{
    char p[32], name[64];
    snprintf(p, sizeof p, "block%d", idx);
    b->has_scale = scale;
    if (scale) {
        snprintf(name, sizeof name, "%s.scale", p);
        if (fconv_load(&b->scale, wl, name, 1, NULL, out, in, 1, 1, 0) < 0)
            return -1;
    }
    snprintf(name, sizeof name, "%s.layer1", p);
    if (load_cbr(&b->l1, wl, name, in, out) < 0)
        return -1;
    snprintf(name, sizeof name, "%s.layer2", p);
    return load_cbr(&b->l2, wl, name, out, out);
}

static int load_fc(wrn_t *r, wloader_t *wl, const model_opts_t *o)
{
    int64_t shape[4];
    wl_hint(wl, "check --classes");
    int nd = wl_shape(wl, "fc.weight", shape, 4);
    if (nd < 0)
        return -1;
    r->classes = o->num_classes > 0 ? o->num_classes : (nd == 2 ? (int)shape[0] : 10);
    if (r->classes < 1 || r->classes > 1000000)
        r->classes = 10;   /* wl_take reports the mismatch */
    int64_t ws[2] = {r->classes, r->ch[3]}, bs[1] = {r->classes};
    r->fc_w = wl_take(wl, "fc.weight", 2, ws);
    r->fc_b = r->fc_w ? wl_take(wl, "fc.bias", 1, bs) : NULL;
    return r->fc_b ? 0 : -1;
}

static int channels_from_opts(wrn_t *r, const model_opts_t *o, char *err, size_t errlen)
{
    static const int def[4] = {16, 160, 320, 640};
    if (o->n_channels == 0) {
        memcpy(r->ch, def, sizeof r->ch);
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
        r->ch[i] = o->channels[i];
    }
    return 0;
}

static void *wrn_load(const model_opts_t *o, const wl_source_t *src, arch_info_t *info,
                      char *err, size_t errlen)
{
    wrn_t *r = calloc(1, sizeof *r);
    wloader_t *wl = r ? wloader_new(src, "wideresnet", "check --channels") : NULL;
    if (!wl) {
        err_set(err, errlen, "wideresnet: out of memory");
        free(r);
        return NULL;
    }
    int in_c = o->in_channels > 0 ? o->in_channels : 1;
    int rc = channels_from_opts(r, o, err, errlen);
    if (rc < 0) {
        wloader_destroy(&wl);
        wrn_destroy(r);
        return NULL;
    }
    const int *C = r->ch;
    /* (in, out, scale) of block1..6, as in the seed's __init__ */
    const int spec[6][3] = {{C[0], C[1], 1}, {C[1], C[1], 0}, {C[1], C[2], 1},
                            {C[2], C[2], 0}, {C[2], C[3], 1}, {C[3], C[3], 0}};
    rc = load_cbr(&r->input, wl, "input_block", in_c, C[0]);
    for (int i = 0; i < 6 && rc == 0; i++)
        rc = load_block(&r->blocks[i], wl, i + 1, spec[i][0], spec[i][1], spec[i][2]);
    if (rc == 0)
        rc = load_fc(r, wl, o);
    if (rc == 0)
        rc = wl_finish(wl);
    if (rc != 0) {
        err_set(err, errlen, "%s", wloader_error(wl) ? wloader_error(wl) : "out of memory");
        wrn_destroy(r);
        r = NULL;
    } else {
        *info = (arch_info_t){.in_channels = in_c, .num_classes = r->classes, .nat_h = 28,
                              .nat_w = 28, .hw_fixed = 1};
    }
    wloader_destroy(&wl);
    return r;
}

static const bk_postop_t PO_RELU[1] = {BK_PO_RELU};
static const bk_postop_t PO_RELU_SUM[2] = {BK_PO_RELU, BK_PO_SUM};

static bk_tensor_t *block_build(const wblock_t *b, int idx, bk_graph_t *g, bk_tensor_t *x)
{
    char name[64];
    snprintf(name, sizeof name, "block%d.layer1", idx);
    bk_tensor_t *t = fconv_apply(g, &b->l1, name, x, NULL, 1, PO_RELU);
    bk_tensor_t *res = x;
    if (b->has_scale) {
        snprintf(name, sizeof name, "block%d.scale", idx);
        res = fconv_apply(g, &b->scale, name, x, NULL, 0, NULL);
    }
    /* out = relu(bn(conv(t))) + residual: ReLU before the sum, as the seed */
    snprintf(name, sizeof name, "block%d.layer2", idx);
    return fconv_apply(g, &b->l2, name, t, res, 2, PO_RELU_SUM);
}

static bk_tensor_t *wrn_build(const void *state, bk_graph_t *g, bk_tensor_t *x)
{
    const wrn_t *r = state;
    bk_pool_t max2 = {BK_POOL_MAX, 2, 2, 2, 2, 0, 0};
    bk_pool_t avg7 = {BK_POOL_AVG, 7, 7, 7, 7, 0, 0};
    bk_tensor_t *t = fconv_apply(g, &r->input, "input_block", x, NULL, 1, PO_RELU);
    for (int i = 0; i < 6; i++) {
        t = block_build(&r->blocks[i], i + 1, g, t);
        if (i == 1 || i == 3) {
            bk_set_name(g, i == 1 ? "pool1" : "pool2");
            t = bk_pool2d(g, t, &max2);
        }
    }
    bk_set_name(g, "pool");
    t = bk_pool2d(g, t, &avg7);
    if (t) {
        int n, c, h, w;
        bk_tensor_dims(t, &n, &c, &h, &w);
        if (h != 1 || w != 1)
            return bk_fail(g, "AvgPool2d(7) leaves %dx%d, the fc needs 1x1: "
                           "wideresnet wants 28x28 inputs", h, w);
    }
    bk_set_name(g, "fc");
    return bk_linear(g, t, r->classes, r->fc_w, r->fc_b);
}

/* ------------------------------------------------------------ training */

/* The seed's dropout (nn.Dropout(p=0.01) between layer1 and layer2). */
#define WRN_DROPOUT 0.01f

static bk_tvar_t *cbr_train(const pstore_t *ps, bk_tgraph_t *g, const char *p, bk_tvar_t *x,
                            int oc)
{
    char cn[96], bn[96];
    snprintf(cn, sizeof cn, "%s.cbr.0", p);
    snprintf(bn, sizeof bn, "%s.cbr.1", p);
    return tl_bn_relu(g, ps, bn, tl_conv(g, ps, cn, x, oc, 3, 1, 1, 0));
}

static bk_tvar_t *block_train(const wblock_t *b, int idx, const pstore_t *ps, bk_tgraph_t *g,
                              bk_tvar_t *x)
{
    char name[64];
    int oc = b->l1.p.oc;
    snprintf(name, sizeof name, "block%d.layer1", idx);
    bk_tvar_t *t = cbr_train(ps, g, name, x, oc);
    snprintf(name, sizeof name, "block%d.dropout", idx);
    bk_tgraph_set_name(g, name);
    t = bk_t_dropout(g, t, WRN_DROPOUT);
    snprintf(name, sizeof name, "block%d.layer2", idx);
    t = cbr_train(ps, g, name, t, oc);
    bk_tvar_t *res = x;
    if (b->has_scale) {
        snprintf(name, sizeof name, "block%d.scale", idx);
        res = tl_conv(g, ps, name, x, oc, 1, 1, 0, 1);
    }
    snprintf(name, sizeof name, "block%d.add", idx);
    bk_tgraph_set_name(g, name);
    return bk_t_add(g, t, res);
}

static bk_tvar_t *wrn_train_build(const void *state, const pstore_t *ps, bk_tgraph_t *g,
                                  bk_tvar_t *x)
{
    const wrn_t *r = state;
    bk_pool_t max2 = {BK_POOL_MAX, 2, 2, 2, 2, 0, 0};
    bk_pool_t avg7 = {BK_POOL_AVG, 7, 7, 7, 7, 0, 0};
    bk_tvar_t *t = cbr_train(ps, g, "input_block", x, r->ch[0]);
    for (int i = 0; i < 6; i++) {
        t = block_train(&r->blocks[i], i + 1, ps, g, t);
        if (i == 1 || i == 3) {
            bk_tgraph_set_name(g, i == 1 ? "pool1" : "pool2");
            t = bk_t_pool2d(g, t, &max2);
        }
    }
    bk_tgraph_set_name(g, "pool");
    t = bk_t_pool2d(g, t, &avg7);
    bk_tgraph_set_name(g, "flat");
    t = bk_t_flatten(g, t);
    return tl_linear(g, ps, "fc", t, r->classes);
}

const arch_t ARCH_WIDERESNET = {"wideresnet", wrn_load, wrn_build, wrn_destroy,
                                wrn_train_build};
