/* model_chunks — one training step in bitwise mode (model_step_t.chunk,
 * docs/TRAINING.md "Bitwise training"): the rank's n samples as chunks of
 * s->chunk (the last may be short), or of s->chunk_sizes where samples
 * failed (a chunk is fixed by the samples' places in the step), one
 * training graph per chunk, run op by op over the chunks (backend.h bk_chunks_*), so that every sample's
 * arithmetic is its chunk's whichever rank holds it. The parameter
 * gradients reach the grad-ready hook chunk after chunk (the trainer sums
 * them exactly); loss and logits are each chunk's. */
#include "gpud/model_priv.h"

#include "common/errbuf.h"

#include <stdlib.h>
#include <string.h>

static void slot_drop(chunk_slot_t *s)
{
    bk_graph_destroy(&s->g);
    *s = (chunk_slot_t){0};
}

void model_chunks_drop(model_t *m)
{
    for (int j = 0; j < m->ncs; j++)
        slot_drop(&m->cs[j]);
    free(m->cs);
    m->cs = NULL;
    m->ncs = 0;
}

/* The training graph of a chunk of n samples of (c, h, w). */
static int slot_build(model_t *m, chunk_slot_t *s, int n, int c, int h, int w, float eps,
                      char *err, size_t errlen)
{
    bk_graph_t *g = bk_graph_new(m->be);
    if (!g) {
        err_set(err, errlen, "%s: out of memory for a chunk graph", m->arch->name);
        return -1;
    }
    bk_graph_set_traffic(g, &m->traffic);
    bk_graph_set_name(g, "input");
    bk_tensor_t *in = bk_input(g, n, c, h, w, 0);
    bk_tensor_t *logits = arch_describe(m->arch, &m->info, m->ps, g, in);
    bk_graph_set_name(g, "loss");
    bk_tensor_t *loss = bk_softmax_ce(g, logits, eps);
    if (loss && bk_keep(g, logits) < 0)
        loss = NULL;
    if (!loss) {
        err_set(err, errlen, "%s chunk graph on %dx%dx%dx%d: %s", m->arch->name, n, c, h, w,
                bk_graph_error(g) ? bk_graph_error(g) : "build failed");
        bk_graph_destroy(&g);
        return -1;
    }
    bk_graph_set_exact(g, m->x_fn, m->x_ctx, m->x_sync);
    bk_graph_set_grad_ready(g, m->ready_fn, m->ready_ctx);
    bk_graph_set_grad_queue(g, m->mark_fn, m->flush_fn, m->queue_ctx);
    *s = (chunk_slot_t){.g = g, .in = in, .logits = logits, .loss = loss, .n = n};
    return 0;
}

/* Graphs for k chunks of size[j] samples (each >= 1), of (c, h, w) and
 * label smoothing eps: kept where they fit, rebuilt where not, the ones
 * beyond k released (a smaller share after a membership change needs less
 * memory). */
static int slots_fit(model_t *m, int k, const int *size, int c, int h, int w, float eps,
                     char *err, size_t errlen)
{
    if (m->ncs && (m->cs_c != c || m->cs_h != h || m->cs_w != w || m->cs_eps != eps))
        model_chunks_drop(m);
    if (k > m->ncs) {
        chunk_slot_t *cs = realloc(m->cs, (size_t)k * sizeof *cs);
        if (!cs) {
            err_set(err, errlen, "%s: out of memory for %d chunk graphs", m->arch->name, k);
            return -1;
        }
        memset(cs + m->ncs, 0, (size_t)(k - m->ncs) * sizeof *cs);
        m->cs = cs;
    }
    for (int j = k; j < m->ncs; j++)
        slot_drop(&m->cs[j]);
    m->ncs = k;
    m->cs_c = c;
    m->cs_h = h;
    m->cs_w = w;
    m->cs_eps = eps;
    for (int j = 0; j < k; j++) {
        int n = size[j];
        if (m->cs[j].g && m->cs[j].n == n)
            continue;
        slot_drop(&m->cs[j]);
        if (slot_build(m, &m->cs[j], n, c, h, w, eps, err, errlen) < 0)
            return -1;
    }
    return 0;
}

/* Chunk j's samples [first, first + n) into its graph: pixels, labels,
 * ids (the dropout stream's), the loss gradient 1 / G per sample. */
static int chunk_input(model_t *m, chunk_slot_t *s, int first, model_fill_fn fill,
                       const void *ctx, const model_u8_src_t *u8, const int32_t *labels,
                       const model_step_t *st, const int64_t *ids, float *dl)
{
    bk_graph_t *g = s->g;
    uint64_t per = (uint64_t)m->cs_c * m->cs_h * m->cs_w, px = (uint64_t)s->n * per;
    bk_graph_set_training(g, 1);
    bk_graph_set_dropout(g, !st->no_dropout);
    int rc = u8 ? bk_write_u8(g, s->in, u8->px + (size_t)first * per, u8->lut) : 1;
    if (rc == 0)
        m->traffic.batch_in += px + (uint64_t)u8->c * 256 * sizeof(float);
    if (rc == 1 && u8 && bk_u8_on_host(g, u8->px + (size_t)first * per, (size_t)px) < 0)
        rc = -1;   /* a device decoder's batch, which fill reads on the host */
    if (rc == 1) {
        fill(ctx, first, s->n, m->t_x);
        m->traffic.batch_in += px * sizeof(float);
        rc = bk_write(g, s->in, m->t_x);
    }
    for (int i = 0; i < s->n; i++)   /* d(sum_i l_i / G) / d l_i */
        dl[i] = (float)(1.0 / st->global_batch) * (st->loss_scale > 0 ? st->loss_scale : 1);
    /* labels, loss gradients and, where a dropout draws, the sample keys */
    m->traffic.batch_in += (uint64_t)s->n * (sizeof *labels + sizeof *dl +
                                             (bk_graph_drops(g) ? sizeof(uint64_t) : 0));
    rc = rc ? rc : bk_set_labels(g, labels + first);
    return rc ? rc : bk_set_step(g, st->seed, st->step, ids + first);
}

/* The per-chunk outputs gathered: loss (n) and logits (n * classes). */
static int chunk_outputs(model_t *m, int k, float *loss, float *logits)
{
    size_t nc = (size_t)m->info.num_classes, first = 0;
    for (int j = 0; j < k; j++) {
        chunk_slot_t *s = &m->cs[j];
        if (loss && bk_read(s->g, s->loss, loss + first) < 0)
            return -1;
        if (logits && bk_read(s->g, s->logits, logits + first * nc) < 0)
            return -1;
        m->traffic.out += (uint64_t)s->n * sizeof(float) *
                          ((loss ? 1u : 0u) + (logits ? (uint64_t)nc : 0));
        first += (size_t)s->n;
    }
    return 0;
}

static int fail(model_t *m, const char *what, bk_graph_t *g, char *err, size_t errlen)
{
    err_set(err, errlen, "%s bitwise train step%s: %s", m->arch->name, what,
            g && bk_graph_error(g) ? bk_graph_error(g) : "backend failure");
    model_chunks_drop(m);   /* a failed graph is not reused */
    return -1;
}

/* A rank without samples: zero gradients, and the exact all-reduces every
 * other rank makes, contributing nothing (one chunk graph describes them). */
static int empty(model_t *m, int chunk, int c, int h, int w, const model_step_t *s, char *err,
                 size_t errlen)
{
    if (bk_arena_zero(&m->ps->grads_mem, 0, m->ps->grads_mem.floats) < 0) {
        err_set(err, errlen, "%s train step (empty shard): cannot zero the gradients",
                m->arch->name);
        return -1;
    }
    int fits = m->ncs > 0 && m->cs_c == c && m->cs_h == h && m->cs_w == w &&
               m->cs_eps == s->label_smoothing;   /* any chunk's graph describes the ops */
    if (!fits && slots_fit(m, 1, &chunk, c, h, w, s->label_smoothing, err, errlen) < 0)
        return -1;
    bk_graph_set_training(m->cs[0].g, 1);
    if (bk_chunks_empty(m->cs[0].g, m->cs[0].loss) < 0)
        return fail(m, " (empty shard)", m->cs[0].g, err, errlen);
    return 0;
}

/* The sizes of the non-empty chunks of the n samples into size (room for
 * n): s->chunk_sizes less its zeros (chunks whose samples all failed:
 * they contribute nothing on any worker count), or chunks of s->chunk, the
 * last short. Their count, or -1 when s->chunk_sizes does not fit n. */
static int chunk_plan(model_t *m, int n, const model_step_t *s, int *size, char *err,
                      size_t errlen)
{
    int k = 0;
    if (!s->chunk_sizes) {
        for (int left = n; left > 0; left -= s->chunk)
            size[k++] = left < s->chunk ? left : s->chunk;
        return k;
    }
    long sum = 0;
    for (int j = 0; j < s->n_chunks; j++) {
        int z = s->chunk_sizes[j];
        if (z < 0 || z > s->chunk || (z > 0 && k == n)) {
            err_set(err, errlen, "%s train step: chunk %d of %d holds %d samples (chunk %d, "
                    "%d samples)", m->arch->name, j, s->n_chunks, z, s->chunk, n);
            return -1;
        }
        sum += z;
        if (z > 0)
            size[k++] = z;
    }
    if (sum != n) {
        err_set(err, errlen, "%s train step: the %d chunks hold %ld samples, not %d",
                m->arch->name, s->n_chunks, sum, n);
        return -1;
    }
    return k;
}

int model_chunks_step(model_t *m, model_fill_fn fill, const void *ctx,
                      const model_u8_src_t *u8, int n, int c, int h, int w,
                      const int32_t *labels, const model_step_t *s, float *loss,
                      float *logits, char *err, size_t errlen)
{
    int chunk = s->chunk;
    if (n == 0)
        return empty(m, chunk, c, h, w, s, err, errlen);
    if (!labels) {
        err_set(err, errlen, "%s train step: no labels", m->arch->name);
        return -1;
    }
    int *size = malloc((size_t)n * sizeof *size);
    if (!size) {
        err_set(err, errlen, "%s: out of memory", m->arch->name);
        return -1;
    }
    int k = chunk_plan(m, n, s, size, err, errlen);
    if (k < 0 || model_train_staging(m, chunk, n, c, h, w, err, errlen) < 0 ||
        slots_fit(m, k, size, c, h, w, s->label_smoothing, err, errlen) < 0) {
        free(size);
        return -1;
    }
    free(size);
    int64_t *ids = malloc((size_t)n * sizeof *ids);
    bk_graph_t **gs = malloc((size_t)k * sizeof *gs);
    bk_tensor_t **ys = malloc((size_t)k * sizeof *ys);
    const float **dls = malloc((size_t)k * sizeof *dls);
    int rc = ids && gs && ys && dls ? 0 : -1;
    if (rc < 0)
        err_set(err, errlen, "%s: out of memory", m->arch->name);
    for (int i = 0; rc == 0 && i < n; i++)   /* NULL ids: 0..n-1, as one graph takes them */
        ids[i] = s->ids ? s->ids[i] : i;
    for (int j = 0, first = 0; rc == 0 && j < k; first += m->cs[j].n, j++) {
        gs[j] = m->cs[j].g;
        ys[j] = m->cs[j].loss;
        dls[j] = m->t_dl + first;
        if (chunk_input(m, &m->cs[j], first, fill, ctx, u8, labels, s, ids,
                        m->t_dl + first) != 0)
            rc = fail(m, " (input)", gs[j], err, errlen);
    }
    if (rc == 0 && (bk_chunks_forward(gs, k) < 0 || bk_chunks_backward(gs, k, ys, dls) < 0 ||
                    chunk_outputs(m, k, loss, logits) < 0))
        rc = fail(m, "", gs[0], err, errlen);
    free(ids);
    free(gs);
    free(ys);
    free(dls);
    return rc;
}

struct xsum *model_running_sums(model_t *m)
{
    return m->ncs > 0 ? bk_chunks_running_sums(m->cs[0].g) : NULL;
}

int model_running_apply(model_t *m, char *err, size_t errlen)
{
    if (m->ncs == 0 || bk_chunks_running(m->cs[0].g) == 0)
        return 0;
    return fail(m, " (running stats)", m->cs[0].g, err, errlen);
}
