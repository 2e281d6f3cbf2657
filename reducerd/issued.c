#include "reducerd/issued.h"
#include "common/errbuf.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint64_t seq;
    uint32_t epoch;
    uint8_t phase;
    int32_t rank;
    uint32_t n;
    uint64_t *ids;
    int32_t *labels;
} entry_t;

struct issued {
    entry_t *e;
    size_t n, cap;
    ddp_result_t *held;
    size_t n_held, cap_held;
    /* per loaderd (the shard in a seq's high bits): the highest seq it
     * issued; each sends ISSUED in its own seq order */
    uint64_t max_seq[DDP_MAX_LOADERS];
    bool any[DDP_MAX_LOADERS];
};

/* A RESULT's seq above what its loaderd has issued so far: wait for ISSUED. */
static bool s_not_yet(const issued_t *self, uint64_t seq)
{
    uint32_t shard = DDP_SEQ_SHARD(seq);
    return shard < DDP_MAX_LOADERS && (!self->any[shard] || seq > self->max_seq[shard]);
}

issued_t *issued_new(void) { return calloc(1, sizeof(issued_t)); }

static void s_free_entry(entry_t *e)
{
    free(e->ids);
    free(e->labels);
}

static void s_free_result(ddp_result_t *r)
{
    ddp_msg_t m = {.type = DDP_RESULT};
    m.u.result = *r;
    ddp_msg_clear(&m);
    memset(r, 0, sizeof *r);
}

void issued_destroy(issued_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    issued_t *self = *self_p;
    issued_reset(self);
    free(self->e);
    free(self->held);
    free(self);
    *self_p = NULL;
}

static entry_t *s_find(issued_t *self, uint64_t seq)
{
    for (size_t i = 0; i < self->n; i++)
        if (self->e[i].seq == seq)
            return &self->e[i];
    return NULL;
}

static void s_remove(issued_t *self, entry_t *e, bool free_labels)
{
    free(e->ids);
    if (free_labels)
        free(e->labels);
    *e = self->e[--self->n];
}

int issued_check_shard(const ddp_issued_t *m, uint32_t shard, uint32_t shards, char *err,
                       size_t errlen)
{
    if (DDP_SEQ_SHARD(m->seq) != shard) {
        err_set(err, errlen, "seq %" PRIu64 " names shard %" PRIu32 ", not the sender's %" PRIu32,
                m->seq, DDP_SEQ_SHARD(m->seq), shard);
        return -1;
    }
    for (uint32_t i = 0; shards > 1 && i < m->n; i++)
        if (m->ids[i] % shards != shard) {
            err_set(err, errlen, "seq %" PRIu64 ": id %" PRIu64 " is not in shard %" PRIu32
                    "/%" PRIu32, m->seq, m->ids[i], shard, shards);
            return -1;
        }
    return 0;
}

int issued_add(issued_t *self, ddp_issued_t *m, char *err, size_t errlen)
{
    if (s_find(self, m->seq)) {
        err_set(err, errlen, "ISSUED seq %" PRIu64 " twice", m->seq);
        return -1;
    }
    if (self->n >= ISSUED_MAX_ENTRIES) {
        err_set(err, errlen, "more than %d batches issued and unanswered", ISSUED_MAX_ENTRIES);
        return -1;
    }
    if (self->n == self->cap) {
        size_t cap = self->cap ? self->cap * 2 : 64;
        entry_t *p = realloc(self->e, cap * sizeof *p);
        if (!p) {
            err_set(err, errlen, "out of memory recording an issued batch");
            return -1;
        }
        self->e = p;
        self->cap = cap;
    }
    self->e[self->n++] = (entry_t){.seq = m->seq, .epoch = m->epoch, .phase = m->phase,
                                   .rank = m->rank, .n = m->n, .ids = m->ids, .labels = m->labels};
    m->ids = NULL;
    m->labels = NULL;
    uint32_t shard = DDP_SEQ_SHARD(m->seq); /* < DDP_MAX_LOADERS: issued_check_shard */
    if (shard < DDP_MAX_LOADERS) {
        if (!self->any[shard] || m->seq > self->max_seq[shard])
            self->max_seq[shard] = m->seq;
        self->any[shard] = true;
    }
    return 0;
}

issued_verdict_t issued_judge(issued_t *self, const ddp_result_t *res, int32_t **labels,
                              char *err, size_t errlen)
{
    *labels = NULL;
    entry_t *e = s_find(self, res->seq);
    if (!e) {
        if (s_not_yet(self, res->seq))
            return ISSUED_LATER;
        err_set(err, errlen, "seq %" PRIu64 " is not an unanswered batch (a replay, or never "
                 "issued)", res->seq);
        return ISSUED_FOREIGN;
    }
    if (e->rank != res->rank) {
        err_set(err, errlen, "seq %" PRIu64 " was issued to rank %" PRId32 ", not %" PRId32,
                 res->seq, e->rank, res->rank);
        return ISSUED_FOREIGN;
    }
    if (e->epoch != res->epoch || e->phase != res->phase || e->n != res->n ||
        memcmp(e->ids, res->ids, (size_t)res->n * 8) != 0) {
        err_set(err, errlen, "seq %" PRIu64 " answered with other samples than issued (epoch %"
                 PRIu32 " phase %u, %" PRIu32 " ids; issued epoch %" PRIu32 " phase %u, %" PRIu32
                 " ids)", res->seq, res->epoch, res->phase, res->n, e->epoch, e->phase, e->n);
        s_remove(self, e, true);
        return ISSUED_WRONG;
    }
    *labels = e->labels;
    s_remove(self, e, false);
    return ISSUED_MATCH;
}

int issued_hold(issued_t *self, ddp_result_t *res)
{
    size_t mine = 0;
    for (size_t i = 0; i < self->n_held; i++)
        mine += self->held[i].rank == res->rank;
    if (mine >= ISSUED_MAX_HELD_PER_RANK)
        return -1;
    if (self->n_held == self->cap_held) {
        size_t cap = self->cap_held ? self->cap_held * 2 : 16;
        ddp_result_t *p = realloc(self->held, cap * sizeof *p);
        if (!p)
            return -1;
        self->held = p;
        self->cap_held = cap;
    }
    self->held[self->n_held++] = *res;
    memset(res, 0, sizeof *res);
    return 0;
}

bool issued_pop_decidable(issued_t *self, ddp_result_t *out)
{
    for (size_t i = 0; i < self->n_held; i++) {
        if (!s_not_yet(self, self->held[i].seq)) {
            *out = self->held[i];
            memmove(&self->held[i], &self->held[i + 1], (self->n_held - i - 1) * sizeof *out);
            self->n_held--;
            return true;
        }
    }
    return false;
}

uint64_t issued_end(issued_t *self, uint32_t epoch, uint8_t phase)
{
    for (size_t i = 0; i < self->n;) {
        if (self->e[i].epoch == epoch && self->e[i].phase == phase)
            s_remove(self, &self->e[i], true);
        else
            i++;
    }
    uint64_t dropped = 0;
    for (size_t i = 0; i < self->n_held;) {
        if (self->held[i].epoch == epoch && self->held[i].phase == phase) {
            s_free_result(&self->held[i]);
            self->held[i] = self->held[--self->n_held];
            dropped++;
        } else {
            i++;
        }
    }
    return dropped;
}

uint64_t issued_reset(issued_t *self)
{
    for (size_t i = 0; i < self->n; i++)
        s_free_entry(&self->e[i]);
    self->n = 0;
    uint64_t dropped = self->n_held;
    for (size_t i = 0; i < self->n_held; i++)
        s_free_result(&self->held[i]);
    self->n_held = 0;
    memset(self->any, 0, sizeof self->any);
    memset(self->max_seq, 0, sizeof self->max_seq);
    return dropped;
}

/* The new rank of old, or -1 (removed, or a rank the map does not know). */
static int32_t s_mapped(const int32_t *map, int32_t old_world, int32_t old)
{
    return old >= 0 && old < old_world ? map[old] : -1;
}

uint64_t issued_renumber(issued_t *self, const int32_t *map, int32_t old_world)
{
    for (size_t i = 0; i < self->n;) {
        int32_t r = s_mapped(map, old_world, self->e[i].rank);
        if (r < 0) {
            s_remove(self, &self->e[i], true);
        } else {
            self->e[i++].rank = r;
        }
    }
    uint64_t dropped = 0;
    for (size_t i = 0; i < self->n_held;) {
        int32_t r = s_mapped(map, old_world, self->held[i].rank);
        if (r < 0) {
            s_free_result(&self->held[i]);
            memmove(&self->held[i], &self->held[i + 1], (self->n_held - i - 1) * sizeof *self->held);
            self->n_held--;
            dropped++;
        } else {
            self->held[i++].rank = r;
        }
    }
    return dropped;
}

size_t issued_count(const issued_t *self) { return self->n; }
