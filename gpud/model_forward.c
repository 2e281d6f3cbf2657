/* model_forward — inference: the architecture's description built once per
 * input shape as a forward-only, eval-mode graph for a micro-batch of m->mb
 * samples (a few shapes cached), n samples run as micro-batches, the last
 * one zero-padded and its extra outputs dropped. The graphs bind the live
 * parameters, as the training graph does: eval and training run the same
 * description. */
#include "gpud/model_priv.h"

#include "common/env_switch.h"
#include "common/errbuf.h"
#include "common/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Build the eval graph of a micro-batch of (c, h, w) inputs into s. */
static int slot_build(model_t *m, eval_slot_t *s, int c, int h, int w, char *err,
                      size_t errlen)
{
    bk_graph_t *g = bk_graph_new(m->be);
    bk_graph_set_traffic(g, &m->traffic);   /* a device arena's fold */
    bk_graph_set_forward_only(g);
    bk_graph_set_training(g, 0);
    bk_graph_set_name(g, "input");
    bk_tensor_t *in = bk_input(g, m->mb, c, h, w, 0);
    bk_tensor_t *out = arch_describe(m->arch, &m->info, m->ps, g, in);
    if (!out) {
        err_set(err, errlen, "%s on %dx%dx%d input: %s", m->arch->name, c, h, w,
                bk_graph_error(g) ? bk_graph_error(g) : "graph build failed");
        bk_graph_destroy(&g);
        return -1;
    }
    *s = (eval_slot_t){.c = c, .h = h, .w = w, .g = g, .in = in, .out = out};
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

/* The eval graph for (c, h, w): cached, least recently used evicted. */
static eval_slot_t *graph_for(model_t *m, int c, int h, int w, char *err, size_t errlen)
{
    eval_slot_t *victim = &m->cache[0];
    for (int i = 0; i < GRAPH_CACHE; i++) {
        eval_slot_t *s = &m->cache[i];
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

void model_eval_drop(model_t *m)
{
    model_eval_settle(m);
    for (int i = 0; i < GRAPH_CACHE; i++)
        bk_graph_destroy(&m->cache[i].g);
}

void model_eval_reload(model_t *m)
{
    model_eval_settle(m);
    for (int i = 0; i < GRAPH_CACHE; i++)
        if (m->cache[i].g)
            bk_graph_reload(m->cache[i].g);
}

/* The micro-batch of samples [first, first + k) as bytes where the backend
 * takes them (bk_write_u8: cuda copies them through its pinned double
 * buffer on a copy stream, which overlaps the forward before, and
 * normalises on the device with the same table: the same floats), a short
 * one padded in m->in_u8 (padding samples' outputs are dropped). 0, 1 the
 * backend cannot (write floats), -1 failed. */
static int write_u8(model_t *m, eval_slot_t *s, const model_u8_src_t *u8, int first, int k,
                    size_t per)
{
    const uint8_t *px = u8->px + (size_t)first * per;
    if (k < m->mb) {
        size_t need = (size_t)m->mb * per;
        if (bk_u8_on_host(s->g, px, (size_t)k * per) < 0)   /* a device decoder's batch */
            return -1;
        if (need > m->in_u8_cap) {
            uint8_t *b = realloc(m->in_u8, need);
            if (!b)
                return 1;   /* the float path pads in in_buf */
            m->in_u8 = b;
            m->in_u8_cap = need;
        }
        memcpy(m->in_u8, px, (size_t)k * per);
        memset(m->in_u8 + (size_t)k * per, 0, (size_t)(m->mb - k) * per);
        px = m->in_u8;
    }
    return bk_write_u8(s->g, s->in, px, u8->lut);
}

/* Micro-batch [first, first + k)'s input written into s's input: bytes
 * where the backend takes them, else floats from fill (padding samples
 * zero). On cuda both only queue their device work (the normalise, or the
 * float upload, after the forward before it on the backend's stream). */
static int stage(model_t *m, eval_slot_t *s, model_fill_fn fill, const void *ctx,
                 const model_u8_src_t *u8, int first, int k, size_t per)
{
    int rc = u8 ? write_u8(m, s, u8, first, k, per) : 1;
    if (rc != 1)
        return rc;
    if (u8 && bk_u8_on_host(s->g, u8->px + (size_t)first * per, (size_t)k * per) < 0)
        return -1;   /* fill reads them on the host */
    fill(ctx, first, k, m->in_buf);
    if (k < m->mb)   /* padding samples: zeros, outputs dropped */
        memset(m->in_buf + (size_t)k * per, 0, (size_t)(m->mb - k) * per * sizeof(float));
    return bk_write(s->g, s->in, m->in_buf);
}

/* The micro-batch in flight's logits, k of them, to logits (the backend's
 * read waits for its forward). */
static int collect(model_t *m, eval_slot_t *s, float *logits, int k)
{
    if (bk_read(s->g, s->out, m->out_buf) < 0)
        return -1;
    memcpy(logits, m->out_buf, (size_t)k * m->info.num_classes * sizeof *logits);
    return 0;
}

int model_eval_overlap(void)
{
    return env_switch_on("DDPIPE_EVAL_OVERLAP");
}

/* s's graph failed: the reason in err, the graph destroyed so it is not
 * reused. -1. */
static int graph_failed(model_t *m, eval_slot_t *s, char *err, size_t errlen)
{
    err_set(err, errlen, "%s forward: %s", m->arch->name,
            bk_graph_error(s->g) ? bk_graph_error(s->g) : "backend failure");
    bk_graph_destroy(&s->g);
    return -1;
}

/* n samples as micro-batches through one graph, all but the last one's
 * logits read; the last one's left in m->pend for run_end. Staging
 * micro-batch i + 1 comes before reading micro-batch i's logits: on cuda,
 * whose forward only queues its work and whose read waits for it, the
 * host copies the next bytes (cuda_input.c's other pinned buffer) while
 * the device runs the forward before, instead of the device idling through
 * each copy; the next forward is queued after the read, so the logits it
 * overwrites have been read. The same calls on the same data: the same
 * bits. skip_first: micro-batch 0 is already in the graph's input
 * (model_eval_stage_u8). A failed graph is destroyed so it is not reused. */
static int run_begin(model_t *m, model_fill_fn fill, const void *ctx, const model_u8_src_t *u8,
                     int n, int c, int h, int w, float *logits, int skip_first, char *err,
                     size_t errlen)
{
    if (model_check_input(m, n, c, h, w, err, errlen) < 0)
        return -1;
    if (n == 0)
        return 0;
    eval_slot_t *s = graph_for(m, c, h, w, err, errlen);
    if (!s)
        return -1;
    size_t per = (size_t)c * h * w, nc = (size_t)m->info.num_classes;
    int ahead = model_eval_overlap(), prev = -1, prev_k = 0;   /* the micro-batch in flight */
    for (int first = 0; first < n; first += m->mb) {
        int k = n - first < m->mb ? n - first : m->mb;
        if (!ahead && prev >= 0 && collect(m, s, logits + (size_t)prev * nc, prev_k) < 0)
            goto fail;
        if ((!(skip_first && first == 0) && stage(m, s, fill, ctx, u8, first, k, per) < 0) ||
            (ahead && prev >= 0 && collect(m, s, logits + (size_t)prev * nc, prev_k) < 0) ||
            bk_forward(s->g) < 0)
            goto fail;
        prev = first;
        prev_k = k;
    }
    m->pend.slot = s;
    m->pend.logits = logits + (size_t)prev * nc;
    m->pend.k = prev_k;
    return 0;
fail:
    return graph_failed(m, s, err, errlen);
}

/* The pending micro-batch's logits read (nothing pending: 0; a read that
 * model_eval_settle made and that failed: its error, once). */
static int run_end(model_t *m, char *err, size_t errlen)
{
    eval_slot_t *s = m->pend.slot;
    m->pend.slot = NULL;
    if (s)
        return collect(m, s, m->pend.logits, m->pend.k) == 0 ? 0
                                                               : graph_failed(m, s, err, errlen);
    if (!m->pend.failed[0])
        return 0;
    err_set(err, errlen, "%s", m->pend.failed);
    m->pend.failed[0] = '\0';
    return -1;
}

static int forward(model_t *m, model_fill_fn fill, const void *ctx, const model_u8_src_t *u8,
                   int n, int c, int h, int w, float *logits, char *err, size_t errlen)
{
    m->staged.px = NULL;   /* this call writes the input */
    if (run_end(m, err, errlen) < 0)   /* a begin never ended: its logits first */
        return -1;
    return run_begin(m, fill, ctx, u8, n, c, h, w, logits, 0, err, errlen) < 0
               ? -1 : run_end(m, err, errlen);
}

int model_forward_u8(model_t *m, const uint8_t *pixels, int n, int c, int h, int w,
                     const float *mean, const float *std, float *logits, char *err,
                     size_t errlen)
{
    float *lut = model_u8_table(m, c, mean, std, err, errlen);
    if (!lut)
        return -1;
    model_u8_src_t src = {pixels, c, h * w, lut, backend_threads(m->be)};
    int rc = forward(m, model_fill_u8, &src, &src, n, c, h, w, logits, err, errlen);
    free(lut);
    return rc;
}

int model_eval_begin_u8(model_t *m, const uint8_t *pixels, int n, int c, int h, int w,
                        const float *mean, const float *std, float *logits, char *err,
                        size_t errlen)
{
    if (run_end(m, err, errlen) < 0)   /* a begin never ended: its logits first */
        return -1;
    int skip = model_staged_match(&m->staged, pixels, n, c, h, w, mean, std);
    m->staged.px = NULL;
    float *lut = model_u8_table(m, c, mean, std, err, errlen);
    if (!lut)
        return -1;
    model_u8_src_t src = {pixels, c, h * w, lut, backend_threads(m->be)};
    int rc = run_begin(m, model_fill_u8, &src, &src, n, c, h, w, logits, skip, err, errlen);
    free(lut);
    return rc;
}

int model_eval_stage_u8(model_t *m, const uint8_t *pixels, int n, int c, int h, int w,
                        const float *mean, const float *std, char *err, size_t errlen)
{
    eval_slot_t *s = m->pend.slot;
    m->staged.px = NULL;
    /* only into the graph in flight (another shape's graph may not exist,
     * and making it could evict that one) */
    if (!s || n < 1 || s->c != c || s->h != h || s->w != w ||
        model_check_input(m, n, c, h, w, err, errlen) < 0)
        return 0;
    float *lut = model_u8_table(m, c, mean, std, err, errlen);
    if (!lut)
        return -1;
    model_u8_src_t src = {pixels, c, h * w, lut, backend_threads(m->be)};
    size_t per = (size_t)c * h * w;
    int k = n < m->mb ? n : m->mb;
    int rc = stage(m, s, model_fill_u8, &src, &src, 0, k, per);
    free(lut);
    if (rc < 0) {
        err_set(err, errlen, "%s: staging the next batch: %s", m->arch->name,
                bk_graph_error(s->g) ? bk_graph_error(s->g) : "backend failure");
        return -1;
    }
    model_staged_set(&m->staged, pixels, n, c, h, w, mean, std);
    return 1;
}

int model_eval_end(model_t *m, char *err, size_t errlen)
{
    return run_end(m, err, errlen);
}

void model_eval_settle(model_t *m)
{
    char err[sizeof m->pend.failed];
    m->staged.px = NULL;
    if (m->pend.slot && run_end(m, err, sizeof err) < 0) {
        log_error("%s", err);
        snprintf(m->pend.failed, sizeof m->pend.failed, "%s", err);   /* for the begin's end */
    }
}

int model_forward_f32(model_t *m, const float *x, int n, int c, int h, int w, float *logits,
                      char *err, size_t errlen)
{
    model_f32_src_t ctx = {x, (size_t)c * h * w};
    return forward(m, model_fill_f32, &ctx, NULL, n, c, h, w, logits, err, errlen);
}
