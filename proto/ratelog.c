#include "proto/ratelog.h"

#include "common/clock.h"
#include "common/log.h"

#include <string.h>

/* FNV-1a over the scope pointer, the peer and the kind. */
static uint64_t s_hash(const void *scope, const char *peer, const char *kind)
{
    uint64_t h = 1469598103934665603ull;
    uintptr_t p = (uintptr_t)scope;
    for (size_t i = 0; i < sizeof p; i++)
        h = (h ^ ((p >> (8 * i)) & 0xff)) * 1099511628211ull;
    for (const char *s = peer ? peer : ""; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull;
    for (const char *s = kind ? kind : ""; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h | 1; /* 0 marks a free slot */
}

bool ratelog_allow(ratelog_t *self, const void *scope, const char *peer, const char *kind,
                   uint64_t *held)
{
    int64_t now = clock_mono_ms();
    uint64_t key = s_hash(scope, peer, kind);
    ratelog_entry_t *e = &self->table[key % RATELOG_SLOTS];
    bool fresh = e->key != key || now - e->last_ms >= RATELOG_WINDOW_S * 1000;
    if (now - self->second_ms >= 1000) {
        self->second_ms = now;
        self->in_second = 0;
    }
    if (!fresh || self->in_second >= RATELOG_BURST) {
        self->held_total++;
        return false;
    }
    /* a collision evicts the older key: it may log once more, never floods */
    e->key = key;
    e->last_ms = now;
    self->in_second++;
    if (held)
        *held = self->held_total;
    self->held_total = 0;
    return true;
}

void ratelog_reject(ratelog_t *self, const void *scope, const char *peer, const char *kind,
                    const char *why)
{
    uint64_t held = 0;
    if (!ratelog_allow(self, scope, peer, kind, &held))
        return;
    if (held)
        log_warn("rejected %s from %s: %s (%llu other reject lines held back before this one)",
                 kind, peer, why, (unsigned long long)held);
    else
        log_warn("rejected %s from %s: %s", kind, peer, why);
}
