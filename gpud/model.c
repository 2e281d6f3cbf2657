/* model — the architecture table, model_new/destroy and what a model is
 * (model_priv.h lists the files of the model API).
 *
 * Exactness: the network always runs on micro-batches of m->mb samples
 * (a graph is built once per input shape for exactly that batch), so a
 * sample's arithmetic never depends on n or on its neighbours. */
#include "gpud/model_priv.h"

#include "common/errbuf.h"
#include "common/log.h"

#include <stdlib.h>
#include <string.h>

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
        err_set(err, errlen, "unknown model '%s' (known: resnet18, resnet34, resnet50, "
                "wideresnet, densenet121)", o->arch ? o->arch : "(null)");
        return -1;
    }
    if (o->micro_batch < 0 || o->micro_batch > MODEL_MAX_MICRO_BATCH) {
        err_set(err, errlen, "micro-batch %d out of range 0..%d", o->micro_batch,
                MODEL_MAX_MICRO_BATCH);
        return -1;
    }
    if (o->num_classes < 0 || o->in_channels < 0 || o->in_channels > 64 || o->threads < 0) {
        err_set(err, errlen, "bad model options: classes %d, in-channels %d, threads %d",
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
        err_set(err, errlen, "model: out of memory");
        return NULL;
    }
    m->arch = arch_find(o->arch);
    m->mb = o->micro_batch ? o->micro_batch : MODEL_DEFAULT_MICRO_BATCH;
    m->opts = *o;
    m->opts.arch = NULL;
    if (model_params_open(m, o, weights_path, err, errlen) < 0) {
        model_destroy(&m);
        return NULL;
    }
    m->be = backend_new(backend ? backend : "cpu", o->threads, err, errlen);
    if (m->be && backend_set_precision(m->be, o->fp16 ? "fp16" : o->bf16 ? "bf16" : "fp32",
                                        err, errlen) < 0) {
        model_destroy(&m);
        return NULL;
    }
    if (m->be && pstore_place(m->ps, backend_arena_ops(m->be), &m->traffic, err, errlen) < 0) {
        model_destroy(&m);
        return NULL;
    }
    m->out_buf = malloc((size_t)m->mb * m->info.num_classes * sizeof *m->out_buf);
    if (!m->be || !m->out_buf) {
        if (m->be)
            err_set(err, errlen, "model: out of memory");
        model_destroy(&m);
        return NULL;
    }
    int threads = backend_threads(m->be);
    log_debug("model %s: %d classes, %d input channels, micro-batch %d, backend %s, %d thread%s, "
              "%s", m->arch->name, m->info.num_classes, m->info.in_channels, m->mb,
              backend_name(m->be), threads, threads == 1 ? "" : "s", backend_precision_name(m->be));
    return m;
}

void model_destroy(model_t **mp)
{
    if (!mp || !*mp)
        return;
    model_t *m = *mp;
    model_eval_drop(m);
    bk_graph_destroy(&m->tg);
    model_chunks_drop(m);
    pstore_destroy(&m->ps);
    free(m->nbt);
    free(m->t_x);
    free(m->t_dl);
    free(m->t_lg);
    backend_destroy(&m->be);
    free(m->in_buf);
    free(m->out_buf);
    free(m->in_u8);
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

const char *model_precision(const model_t *m)
{
    return backend_precision_name(m->be);
}

backend_t *model_backend(model_t *m)
{
    return m->be;
}

int model_micro_batch(const model_t *m)
{
    return m->mb;
}

int model_card(int i, model_card_t *card, char *err, size_t errlen)
{
    if (i < 0 || (size_t)i >= sizeof ARCHS / sizeof *ARCHS)
        return 1;
    const arch_t *arch = ARCHS[i];
    model_opts_t o = {.arch = arch->name};
    arch_info_t a;
    if (arch->resolve(&o, NULL, &a, err, errlen) < 0)
        return -1;
    /* PS_RECORD: the walk creates each tensor (zero pages, never touched) */
    pstore_t *ps = pstore_new(arch->name, 0);
    if (!ps) {
        err_set(err, errlen, "%s: out of memory", arch->name);
        return -1;
    }
    ps->mode = PS_RECORD;
    if (arch_walk(arch, &a, ps, err, errlen) < 0) {
        pstore_destroy(&ps);
        return -1;
    }
    *card = (model_card_t){.name = arch->name, .in_channels = a.in_channels,
                           .num_classes = a.num_classes, .h = a.nat_h, .w = a.nat_w,
                           .hw_fixed = a.hw_fixed};
    for (size_t e = 0; e < ps->n; e++)
        *(ps->e[e].trainable ? &card->params : &card->buffers) += (int64_t)ps->e[e].n;
    pstore_destroy(&ps);
    return 0;
}
