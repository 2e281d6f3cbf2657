/* resnet — torchvision's ResNet-18/34 (BasicBlock) and ResNet-50
 * (Bottleneck), with torchvision's exact state_dict names:
 * conv1, bn1, layerL.B.{conv1,bn1,conv2,bn2[,conv3,bn3]},
 * layerL.0.downsample.{0,1}, fc. Eval mode: every BatchNorm is folded into
 * its convolution; ReLU and the residual sum are conv post-ops. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpud/models/layers.h"
#include "common/errbuf.h"

typedef struct {
    fconv_t c1, c2, c3, ds;     /* c3 only in bottlenecks; ds when has_ds */
    int has_ds;
} rblock_t;

typedef struct {
    int bottleneck;
    int layers[4];
    fconv_t conv1;
    rblock_t *blocks;
    int nblocks;
    float *fc_w, *fc_b;
    int fc_in, classes;
} resnet_t;

static void resnet_destroy(void *state)
{
    resnet_t *r = state;
    if (!r)
        return;
    fconv_free(&r->conv1);
    for (int i = 0; i < r->nblocks; i++) {
        fconv_free(&r->blocks[i].c1);
        fconv_free(&r->blocks[i].c2);
        fconv_free(&r->blocks[i].c3);
        fconv_free(&r->blocks[i].ds);
    }
    free(r->blocks);
    free(r->fc_w);
    free(r->fc_b);
    free(r);
}

/* One block of layer `layer` (1-based), index b; *inplanes updated. */
static int load_block(resnet_t *r, wloader_t *wl, rblock_t *blk, int layer, int b,
                      int *inplanes)
{
    int planes = 64 << (layer - 1);
    int stride = (layer > 1 && b == 0) ? 2 : 1;
    int expansion = r->bottleneck ? 4 : 1;
    char p[64], cn[96], bn[96];
    snprintf(p, sizeof p, "layer%d.%d", layer, b);
#define NAMES(i) (snprintf(cn, sizeof cn, "%s.conv%d", p, i), \
                  snprintf(bn, sizeof bn, "%s.bn%d", p, i))
    int rc;
    if (r->bottleneck) {
        NAMES(1);
        rc = fconv_load(&blk->c1, wl, cn, 0, bn, planes, *inplanes, 1, 1, 0);
        NAMES(2);
        rc = rc ? rc : fconv_load(&blk->c2, wl, cn, 0, bn, planes, planes, 3, stride, 1);
        NAMES(3);
        rc = rc ? rc : fconv_load(&blk->c3, wl, cn, 0, bn, planes * 4, planes, 1, 1, 0);
    } else {
        NAMES(1);
        rc = fconv_load(&blk->c1, wl, cn, 0, bn, planes, *inplanes, 3, stride, 1);
        NAMES(2);
        rc = rc ? rc : fconv_load(&blk->c2, wl, cn, 0, bn, planes, planes, 3, 1, 1);
    }
#undef NAMES
    blk->has_ds = stride != 1 || *inplanes != planes * expansion;
    if (rc == 0 && blk->has_ds) {
        snprintf(cn, sizeof cn, "%s.downsample.0", p);
        snprintf(bn, sizeof bn, "%s.downsample.1", p);
        rc = fconv_load(&blk->ds, wl, cn, 0, bn, planes * expansion, *inplanes, 1, stride, 0);
    }
    *inplanes = planes * expansion;
    return rc;
}

static int load_fc(resnet_t *r, wloader_t *wl, const model_opts_t *o)
{
    int64_t shape[4];
    wl_hint(wl, "check --classes");
    int nd = wl_shape(wl, "fc.weight", shape, 4);
    if (nd < 0)
        return -1;
    r->classes = o->num_classes > 0 ? o->num_classes : (nd == 2 ? (int)shape[0] : 0);
    if (r->classes < 1 || r->classes > 1000000) {
        r->classes = 1;   /* let wl_take report the shape mismatch */
    }
    int64_t ws[2] = {r->classes, r->fc_in}, bs[1] = {r->classes};
    r->fc_w = wl_take(wl, "fc.weight", 2, ws);
    r->fc_b = r->fc_w ? wl_take(wl, "fc.bias", 1, bs) : NULL;
    return r->fc_b ? 0 : -1;
}

static void *resnet_load(const model_opts_t *o, const wl_source_t *src, arch_info_t *info,
                         const int layers[4], int bottleneck, const char *name, char *err,
                         size_t errlen)
{
    resnet_t *r = calloc(1, sizeof *r);
    wloader_t *wl = wloader_new(src, name, "check --model");
    if (!r || !wl) {
        err_set(err, errlen, "%s: out of memory", name);
        free(r);
        wloader_destroy(&wl);
        return NULL;
    }
    r->bottleneck = bottleneck;
    memcpy(r->layers, layers, sizeof r->layers);
    r->nblocks = layers[0] + layers[1] + layers[2] + layers[3];
    r->blocks = calloc((size_t)r->nblocks, sizeof *r->blocks);
    int in_c = o->in_channels > 0 ? o->in_channels : 3;
    int rc = r->blocks ? fconv_load(&r->conv1, wl, "conv1", 0, "bn1", 64, in_c, 7, 2, 3) : -1;
    int inplanes = 64;
    for (int l = 0, i = 0; l < 4 && rc == 0; l++)
        for (int b = 0; b < layers[l] && rc == 0; b++, i++)
            rc = load_block(r, wl, &r->blocks[i], l + 1, b, &inplanes);
    r->fc_in = inplanes;
    if (rc == 0)
        rc = load_fc(r, wl, o);
    if (rc == 0)
        rc = wl_finish(wl);
    if (rc != 0) {
        err_set(err, errlen, "%s", r->blocks && wloader_error(wl) ? wloader_error(wl)
                                                                   : "out of memory");
        resnet_destroy(r);
        r = NULL;
    } else {
        *info = (arch_info_t){.in_channels = in_c, .num_classes = r->classes, .nat_h = 224,
                              .nat_w = 224, .hw_fixed = 0};
    }
    wloader_destroy(&wl);
    return r;
}

static const bk_postop_t PO_RELU[1] = {BK_PO_RELU};
static const bk_postop_t PO_SUM_RELU[2] = {BK_PO_SUM, BK_PO_RELU};

static bk_tensor_t *block_build(const resnet_t *r, const rblock_t *blk, const char *prefix,
                                bk_graph_t *g, bk_tensor_t *x)
{
    char name[96];
    snprintf(name, sizeof name, "%s.conv1", prefix);
    bk_tensor_t *t = fconv_apply(g, &blk->c1, name, x, NULL, 1, PO_RELU);
    if (r->bottleneck) {
        snprintf(name, sizeof name, "%s.conv2", prefix);
        t = fconv_apply(g, &blk->c2, name, t, NULL, 1, PO_RELU);
    }
    bk_tensor_t *identity = x;
    if (blk->has_ds) {
        snprintf(name, sizeof name, "%s.downsample", prefix);
        identity = fconv_apply(g, &blk->ds, name, x, NULL, 0, NULL);
    }
    /* out = relu(bn(conv(t)) + identity): the sum accumulates in place */
    snprintf(name, sizeof name, "%s.conv%d", prefix, r->bottleneck ? 3 : 2);
    return fconv_apply(g, r->bottleneck ? &blk->c3 : &blk->c2, name, t, identity, 2,
                       PO_SUM_RELU);
}

static bk_tensor_t *resnet_build(const void *state, bk_graph_t *g, bk_tensor_t *x)
{
    const resnet_t *r = state;
    bk_tensor_t *t = fconv_apply(g, &r->conv1, "conv1", x, NULL, 1, PO_RELU);
    bk_pool_t mp = {BK_POOL_MAX, 3, 3, 2, 2, 1, 1};
    bk_set_name(g, "maxpool");
    t = bk_pool2d(g, t, &mp);
    for (int l = 0, i = 0; l < 4; l++)
        for (int b = 0; b < r->layers[l]; b++, i++) {
            char prefix[32];
            snprintf(prefix, sizeof prefix, "layer%d.%d", l + 1, b);
            t = block_build(r, &r->blocks[i], prefix, g, t);
        }
    bk_set_name(g, "avgpool");
    t = bk_global_avg_pool(g, t);
    bk_set_name(g, "fc");
    return bk_linear(g, t, r->classes, r->fc_w, r->fc_b);
}

static void *resnet18_load(const model_opts_t *o, const wl_source_t *src, arch_info_t *info,
                           char *err, size_t errlen)
{
    static const int layers[4] = {2, 2, 2, 2};
    return resnet_load(o, src, info, layers, 0, "resnet18", err, errlen);
}

static void *resnet34_load(const model_opts_t *o, const wl_source_t *src, arch_info_t *info,
                           char *err, size_t errlen)
{
    static const int layers[4] = {3, 4, 6, 3};
    return resnet_load(o, src, info, layers, 0, "resnet34", err, errlen);
}

static void *resnet50_load(const model_opts_t *o, const wl_source_t *src, arch_info_t *info,
                           char *err, size_t errlen)
{
    static const int layers[4] = {3, 4, 6, 3};
    return resnet_load(o, src, info, layers, 1, "resnet50", err, errlen);
}

/* ------------------------------------------------------------ training */

/* torchvision's BasicBlock / Bottleneck, unfolded:
 * relu(bn2(conv2(relu(bn1(conv1(x))))) + downsample(x)). */
static bk_tvar_t *block_train(const resnet_t *r, const rblock_t *blk, const char *p,
                              const pstore_t *ps, bk_tgraph_t *g, bk_tvar_t *x)
{
    char cn[96], bn[96];
    int nconv = r->bottleneck ? 3 : 2;
    const fconv_t *convs[3] = {&blk->c1, &blk->c2, &blk->c3};
    bk_tvar_t *t = x;
    for (int i = 0; i < nconv; i++) {
        const bk_conv_t *c = &convs[i]->p;
        snprintf(cn, sizeof cn, "%s.conv%d", p, i + 1);
        snprintf(bn, sizeof bn, "%s.bn%d", p, i + 1);
        t = tl_conv(g, ps, cn, t, c->oc, c->kh, c->stride_h, c->pad_h, 0);
        t = i < nconv - 1 ? tl_bn_relu(g, ps, bn, t) : tl_bn(g, ps, bn, t);
    }
    bk_tvar_t *id = x;
    if (blk->has_ds) {
        snprintf(cn, sizeof cn, "%s.downsample.0", p);
        snprintf(bn, sizeof bn, "%s.downsample.1", p);
        id = tl_bn(g, ps, bn, tl_conv(g, ps, cn, x, blk->ds.p.oc, 1, blk->ds.p.stride_h, 0, 0));
    }
    snprintf(cn, sizeof cn, "%s.add", p);
    bk_tgraph_set_name(g, cn);
    return bk_t_relu(g, bk_t_add(g, t, id));
}

static bk_tvar_t *resnet_train_build(const void *state, const pstore_t *ps, bk_tgraph_t *g,
                                     bk_tvar_t *x)
{
    const resnet_t *r = state;
    bk_tvar_t *t = tl_bn_relu(g, ps, "bn1", tl_conv(g, ps, "conv1", x, 64, 7, 2, 3, 0));
    bk_tgraph_set_name(g, "maxpool");
    bk_pool_t mp = {BK_POOL_MAX, 3, 3, 2, 2, 1, 1};
    t = bk_t_pool2d(g, t, &mp);
    for (int l = 0, i = 0; l < 4; l++)
        for (int b = 0; b < r->layers[l]; b++, i++) {
            char prefix[32];
            snprintf(prefix, sizeof prefix, "layer%d.%d", l + 1, b);
            t = block_train(r, &r->blocks[i], prefix, ps, g, t);
        }
    bk_tgraph_set_name(g, "avgpool");
    t = bk_t_global_avg_pool(g, t);
    return tl_linear(g, ps, "fc", t, r->classes);
}

const arch_t ARCH_RESNET18 = {"resnet18", resnet18_load, resnet_build, resnet_destroy,
                              resnet_train_build};
const arch_t ARCH_RESNET34 = {"resnet34", resnet34_load, resnet_build, resnet_destroy,
                              resnet_train_build};
const arch_t ARCH_RESNET50 = {"resnet50", resnet50_load, resnet_build, resnet_destroy,
                              resnet_train_build};
