/* pstore — the parameter store: a state_dict by name, loaded from a weights
 * file or recorded from the description (init.c), placed into the
 * backend's arenas, and the check that a file holds nothing the
 * description left unbound. */
#include "gpud/models/layers.h"

#include "common/errbuf.h"
#include "common/str_suffix.h"
#include "gpud/finite.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char NBT[] = ".num_batches_tracked";

#define PSTORE_ALIGN 16   /* floats: a value starts on a 64-byte line */

pstore_t *pstore_new(const char *src, int grads)
{
    pstore_t *ps = calloc(1, sizeof *ps);
    if (ps && !(ps->src = strdup(src ? src : "the weights"))) {
        free(ps);
        return NULL;
    }
    if (ps)
        ps->grads = grads != 0;
    return ps;
}

void pstore_destroy(pstore_t **psp)
{
    if (!psp || !*psp)
        return;
    pstore_t *ps = *psp;
    for (size_t i = 0; i < ps->n && !ps->placed; i++)
        free(ps->e[i].w);
    if (ps->placed) {
        bk_arena_free(&ps->params_mem);
        bk_arena_free(&ps->grads_mem);
    }
    free(ps->e);
    free(ps->src);
    free(ps);
    *psp = NULL;
}

int pstore_reserve(pstore_t *ps, size_t n)
{
    if (ps->n + n <= ps->cap)
        return 0;
    size_t cap = ps->cap ? 2 * ps->cap : 64;
    while (cap < ps->n + n)
        cap *= 2;
    pentry_t *e = realloc(ps->e, cap * sizeof *e);
    if (!e)
        return -1;
    ps->e = e;
    ps->cap = cap;
    return 0;
}

pentry_t *pstore_add(pstore_t *ps, const char *name, int ndim, const int64_t *shape)
{
    if (ps->placed || strlen(name) >= sizeof ps->e->name || ndim < 0 || ndim > 4 ||
        pstore_reserve(ps, 1) < 0)
        return NULL;
    pentry_t *e = &ps->e[ps->n];
    memset(e, 0, sizeof *e);
    e->walk = -1;
    snprintf(e->name, sizeof e->name, "%s", name);
    e->n = 1;
    for (int d = 0; d < ndim; d++)
        e->n *= (size_t)(shape[d] > 0 ? shape[d] : 0);
    e->ndim = ndim;
    if (ndim > 0)
        memcpy(e->shape, shape, (size_t)ndim * sizeof *shape);
    e->trainable = str_suffix(name, ".weight", NULL) || str_suffix(name, ".bias", NULL);
    e->w = calloc(e->n ? e->n : 1, sizeof *e->w);   /* until pstore_place */
    if (!e->w)
        return NULL;
    ps->n++;
    return e;
}

int pstore_lay_grads(pstore_t *ps)
{
    if (!ps->placed)   /* pstore_place lays them */
        return 0;
    size_t total = 0;
    for (size_t i = 0; i < ps->n; i++) {
        pentry_t *e = &ps->e[i];
        e->goff = total;
        total += e->trainable && !e->frozen ? e->n : 0;
    }
    const bk_arena_ops_t *ops = ps->params_mem.ops ? ps->params_mem.ops : &bk_arena_host;
    bk_arena_t fresh;
    if (bk_arena_alloc(&fresh, ops, total, ps->params_mem.traffic) < 0)
        return -1;
    bk_arena_free(&ps->grads_mem);
    ps->grads_mem = fresh;
    for (size_t i = 0; i < ps->n; i++) {
        pentry_t *e = &ps->e[i];
        e->g = e->trainable && !e->frozen ? ps->grads_mem.base + e->goff : NULL;
    }
    return 0;
}

int pstore_place(pstore_t *ps, const bk_arena_ops_t *ops, bk_traffic_t *traffic, char *err,
                 size_t errlen)
{
    if (ps->placed)
        return 0;
    /* trainable first, then the buffers; each value on a cache line of its
     * own, as the calloc'd arrays were (the kernels' vector loads) */
    size_t total = 0;
    for (int buffers = 0; buffers < 2; buffers++) {
        total = (total + PSTORE_ALIGN - 1) / PSTORE_ALIGN * PSTORE_ALIGN;
        if (buffers)
            ps->buf_off = total;
        for (size_t i = 0; i < ps->n; i++)
            if (ps->e[i].trainable == !buffers) {
                total = (total + PSTORE_ALIGN - 1) / PSTORE_ALIGN * PSTORE_ALIGN;
                ps->e[i].off = total;
                total += ps->e[i].n;
            }
    }
    if (bk_arena_alloc(&ps->params_mem, ops, total, traffic) < 0) {
        err_set(err, errlen, "%s: out of memory for the %s arena of %zu parameters", ps->src,
                ops->name, total);
        return -1;
    }
    for (size_t i = 0; i < ps->n; i++)
        if (bk_arena_write(&ps->params_mem, ps->e[i].off, ps->e[i].n, ps->e[i].w) < 0) {
            err_set(err, errlen, "%s: cannot write %s to the %s arena", ps->src, ps->e[i].name,
                    ops->name);
            bk_arena_free(&ps->params_mem);
            return -1;
        }
    for (size_t i = 0; i < ps->n; i++) {
        free(ps->e[i].w);
        ps->e[i].w = ps->params_mem.base + ps->e[i].off;
    }
    ps->placed = 1;
    if (ps->grads && pstore_lay_grads(ps) < 0) {
        err_set(err, errlen, "%s: out of memory for the %s arena of the gradients", ps->src,
                ops->name);
        return -1;
    }
    return 0;
}

static int entry_load(pstore_t *ps, const st_tensor_t *t, char *err, size_t errlen)
{
    pentry_t *e = pstore_add(ps, t->name, t->ndim, t->shape);
    if (!e) {
        err_set(err, errlen, "%s: out of memory, or a name too long or more than 4 "
                "dimensions", t->name);
        return -1;
    }
    if (st_tensor_to_f32(t, e->w, e->n) < 0) {
        err_set(err, errlen, "%s: dtype %s is not a float type (F32, F16, BF16, F64)",
                t->name, st_dtype_name(t->dtype));
        return -1;
    }
    /* checked as the model will use it: an F64 beyond FLT_MAX is inf too */
    char bad[256];
    if (finite_check(t->name, e->w, e->n, bad, sizeof bad) < 0) {
        err_set(err, errlen, "%s: weights must be finite (a damaged file, or a model that "
                "diverged)", bad);
        return -1;
    }
    return 0;
}

pstore_t *pstore_load(const safetensors_t *st, int grads, char *err, size_t errlen)
{
    pstore_t *ps = pstore_new(safetensors_path(st), grads);
    if (!ps || pstore_reserve(ps, safetensors_count(st)) < 0) {
        pstore_destroy(&ps);
        err_set(err, errlen, "parameters: out of memory");
        return NULL;
    }
    for (size_t i = 0; i < safetensors_count(st); i++) {
        const st_tensor_t *t = safetensors_at(st, i);
        if (!str_suffix(t->name, NBT, NULL) && entry_load(ps, t, err, errlen) < 0) {
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

static int by_name(const void *a, const void *b)
{
    return strcmp(((const pentry_t *)a)->name, ((const pentry_t *)b)->name);
}

void pstore_sort(pstore_t *ps)
{
    if (ps->n > 1)
        qsort(ps->e, ps->n, sizeof *ps->e, by_name);
}

void pstore_hint(pstore_t *ps, const char *hint)
{
    snprintf(ps->hint, sizeof ps->hint, "%s", hint ? hint : "");
}

/* t was bound; num_batches_tracked counts as bound with its BatchNorm. */
static int is_bound(const pstore_t *ps, const st_tensor_t *t)
{
    char name[sizeof ps->e->name + sizeof NBT];
    size_t len = strlen(t->name);
    if (str_suffix(t->name, NBT, NULL))
        snprintf(name, sizeof name, "%.*s.running_mean", (int)(len - (sizeof NBT - 1)),
                 t->name);
    else
        snprintf(name, sizeof name, "%s", t->name);
    const pentry_t *e = pstore_find(ps, name);
    return e && e->bound;
}

int pstore_leftovers(const pstore_t *ps, const safetensors_t *st, char *err, size_t errlen)
{
    size_t extra = 0;
    const st_tensor_t *first = NULL;
    for (size_t i = 0; i < safetensors_count(st); i++)
        if (!is_bound(ps, safetensors_at(st, i)) && extra++ == 0)
            first = safetensors_at(st, i);
    if (!first)
        return 0;
    char have[128];
    err_set(err, errlen, "%s: unexpected tensor %s (shape %s) is not part of %s%s (wrong "
            "--model?)", safetensors_path(st), first->name,
            st_shape_str(first->shape, first->ndim, have, sizeof have), ps->arch,
            extra > 1 ? " (and more)" : "");
    return -1;
}
