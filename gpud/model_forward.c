/* model_forward — inference: the network compiled once per input shape
 * for a micro-batch of m->mb samples (a few shapes cached), n samples run
 * as micro-batches, the last one zero-padded and its extra outputs dropped.
 * An architecture without a folded network (DenseNet) runs its training
 * graph in eval mode instead. */
#include "gpud/model_priv.h"

#include "common/errbuf.h"

#include <stdlib.h>
#include <string.h>

/* Compile the network for a micro-batch of (c, h, w) inputs. */
static int slot_build(model_t *m, graph_slot_t *s, int c, int h, int w, char *err,
                      size_t errlen)
{
    bk_graph_t *g = bk_graph_new(m->be);
    bk_set_name(g, "input");
    bk_tensor_t *in = bk_input(g, m->mb, c, h, w);
    bk_tensor_t *out = m->arch->build(m->state, g, in);
    if (!out) {
        err_set(err, errlen, "%s on %dx%dx%d input: %s", m->arch->name, c, h, w,
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
            err_set(err, errlen, "model: out of memory for a %dx%dx%dx%d input", m->mb, c,
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
        err_set(err, errlen, "%s eval graph on %dx%dx%dx%d: %s", m->arch->name, m->mb, c, h,
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
        err_set(err, errlen, "%s forward: %s", m->arch->name,
                bk_graph_error(s->g) ? bk_graph_error(s->g) : "backend failure");
        bk_graph_destroy(&s->g);
        return -1;
    }
    bk_tgraph_set_training(m->eg, 0);
    if (bk_t_write(m->eg, m->e_in, m->in_buf) == 0 && bk_t_forward(m->eg) == 0 &&
        bk_t_read(m->eg, m->e_out, m->out_buf) == 0)
        return 0;
    err_set(err, errlen, "%s forward: %s", m->arch->name,
            bk_tgraph_error(m->eg) ? bk_tgraph_error(m->eg) : "backend failure");
    bk_tgraph_destroy(&m->eg);
    return -1;
}

static int forward(model_t *m, model_fill_fn fill, const void *ctx, int n, int c, int h, int w,
                   float *logits, char *err, size_t errlen)
{
    if (model_check_input(m, n, c, h, w, err, errlen) < 0)
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
        err_set(err, errlen, "%s: mean and std must both be given or both NULL",
                m->arch->name);
        return -1;
    }
    if (c < 1 || c > 64) {
        err_set(err, errlen, "%s: %d input channels", m->arch->name, c);
        return -1;
    }
    float *lut = model_u8_table(m, c, mean, std, err, errlen);
    if (!lut)
        return -1;
    model_u8_src_t src = {pixels, c, h * w, lut, backend_threads(m->be)};
    int rc = forward(m, model_fill_u8, &src, n, c, h, w, logits, err, errlen);
    free(lut);
    return rc;
}

int model_forward_f32(model_t *m, const float *x, int n, int c, int h, int w, float *logits,
                      char *err, size_t errlen)
{
    model_f32_src_t ctx = {x, (size_t)c * h * w};
    return forward(m, model_fill_f32, &ctx, n, c, h, w, logits, err, errlen);
}
