#include "reducerd/peers.h"

#include "common/clock.h"
#include "common/log.h"

#include <stdlib.h>
#include <string.h>

/* Open-addressed index from ROUTER identity to item: every RESULT looks
 * its sender up, and a linear scan cost ~10% of reducerd's CPU at 512
 * ranks (bench/reducerd_load). Twice PEERS_MAX slots keep probes short. */
#define PEERS_SLOTS (2 * PEERS_MAX)

struct peers {
    peer_t items[PEERS_MAX];
    int16_t slots[PEERS_SLOTS]; /* item index, -1 empty */
    int n;
    int world;
    int next_rank;
    int max_rank;
};

peers_t *peers_new(int world)
{
    peers_t *self = calloc(1, sizeof *self);
    if (!self)
        return NULL;
    self->world = world;
    memset(self->slots, 0xff, sizeof self->slots);
    return self;
}

void peers_destroy(peers_t **self)
{
    if (!self || !*self)
        return;
    for (int i = 0; i < (*self)->n; i++)
        zframe_destroy(&(*self)->items[i].identity);
    free(*self);
    *self = NULL;
}

/* FNV-1a of the identity bytes. */
static uint32_t identity_hash(zframe_t *identity)
{
    const uint8_t *d = zframe_data(identity);
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < zframe_size(identity); i++)
        h = (h ^ d[i]) * 1099511628211ull;
    return (uint32_t)(h ^ (h >> 32));
}

/* Re-made after every JOIN (identities change only there), in item order:
 * with linear probing the first item of an identity is met first, so a
 * lookup answers what a scan in item order would. */
static void index_rebuild(peers_t *self)
{
    memset(self->slots, 0xff, sizeof self->slots);
    for (int i = 0; i < self->n; i++) {
        uint32_t h = identity_hash(self->items[i].identity) & (PEERS_SLOTS - 1);
        while (self->slots[h] >= 0)
            h = (h + 1) & (PEERS_SLOTS - 1);
        self->slots[h] = (int16_t)i;
    }
}

peer_t *peers_by_identity(peers_t *self, zframe_t *identity)
{
    if (!identity)
        return NULL;
    uint32_t h = identity_hash(identity) & (PEERS_SLOTS - 1);
    for (; self->slots[h] >= 0; h = (h + 1) & (PEERS_SLOTS - 1))
        if (zframe_eq(self->items[self->slots[h]].identity, identity))
            return &self->items[self->slots[h]];
    return NULL;
}

peer_t *peers_by_name(peers_t *self, const char *name)
{
    for (int i = 0; i < self->n; i++)
        if (strcmp(self->items[i].name, name) == 0)
            return &self->items[i];
    return NULL;
}

peer_t *peers_by_rank(peers_t *self, int32_t rank)
{
    for (int i = 0; i < self->n; i++)
        if (self->items[i].role == DDP_ROLE_GPUD && self->items[i].rank == rank &&
            !self->items[i].removed)
            return &self->items[i];
    return NULL;
}

int peers_index_of(const peers_t *self, const peer_t *p)
{
    return (int)(p - self->items);
}

static int32_t pick_rank(peers_t *self, int32_t want)
{
    if (want >= 0) {
        peer_t *holder = peers_by_rank(self, want);
        if (!holder || holder->dead)
            return want;
        log_warn("rank %d is held by live worker %s; assigning another", want, holder->name);
    }
    /* lowest rank nobody holds, or whose holder died (a restarted worker takes its place) */
    for (int32_t r = 0;; r++) {
        peer_t *holder = peers_by_rank(self, r);
        if (!holder || holder->dead)
            return r;
    }
}

peer_t *peers_join(peers_t *self, zframe_t *identity, const ddp_join_t *join)
{
    peer_t *p = peers_by_name(self, join->name);
    if (p && !zframe_eq(p->identity, identity)) {
        /* same name, new socket: a restarted process */
        zframe_destroy(&p->identity);
        p->identity = zframe_dup(identity);
    }
    if (!p) {
        if (self->n >= PEERS_MAX) {
            log_error("more than %d peers joined; ignoring %s", PEERS_MAX, join->name);
            return NULL;
        }
        p = &self->items[self->n++];
        memset(p, 0, sizeof *p);
        p->identity = zframe_dup(identity);
        p->rank = -1;
        p->prev_rank = -1;
    }
    p->role = join->role;
    snprintf(p->name, sizeof p->name, "%s", join->name);
    snprintf(p->host, sizeof p->host, "%s", join->host);
    snprintf(p->ring, sizeof p->ring, "%s", join->ring);
    p->nccl = join->role == DDP_ROLE_GPUD && join->nccl;
    if (join->role == DDP_ROLE_GPUD) {
        if (p->rank < 0 || p->dead)
            p->rank = pick_rank(self, p->rank >= 0 ? p->rank : join->want_rank);
        if (p->rank > self->max_rank)
            self->max_rank = p->rank;
    }
    p->dead = false;
    p->last_seen_ms = clock_mono_ms();
    index_rebuild(self);
    return p;
}

int peers_count(const peers_t *self) { return self->n; }
peer_t *peers_at(peers_t *self, int i) { return (i >= 0 && i < self->n) ? &self->items[i] : NULL; }

int peers_alive(const peers_t *self, uint8_t role)
{
    int n = 0;
    for (int i = 0; i < self->n; i++)
        if (self->items[i].role == role && !self->items[i].dead)
            n++;
    return n;
}

int peers_gpud_ranks(const peers_t *self)
{
    int ranks = 0;
    for (int r = 0; r <= self->max_rank; r++)
        for (int i = 0; i < self->n; i++)
            if (self->items[i].role == DDP_ROLE_GPUD && self->items[i].rank == r) {
                ranks++;
                break;
            }
    return ranks;
}
