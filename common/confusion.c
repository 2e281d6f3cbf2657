#include "common/confusion.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/errbuf.h"
#include "common/mix64.h"

/* A slot: key = truth << 32 | pred, count 0 when empty. */
typedef struct {
    uint64_t key;
    uint64_t count;
} slot_t;

struct confusion {
    slot_t *slot;
    uint64_t cap;      /* power of two */
    uint64_t used;
    ev_cell_t *sorted; /* confusion_cells' output */
    uint64_t sorted_cap;
};

#define CONFUSION_MIN_CAP 64u

confusion_t *confusion_new(void)
{
    confusion_t *self = calloc(1, sizeof *self);
    if (!self)
        return NULL;
    self->cap = CONFUSION_MIN_CAP;
    self->slot = calloc(self->cap, sizeof *self->slot);
    if (!self->slot) {
        free(self);
        return NULL;
    }
    return self;
}

void confusion_destroy(confusion_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    free((*self_p)->slot);
    free((*self_p)->sorted);
    free(*self_p);
    *self_p = NULL;
}

/* neighbouring cells land far apart */
static uint64_t s_hash(uint64_t x)
{
    return mix64(x);
}

static slot_t *s_find(slot_t *slot, uint64_t cap, uint64_t key)
{
    uint64_t i = s_hash(key) & (cap - 1);
    while (slot[i].count && slot[i].key != key)
        i = (i + 1) & (cap - 1);
    return &slot[i];
}

static int s_grow(confusion_t *self)
{
    if (self->cap > UINT64_MAX / 2 / sizeof(slot_t))
        return -1;
    uint64_t cap = self->cap * 2;
    slot_t *slot = calloc(cap, sizeof *slot);
    if (!slot)
        return -1;
    for (uint64_t i = 0; i < self->cap; i++)
        if (self->slot[i].count)
            *s_find(slot, cap, self->slot[i].key) = self->slot[i];
    free(self->slot);
    self->slot = slot;
    self->cap = cap;
    return 0;
}

int confusion_add(confusion_t *self, uint32_t truth, uint32_t pred)
{
    uint64_t key = (uint64_t)truth << 32 | pred;
    slot_t *s = s_find(self->slot, self->cap, key);
    if (s->count) {
        s->count++;
        return 0;
    }
    /* a new cell: keep the table at most half full */
    if ((self->used + 1) * 2 > self->cap) {
        if (s_grow(self) < 0)
            return -1;
        s = s_find(self->slot, self->cap, key);
    }
    s->key = key;
    s->count = 1;
    self->used++;
    return 0;
}

static int s_cmp(const void *a, const void *b)
{
    const ev_cell_t *x = a, *y = b;
    if (x->truth != y->truth)
        return x->truth < y->truth ? -1 : 1;
    return x->pred < y->pred ? -1 : x->pred > y->pred;
}

int confusion_cells(confusion_t *self, const ev_cell_t **cells, uint64_t *n)
{
    *cells = NULL;
    *n = 0;
    if (self->used > self->sorted_cap || !self->sorted) {
        ev_cell_t *buf = realloc(self->sorted, (self->used ? self->used : 1) * sizeof *buf);
        if (!buf)
            return -1;
        self->sorted = buf;
        self->sorted_cap = self->used;
    }
    uint64_t m = 0;
    for (uint64_t i = 0; i < self->cap; i++)
        if (self->slot[i].count)
            self->sorted[m++] = (ev_cell_t){(uint32_t)(self->slot[i].key >> 32),
                                            (uint32_t)self->slot[i].key, self->slot[i].count};
    qsort(self->sorted, m, sizeof *self->sorted, s_cmp);
    *cells = self->sorted;
    *n = m;
    return 0;
}

void confusion_normalize(ev_cell_t *cells, uint64_t *n)
{
    if (*n > 1)
        qsort(cells, *n, sizeof *cells, s_cmp);
    uint64_t out = 0;
    for (uint64_t i = 0; i < *n; i++) {
        if (!cells[i].count)
            continue;
        if (out && cells[out - 1].truth == cells[i].truth && cells[out - 1].pred == cells[i].pred)
            cells[out - 1].count += cells[i].count;
        else
            cells[out++] = cells[i];
    }
    *n = out;
}

int confusion_check(const ev_cell_t *cells, uint64_t n, uint32_t nc, char *err, size_t errlen)
{
    for (uint64_t i = 0; i < n; i++) {
        const ev_cell_t *c = &cells[i];
        if (c->truth >= nc || c->pred >= nc || c->count == 0) {
            err_set(err, errlen, "confusion cell %" PRIu64 " (%" PRIu32 ", %" PRIu32 ") x %" PRIu64
                    ": want both classes < %" PRIu32 " and a count > 0", i, c->truth, c->pred,
                    c->count, nc);
            return -1;
        }
        if (i && s_cmp(&cells[i - 1], c) >= 0) {
            err_set(err, errlen, "confusion cell %" PRIu64 " (%" PRIu32 ", %" PRIu32 ") is not "
                    "after the one before: want cells sorted by (true, pred), each once", i,
                    c->truth, c->pred);
            return -1;
        }
    }
    return 0;
}

uint64_t confusion_at(const ev_cell_t *cells, uint64_t n, uint32_t truth, uint32_t pred)
{
    ev_cell_t key = {truth, pred, 0};
    const ev_cell_t *hit = n ? bsearch(&key, cells, n, sizeof *cells, s_cmp) : NULL;
    return hit ? hit->count : 0;
}

ev_cell_t *confusion_from_dense(const uint64_t *dense, uint32_t nc, uint64_t *n)
{
    uint64_t m = 0;
    for (uint64_t i = 0; i < (uint64_t)nc * nc; i++)
        m += dense[i] != 0;
    ev_cell_t *cells = malloc((m ? m : 1) * sizeof *cells);
    if (!cells)
        return NULL;
    m = 0;
    for (uint32_t t = 0; t < nc; t++)
        for (uint32_t p = 0; p < nc; p++)
            if (dense[(uint64_t)t * nc + p])
                cells[m++] = (ev_cell_t){t, p, dense[(uint64_t)t * nc + p]};
    *n = m;
    return cells;
}
