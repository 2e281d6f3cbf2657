/* model_params — the unfolded parameters of a model opened for training:
 * access by index and name, BatchNorm's num_batches_tracked counters,
 * freezing, the SyncBatchNorm hook, and refolding the trained values into
 * the inference network (model_sync_eval). */
#include "gpud/model_priv.h"

#include "common/errbuf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One num_batches_tracked counter per BatchNorm (an entry "<bn>.running_mean"
 * of the parameters), valued from the weights file when it has one. */
int model_counts_load(model_t *m, const safetensors_t *st, char *err, size_t errlen)
{
    static const char RM[] = ".running_mean";
    m->nbt = calloc(m->ps->n + 1, sizeof *m->nbt);
    if (!m->nbt) {
        err_set(err, errlen, "model: out of memory");
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
            err_set(err, errlen, "%s: want one integer, the file has %s %lld values",
                    c->name, st_dtype_name(t->dtype), (long long)t->numel);
            return -1;
        }
    }
    return 0;
}

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
        err_set(err, errlen, "%s: not opened for training", m->arch->name);
        return -1;
    }
    size_t len = 0;
    char *img = pstore_image(m->ps, &len);
    safetensors_t *st = img ? safetensors_open_buffer(img, len, "trained parameters", err,
                                                      errlen) : NULL;
    free(img);
    if (!st) {
        if (!img)
            err_set(err, errlen, "%s: out of memory", m->arch->name);
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
