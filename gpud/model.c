/* model — architecture + weights + backend behind the API gpud calls.
 *
 * Exactness: the network always runs on micro-batches of m->mb samples
 * (a graph is compiled once per input shape for exactly that batch), so a
 * sample's arithmetic never depends on n or on its neighbours. */
#include "gpud/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/safetensors.h"
#include "gpud/backend.h"
#include "gpud/models/layers.h"

#define GRAPH_CACHE 4   /* input shapes kept compiled at once */

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
};

static const arch_t *const ARCHS[] = {&ARCH_RESNET18, &ARCH_RESNET34, &ARCH_RESNET50,
                                      &ARCH_WIDERESNET};

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
                 "wideresnet)", o->arch ? o->arch : "(null)");
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
    safetensors_t *st = safetensors_open(weights_path, err, errlen);
    if (!st) {
        model_destroy(&m);
        return NULL;
    }
    m->state = m->arch->load(o, st, &m->info, err, errlen);
    safetensors_destroy(&st);   /* loaders copied what they need */
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
    size_t need = (size_t)m->mb * c * h * w;
    if (need > m->in_cap) {
        float *b = realloc(m->in_buf, need * sizeof *b);
        if (!b) {
            snprintf(err, errlen, "model: out of memory for a %dx%dx%dx%d input", m->mb, c,
                     h, w);
            return NULL;
        }
        m->in_buf = b;
        m->in_cap = need;
    }
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

static int forward(model_t *m, fill_fn fill, const void *ctx, int n, int c, int h, int w,
                   float *logits, char *err, size_t errlen)
{
    if (check_input(m, n, c, h, w, err, errlen) < 0)
        return -1;
    if (n == 0)
        return 0;
    graph_slot_t *s = graph_for(m, c, h, w, err, errlen);
    if (!s)
        return -1;
    size_t per = (size_t)c * h * w, nc = (size_t)m->info.num_classes;
    for (int first = 0; first < n; first += m->mb) {
        int k = n - first < m->mb ? n - first : m->mb;
        fill(ctx, first, k, m->in_buf);
        if (k < m->mb)   /* padding samples: zeros, outputs dropped */
            memset(m->in_buf + (size_t)k * per, 0, (size_t)(m->mb - k) * per * sizeof(float));
        if (bk_write(s->g, s->in, m->in_buf) < 0 || bk_run(s->g) < 0 ||
            bk_read(s->g, s->out, m->out_buf) < 0) {
            snprintf(err, errlen, "%s forward: %s", m->arch->name,
                     bk_graph_error(s->g) ? bk_graph_error(s->g) : "backend failure");
            bk_graph_destroy(&s->g);   /* a failed graph is not reused */
            return -1;
        }
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

/* Does class a rank before class b? Higher logit first, NaN last, ties by id. */
static int ranks_before(const float *l, int a, int b)
{
    float x = l[a], y = l[b];
    if (isnan(x) || isnan(y))
        return isnan(y) && (!isnan(x) || a < b);
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
    for (int c = 0; c < nc; c++)
        mx = l[c] > mx ? l[c] : mx;
    if (!isfinite(mx))
        return NAN;
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
