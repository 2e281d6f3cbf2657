/* model_params — a model's parameters: opened from the weights file and
 * checked against the description (or initialised), access by index and
 * name, BatchNorm's num_batches_tracked counters, freezing, the
 * SyncBatchNorm hook, and model_sync_eval. */
#include "gpud/model_priv.h"

#include "common/errbuf.h"
#include "common/str_suffix.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One num_batches_tracked counter per BatchNorm (an entry "<bn>.running_mean"
 * of the parameters), valued from the weights file st when it has one. */
static int counts_load(model_t *m, const safetensors_t *st, char *err, size_t errlen)
{
    static const char RM[] = ".running_mean";
    m->nbt = calloc(m->ps->n + 1, sizeof *m->nbt);
    if (!m->nbt) {
        err_set(err, errlen, "model: out of memory");
        return -1;
    }
    for (size_t i = 0; i < m->ps->n; i++) {
        const char *name = m->ps->e[i].name;
        size_t stem;
        if (!str_suffix(name, RM, &stem))
            continue;
        bn_count_t *c = &m->nbt[m->n_nbt++];
        snprintf(c->name, sizeof c->name, "%.*s.num_batches_tracked", (int)stem, name);
        c->rm = i;
        const st_tensor_t *t = st ? safetensors_get(st, c->name) : NULL;
        if (t && st_tensor_to_i64(t, &c->value, 1) < 0) {
            err_set(err, errlen, "%s: want one integer, the file has %s %lld values",
                    c->name, st_dtype_name(t->dtype), (long long)t->numel);
            return -1;
        }
    }
    return 0;
}

int model_params_open(model_t *m, const model_opts_t *o, const char *weights_path, char *err,
                      size_t errlen)
{
    if (!weights_path && o->init) {   /* models/init.c */
        if (m->arch->resolve(o, NULL, &m->info, err, errlen) < 0)
            return -1;
        m->ps = init_weights(m->arch, &m->info, o->init_seed, o->train, err, errlen);
        return m->ps && (!o->train || counts_load(m, NULL, err, errlen) == 0) ? 0 : -1;
    }
    safetensors_t *st = safetensors_open(weights_path, err, errlen);
    int rc = st ? m->arch->resolve(o, st, &m->info, err, errlen) : -1;
    if (rc == 0 && !(m->ps = pstore_load(st, o->train, err, errlen)))
        rc = -1;
    if (rc == 0)
        rc = arch_check(m->arch, &m->info, m->ps, st, err, errlen);
    if (rc == 0 && o->train)
        rc = counts_load(m, st, err, errlen);
    safetensors_destroy(&st);
    return rc;
}

int model_param_count(const model_t *m)
{
    return m->ps && m->opts.train ? (int)m->ps->n : 0;
}

static void param_of(const pentry_t *e, model_param_t *p)
{
    *p = (model_param_t){.name = e->name, .value = e->w, .grad = e->frozen ? NULL : e->g,
                         .offset = e->off, .grad_offset = e->goff, .numel = e->n,
                         .ndim = e->ndim, .walk = e->walk};
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

const struct bk_arena *model_params_arena(const model_t *m)
{
    return m->ps && m->opts.train ? &m->ps->params_mem : NULL;
}

const struct bk_arena *model_grads_arena(const model_t *m)
{
    return m->ps && m->opts.train ? &m->ps->grads_mem : NULL;
}

size_t model_buffers_offset(const model_t *m)
{
    return m->ps ? m->ps->buf_off : 0;
}

const struct bk_traffic *model_traffic(const model_t *m)
{
    return &m->traffic;
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
void model_counts_step(model_t *m)
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
    bk_graph_set_allreduce(m->tg, fn, ctx);   /* NULL graph: nothing */
    return 0;
}

int model_set_grad_ready(model_t *m, model_grad_ready_fn fn, void *ctx)
{
    if (!m->ps || !m->opts.train)
        return -1;
    m->ready_fn = fn;
    m->ready_ctx = ctx;
    bk_graph_set_grad_ready(m->tg, fn, ctx);   /* NULL graph: nothing */
    for (int j = 0; j < m->ncs; j++)
        bk_graph_set_grad_ready(m->cs[j].g, fn, ctx);
    return 0;
}

int model_set_grad_queue(model_t *m, model_grad_mark_fn mark, model_grad_flush_fn flush,
                         void *ctx)
{
    if (!m->ps || !m->opts.train)
        return -1;
    m->mark_fn = mark;
    m->flush_fn = flush;
    m->queue_ctx = ctx;
    bk_graph_set_grad_queue(m->tg, mark, flush, ctx);   /* NULL graph: nothing */
    for (int j = 0; j < m->ncs; j++)
        bk_graph_set_grad_queue(m->cs[j].g, mark, flush, ctx);
    return 0;
}

int model_set_exact(model_t *m, model_xreduce_fn fn, void *ctx, int sync_bn)
{
    if (!m->ps || !m->opts.train)
        return -1;
    m->x_fn = fn;
    m->x_ctx = ctx;
    m->x_sync = sync_bn;
    for (int j = 0; j < m->ncs; j++)
        bk_graph_set_exact(m->cs[j].g, fn, ctx, sync_bn);
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
    if (changed) {   /* the graph bound the old gradient arrays */
        bk_graph_destroy(&m->tg);
        model_chunks_drop(m);
        if (pstore_lay_grads(m->ps) < 0)
            return -1;
    }
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
        if (str_suffix(e->name, ".running_mean", NULL) &&
            strncmp(e->name, prefix, len) == 0 && e->bn_eval != (frozen != 0)) {
            e->bn_eval = frozen != 0;
            changed++;
        }
    }
    if (changed) {   /* the graph fixed each BN's mode when it was built */
        bk_graph_destroy(&m->tg);
        model_chunks_drop(m);
    }
    return changed;
}

int model_sync_eval(model_t *m, char *err, size_t errlen)
{
    if (!m->ps || !m->opts.train) {
        err_set(err, errlen, "%s: not opened for training", m->arch->name);
        return -1;
    }
    /* The eval graphs are bound to the live parameters, but a fused eval
     * plan folds them when it compiles: fold again at the next forward. */
    model_eval_reload(m);
    return 0;
}

int model_param_is_bn_buffer(const char *name)
{
    return str_suffix(name, ".running_mean", NULL) || str_suffix(name, ".running_var", NULL);
}

int model_param_is_bias(const char *name)
{
    return str_suffix(name, ".bias", NULL);
}

int model_param_is_bn_weight(const model_t *m, const char *name)
{
    char rm[200];
    size_t stem;
    if (!str_suffix(name, ".weight", &stem) || stem + sizeof ".running_mean" > sizeof rm)
        return 0;
    snprintf(rm, sizeof rm, "%.*s.running_mean", (int)stem, name);
    model_param_t p;
    return model_param_find(m, rm, &p) == 0;
}
