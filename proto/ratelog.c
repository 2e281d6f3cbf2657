#include "proto/ratelog.h"

#include "common/clock.h"
#include "common/log.h"

#include <string.h>

#define SLOTS 256

typedef struct {
    uint64_t key;
    int64_t last_ms;
} entry_t;

static _Thread_local entry_t table[SLOTS];
static _Thread_local uint64_t held_total;
static _Thread_local int64_t second_ms;
static _Thread_local int in_second;

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

bool ratelog_allow(const void *scope, const char *peer, const char *kind, uint64_t *held)
{
    int64_t now = clock_mono_ms();
    uint64_t key = s_hash(scope, peer, kind);
    entry_t *e = &table[key % SLOTS];
    bool fresh = e->key != key || now - e->last_ms >= RATELOG_WINDOW_S * 1000;
    if (now - second_ms >= 1000) {
        second_ms = now;
        in_second = 0;
    }
    if (!fresh || in_second >= RATELOG_BURST) {
        held_total++;
        return false;
    }
    /* a collision evicts the older key: it may log once more, never floods */
    e->key = key;
    e->last_ms = now;
    in_second++;
    if (held)
        *held = held_total;
    held_total = 0;
    return true;
}

void ratelog_reject(const void *scope, const char *peer, const char *kind, const char *why)
{
    uint64_t held = 0;
    if (!ratelog_allow(scope, peer, kind, &held))
        return;
    if (held)
        log_warn("rejected %s from %s: %s (%llu other reject lines held back before this one)",
                 kind, peer, why, (unsigned long long)held);
    else
        log_warn("rejected %s from %s: %s", kind, peer, why);
}
