#include "gpud/parts.h"

#include "common/errbuf.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

struct parts {
    int n_loaders;
    part_t *v;                 /* held parts, any (gen, step) */
    size_t n, cap;
};

parts_t *parts_new(int n_loaders)
{
    parts_t *self = calloc(1, sizeof *self);
    if (self)
        self->n_loaders = n_loaders;
    return self;
}

static void free_part(part_t *p)
{
    ddp_msg_t m = {.type = DDP_BATCH, .u.batch = p->b};
    ddp_msg_clear(&m);
    free(p->at);
    memset(p, 0, sizeof *p);
}

void parts_destroy(parts_t **self_p)
{
    parts_t *self = self_p ? *self_p : NULL;
    if (!self)
        return;
    for (size_t i = 0; i < self->n; i++)
        free_part(&self->v[i]);
    free(self->v);
    free(self);
    *self_p = NULL;
}

static bool same_step(const ddp_batch_t *a, uint32_t gen, uint64_t step)
{
    return a->gen == gen && a->step == step;
}

int parts_add(parts_t *self, ddp_batch_t *b, int loader, char *err, size_t errlen)
{
    if (b->n && !b->pos) {
        err_set(err, errlen, "train batch %" PRIu64 " of step %" PRIu64 " from a sharded "
                "loaderd carries no 'pos'", b->seq, b->step);
        return -1;
    }
    for (size_t i = 0; i < self->n; i++)
        if (self->v[i].loader == loader && same_step(&self->v[i].b, b->gen, b->step)) {
            err_set(err, errlen, "a second part of step %" PRIu64 " (generation %" PRIu32
                    ") from loaderd %d", b->step, b->gen, loader);
            return -1;
        }
    if (self->n == self->cap) {
        size_t cap = self->cap ? self->cap * 2 : 16;
        part_t *p = realloc(self->v, cap * sizeof *p);
        if (!p) {
            err_set(err, errlen, "out of memory keeping a train part");
            return -1;
        }
        self->v = p;
        self->cap = cap;
    }
    self->v[self->n++] = (part_t){.b = *b, .loader = loader};
    memset(b, 0, sizeof *b);
    return 0;
}

void parts_prune(parts_t *self, uint32_t gen, uint64_t step)
{
    for (size_t i = 0; i < self->n;) {
        const ddp_batch_t *b = &self->v[i].b;
        if (b->gen < gen || (b->gen == gen && b->step < step)) {
            free_part(&self->v[i]);
            self->v[i] = self->v[--self->n];
        } else {
            i++;
        }
    }
}

size_t parts_count(const parts_t *self) { return self->n; }

/* One merged sample: its index in r's list, and where it is now. */
typedef struct {
    uint32_t pos;
    int part;
    uint32_t i;
} slot_t;

static int by_pos(const void *a, const void *b)
{
    uint32_t x = ((const slot_t *)a)->pos, y = ((const slot_t *)b)->pos;
    return x < y ? -1 : x > y;
}

/* The taken parts' samples into merged, in pos order. */
static int merge(part_t *taken, int n, ddp_batch_t *m, char *err, size_t errlen)
{
    uint64_t total = 0, global = 0;
    for (int p = 0; p < n; p++) {
        const ddp_batch_t *b = &taken[p].b;
        if (b->c != taken[0].b.c || b->h != taken[0].b.h || b->w != taken[0].b.w ||
            b->epoch != taken[0].b.epoch || b->steps_per_epoch != taken[0].b.steps_per_epoch) {
            err_set(err, errlen, "the loaderds' parts of step %" PRIu64 " differ in image size, "
                    "epoch or plan (%ux%ux%u vs %ux%ux%u): start every loaderd with the same options",
                    b->step, b->c, b->h, b->w, taken[0].b.c, taken[0].b.h, taken[0].b.w);
            return -1;
        }
        total += b->n;
        global += b->global_count;
    }
    if (total > DDP_MAX_BATCH || global > UINT32_MAX) {
        err_set(err, errlen, "step %" PRIu64 ": %" PRIu64 " samples in the parts, too many",
                taken[0].b.step, total);
        return -1;
    }
    const ddp_batch_t *f = &taken[0].b;
    *m = (ddp_batch_t){.seq = f->seq, .epoch = f->epoch, .phase = f->phase, .n = (uint32_t)total,
                       .c = f->c, .h = f->h, .w = f->w, .step = f->step,
                       .global_count = (uint32_t)global, .gen = f->gen,
                       .steps_per_epoch = f->steps_per_epoch};
    size_t sb = (size_t)f->c * f->h * f->w, cnt = total ? total : 1;
    slot_t *s = calloc(cnt, sizeof *s);
    m->ids = calloc(cnt, sizeof *m->ids);
    m->labels = calloc(cnt, sizeof *m->labels);
    m->pos = calloc(cnt, sizeof *m->pos);   /* bitwise training's chunks (chunk_sizes.h) */
    m->pixels = zframe_new(NULL, sb * total);
    for (int p = 0; p < n; p++)
        taken[p].at = calloc(taken[p].b.n ? taken[p].b.n : 1, sizeof *taken[p].at);
    bool ok = s && m->ids && m->labels && m->pos && m->pixels;
    for (int p = 0; p < n; p++)
        ok = ok && taken[p].at;
    if (!ok) {
        free(s);
        err_set(err, errlen, "out of memory merging step %" PRIu64 " (%" PRIu64 " samples)",
                f->step, total);
        return -1;
    }
    size_t k = 0;
    for (int p = 0; p < n; p++)
        for (uint32_t i = 0; i < taken[p].b.n; i++)
            s[k++] = (slot_t){.pos = taken[p].b.pos[i], .part = p, .i = i};
    qsort(s, total, sizeof *s, by_pos);
    uint8_t *px = zframe_data(m->pixels);
    for (size_t j = 0; j < total; j++) {
        if (j && s[j].pos == s[j - 1].pos) {
            err_set(err, errlen, "step %" PRIu64 ": two loaderds sent position %" PRIu32
                    " (same --shard twice?)", f->step, s[j].pos);
            free(s);
            return -1;
        }
        part_t *p = &taken[s[j].part];
        m->ids[j] = p->b.ids[s[j].i];
        m->labels[j] = p->b.labels[s[j].i];
        m->pos[j] = s[j].pos;
        memcpy(px + j * sb, (const uint8_t *)zframe_data(p->b.pixels) + s[j].i * sb, sb);
        p->at[s[j].i] = (uint32_t)j;
    }
    free(s);
    return 0;
}

int parts_take(parts_t *self, uint32_t gen, uint64_t step, ddp_batch_t *merged, part_t **taken,
               int *n, char *err, size_t errlen)
{
    int have = 0;
    for (size_t i = 0; i < self->n; i++)
        have += same_step(&self->v[i].b, gen, step);
    if (have < self->n_loaders)
        return 0;
    part_t *t = calloc((size_t)have, sizeof *t);
    if (!t) {
        err_set(err, errlen, "out of memory taking the parts of step %" PRIu64, step);
        return -1;
    }
    int k = 0;
    for (size_t i = 0; i < self->n;) {
        if (same_step(&self->v[i].b, gen, step)) {
            t[k++] = self->v[i];
            self->v[i] = self->v[--self->n];
        } else {
            i++;
        }
    }
    memset(merged, 0, sizeof *merged);
    if (merge(t, k, merged, err, errlen) < 0) {
        parts_free_taken(merged, t, k);
        return -1;
    }
    *taken = t;
    *n = k;
    return 1;
}

void parts_free_taken(ddp_batch_t *merged, part_t *taken, int n)
{
    if (merged) {
        ddp_msg_t m = {.type = DDP_BATCH, .u.batch = *merged};
        ddp_msg_clear(&m);
        memset(merged, 0, sizeof *merged);
    }
    for (int i = 0; taken && i < n; i++)
        free_part(&taken[i]);
    free(taken);
}
