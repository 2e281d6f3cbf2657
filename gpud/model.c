/* model — architecture + weights + backend behind the API gpud calls.
 *
 * Exactness: the network always runs on micro-batches of m->mb samples
 * (a graph is compiled once per input shape for exactly that batch), so a
 * sample's arithmetic never depends on n or on its neighbours. */
#include "gpud/model.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/safetensors.h"
#include "gpud/backend.h"
#include "gpud/models/layers.h"

#define GRAPH_CACHE 4   /* input shapes kept compiled at once */

/* PyTorch's num_batches_tracked of one BatchNorm (model_count_at). */
typedef struct {
    char name[160];     /* "<bn>.num_batches_tracked" */
    int64_t value;
    size_t rm;          /* pstore index of the BN's running_mean (bn_eval) */
} bn_count_t;

typedef struct {
    int c, h, w;
    bk_graph_t *g;
    bk_tensor_t *in, *out;
    unsigned long last_used;
} graph_slot_t;

struct model {
    const arch_t *arch;
    void *state;
    arch_info_t info;
    backend_t *be;
    int mb;
    graph_slot_t cache[GRAPH_CACHE];
    unsigned long tick;
    float *in_buf;      /* mb * c * h * w of the current shape */
    size_t in_cap;
    float *out_buf;     /* mb * num_classes */
    model_opts_t opts;  /* as given (arch name not kept) */
    pstore_t *ps;       /* unfolded parameters (train = 1) */
    bk_tgraph_t *tg;    /* training graph of the last shape */
    bk_tvar_t *t_in, *t_logits, *t_loss;
    int tn, tc, th, tw;
    float t_eps;
    float *t_x, *t_dl;  /* input and loss-gradient staging */
    size_t t_cap;
    bk_tgraph_t *eg;    /* arch without a folded network: eval-mode graph */
    bk_tvar_t *e_in, *e_out;
    int ec, eh, ew;
    model_allreduce_fn sync_fn;   /* SyncBatchNorm hook, NULL: off */
    void *sync_ctx;
    bn_count_t *nbt;    /* num_batches_tracked of each BatchNorm (train = 1) */
    int n_nbt;
};

static const arch_t *const ARCHS[] = {&ARCH_RESNET18, &ARCH_RESNET34, &ARCH_RESNET50,
                                      &ARCH_WIDERESNET, &ARCH_DENSENET121};

static const arch_t *arch_find(const char *name)
{
    for (size_t i = 0; i < sizeof ARCHS / sizeof *ARCHS; i++)
        if (name && strcmp(ARCHS[i]->name, name) == 0)
            return ARCHS[i];
    return NULL;
}

static int opts_check(const model_opts_t *o, char *err, size_t errlen)
{
    if (!arch_find(o->arch)) {
        snprintf(err, errlen, "unknown model '%s' (known: resnet18, resnet34, resnet50, "
                 "wideresnet, densenet121)", o->arch ? o->arch : "(null)");
        return -1;
    }
    if (o->micro_batch < 0 || o->micro_batch > MODEL_MAX_MICRO_BATCH) {
        snprintf(err, errlen, "micro-batch %d out of range 0..%d", o->micro_batch,
                 MODEL_MAX_MICRO_BATCH);
        return -1;
    }
    if (o->num_classes < 0 || o->in_channels < 0 || o->in_channels > 64 || o->threads < 0) {
        snprintf(err, errlen, "bad model options: classes %d, in-channels %d, threads %d",
                 o->num_classes, o->in_channels, o->threads);
        return -1;
    }
    return 0;
}

/* One num_batches_tracked counter per BatchNorm (an entry "<bn>.running_mean"
 * of the parameters), valued from the weights file when it has one. */
static int nbt_load(model_t *m, const safetensors_t *st, char *err, size_t errlen)
{
    static const char RM[] = ".running_mean";
    m->nbt = calloc(m->ps->n + 1, sizeof *m->nbt);
    if (!m->nbt) {
        snprintf(err, errlen, "model: out of memory");
        return -1;
    }
    for (size_t i = 0; i < m->ps->n; i++) {
        const char *name = m->ps->e[i].name;
        size_t nl = strlen(name), sl = sizeof RM - 1;
        if (nl <= sl || strcmp(name + nl - sl, RM) != 0)
            continue;
        bn_count_t *c = &m->nbt[m->n_nbt++];
        snprintf(c->name, sizeof c->name, "%.*s.num_batches_tracked", (int)(nl - sl), name);
        c->rm = i;
        const st_tensor_t *t = safetensors_get(st, c->name);
        if (t && st_tensor_to_i64(t, &c->value, 1) < 0) {
            snprintf(err, errlen, "%s: want one integer, the file has %s %lld values",
                     c->name, st_dtype_name(t->dtype), (long long)t->numel);
            return -1;
        }
    }
    return 0;
}

model_t *model_new(const model_opts_t *o, const char *backend, const char *weights_path,
                   char *err, size_t errlen)
{
    if (!o || opts_check(o, err, errlen) < 0)
        return NULL;
    model_t *m = calloc(1, sizeof *m);
    if (!m) {
        snprintf(err, errlen, "model: out of memory");
        return NULL;
    }
    m->arch = arch_find(o->arch);
    m->mb = o->micro_batch ? o->micro_batch : MODEL_DEFAULT_MICRO_BATCH;
    safetensors_t *st = !weights_path && o->init
                            ? init_weights(m->arch, o, o->init_seed, err, errlen)   /* models/init.c */
                            : safetensors_open(weights_path, err, errlen);
    if (!st) {
        model_destroy(&m);
        return NULL;
    }
    m->opts = *o;
    m->opts.arch = NULL;
    m->state = m->arch->load(o, &(wl_source_t){.file = st}, &m->info, err, errlen);
    int unfolded = o->train || !m->arch->build;   /* inference on unfolded weights too */
    if (m->state && unfolded)
        m->ps = pstore_load(st, err, errlen);
    if (m->ps && o->train && nbt_load(m, st, err, errlen) < 0)
        pstore_destroy(&m->ps);
    safetensors_destroy(&st);   /* loaders copied what they need */
    if (m->state && unfolded && !m->ps) {
        model_destroy(&m);
        return NULL;
    }
    if (!m->state) {
        model_destroy(&m);
        return NULL;
    }
    m->be = backend_new(backend ? backend : "cpu", o->threads, err, errlen);
    m->out_buf = malloc((size_t)m->mb * m->info.num_classes * sizeof *m->out_buf);
    if (!m->be || !m->out_buf) {
        if (m->be)
            snprintf(err, errlen, "model: out of memory");
        model_destroy(&m);
        return NULL;
    }
    log_debug("model %s: %d classes, %d input channels, micro-batch %d, backend %s, %d threads",
              m->arch->name, m->info.num_classes, m->info.in_channels, m->mb,
              backend_name(m->be), backend_threads(m->be));
    return m;
}

void model_destroy(model_t **mp)
{
    if (!mp || !*mp)
        return;
    model_t *m = *mp;
    for (int i = 0; i < GRAPH_CACHE; i++)
        bk_graph_destroy(&m->cache[i].g);
    if (m->state)
        m->arch->destroy(m->state);
    bk_tgraph_destroy(&m->tg);
    bk_tgraph_destroy(&m->eg);
    pstore_destroy(&m->ps);
    free(m->nbt);
    free(m->t_x);
    free(m->t_dl);
    backend_destroy(&m->be);
    free(m->in_buf);
    free(m->out_buf);
    free(m);
    *mp = NULL;
}

int model_in_channels(const model_t *m)
{
    return m->info.in_channels;
}

int model_num_classes(const model_t *m)
{
    return m->info.num_classes;
}

int model_input_hw(const model_t *m, int *h, int *w)
{
    *h = m->info.nat_h;
    *w = m->info.nat_w;
    return m->info.hw_fixed;
}

const char *model_arch(const model_t *m)
{
    return m->arch->name;
}

int model_micro_batch(const model_t *m)
{
    return m->mb;
}

/* Compile the network for a micro-batch of (c, h, w) inputs. */
static int slot_build(model_t *m, graph_slot_t *s, int c, int h, int w, char *err,
                      size_t errlen)
{
    bk_graph_t *g = bk_graph_new(m->be);
    bk_set_name(g, "input");
    bk_tensor_t *in = bk_input(g, m->mb, c, h, w);
    bk_tensor_t *out = m->arch->build(m->state, g, in);
    if (!out) {
        snprintf(err, errlen, "%s on %dx%dx%d input: %s", m->arch->name, c, h, w,
                 bk_graph_error(g) ? bk_graph_error(g) : "graph build failed");
        bk_graph_destroy(&g);
        return -1;
    }
    *s = (graph_slot_t){.c = c, .h = h, .w = w, .g = g, .in = in, .out = out};
    return 0;
}

/* in_buf holds a micro-batch of (c, h, w) samples. */
static int in_buf_fit(model_t *m, int c, int h, int w, char *err, size_t errlen)
{
    size_t need = (size_t)m->mb * c * h * w;
    if (need > m->in_cap) {
        float *b = realloc(m->in_buf, need * sizeof *b);
        if (!b) {
            snprintf(err, errlen, "model: out of memory for a %dx%dx%dx%d input", m->mb, c,
                     h, w);
            return -1;
        }
        m->in_buf = b;
        m->in_cap = need;
    }
    return 0;
}

/* The compiled graph for (c, h, w): cached, least recently used evicted. */
static graph_slot_t *graph_for(model_t *m, int c, int h, int w, char *err, size_t errlen)
{
    graph_slot_t *victim = &m->cache[0];
    for (int i = 0; i < GRAPH_CACHE; i++) {
        graph_slot_t *s = &m->cache[i];
        if (s->g && s->c == c && s->h == h && s->w == w) {
            s->last_used = ++m->tick;
            return s;
        }
        if (!s->g || (victim->g && s->last_used < victim->last_used))
            victim = s;
    }
    if (in_buf_fit(m, c, h, w, err, errlen) < 0)
        return NULL;
    bk_graph_destroy(&victim->g);
    if (slot_build(m, victim, c, h, w, err, errlen) < 0)
        return NULL;
    victim->last_used = ++m->tick;
    return victim;
}

/* Fills in_buf rows [0, k) from samples [first, first + k). */
typedef void (*fill_fn)(const void *ctx, int first, int k, float *dst);

typedef struct {
    const uint8_t *px;
    int c, hw;
    const float *lut;   /* c x 256: the normalised value of each byte */
    int threads;
} u8_ctx_t;

/* torchvision: ToTensor divides by 255 in float, Normalize subtracts the
 * mean and divides by the std, each step rounded to float. A byte has only
 * 256 values, so each channel's results are tabulated once per call: the
 * same floats, without a division per pixel. */
static float *u8_table(int c, const float *mean, const float *std)
{
    float *lut = malloc((size_t)c * 256 * sizeof *lut);
    if (!lut)
        return NULL;
    for (int ch = 0; ch < c; ch++)
        for (int p = 0; p < 256; p++)
            lut[ch * 256 + p] = mean ? ((float)p / 255.0f - mean[ch]) / std[ch]
                                     : (float)p / 255.0f;
    return lut;
}

static void fill_u8(const void *ctx, int first, int k, float *dst)
{
    const u8_ctx_t *u = ctx;
    size_t per = (size_t)u->c * u->hw;
    const uint8_t *src = u->px + (size_t)first * per;
#pragma omp parallel for schedule(static) num_threads(u->threads)
    for (int sc = 0; sc < k * u->c; sc++) {
        const float *lut = u->lut + (sc % u->c) * 256;
        const uint8_t *p = src + (size_t)sc * u->hw;
        float *d = dst + (size_t)sc * u->hw;
        for (int i = 0; i < u->hw; i++)
            d[i] = lut[p[i]];
    }
}

typedef struct {
    const float *x;
    size_t per;
} f32_ctx_t;

static void fill_f32(const void *ctx, int first, int k, float *dst)
{
    const f32_ctx_t *f = ctx;
    memcpy(dst, f->x + (size_t)first * f->per, (size_t)k * f->per * sizeof *dst);
}

static int check_input(const model_t *m, int n, int c, int h, int w, char *err, size_t errlen)
{
    if (n < 0 || h < 1 || w < 1 || h > 8192 || w > 8192) {
        snprintf(err, errlen, "%s: bad input shape n=%d %dx%d", m->arch->name, n, h, w);
        return -1;
    }
    if (c != m->info.in_channels) {
        snprintf(err, errlen, "%s: input has %d channels, the model wants %d "
                 "(check --in-channels or the loader's color conversion)", m->arch->name, c,
                 m->info.in_channels);
        return -1;
    }
    if (m->info.hw_fixed && (h != m->info.nat_h || w != m->info.nat_w)) {
        snprintf(err, errlen, "%s: input is %dx%d, the model wants %dx%d", m->arch->name, h,
                 w, m->info.nat_h, m->info.nat_w);
        return -1;
    }
    return 0;
}

/* The eval-mode training graph of (c, h, w) for an arch without a folded
 * network (one shape cached): BatchNorm on the running stats of the live
 * parameters, so trained values need no model_sync_eval. */
static int eval_graph(model_t *m, int c, int h, int w, char *err, size_t errlen)
{
    if (m->eg && m->ec == c && m->eh == h && m->ew == w)
        return 0;
    bk_tgraph_destroy(&m->eg);
    if (in_buf_fit(m, c, h, w, err, errlen) < 0)
        return -1;
    bk_tgraph_t *g = bk_tgraph_new(m->be);
    bk_tgraph_set_forward_only(g);
    bk_tgraph_set_training(g, 0);
    bk_tgraph_set_name(g, "input");
    m->e_in = bk_t_input(g, m->mb, c, h, w, 0);
    m->e_out = m->arch->train_build(m->state, m->ps, g, m->e_in);
    if (!m->e_out) {
        snprintf(err, errlen, "%s eval graph on %dx%dx%dx%d: %s", m->arch->name, m->mb, c, h,
                 w, bk_tgraph_error(g) ? bk_tgraph_error(g) : "build failed");
        bk_tgraph_destroy(&g);
        return -1;
    }
    m->eg = g;
    m->ec = c;
    m->eh = h;
    m->ew = w;
    return 0;
}

/* One micro-batch of m->in_buf through the folded graph (slot) or, for an
 * arch without one, the eval-mode training graph; m->out_buf gets logits.
 * A failed graph is destroyed so it is not reused. */
static int run_micro_batch(model_t *m, graph_slot_t *s, char *err, size_t errlen)
{
    if (s) {
        if (bk_write(s->g, s->in, m->in_buf) == 0 && bk_run(s->g) == 0 &&
            bk_read(s->g, s->out, m->out_buf) == 0)
            return 0;
        snprintf(err, errlen, "%s forward: %s", m->arch->name,
                 bk_graph_error(s->g) ? bk_graph_error(s->g) : "backend failure");
        bk_graph_destroy(&s->g);
        return -1;
    }
    bk_tgraph_set_training(m->eg, 0);
    if (bk_t_write(m->eg, m->e_in, m->in_buf) == 0 && bk_t_forward(m->eg) == 0 &&
        bk_t_read(m->eg, m->e_out, m->out_buf) == 0)
        return 0;
    snprintf(err, errlen, "%s forward: %s", m->arch->name,
             bk_tgraph_error(m->eg) ? bk_tgraph_error(m->eg) : "backend failure");
    bk_tgraph_destroy(&m->eg);
    return -1;
}

static int forward(model_t *m, fill_fn fill, const void *ctx, int n, int c, int h, int w,
                   float *logits, char *err, size_t errlen)
{
    if (check_input(m, n, c, h, w, err, errlen) < 0)
        return -1;
    if (n == 0)
        return 0;
    graph_slot_t *s = NULL;
    if (!m->arch->build) {   /* no folded network (densenet): same micro-batching */
        if (eval_graph(m, c, h, w, err, errlen) < 0)
            return -1;
    } else if (!(s = graph_for(m, c, h, w, err, errlen))) {
        return -1;
    }
    size_t per = (size_t)c * h * w, nc = (size_t)m->info.num_classes;
    for (int first = 0; first < n; first += m->mb) {
        int k = n - first < m->mb ? n - first : m->mb;
        fill(ctx, first, k, m->in_buf);
        if (k < m->mb)   /* padding samples: zeros, outputs dropped */
            memset(m->in_buf + (size_t)k * per, 0, (size_t)(m->mb - k) * per * sizeof(float));
        if (run_micro_batch(m, s, err, errlen) < 0)
            return -1;
        memcpy(logits + (size_t)first * nc, m->out_buf, (size_t)k * nc * sizeof *logits);
    }
    return 0;
}

int model_forward_u8(model_t *m, const uint8_t *pixels, int n, int c, int h, int w,
                     const float *mean, const float *std, float *logits, char *err,
                     size_t errlen)
{
    if ((mean == NULL) != (std == NULL)) {
        snprintf(err, errlen, "%s: mean and std must both be given or both NULL",
                 m->arch->name);
        return -1;
    }
    for (int ch = 0; std && ch < c; ch++)
        if (!(fabsf(std[ch]) > 0.0f) || !isfinite(std[ch]) || !isfinite(mean[ch])) {
            snprintf(err, errlen, "%s: normalisation std[%d]=%g / mean[%d]=%g is not usable",
                     m->arch->name, ch, (double)std[ch], ch, (double)mean[ch]);
            return -1;
        }
    if (c < 1 || c > 64) {
        snprintf(err, errlen, "%s: %d input channels", m->arch->name, c);
        return -1;
    }
    float *lut = u8_table(c, mean, std);
    if (!lut) {
        snprintf(err, errlen, "%s: out of memory", m->arch->name);
        return -1;
    }
    u8_ctx_t ctx = {pixels, c, h * w, lut, backend_threads(m->be)};
    int rc = forward(m, fill_u8, &ctx, n, c, h, w, logits, err, errlen);
    free(lut);
    return rc;
}

int model_forward_f32(model_t *m, const float *x, int n, int c, int h, int w, float *logits,
                      char *err, size_t errlen)
{
    f32_ctx_t ctx = {x, (size_t)c * h * w};
    return forward(m, fill_f32, &ctx, n, c, h, w, logits, err, errlen);
}

/* ------------------------------------------------------- top-k and loss */

/* Does class a rank before class b? Higher logit first, ties by id; NaN
 * above everything as in torch.topk/argmax, so top-1 of a row with NaNs is
 * torch.argmax's (its first NaN). */
static int ranks_before(const float *l, int a, int b)
{
    float x = l[a], y = l[b];
    if (isnan(x) || isnan(y))
        return isnan(x) && (!isnan(y) || a < b);
    return x > y || (x == y && a < b);
}

static void topk_one(const float *l, int nc, int k, int32_t *out)
{
    /* k passes of selection; k is small (5) and classes <= ~1000s */
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int c = 0; c < nc; c++) {
            int taken = 0;
            for (int i = 0; i < j && !taken; i++)
                taken = out[i] == c;
            if (!taken && (best < 0 || ranks_before(l, c, best)))
                best = c;
        }
        out[j] = best;   /* -1 once the classes run out */
    }
}

static float ce_one(const float *l, int nc, int32_t label)
{
    if (label < 0 || label >= nc)
        return NAN;
    double mx = -INFINITY;
    bool nan = false;
    for (int c = 0; c < nc; c++) {
        nan |= isnan(l[c]);
        mx = l[c] > mx ? l[c] : mx;
    }
    if (nan || !isfinite(mx))
        return NAN;   /* as torch's log_softmax: a NaN logit, or inf - inf */
    double s = 0.0;
    for (int c = 0; c < nc; c++)
        s += exp((double)l[c] - mx);
    return (float)(mx + log(s) - (double)l[label]);
}

void model_topk_ce(const float *logits, int n, int num_classes, const int32_t *labels, int k,
                   int32_t *topk, float *loss)
{
    for (int i = 0; i < n; i++) {
        const float *l = logits + (size_t)i * num_classes;
        if (topk && k > 0)
            topk_one(l, num_classes, k, topk + (size_t)i * k);
        if (loss)
            loss[i] = labels ? ce_one(l, num_classes, labels[i]) : NAN;
    }
}

/* -------------------------------------------------------------- training */

int model_param_count(const model_t *m)
{
    return m->ps && m->opts.train ? (int)m->ps->n : 0;
}

static void param_of(const pentry_t *e, model_param_t *p)
{
    *p = (model_param_t){.name = e->name, .value = e->w, .grad = e->frozen ? NULL : e->g,
                         .numel = e->n, .ndim = e->ndim};
    memcpy(p->shape, e->shape, sizeof p->shape);
}

int model_param_at(const model_t *m, int i, model_param_t *p)
{
    if (!m->ps || !m->opts.train || i < 0 || (size_t)i >= m->ps->n)
        return -1;
    param_of(&m->ps->e[i], p);
    return 0;
}

int model_param_find(const model_t *m, const char *name, model_param_t *p)
{
    const pentry_t *e = m->ps && m->opts.train && name ? pstore_find(m->ps, name) : NULL;
    if (!e)
        return -1;
    param_of(e, p);
    return 0;
}

int model_i64_count(const model_t *m)
{
    return m->ps && m->opts.train ? m->n_nbt : 0;
}

int model_i64_at(const model_t *m, int i, model_i64_t *p)
{
    if (i < 0 || i >= model_i64_count(m))
        return -1;
    *p = (model_i64_t){.name = m->nbt[i].name, .value = &m->nbt[i].value, .numel = 1,
                       .ndim = 0};
    return 0;
}

/* A train step happened: +1 in every BatchNorm that trains. */
static void nbt_step(model_t *m)
{
    for (int i = 0; i < m->n_nbt; i++)
        if (!m->ps->e[m->nbt[i].rm].bn_eval)
            m->nbt[i].value++;
}

int model_set_sync_bn(model_t *m, model_allreduce_fn fn, void *ctx)
{
    if (!m->ps || !m->opts.train)
        return -1;
    m->sync_fn = fn;
    m->sync_ctx = ctx;
    bk_tgraph_set_allreduce(m->tg, fn, ctx);   /* NULL graph: nothing */
    return 0;
}

int model_freeze(model_t *m, const char *prefix, int frozen)
{
    if (!m->ps || !m->opts.train || !prefix)
        return -1;
    int changed = 0;
    size_t len = strlen(prefix);
    for (size_t i = 0; i < m->ps->n; i++) {
        pentry_t *e = &m->ps->e[i];
        if (e->trainable && strncmp(e->name, prefix, len) == 0 && e->frozen != (frozen != 0)) {
            e->frozen = frozen != 0;
            changed++;
        }
    }
    if (changed)   /* the graph bound the old gradient arrays */
        bk_tgraph_destroy(&m->tg);
    return changed;
}

int model_freeze_bn(model_t *m, const char *prefix, int frozen)
{
    if (!m->ps || !m->opts.train || !prefix)
        return -1;
    int changed = 0;
    size_t len = strlen(prefix);
    for (size_t i = 0; i < m->ps->n; i++) {
        pentry_t *e = &m->ps->e[i];
        size_t nl = strlen(e->name), sl = strlen(".running_mean");
        if (nl > sl && strcmp(e->name + nl - sl, ".running_mean") == 0 &&
            strncmp(e->name, prefix, len) == 0 && e->bn_eval != (frozen != 0)) {
            e->bn_eval = frozen != 0;
            changed++;
        }
    }
    if (changed)   /* the graph fixed each BN's mode when it was built */
        bk_tgraph_destroy(&m->tg);
    return changed;
}

/* The training graph for n samples of (c, h, w) and label smoothing eps,
 * rebuilt when either changes. */
static int train_graph(model_t *m, int n, int c, int h, int w, float eps, char *err,
                       size_t errlen)
{
    if (m->tg && m->tn == n && m->tc == c && m->th == h && m->tw == w && m->t_eps == eps)
        return 0;
    bk_tgraph_destroy(&m->tg);
    size_t need = (size_t)n * c * h * w;
    if (need > m->t_cap) {
        float *x = realloc(m->t_x, need * sizeof *x);
        if (x)
            m->t_x = x;
        if (!x) {
            snprintf(err, errlen, "%s: out of memory for a %dx%dx%dx%d batch", m->arch->name,
                     n, c, h, w);
            return -1;
        }
        m->t_cap = need;
    }
    float *dl = realloc(m->t_dl, (size_t)n * sizeof *dl);
    if (!dl) {
        snprintf(err, errlen, "%s: out of memory", m->arch->name);
        return -1;
    }
    m->t_dl = dl;
    bk_tgraph_t *g = bk_tgraph_new(m->be);
    bk_tgraph_set_name(g, "input");
    m->t_in = bk_t_input(g, n, c, h, w, 0);
    m->t_logits = m->arch->train_build(m->state, m->ps, g, m->t_in);
    bk_tgraph_set_name(g, "loss");
    m->t_loss = bk_t_softmax_ce(g, m->t_logits, eps);
    if (!m->t_loss) {
        snprintf(err, errlen, "%s training graph on %dx%dx%dx%d: %s", m->arch->name, n, c, h,
                 w, bk_tgraph_error(g) ? bk_tgraph_error(g) : "build failed");
        bk_tgraph_destroy(&g);
        return -1;
    }
    bk_tgraph_set_allreduce(g, m->sync_fn, m->sync_ctx);
    m->tg = g;
    m->tn = n;
    m->tc = c;
    m->th = h;
    m->tw = w;
    m->t_eps = eps;
    return 0;
}

static int step_check(const model_t *m, int n, const model_step_t *s, char *err, size_t errlen)
{
    if (!m->ps || !m->opts.train) {
        snprintf(err, errlen, "%s: not opened for training (model_opts_t.train = 1)",
                 m->arch->name);
        return -1;
    }
    if (!s || s->global_batch < n || s->global_batch < 1) {
        snprintf(err, errlen, "%s: global batch %d must be >= the %d samples of the step",
                 m->arch->name, s ? s->global_batch : 0, n);
        return -1;
    }
    if (!(s->label_smoothing >= 0.0f && s->label_smoothing <= 1.0f)) {
        snprintf(err, errlen, "%s: label smoothing %g outside [0, 1]", m->arch->name,
                 (double)s->label_smoothing);
        return -1;
    }
    return 0;
}

/* x (n*c*h*w, normalised) is in m->t_x. */
static int train_run(model_t *m, int n, const int32_t *labels, const model_step_t *s,
                     float *loss, float *logits, char *err, size_t errlen)
{
    bk_tgraph_t *g = m->tg;
    bk_tgraph_set_training(g, 1);
    bk_tgraph_set_dropout(g, !s->no_dropout);
    int rc = bk_t_write(g, m->t_in, m->t_x);
    rc = rc ? rc : bk_t_set_labels(g, labels);
    rc = rc ? rc : bk_t_set_step(g, s->seed, s->step, s->ids);
    rc = rc ? rc : bk_t_forward(g);
    for (int i = 0; i < n; i++)   /* d(sum_i l_i / G) / d l_i */
        m->t_dl[i] = (float)(1.0 / s->global_batch);
    rc = rc ? rc : bk_t_backward(g, m->t_loss, m->t_dl);
    if (rc == 0 && loss)
        rc = bk_t_read(g, m->t_loss, loss);
    if (rc == 0 && logits)
        rc = bk_t_read(g, m->t_logits, logits);
    if (rc != 0) {
        snprintf(err, errlen, "%s train step: %s", m->arch->name,
                 bk_tgraph_error(g) ? bk_tgraph_error(g) : "backend failure");
        bk_tgraph_destroy(&m->tg);   /* a failed graph is not reused */
        return -1;
    }
    return 0;
}

/* An empty shard contributes nothing to the gradient sum. With SyncBatchNorm
 * the rank still takes part in every BatchNorm all-reduce (contributing
 * zeros) and updates its running stats like the others: the hooks come from
 * a graph of the same structure, the current one when its sample shape fits,
 * else one built for a single sample. */
static int empty_step(model_t *m, int c, int h, int w, const model_step_t *s, char *err,
                      size_t errlen)
{
    for (size_t i = 0; i < m->ps->n; i++)
        if (m->ps->e[i].g)
            memset(m->ps->e[i].g, 0, m->ps->e[i].n * sizeof(float));
    if (m->sync_fn) {
        int fits = m->tg && m->tc == c && m->th == h && m->tw == w &&
                   m->t_eps == s->label_smoothing;
        if (!fits && train_graph(m, 1, c, h, w, s->label_smoothing, err, errlen) < 0)
            return -1;
        bk_tgraph_set_training(m->tg, 1);
        if (bk_t_empty_step(m->tg, m->t_loss) < 0) {
            snprintf(err, errlen, "%s train step (empty shard): %s", m->arch->name,
                     bk_tgraph_error(m->tg) ? bk_tgraph_error(m->tg) : "backend failure");
            bk_tgraph_destroy(&m->tg);
            return -1;
        }
    }
    nbt_step(m);
    return 0;
}

static int train_step(model_t *m, fill_fn fill, const void *ctx, int n, int c, int h, int w,
                      const int32_t *labels, const model_step_t *s, float *loss,
                      float *logits, char *err, size_t errlen)
{
    if (step_check(m, n, s, err, errlen) < 0 || check_input(m, n, c, h, w, err, errlen) < 0)
        return -1;
    if (n == 0)
        return empty_step(m, c, h, w, s, err, errlen);
    if (!labels) {
        snprintf(err, errlen, "%s train step: no labels", m->arch->name);
        return -1;
    }
    if (train_graph(m, n, c, h, w, s->label_smoothing, err, errlen) < 0)
        return -1;
    fill(ctx, 0, n, m->t_x);
    if (train_run(m, n, labels, s, loss, logits, err, errlen) < 0)
        return -1;
    nbt_step(m);
    return 0;
}

int model_train_step_u8(model_t *m, const uint8_t *pixels, int n, int c, int h, int w,
                        const float *mean, const float *std, const int32_t *labels,
                        const model_step_t *s, float *loss, float *logits, char *err,
                        size_t errlen)
{
    if ((mean == NULL) != (std == NULL) || c < 1 || c > 64) {
        snprintf(err, errlen, "%s: bad normalisation or %d channels", m->arch->name, c);
        return -1;
    }
    for (int ch = 0; std && ch < c; ch++)
        if (!(fabsf(std[ch]) > 0.0f) || !isfinite(std[ch]) || !isfinite(mean[ch])) {
            snprintf(err, errlen, "%s: normalisation std[%d]=%g / mean[%d]=%g is not usable",
                     m->arch->name, ch, (double)std[ch], ch, (double)mean[ch]);
            return -1;
        }
    float *lut = u8_table(c, mean, std);
    if (!lut) {
        snprintf(err, errlen, "%s: out of memory", m->arch->name);
        return -1;
    }
    u8_ctx_t ctx = {pixels, c, h * w, lut, backend_threads(m->be)};
    int rc = train_step(m, fill_u8, &ctx, n, c, h, w, labels, s, loss, logits, err, errlen);
    free(lut);
    return rc;
}

int model_train_step_f32(model_t *m, const float *x, int n, int c, int h, int w,
                         const int32_t *labels, const model_step_t *s, float *loss,
                         float *logits, char *err, size_t errlen)
{
    f32_ctx_t ctx = {x, (size_t)c * h * w};
    return train_step(m, fill_f32, &ctx, n, c, h, w, labels, s, loss, logits, err, errlen);
}

/* The parameters as an in-memory safetensors image (F32). */
static char *pstore_image(const pstore_t *ps, size_t *len)
{
    size_t hcap = 64 + ps->n * 400, hl = 0, data = 0;
    char *h = malloc(hcap);
    if (!h)
        return NULL;
    hl += (size_t)snprintf(h + hl, hcap - hl, "{");
    for (size_t i = 0; i < ps->n; i++) {
        const pentry_t *e = &ps->e[i];
        hl += (size_t)snprintf(h + hl, hcap - hl, "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[",
                               i ? "," : "", e->name);
        for (int d = 0; d < e->ndim; d++)
            hl += (size_t)snprintf(h + hl, hcap - hl, "%s%lld", d ? "," : "",
                                   (long long)e->shape[d]);
        hl += (size_t)snprintf(h + hl, hcap - hl, "],\"data_offsets\":[%zu,%zu]}", data,
                               data + e->n * sizeof(float));
        data += e->n * sizeof(float);
    }
    hl += (size_t)snprintf(h + hl, hcap - hl, "}");
    while (hl % 8)
        h[hl++] = ' ';
    char *img = malloc(8 + hl + data);
    if (!img) {
        free(h);
        return NULL;
    }
    uint64_t hl64 = hl;
    for (int i = 0; i < 8; i++)
        img[i] = (char)(hl64 >> (8 * i));
    memcpy(img + 8, h, hl);
    free(h);
    size_t off = 8 + hl;
    for (size_t i = 0; i < ps->n; i++) {
        memcpy(img + off, ps->e[i].w, ps->e[i].n * sizeof(float));
        off += ps->e[i].n * sizeof(float);
    }
    *len = off;
    return img;
}

int model_sync_eval(model_t *m, char *err, size_t errlen)
{
    if (!m->ps || !m->opts.train) {
        snprintf(err, errlen, "%s: not opened for training", m->arch->name);
        return -1;
    }
    size_t len = 0;
    char *img = pstore_image(m->ps, &len);
    safetensors_t *st = img ? safetensors_open_buffer(img, len, "trained parameters", err,
                                                      errlen) : NULL;
    free(img);
    if (!st) {
        if (!img)
            snprintf(err, errlen, "%s: out of memory", m->arch->name);
        return -1;
    }
    model_opts_t o = m->opts;
    o.arch = m->arch->name;
    arch_info_t info;
    void *state = m->arch->load(&o, &(wl_source_t){.file = st}, &info, err, errlen);
    safetensors_destroy(&st);
    if (!state)
        return -1;
    m->arch->destroy(m->state);
    m->state = state;
    for (int i = 0; i < GRAPH_CACHE; i++)   /* graphs hold the old folded weights */
        bk_graph_destroy(&m->cache[i].g);
    return 0;
}
