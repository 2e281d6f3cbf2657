/* layers — the layers that bind parameter-store entries into a tape graph
 * (checking name and shape), and the walks of a description that check or
 * record the parameters without running it. */
#include "gpud/models/layers.h"

#include "common/errbuf.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------- parameters */

/* Fail g with msg alone (it names the tensor), then restore the op name. */
static void *param_fail(bk_graph_t *g, const char *layer, const char *msg)
{
    bk_graph_set_name(g, "");
    bk_fail(g, "%s", msg);
    bk_graph_set_name(g, layer);
    return NULL;
}

static int same_shape(const pentry_t *e, int ndim, const int64_t *shape)
{
    int same = e->ndim == ndim;
    for (int d = 0; same && d < ndim; d++)
        same = e->shape[d] == shape[d];
    return same;
}

/* layer.suffix with exactly `shape`, marked bound (created in PS_RECORD),
 * or NULL after failing g. */
static pentry_t *tl_param(bk_graph_t *g, pstore_t *ps, const char *layer, const char *suffix,
                          int ndim, const int64_t *shape)
{
    char full[160], msg[600], have[128], want[128];
    snprintf(full, sizeof full, "%s.%s", layer, suffix);
    bk_graph_set_name(g, layer);
    pentry_t *e = pstore_find(ps, full);
    if (!e && ps->mode == PS_RECORD && !(e = pstore_add(ps, full, ndim, shape))) {
        snprintf(msg, sizeof msg, "%s: out of memory, or a name too long to record", full);
        return param_fail(g, layer, msg);
    }
    if (!e) {
        snprintf(msg, sizeof msg, "%s: missing from %s (not a %s state_dict? check --model)",
                 full, ps->src, ps->arch);
        return param_fail(g, layer, msg);
    }
    if (!same_shape(e, ndim, shape)) {
        snprintf(msg, sizeof msg, "%s: file has %s, model wants %s%s%s%s", full,
                 st_shape_str(e->shape, e->ndim, have, sizeof have),
                 st_shape_str(shape, ndim, want, sizeof want), ps->hint[0] ? " (" : "",
                 ps->hint, ps->hint[0] ? ")" : "");
        return param_fail(g, layer, msg);
    }
    if (!e->bound)
        e->walk = ps->nwalk++;
    e->bound = 1;
    return e;
}

/* The gradient array of a trainable, unfrozen entry, else NULL. */
static float *live_grad(const pentry_t *e)
{
    return e && !e->frozen ? e->g : NULL;
}

/* A layer starts: its input exists, and a recording store has room for
 * its entries (pointers to them stay valid through the layer). */
static int layer_begin(bk_graph_t *g, pstore_t *ps, const char *name, const bk_tensor_t *x)
{
    bk_graph_set_name(g, name);
    if (!x) {
        bk_fail(g, "no input (an earlier layer failed)");
        return -1;
    }
    if (ps->mode == PS_RECORD && pstore_reserve(ps, 4) < 0) {
        bk_fail(g, "out of memory");
        return -1;
    }
    return 0;
}

static int channels(const bk_tensor_t *x)
{
    int n, c, h, w;
    bk_tensor_dims(x, &n, &c, &h, &w);
    return c;
}

/* -------------------------------------------------------------- layers */

int tl_conv_bind(bk_graph_t *g, pstore_t *ps, const char *name, int ic, int oc, int k,
                 int stride, int pad, int has_bias, bk_conv_t *p)
{
    if (ps->mode == PS_RECORD && pstore_reserve(ps, 2) < 0) {
        bk_graph_set_name(g, name);
        bk_fail(g, "out of memory");
        return -1;
    }
    pentry_t *we = tl_param(g, ps, name, "weight", 4, (int64_t[4]){oc, ic, k, k});
    pentry_t *be = has_bias && we ? tl_param(g, ps, name, "bias", 1, (int64_t[1]){oc}) : NULL;
    if (!we || (has_bias && !be))
        return -1;
    *p = (bk_conv_t){.ic = ic, .oc = oc, .kh = k, .kw = k, .stride_h = stride,
                      .stride_w = stride, .pad_h = pad, .pad_w = pad, .weight = we->w,
                      .grad_weight = live_grad(we), .bias = be ? be->w : NULL,
                      .grad_bias = live_grad(be)};
    return 0;
}

bk_tensor_t *tl_conv_on(bk_graph_t *g, const char *name, bk_tensor_t *x, const bk_conv_t *p)
{
    bk_graph_set_name(g, name);
    if (!x)
        return bk_fail(g, "no input (an earlier layer failed)");
    return bk_conv2d(g, x, p);
}

bk_tensor_t *tl_conv(bk_graph_t *g, pstore_t *ps, const char *name, bk_tensor_t *x, int oc, int k,
                   int stride, int pad, int has_bias)
{
    bk_conv_t p;
    if (layer_begin(g, ps, name, x) < 0 ||
        tl_conv_bind(g, ps, name, channels(x), oc, k, stride, pad, has_bias, &p) < 0)
        return NULL;
    return tl_conv_on(g, name, x, &p);
}

/* model_new's check: the running variances of a weights file are sane. */
static int check_var(bk_graph_t *g, const char *name, const pentry_t *rv)
{
    for (size_t i = 0; i < rv->n; i++)
        if (!(rv->w[i] >= 0.0f) || !isfinite(rv->w[i])) {
            char msg[300];
            snprintf(msg, sizeof msg, "%s.running_var[%zu] = %g: a variance must be finite "
                     "and >= 0", name, i, (double)rv->w[i]);
            param_fail(g, name, msg);
            return -1;
        }
    return 0;
}

static bk_tensor_t *bn_layer(bk_graph_t *g, pstore_t *ps, const char *name, bk_tensor_t *x,
                           int relu)
{
    if (layer_begin(g, ps, name, x) < 0)
        return NULL;
    int64_t c[1] = {channels(x)};
    pentry_t *gm = tl_param(g, ps, name, "weight", 1, c);
    pentry_t *bt = tl_param(g, ps, name, "bias", 1, c);
    pentry_t *rm = tl_param(g, ps, name, "running_mean", 1, c);
    pentry_t *rv = tl_param(g, ps, name, "running_var", 1, c);
    if (!gm || !bt || !rm || !rv || (ps->mode == PS_CHECK && check_var(g, name, rv) < 0))
        return NULL;
    /* the backend wants both BN gradients or neither */
    int frozen = gm->frozen || bt->frozen;
    bk_bn_t p = {.c = (int)c[0], .weight = gm->w, .grad_weight = frozen ? NULL : gm->g,
                  .bias = bt->w, .grad_bias = frozen ? NULL : bt->g,
                  .running_mean = rm->w, .running_var = rv->w,
                  .momentum = 0.1f, .eps = BN_EPS, .relu = relu, .eval = rm->bn_eval};
    bk_graph_set_name(g, name);
    return bk_batchnorm(g, x, &p);
}

bk_tensor_t *tl_bn(bk_graph_t *g, pstore_t *ps, const char *name, bk_tensor_t *x)
{
    return bn_layer(g, ps, name, x, 0);
}

bk_tensor_t *tl_bn_relu(bk_graph_t *g, pstore_t *ps, const char *name, bk_tensor_t *x)
{
    return bn_layer(g, ps, name, x, 1);
}

bk_tensor_t *tl_linear(bk_graph_t *g, pstore_t *ps, const char *name, bk_tensor_t *x, int out)
{
    if (layer_begin(g, ps, name, x) < 0)
        return NULL;
    int n, c, h, w;
    bk_tensor_dims(x, &n, &c, &h, &w);
    pentry_t *we = tl_param(g, ps, name, "weight", 2, (int64_t[2]){out, (int64_t)c * h * w});
    pentry_t *be = we ? tl_param(g, ps, name, "bias", 1, (int64_t[1]){out}) : NULL;
    if (!we || !be)
        return NULL;
    bk_graph_set_name(g, name);
    return bk_linear(g, x, out, we->w, live_grad(we), be->w, live_grad(be));
}

/* ------------------------------------------------------------- walks */

int arch_classes(const model_opts_t *o, const safetensors_t *st, const char *head, int def)
{
    if (o->num_classes > 0)
        return o->num_classes;
    const st_tensor_t *t = st ? safetensors_get(st, head) : NULL;
    if (!t)   /* no file, or describe reports the head missing */
        return def;
    if (t->ndim != 2 || t->shape[0] < 1 || t->shape[0] > 1000000)
        return 1;   /* describe reports the shape */
    return (int)t->shape[0];
}

bk_tensor_t *arch_describe(const arch_t *arch, const arch_info_t *a, pstore_t *ps, bk_graph_t *g,
                         bk_tensor_t *x)
{
    snprintf(ps->arch, sizeof ps->arch, "%s", arch->name);
    pstore_hint(ps, arch->hint);
    return arch->describe(a, ps, g, x);
}

int arch_walk(const arch_t *arch, const arch_info_t *a, pstore_t *ps, char *err, size_t errlen)
{
    /* a description graph: shapes checked, parameters bound, nothing made */
    bk_graph_t *g = bk_graph_new(NULL);
    bk_graph_set_name(g, "input");
    bk_tensor_t *x = bk_input(g, 1, a->in_channels, a->nat_h, a->nat_w, 0);
    bk_tensor_t *y = x ? arch_describe(arch, a, ps, g, x) : NULL;
    if (!y)
        err_set(err, errlen, "%s", bk_graph_error(g) ? bk_graph_error(g) : "out of memory");
    bk_graph_destroy(&g);
    return y ? 0 : -1;
}

int arch_check(const arch_t *arch, const arch_info_t *a, pstore_t *ps, const safetensors_t *st,
               char *err, size_t errlen)
{
    ps->mode = PS_CHECK;
    int rc = arch_walk(arch, a, ps, err, errlen);
    ps->mode = PS_BIND;
    return rc ? rc : pstore_leftovers(ps, st, err, errlen);
}
