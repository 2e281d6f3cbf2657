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
 * a ReLU + conv, so it cannot be folded into a convolution: there is no
 * folded inference network (build = NULL) and inference runs the training
 * graph in eval mode (BatchNorm on running statistics, model.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpud/models/layers.h"
#include "common/errbuf.h"

#define DN_GROWTH 32
#define DN_BN_SIZE 4
#define DN_INIT 64

static const int DN_BLOCKS[4] = {6, 12, 24, 16};

typedef struct {
    int in_c, classes, features;   /* features: channels into the classifier */
} densenet_t;

static void densenet_destroy(void *state)
{
    free(state);
}

/* Check that tensor `name` exists with `shape` (wl_take does the naming
 * and the message); the values are read again by the parameter store. */
static int need(wloader_t *wl, const char *name, int ndim, const int64_t *shape)
{
    float *v = wl_take(wl, name, ndim, shape);
    free(v);
    return v ? 0 : -1;
}

static int need_conv(wloader_t *wl, const char *p, int oc, int ic, int k)
{
    char name[160];
    snprintf(name, sizeof name, "%s.weight", p);
    return need(wl, name, 4, (int64_t[4]){oc, ic, k, k});
}

static int need_bn(wloader_t *wl, const char *p, int c)
{
    static const char *const parts[4] = {"weight", "bias", "running_mean", "running_var"};
    char name[160];
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof name, "%s.%s", p, parts[i]);
        if (need(wl, name, 1, (int64_t[1]){c}) < 0)
            return -1;
    }
    snprintf(name, sizeof name, "%s.num_batches_tracked", p);
    wl_optional(wl, name);
    return 0;
}

/* Block b (1-based) on c input channels; returns its output channels or -1. */
static int need_block(wloader_t *wl, int b, int c)
{
    char p[96], n[128];
    for (int l = 0; l < DN_BLOCKS[b - 1]; l++, c += DN_GROWTH) {
        snprintf(p, sizeof p, "features.denseblock%d.denselayer%d", b, l + 1);
        snprintf(n, sizeof n, "%s.norm1", p);
        if (need_bn(wl, n, c) < 0)
            return -1;
        snprintf(n, sizeof n, "%s.conv1", p);
        if (need_conv(wl, n, DN_BN_SIZE * DN_GROWTH, c, 1) < 0)
            return -1;
        snprintf(n, sizeof n, "%s.norm2", p);
        if (need_bn(wl, n, DN_BN_SIZE * DN_GROWTH) < 0)
            return -1;
        snprintf(n, sizeof n, "%s.conv2", p);
        if (need_conv(wl, n, DN_GROWTH, DN_BN_SIZE * DN_GROWTH, 3) < 0)
            return -1;
    }
    return c;
}

static int need_classifier(densenet_t *d, wloader_t *wl, const model_opts_t *o)
{
    int64_t shape[4];
    wl_hint(wl, "check --classes");
    int nd = wl_shape(wl, "classifier.weight", shape, 4);
    if (nd < 0)
        return -1;
    d->classes = o->num_classes > 0 ? o->num_classes : (nd == 2 ? (int)shape[0] : 0);
    if (d->classes < 1 || d->classes > 1000000)
        d->classes = 1;   /* let need() report the shape mismatch */
    if (need(wl, "classifier.weight", 2, (int64_t[2]){d->classes, d->features}) < 0)
        return -1;
    return need(wl, "classifier.bias", 1, (int64_t[1]){d->classes});
}

static int need_all(densenet_t *d, wloader_t *wl, const model_opts_t *o)
{
    int c = DN_INIT;
    if (need_conv(wl, "features.conv0", DN_INIT, d->in_c, 7) < 0 ||
        need_bn(wl, "features.norm0", DN_INIT) < 0)
        return -1;
    for (int b = 1; b <= 4; b++) {
        if ((c = need_block(wl, b, c)) < 0)
            return -1;
        if (b == 4)
            break;
        char p[64];
        snprintf(p, sizeof p, "features.transition%d.norm", b);
        if (need_bn(wl, p, c) < 0)
            return -1;
        snprintf(p, sizeof p, "features.transition%d.conv", b);
        if (need_conv(wl, p, c / 2, c, 1) < 0)
            return -1;
        c /= 2;
    }
    if (need_bn(wl, "features.norm5", c) < 0)
        return -1;
    d->features = c;
    return need_classifier(d, wl, o);
}

static void *densenet_load(const model_opts_t *o, const wl_source_t *src, arch_info_t *info,
                           char *err, size_t errlen)
{
    densenet_t *d = calloc(1, sizeof *d);
    wloader_t *wl = wloader_new(src, "densenet121", "check --model");
    if (!d || !wl) {
        err_set(err, errlen, "densenet121: out of memory");
        free(d);
        wloader_destroy(&wl);
        return NULL;
    }
    d->in_c = o->in_channels > 0 ? o->in_channels : 3;
    if (need_all(d, wl, o) < 0 || wl_finish(wl) < 0) {
        err_set(err, errlen, "%s", wloader_error(wl));
        free(d);
        d = NULL;
    } else {
        *info = (arch_info_t){.in_channels = d->in_c, .num_classes = d->classes, .nat_h = 224,
                              .nat_w = 224, .hw_fixed = 0};
    }
    wloader_destroy(&wl);
    return d;
}

/* ------------------------------------------------------------- network */

/* One _DenseLayer on the concatenation of xs[0..k): its 32 new channels. */
static bk_tvar_t *dense_layer(const pstore_t *ps, bk_tgraph_t *g, const char *p, int k,
                              bk_tvar_t *const *xs)
{
    char n[128];
    bk_tvar_t *t = xs[0];
    if (k > 1) {
        snprintf(n, sizeof n, "%s.cat", p);
        bk_tgraph_set_name(g, n);
        t = bk_t_concat(g, k, xs);
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
static bk_tvar_t *dense_block(const pstore_t *ps, bk_tgraph_t *g, int b, bk_tvar_t *x)
{
    bk_tvar_t *xs[1 + 24];
    int k = 0;
    xs[k++] = x;
    for (int l = 0; l < DN_BLOCKS[b - 1]; l++, k++) {
        char p[96];
        snprintf(p, sizeof p, "features.denseblock%d.denselayer%d", b, l + 1);
        xs[k] = dense_layer(ps, g, p, k, xs);
    }
    char n[64];
    snprintf(n, sizeof n, "features.denseblock%d.cat", b);
    bk_tgraph_set_name(g, n);
    return bk_t_concat(g, k, xs);
}

static bk_tvar_t *transition(const pstore_t *ps, bk_tgraph_t *g, int b, bk_tvar_t *x)
{
    char n[64];
    int c = 0, unused;
    if (x)
        bk_tvar_dims(x, &unused, &c, &unused, &unused);
    snprintf(n, sizeof n, "features.transition%d.norm", b);
    x = tl_bn_relu(g, ps, n, x);
    snprintf(n, sizeof n, "features.transition%d.conv", b);
    x = tl_conv(g, ps, n, x, c / 2, 1, 1, 0, 0);
    snprintf(n, sizeof n, "features.transition%d.pool", b);
    bk_tgraph_set_name(g, n);
    bk_pool_t ap = {BK_POOL_AVG, 2, 2, 2, 2, 0, 0};
    return bk_t_pool2d(g, x, &ap);
}

static bk_tvar_t *densenet_train_build(const void *state, const pstore_t *ps, bk_tgraph_t *g,
                                       bk_tvar_t *x)
{
    const densenet_t *d = state;
    bk_tvar_t *t = tl_conv(g, ps, "features.conv0", x, DN_INIT, 7, 2, 3, 0);
    t = tl_bn_relu(g, ps, "features.norm0", t);
    bk_tgraph_set_name(g, "features.pool0");
    bk_pool_t mp = {BK_POOL_MAX, 3, 3, 2, 2, 1, 1};
    t = bk_t_pool2d(g, t, &mp);
    for (int b = 1; b <= 4; b++) {
        t = dense_block(ps, g, b, t);
        if (b < 4)
            t = transition(ps, g, b, t);
    }
    /* features end with norm5; forward() applies the ReLU: one fused op */
    t = tl_bn_relu(g, ps, "features.norm5", t);
    bk_tgraph_set_name(g, "avgpool");
    t = bk_t_global_avg_pool(g, t);
    return tl_linear(g, ps, "classifier", t, d->classes);
}

const arch_t ARCH_DENSENET121 = {"densenet121", densenet_load, NULL, densenet_destroy,
                                 densenet_train_build};
