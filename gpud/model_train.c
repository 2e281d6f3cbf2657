/* model_train — one training step: the training graph (rebuilt when the
 * batch's shape or the label smoothing changes), forward, backward of
 * sum(loss) / global_batch, the gradients left in the parameters (the
 * grads arena); the bytes it moves between host and backend counted (the
 * batch and outputs here, the backend's own per-op copies taken from it),
 * and their plan (model_step_plan, model_copy_plan). */
#include "gpud/model_priv.h"

#include "common/env_switch.h"
#include "common/errbuf.h"

#include <stdlib.h>
#include <string.h>

/* The training graph for n samples of (c, h, w) and label smoothing eps,
 * rebuilt when either changes. */
static int train_graph(model_t *m, int n, int c, int h, int w, float eps, char *err,
                       size_t errlen)
{
    if (m->tg && m->tn == n && m->tc == c && m->th == h && m->tw == w && m->t_eps == eps)
        return 0;
    bk_graph_destroy(&m->tg);
    if (model_train_staging(m, n, n, c, h, w, err, errlen) < 0)
        return -1;
    bk_graph_t *g = bk_graph_new(m->be);
    bk_graph_set_traffic(g, &m->traffic);   /* a device arena's BatchNorm vectors */
    bk_graph_set_name(g, "input");
    m->t_in = bk_input(g, n, c, h, w, 0);
    m->t_logits = arch_describe(m->arch, &m->info, m->ps, g, m->t_in);
    bk_graph_set_name(g, "loss");
    m->t_loss = bk_softmax_ce(g, m->t_logits, eps);
    if (m->t_loss && bk_keep(g, m->t_logits) < 0)   /* read after every step (top-k) */
        m->t_loss = NULL;
    if (!m->t_loss) {
        err_set(err, errlen, "%s training graph on %dx%dx%dx%d: %s", m->arch->name, n, c, h,
                w, bk_graph_error(g) ? bk_graph_error(g) : "build failed");
        bk_graph_destroy(&g);
        return -1;
    }
    bk_graph_set_allreduce(g, m->sync_fn, m->sync_ctx);
    bk_graph_set_grad_ready(g, m->ready_fn, m->ready_ctx);
    bk_graph_set_grad_queue(g, m->mark_fn, m->flush_fn, m->queue_ctx);
    m->tg = g;
    m->t_build++;   /* a batch staged into the graph before is not in this one */
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
        err_set(err, errlen, "%s: not opened for training (model_opts_t.train = 1)",
                m->arch->name);
        return -1;
    }
    if (!s || s->global_batch < n || s->global_batch < 1) {
        err_set(err, errlen, "%s: global batch %d must be >= the %d samples of the step",
                m->arch->name, s ? s->global_batch : 0, n);
        return -1;
    }
    if (!(s->label_smoothing >= 0.0f && s->label_smoothing <= 1.0f)) {
        err_set(err, errlen, "%s: label smoothing %g outside [0, 1]", m->arch->name,
                (double)s->label_smoothing);
        return -1;
    }
    if (s->topk && (s->k < 1 || s->k > m->info.num_classes)) {
        err_set(err, errlen, "%s: top-%d of %d classes", m->arch->name, s->k,
                m->info.num_classes);
        return -1;
    }
    return 0;
}

/* Where a step's logits come to the host to be ranked there (s->topk and
 * no ranking by the backend): the caller's logits when it asked for them,
 * else m->t_lg (grown to n rows). NULL after err (out of memory). */
static float *host_logits(model_t *m, int n, float *logits, char *err, size_t errlen)
{
    size_t need = (size_t)n * (size_t)m->info.num_classes;
    if (logits)
        return logits;
    if (need > m->t_lg_cap) {
        float *p = realloc(m->t_lg, need * sizeof *p);
        if (!p) {
            err_set(err, errlen, "%s train step: out of memory", m->arch->name);
            return NULL;
        }
        m->t_lg = p;
        m->t_lg_cap = need;
    }
    return m->t_lg;
}

/* The step's input into the graph: uint8 pixels straight into the input
 * tensor when the backend can (no float copy of the batch), else filled
 * into m->t_x and written from there; *bytes what crossed (counted by the
 * step that reads it). */
static int train_input(model_t *m, int n, model_fill_fn fill, const void *ctx,
                       const model_u8_src_t *u8, uint64_t *bytes)
{
    uint64_t px = (uint64_t)n * (uint64_t)(m->tc * m->th * m->tw);
    int rc = u8 ? bk_write_u8(m->tg, m->t_in, u8->px, u8->lut) : 1;
    if (rc == 0)
        *bytes = px + (uint64_t)u8->c * 256 * sizeof(float);
    if (rc != 1)
        return rc;
    if (u8 && bk_u8_on_host(m->tg, u8->px, (size_t)px) < 0)   /* a device decoder's batch */
        return -1;
    fill(ctx, 0, n, m->t_x);
    *bytes = px * sizeof(float);
    return bk_write(m->tg, m->t_in, m->t_x);
}

/* The training graph's ops on n samples of (c, h, w), described only
 * (nothing planned or allocated; a new graph is in training mode); *loss its loss, NULL
 * when the description failed (the graph's error says why; a NULL graph:
 * out of memory). The caller destroys the graph. */
static bk_graph_t *describe_train(const model_t *m, int n, int c, int h, int w,
                                  bk_tensor_t **loss)
{
    bk_graph_t *g = bk_graph_new(NULL);
    bk_tensor_t *x = g ? bk_input(g, n, c, h, w, 0) : NULL;
    bk_tensor_t *logits = x ? arch_describe(m->arch, &m->info, m->ps, g, x) : NULL;
    *loss = logits ? bk_softmax_ce(g, logits, 0.0f) : NULL;
    return g;
}

void model_step_bytes(int n, int c, int h, int w, int u8, int ids, int loss, int outs,
                      bk_traffic_t *t)
{
    uint64_t px = (uint64_t)n * (uint64_t)c * (uint64_t)h * (uint64_t)w;
    *t = (bk_traffic_t){0};
    if (n == 0)
        return;
    t->batch_in = (u8 ? px + (uint64_t)c * 256 * sizeof(float) : px * sizeof(float)) +
                  (uint64_t)n * (sizeof(int32_t) + sizeof(float) +   /* labels, dloss */
                                 (ids ? sizeof(int64_t) : 0));
    t->out = (uint64_t)n * sizeof(float) * ((loss ? 1u : 0u) + (uint64_t)outs);
}

void model_step_plan(const model_t *m, int n, int c, int h, int w, int u8, int loss,
                     int logits, int topk_k, bk_traffic_t *t)
{
    int classes = m->info.num_classes;
    /* the logits, read when asked or to rank them here; else k ids */
    int outs = logits || (topk_k > 0 && !backend_ranks_topk(m->be)) ? classes
               : topk_k > 0                                         ? topk_k
                                                                    : 0;
    /* the sample keys go where the training graph draws a dropout mask */
    bk_tensor_t *y = NULL;
    bk_graph_t *g = describe_train(m, n > 0 ? n : 1, c, h, w, &y);
    int drops = y && bk_graph_drops(g);
    bk_graph_destroy(&g);
    model_step_bytes(n, c, h, w, u8, drops, loss, outs, t);
}

int model_copy_plan(const model_t *m, int n, int c, int h, int w, bk_copy_plan_t *p, char *err,
                    size_t errlen)
{
    *p = (bk_copy_plan_t){0};
    if (!m->ps || !m->opts.train) {
        err_set(err, errlen, "%s: not opened for training (model_opts_t.train = 1)",
                m->arch->name);
        return -1;
    }
    bk_tensor_t *loss = NULL;
    bk_graph_t *g = describe_train(m, n, c, h, w, &loss);
    if (!loss)
        err_set(err, errlen, "%s graph on %dx%dx%dx%d: %s", m->arch->name, n, c, h, w,
                g && bk_graph_error(g) ? bk_graph_error(g) : "out of memory");
    else
        bk_graph_copy_plan(g, loss, m->be, m->sync_fn != NULL, p);   /* a plain step */
    bk_graph_destroy(&g);
    return loss ? 0 : -1;
}

/* A failed step: its error, and its graph not reused. -1. */
static int run_failed(model_t *m, char *err, size_t errlen)
{
    err_set(err, errlen, "%s train step: %s", m->arch->name,
            bk_graph_error(m->tg) ? bk_graph_error(m->tg) : "backend failure");
    bk_graph_destroy(&m->tg);
    m->t_pend.on = 0;
    return -1;
}

/* The step queued: its input (unless staged: already in the graph), labels,
 * sample keys and loss gradient, then forward and backward (on cuda one
 * recorded pass, not waited for); what its end reads kept in m->t_pend. */
static int run_begin(model_t *m, int n, model_fill_fn fill, const void *ctx,
                     const model_u8_src_t *u8, int staged, const int32_t *labels,
                     const model_step_t *s, float *loss, float *logits, char *err,
                     size_t errlen)
{
    bk_graph_t *g = m->tg;
    /* the backend's own copies (cuda: per-op parameter uploads and gradient
     * downloads) count from here: what ran before (an evaluation's weight
     * uploads) is not this step's */
    bk_traffic_t kernels = {0};
    backend_traffic_take(m->be, &kernels);
    bk_graph_set_training(g, 1);
    bk_graph_set_dropout(g, !s->no_dropout);
    uint64_t in_bytes = staged ? m->t_staged.bytes : 0;   /* counted when it crossed */
    int rc = staged ? 0 : train_input(m, n, fill, ctx, u8, &in_bytes);
    rc = rc ? rc : bk_set_labels(g, labels);
    rc = rc ? rc : bk_set_step(g, s->seed, s->step, s->ids);
    for (int i = 0; i < n; i++)   /* d(S sum_i l_i / G) / d l_i, S a power of two */
        m->t_dl[i] = (float)(1.0 / s->global_batch) * (s->loss_scale > 0 ? s->loss_scale : 1);
    rc = rc ? rc : bk_forward_backward(g, m->t_loss, m->t_dl);   /* recorded where it can be */
    bk_traffic_t *t = &m->traffic;
    /* the batch and outputs are counted here, where they cross the graph */
    kernels = (bk_traffic_t){0};
    backend_traffic_take(m->be, &kernels);
    t->params += kernels.params;
    t->bn += kernels.bn;
    /* the pixels, labels, loss gradients and, where a dropout draws, the
     * sample keys */
    t->batch_in += in_bytes + (uint64_t)n * (sizeof *labels + sizeof *m->t_dl +
                                             (bk_graph_drops(g) ? sizeof(uint64_t) : 0));
    if (rc != 0)
        return run_failed(m, err, errlen);
    m->t_pend = (train_pend_t){.on = 1, .n = n, .loss = loss, .logits = logits,
                               .topk = s->topk, .k = s->k};
    return 0;
}

/* The begun step's outputs read: its loss, its top-k (ranked where the
 * logits are, unless they come to the host anyway), its logits. */
static int run_end(model_t *m, char *err, size_t errlen)
{
    if (!m->t_pend.on)
        return 0;
    train_pend_t p = m->t_pend;
    bk_graph_t *g = m->tg;
    bk_traffic_t *t = &m->traffic;
    int n = p.n, rc = 0;
    if (p.loss && (rc = bk_read(g, m->t_loss, p.loss)) == 0)
        t->out += (uint64_t)n * sizeof *p.loss;
    int ranked = 0;
    if (rc == 0 && p.topk && !p.logits &&
        (rc = bk_read_topk(g, m->t_logits, p.k, p.topk)) == 0) {
        t->out += (uint64_t)n * (uint64_t)p.k * sizeof *p.topk;
        ranked = 1;
    }
    rc = rc == 1 ? 0 : rc;   /* the backend does not rank: the host does */
    float *lg = p.logits;
    if (rc == 0 && p.topk && !ranked && !(lg = host_logits(m, n, p.logits, err, errlen))) {
        m->t_pend.on = 0;
        return -1;
    }
    if (rc == 0 && lg && (rc = bk_read(g, m->t_logits, lg)) == 0)
        t->out += (uint64_t)n * (uint64_t)m->info.num_classes * sizeof *lg;
    if (rc == 0 && p.topk && !ranked)
        model_topk_ce(lg, n, m->info.num_classes, NULL, p.k, p.topk, NULL);
    if (rc != 0)
        return run_failed(m, err, errlen);
    m->t_pend.on = 0;
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
    if (bk_arena_zero(&m->ps->grads_mem, 0, m->ps->grads_mem.floats) < 0) {
        err_set(err, errlen, "%s train step (empty shard): cannot zero the gradients",
                m->arch->name);
        return -1;
    }
    if (m->sync_fn) {
        int fits = m->tg && m->tc == c && m->th == h && m->tw == w &&
                   m->t_eps == s->label_smoothing;
        if (!fits && train_graph(m, 1, c, h, w, s->label_smoothing, err, errlen) < 0)
            return -1;
        bk_graph_set_training(m->tg, 1);
        if (bk_empty_step(m->tg, m->t_loss) < 0) {
            err_set(err, errlen, "%s train step (empty shard): %s", m->arch->name,
                    bk_graph_error(m->tg) ? bk_graph_error(m->tg) : "backend failure");
            bk_graph_destroy(&m->tg);
            return -1;
        }
    }
    model_counts_step(m);
    return 0;
}

/* A step on n samples; staged: the caller's batch is what m->t_staged
 * holds (written into the graph it was staged for, it is not written
 * again); keep: the step is left begun (m->t_pend, model_train_end reads
 * its outputs) where it runs on the training graph. */
static int train_step(model_t *m, model_fill_fn fill, const void *ctx,
                      const model_u8_src_t *u8, int n, int c, int h, int w,
                      const int32_t *labels, const model_step_t *s, float *loss,
                      float *logits, int staged, int keep, char *err, size_t errlen)
{
    if (run_end(m, err, errlen) < 0)   /* a begin never ended: its outputs first */
        return -1;
    /* a staged batch is read once, by this step, where it went into the
     * graph this step runs; its bytes are counted where it is read, or here
     * where it is not (they crossed all the same) */
    staged_input_t was = m->t_staged;
    m->t_staged.px = NULL;
    staged = staged && m->tg && was.build == m->t_build && s && s->chunk == 0 && n > 0 &&
             m->t_eps == s->label_smoothing;   /* train_graph keeps that graph */
    if (was.px && !staged)
        m->traffic.batch_in += was.bytes;
    model_eval_settle(m);   /* the same backend: a pipelined eval's read first */
    if (step_check(m, n, s, err, errlen) < 0 || model_check_input(m, n, c, h, w, err, errlen) < 0)
        return -1;
    if (s->chunk > 0) {   /* the top-k from the chunks' logits, ranked here */
        float *lg = logits;
        if (s->topk && n > 0 && !(lg = host_logits(m, n, logits, err, errlen)))
            return -1;
        if (model_chunks_step(m, fill, ctx, u8, n, c, h, w, labels, s, loss, lg, err,
                              errlen) < 0)
            return -1;
        if (s->topk && n > 0)
            model_topk_ce(lg, n, m->info.num_classes, NULL, s->k, s->topk, NULL);
        model_counts_step(m);
        return 0;
    }
    if (n == 0)
        return empty_step(m, c, h, w, s, err, errlen);
    if (!labels) {
        err_set(err, errlen, "%s train step: no labels", m->arch->name);
        return -1;
    }
    if (train_graph(m, n, c, h, w, s->label_smoothing, err, errlen) < 0)
        return -1;
    if (run_begin(m, n, fill, ctx, u8, staged, labels, s, loss, logits, err, errlen) < 0)
        return -1;
    model_counts_step(m);   /* the pass that updates the running stats is queued */
    return keep ? 0 : run_end(m, err, errlen);
}

static int step_u8(model_t *m, const uint8_t *pixels, int n, int c, int h, int w,
                   const float *mean, const float *std, const int32_t *labels,
                   const model_step_t *s, float *loss, float *logits, int keep, char *err,
                   size_t errlen)
{
    int staged = model_staged_match(&m->t_staged, pixels, n, c, h, w, mean, std);
    float *lut = model_u8_table(m, c, mean, std, err, errlen);
    if (!lut) {
        model_train_unstage(m);   /* read once: no step will */
        return -1;
    }
    model_u8_src_t src = {pixels, c, h * w, lut, backend_threads(m->be)};
    int rc = train_step(m, model_fill_u8, &src, &src, n, c, h, w, labels, s, loss, logits,
                        staged, keep, err, errlen);
    free(lut);
    return rc;
}

int model_train_step_u8(model_t *m, const uint8_t *pixels, int n, int c, int h, int w,
                        const float *mean, const float *std, const int32_t *labels,
                        const model_step_t *s, float *loss, float *logits, char *err,
                        size_t errlen)
{
    return step_u8(m, pixels, n, c, h, w, mean, std, labels, s, loss, logits, 0, err, errlen);
}

int model_train_begin_u8(model_t *m, const uint8_t *pixels, int n, int c, int h, int w,
                         const float *mean, const float *std, const int32_t *labels,
                         const model_step_t *s, float *loss, float *logits, char *err,
                         size_t errlen)
{
    return step_u8(m, pixels, n, c, h, w, mean, std, labels, s, loss, logits, 1, err, errlen);
}

int model_train_stage_u8(model_t *m, const uint8_t *pixels, int n, int c, int h, int w,
                         const float *mean, const float *std, char *err, size_t errlen)
{
    model_train_unstage(m);   /* a stage before this one is not read */
    /* only into the graph of the step in flight, whose shape it has */
    if (!m->t_pend.on || !m->tg || n != m->tn || c != m->tc || h != m->th || w != m->tw)
        return 0;
    float *lut = model_u8_table(m, c, mean, std, err, errlen);
    if (!lut)
        return -1;
    model_u8_src_t src = {pixels, c, h * w, lut, backend_threads(m->be)};
    uint64_t bytes = 0;
    int rc = train_input(m, n, model_fill_u8, &src, &src, &bytes);
    free(lut);
    if (rc < 0) {
        err_set(err, errlen, "%s: staging the next step's batch: %s", m->arch->name,
                bk_graph_error(m->tg) ? bk_graph_error(m->tg) : "backend failure");
        return -1;
    }
    model_staged_set(&m->t_staged, pixels, n, c, h, w, mean, std);
    m->t_staged.build = m->t_build;
    m->t_staged.bytes = bytes;
    return 1;
}

int model_train_end(model_t *m, char *err, size_t errlen)
{
    return run_end(m, err, errlen);
}

void model_train_unstage(model_t *m)
{
    if (m->t_staged.px)   /* it crossed, and no step will count it */
        m->traffic.batch_in += m->t_staged.bytes;
    m->t_staged.px = NULL;
}

int model_train_overlap(void)
{
    return env_switch_on("DDPIPE_TRAIN_OVERLAP");
}

int model_train_step_f32(model_t *m, const float *x, int n, int c, int h, int w,
                         const int32_t *labels, const model_step_t *s, float *loss,
                         float *logits, char *err, size_t errlen)
{
    model_f32_src_t ctx = {x, (size_t)c * h * w};
    return train_step(m, model_fill_f32, &ctx, NULL, n, c, h, w, labels, s, loss, logits, 0, 0,
                      err, errlen);
}
