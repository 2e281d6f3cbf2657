/* layers — state_dict loading with operator-facing errors, BN folding. */
#include "gpud/models/layers.h"

#include "common/errbuf.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct wloader {
    const safetensors_t *st;    /* NULL: record mode (rec) */
    wl_record_t *rec;
    unsigned char *used;    /* per tensor, in safetensors_at order */
    char arch[32];
    char hint[64];
    char err[512];
    int failed;
};

void wl_record_free(wl_record_t *r)
{
    free(r->e);
    memset(r, 0, sizeof *r);
}

static void record(wloader_t *wl, const char *name, int ndim, const int64_t *shape, int is_i64)
{
    wl_record_t *r = wl->rec;
    for (size_t i = 0; i < r->n; i++)
        if (strcmp(r->e[i].name, name) == 0)
            return;   /* densenet checks some tensors twice */
    if (r->n == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 64;
        wl_rec_t *e = realloc(r->e, cap * sizeof *e);
        if (!e) {
            r->failed = 1;
            return;
        }
        r->e = e;
        r->cap = cap;
    }
    if (strlen(name) >= sizeof r->e[0].name || ndim > 4) {
        r->failed = 1;
        return;
    }
    wl_rec_t *e = &r->e[r->n++];
    memset(e, 0, sizeof *e);
    snprintf(e->name, sizeof e->name, "%s", name);
    e->ndim = ndim;
    if (ndim > 0)
        memcpy(e->shape, shape, (size_t)ndim * sizeof *shape);
    e->is_i64 = is_i64;
}

wloader_t *wloader_new(const wl_source_t *src, const char *arch, const char *hint)
{
    const safetensors_t *st = src ? src->file : NULL;
    if (!st && !(src && src->record))
        return NULL;
    wloader_t *wl = calloc(1, sizeof *wl);
    if (!wl)
        return NULL;
    wl->st = st;
    wl->rec = st ? NULL : src->record;
    wl->used = calloc((st ? safetensors_count(st) : 0) + 1, 1);
    if (!wl->used) {
        free(wl);
        return NULL;
    }
    snprintf(wl->arch, sizeof wl->arch, "%s", arch);
    wl_hint(wl, hint);
    return wl;
}

void wl_hint(wloader_t *wl, const char *hint)
{
    snprintf(wl->hint, sizeof wl->hint, "%s", hint ? hint : "");
}

void wloader_destroy(wloader_t **wl)
{
    if (!wl || !*wl)
        return;
    free((*wl)->used);
    free(*wl);
    *wl = NULL;
}

const char *wloader_error(const wloader_t *wl)
{
    return wl->failed ? wl->err : NULL;
}

static void wl_fail(wloader_t *wl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void wl_fail(wloader_t *wl, const char *fmt, ...)
{
    if (wl->failed)
        return;
    wl->failed = 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(wl->err, sizeof wl->err, fmt, ap);
    va_end(ap);
}

/* Look name up and mark it used. NULL (and error) when missing. */
static const st_tensor_t *lookup(wloader_t *wl, const char *name, int required)
{
    const st_tensor_t *t = safetensors_get(wl->st, name);
    if (!t) {
        if (required)
            wl_fail(wl, "%s: missing from %s (not a %s state_dict? check --model)", name,
                    safetensors_path(wl->st), wl->arch);
        return NULL;
    }
    wl->used[t - safetensors_at(wl->st, 0)] = 1;
    return t;
}

/* Record mode: remember the tensor, hand out zeros of its shape. */
static float *take_recorded(wloader_t *wl, const char *name, int ndim, const int64_t *shape)
{
    size_t numel = 1;
    for (int i = 0; i < ndim; i++)
        numel *= (size_t)(shape[i] > 0 ? shape[i] : 0);
    record(wl, name, ndim, shape, 0);
    float *v = calloc(numel ? numel : 1, sizeof *v);
    if (!v || wl->rec->failed) {
        free(v);
        wl_fail(wl, "%s: out of memory, or a name/shape too long to record", name);
        return NULL;
    }
    return v;
}

float *wl_take(wloader_t *wl, const char *name, int ndim, const int64_t *shape)
{
    if (wl->failed)
        return NULL;
    if (wl->rec)
        return take_recorded(wl, name, ndim, shape);
    const st_tensor_t *t = lookup(wl, name, 1);
    if (!t)
        return NULL;
    int same = t->ndim == ndim;
    for (int i = 0; same && i < ndim; i++)
        same = t->shape[i] == shape[i];
    if (!same) {
        char have[128], want[128];
        wl_fail(wl, "%s: file has %s, model wants %s%s%s%s", name,
                st_shape_str(t->shape, t->ndim, have, sizeof have),
                st_shape_str(shape, ndim, want, sizeof want), wl->hint[0] ? " (" : "",
                wl->hint, wl->hint[0] ? ")" : "");
        return NULL;
    }
    float *v = malloc((size_t)(t->numel ? t->numel : 1) * sizeof *v);
    if (!v) {
        wl_fail(wl, "%s: out of memory (%lld values)", name, (long long)t->numel);
        return NULL;
    }
    if (st_tensor_to_f32(t, v, (size_t)t->numel) < 0) {
        free(v);
        wl_fail(wl, "%s: dtype %s is not a float type (F32, F16, BF16, F64)", name,
                st_dtype_name(t->dtype));
        return NULL;
    }
    return v;
}

int wl_shape(wloader_t *wl, const char *name, int64_t *shape, int max_dims)
{
    if (wl->failed)
        return -1;
    if (wl->rec)   /* no file: no shape; the arch falls back to its options */
        return 0;
    const st_tensor_t *t = lookup(wl, name, 1);
    if (!t)
        return -1;
    if (t->ndim > max_dims) {
        char have[128];
        wl_fail(wl, "%s: file has %s, expected at most %d dimensions", name,
                st_shape_str(t->shape, t->ndim, have, sizeof have), max_dims);
        return -1;
    }
    memcpy(shape, t->shape, (size_t)t->ndim * sizeof *shape);
    return t->ndim;
}

void wl_optional(wloader_t *wl, const char *name)
{
    size_t nl = strlen(name), sl = strlen(".num_batches_tracked");
    if (wl->rec) {   /* PyTorch's state_dict has the counter: so does the init */
        if (nl > sl && strcmp(name + nl - sl, ".num_batches_tracked") == 0)
            record(wl, name, 0, NULL, 1);
        return;
    }
    (void)lookup(wl, name, 0);
}

int wl_finish(wloader_t *wl)
{
    if (wl->failed)
        return -1;
    if (wl->rec)
        return 0;
    size_t n = safetensors_count(wl->st), extra = 0;
    const st_tensor_t *first = NULL;
    for (size_t i = 0; i < n; i++)
        if (!wl->used[i] && extra++ == 0)
            first = safetensors_at(wl->st, i);
    if (!first)
        return 0;
    char have[128];
    wl_fail(wl, "%s: unexpected tensor %s (shape %s) is not part of %s%s (wrong --model?)",
            safetensors_path(wl->st), first->name,
            st_shape_str(first->shape, first->ndim, have, sizeof have), wl->arch,
            extra > 1 ? " (and more)" : "");
    return -1;
}

/* ------------------------------------------------------------- folding */

void bn_fold(float *w, float *bias, int oc, size_t per_oc, const float *gamma,
             const float *beta, const float *mean, const float *var, float eps)
{
    for (int o = 0; o < oc; o++) {
        double s = (double)gamma[o] / sqrt((double)var[o] + (double)eps);
        for (size_t i = 0; i < per_oc; i++)
            w[(size_t)o * per_oc + i] = (float)(w[(size_t)o * per_oc + i] * s);
        bias[o] = (float)(((double)bias[o] - mean[o]) * s + beta[o]);
    }
}

static int load_bn_into(fconv_t *c, wloader_t *wl, const char *bn, int oc, int k_elems)
{
    const char *parts[4] = {"weight", "bias", "running_mean", "running_var"};
    float *v[4] = {0};
    int64_t shape[1] = {oc};
    char name[256];
    int ok = 1;
    for (int i = 0; i < 4 && ok; i++) {
        snprintf(name, sizeof name, "%s.%s", bn, parts[i]);
        ok = (v[i] = wl_take(wl, name, 1, shape)) != NULL;
    }
    snprintf(name, sizeof name, "%s.num_batches_tracked", bn);
    wl_optional(wl, name);
    if (ok) {
        for (int i = 0; i < oc && ok; i++)
            if (!(v[3][i] >= 0.0f) || !isfinite(v[3][i])) {
                wl_fail(wl, "%s.running_var[%d] = %g: a variance must be finite and >= 0",
                        bn, i, (double)v[3][i]);
                ok = 0;
            }
    }
    if (ok)
        bn_fold(c->w, c->b, oc, (size_t)k_elems, v[0], v[1], v[2], v[3], BN_EPS);
    for (int i = 0; i < 4; i++)
        free(v[i]);
    return ok ? 0 : -1;
}

int fconv_load(fconv_t *c, wloader_t *wl, const char *conv, int has_bias, const char *bn,
               int oc, int ic, int k, int stride, int pad)
{
    memset(c, 0, sizeof *c);
    char name[256];
    int64_t wshape[4] = {oc, ic, k, k}, bshape[1] = {oc};
    snprintf(name, sizeof name, "%s.weight", conv);
    c->w = wl_take(wl, name, 4, wshape);
    if (!c->w)
        return -1;
    if (has_bias) {
        snprintf(name, sizeof name, "%s.bias", conv);
        c->b = wl_take(wl, name, 1, bshape);
    } else if (bn) {
        c->b = calloc((size_t)oc, sizeof *c->b);   /* the fold creates a bias */
        if (!c->b)
            wl_fail(wl, "%s: out of memory", conv);
    }
    if ((has_bias || bn) && !c->b) {
        fconv_free(c);
        return -1;
    }
    if (bn && load_bn_into(c, wl, bn, oc, ic * k * k) < 0) {
        fconv_free(c);
        return -1;
    }
    c->p = (bk_conv_t){.ic = ic, .oc = oc, .kh = k, .kw = k, .stride_h = stride,
                       .stride_w = stride, .pad_h = pad, .pad_w = pad, .weight = c->w,
                       .bias = c->b};
    return 0;
}

void fconv_free(fconv_t *c)
{
    free(c->w);
    free(c->b);
    memset(c, 0, sizeof *c);
}

bk_tensor_t *fconv_apply(bk_graph_t *g, const fconv_t *c, const char *name, bk_tensor_t *x,
                         bk_tensor_t *residual, int n_post, const bk_postop_t *post)
{
    bk_conv_t p = c->p;
    p.n_post = n_post;
    for (int i = 0; i < n_post && i < BK_MAX_POST; i++)
        p.post[i] = post[i];
    bk_set_name(g, name);
    return bk_conv2d(g, x, &p, residual);
}

/* ------------------------------------------------ training parameters */

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

void pstore_destroy(pstore_t **psp)
{
    if (!psp || !*psp)
        return;
    pstore_t *ps = *psp;
    for (size_t i = 0; i < ps->n; i++) {
        free(ps->e[i].w);
        free(ps->e[i].g);
    }
    free(ps->e);
    free(ps);
    *psp = NULL;
}

static int pentry_load(pentry_t *e, const st_tensor_t *t, char *err, size_t errlen)
{
    if (strlen(t->name) >= sizeof e->name || t->ndim > 4) {
        err_set(err, errlen, "%s: name too long or more than 4 dimensions", t->name);
        return -1;
    }
    snprintf(e->name, sizeof e->name, "%s", t->name);
    e->n = (size_t)t->numel;
    e->ndim = t->ndim;
    memcpy(e->shape, t->shape, (size_t)t->ndim * sizeof *e->shape);
    e->trainable = ends_with(t->name, ".weight") || ends_with(t->name, ".bias");
    e->w = malloc((e->n ? e->n : 1) * sizeof *e->w);
    e->g = e->trainable ? calloc(e->n ? e->n : 1, sizeof *e->g) : NULL;
    if (!e->w || (e->trainable && !e->g)) {
        err_set(err, errlen, "%s: out of memory", t->name);
        return -1;
    }
    if (st_tensor_to_f32(t, e->w, e->n) < 0) {
        err_set(err, errlen, "%s: dtype %s is not a float type (F32, F16, BF16, F64)",
                t->name, st_dtype_name(t->dtype));
        return -1;
    }
    return 0;
}

pstore_t *pstore_load(const safetensors_t *st, char *err, size_t errlen)
{
    pstore_t *ps = calloc(1, sizeof *ps);
    size_t cnt = safetensors_count(st);
    if (!ps || !(ps->e = calloc(cnt + 1, sizeof *ps->e))) {
        free(ps);
        err_set(err, errlen, "parameters: out of memory");
        return NULL;
    }
    for (size_t i = 0; i < cnt; i++) {
        const st_tensor_t *t = safetensors_at(st, i);
        if (ends_with(t->name, ".num_batches_tracked"))
            continue;
        if (pentry_load(&ps->e[ps->n++], t, err, errlen) < 0) {
            pstore_destroy(&ps);
            return NULL;
        }
    }
    return ps;
}

pentry_t *pstore_find(const pstore_t *ps, const char *name)
{
    for (size_t i = 0; i < ps->n; i++)
        if (strcmp(ps->e[i].name, name) == 0)
            return &ps->e[i];
    return NULL;
}

/* name.suffix with exactly `numel` values, or NULL after failing g. */
static pentry_t *tl_param(bk_tgraph_t *g, const pstore_t *ps, const char *name,
                          const char *suffix, size_t numel)
{
    char full[160];
    snprintf(full, sizeof full, "%s.%s", name, suffix);
    pentry_t *e = pstore_find(ps, full);
    bk_tgraph_set_name(g, name);
    if (!e)
        return bk_tfail(g, "%s: missing from the weights", full);
    if (e->n != numel)
        return bk_tfail(g, "%s: has %zu values, the network wants %zu", full, e->n, numel);
    return e;
}

/* The gradient array of a trainable, unfrozen entry, else NULL. */
static float *live_grad(const pentry_t *e)
{
    return e && !e->frozen ? e->g : NULL;
}

static bk_tvar_t *tl_missing(bk_tgraph_t *g, const char *name)
{
    bk_tgraph_set_name(g, name);
    return bk_tfail(g, "no input (an earlier layer failed)");
}

bk_tvar_t *tl_conv(bk_tgraph_t *g, const pstore_t *ps, const char *name, bk_tvar_t *x, int oc,
                   int k, int stride, int pad, int has_bias)
{
    if (!x)
        return tl_missing(g, name);
    int n, c, h, w;
    bk_tvar_dims(x, &n, &c, &h, &w);
    pentry_t *we = tl_param(g, ps, name, "weight", (size_t)oc * c * k * k);
    pentry_t *be = has_bias ? tl_param(g, ps, name, "bias", (size_t)oc) : NULL;
    if (!we || (has_bias && !be))
        return tl_missing(g, name);
    bk_tconv_t p = {.ic = c, .oc = oc, .kh = k, .kw = k, .stride_h = stride,
                    .stride_w = stride, .pad_h = pad, .pad_w = pad, .weight = we->w,
                    .grad_weight = live_grad(we), .bias = be ? be->w : NULL,
                    .grad_bias = live_grad(be)};
    bk_tgraph_set_name(g, name);
    return bk_t_conv2d(g, x, &p);
}

static bk_tvar_t *bn_layer(bk_tgraph_t *g, const pstore_t *ps, const char *name, bk_tvar_t *x,
                           int relu)
{
    if (!x)
        return tl_missing(g, name);
    int n, c, h, w;
    bk_tvar_dims(x, &n, &c, &h, &w);
    pentry_t *gm = tl_param(g, ps, name, "weight", (size_t)c);
    pentry_t *bt = tl_param(g, ps, name, "bias", (size_t)c);
    pentry_t *rm = tl_param(g, ps, name, "running_mean", (size_t)c);
    pentry_t *rv = tl_param(g, ps, name, "running_var", (size_t)c);
    if (!gm || !bt || !rm || !rv)
        return tl_missing(g, name);
    /* the backend wants both BN gradients or neither */
    int frozen = gm->frozen || bt->frozen;
    bk_tbn_t p = {.c = c, .weight = gm->w, .grad_weight = frozen ? NULL : gm->g,
                  .bias = bt->w, .grad_bias = frozen ? NULL : bt->g,
                  .running_mean = rm->w, .running_var = rv->w,
                  .momentum = 0.1f, .eps = BN_EPS, .relu = relu, .eval = rm->bn_eval};
    bk_tgraph_set_name(g, name);
    return bk_t_batchnorm(g, x, &p);
}

bk_tvar_t *tl_bn(bk_tgraph_t *g, const pstore_t *ps, const char *name, bk_tvar_t *x)
{
    return bn_layer(g, ps, name, x, 0);
}

bk_tvar_t *tl_bn_relu(bk_tgraph_t *g, const pstore_t *ps, const char *name, bk_tvar_t *x)
{
    return bn_layer(g, ps, name, x, 1);
}

bk_tvar_t *tl_linear(bk_tgraph_t *g, const pstore_t *ps, const char *name, bk_tvar_t *x,
                     int out)
{
    if (!x)
        return tl_missing(g, name);
    int n, c, h, w;
    bk_tvar_dims(x, &n, &c, &h, &w);
    pentry_t *we = tl_param(g, ps, name, "weight", (size_t)out * c * h * w);
    pentry_t *be = tl_param(g, ps, name, "bias", (size_t)out);
    if (!we || !be)
        return tl_missing(g, name);
    bk_tgraph_set_name(g, name);
    return bk_t_linear(g, x, out, we->w, live_grad(we), be->w, live_grad(be));
}
