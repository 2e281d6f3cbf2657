#include "reducerd/trust.h"

#include "common/clock.h"
#include "common/log.h"
#include "proto/ratelog.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void trust_reject(reducer_t *self, const char *peer, const char *kind, const char *fmt, ...)
{
    self->stats.rejected++;
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ratelog_reject(&self->stats.log, self, peer, kind, msg);
}

bool trust_auth_ok(const reducer_t *self, const ddp_auth_t *auth, uint8_t role, int32_t rank,
                   const char *name)
{
    return auth->session == self->session && strcmp(auth->job, self->options.job) == 0 &&
           token_valid(self->secret, self->session, role, rank, name, auth->token);
}

void trust_welcome_auth(reducer_t *self, ddp_welcome_t *welcome, uint8_t role, int32_t rank,
                        const char *name)
{
    welcome->session = self->session;
    token_compute(self->secret, self->session, role, rank, name, welcome->token);
}

void trust_peer_label(reducer_t *self, zframe_t *route, char *buf, size_t cap)
{
    peer_t *p = route ? peers_by_identity(self->peers, route) : NULL;
    if (p) {
        snprintf(buf, cap, "%s", p->name);
        return;
    }
    size_t n = route ? zframe_size(route) : 0, off = 0;
    const uint8_t *d = route ? zframe_data(route) : NULL;
    off += (size_t)snprintf(buf, cap, "unjoined ");
    for (size_t i = 0; i < n && i < 16 && off + 3 < cap; i++)
        off += (size_t)snprintf(buf + off, cap - off, "%02x", d[i]);
}

static bool loader_alive(const reducer_t *self, const loader_role_t *l)
{
    return l->identity &&
           clock_mono_ms() - l->last_seen_ms <= self->options.worker_timeout_s * 1000;
}

loader_role_t *trust_loader_at(reducer_t *self, zframe_t *route)
{
    for (int i = 0; i < DDP_MAX_LOADERS; i++)
        if (self->loaders[i].identity && zframe_eq(self->loaders[i].identity, route))
            return &self->loaders[i];
    return NULL;
}

loader_role_t *trust_loader_named(reducer_t *self, const char *name)
{
    for (int i = 0; i < DDP_MAX_LOADERS; i++)
        if (self->loaders[i].identity && strcmp(self->loaders[i].name, name) == 0)
            return &self->loaders[i];
    return NULL;
}

/* Why a loader JOIN for shard/shards cannot be taken, in stop ("" : it can
 * as far as the shard count goes). */
static void shard_refusal(const reducer_t *self, const ddp_join_t *join, uint32_t shards,
                          char *stop, size_t cap)
{
    if (self->loader_shards && shards != self->loader_shards)
        snprintf(stop, cap, "loaderd %s has shard %u/%u, but the job's loaderds split the "
                 "dataset in %u shards (%s first): every loaderd needs the same N in --shard I/N",
                 join->name, join->shard, shards, self->loader_shards,
                 self->loaders[0].identity ? self->loaders[0].name : "another");
}

/* The loader role of a shard belongs to the identity that joined for it; a
 * second one is refused while the first is heard from (PLAN, ISSUED,
 * FAILED, HEARTBEAT), so a stranger cannot take the plan over. A lone
 * loader silent for --worker-timeout may be replaced (a restarted loaderd);
 * a shard of several is not (the watchdog ends that job). */
bool trust_loader_join(reducer_t *self, zframe_t *route, const ddp_join_t *join, char *stop,
                       size_t cap)
{
    stop[0] = '\0';
    uint32_t shards = join->shards ? join->shards : 1;
    loader_role_t *mine = trust_loader_at(self, route);
    if (mine) { /* a JOIN re-sent; the shard it holds stays its */
        mine->last_seen_ms = clock_mono_ms();
        return true;
    }
    shard_refusal(self, join, shards, stop, cap);
    if (stop[0]) {
        trust_reject(self, join->name, "JOIN", "%s", stop);
        return false;
    }
    loader_role_t *l = &self->loaders[join->shard];
    if (shards == 1 && loader_alive(self, l)) {
        trust_reject(self, join->name, "JOIN",
                     "a second loader while %s is alive: only one loaderd per job", l->name);
        return false;
    }
    if (shards > 1 && l->identity) {
        snprintf(stop, cap, "two loaderds claim shard %u/%u: %s holds it%s, %s is refused",
                 join->shard, shards, l->name, loader_alive(self, l) ? "" : " (silent)",
                 join->name);
        trust_reject(self, join->name, "JOIN", "%s", stop);
        return false;
    }
    if (l->identity) {
        uint64_t dropped = issued_reset(self->issued);
        self->stats.rejected += dropped;
        log_warn("loader %s replaces %s (silent for more than %lds)", join->name, l->name,
                 self->options.worker_timeout_s);
    }
    zframe_destroy(&l->identity);
    l->identity = zframe_dup(route);
    snprintf(l->name, sizeof l->name, "%s", join->name);
    l->last_seen_ms = clock_mono_ms();
    self->loader_shards = shards;
    if (shards > 1)
        log_info("loaderd %s holds shard %u/%u", join->name, join->shard, shards);
    return true;
}

int trust_from_loader(reducer_t *self, zframe_t *route, const ddp_auth_t *auth, bool need_token,
                      const char *kind)
{
    char who[64];
    loader_role_t *l = trust_loader_at(self, route);
    if (!l) {
        trust_peer_label(self, route, who, sizeof who);
        trust_reject(self, who, kind, "only the loader that joined (%s) may send %s",
                     self->loaders[0].identity ? self->loaders[0].name
                     : self->loader_shards ? "one per shard" : "none yet", kind);
        return -1;
    }
    if ((need_token || auth->session) &&
        !trust_auth_ok(self, auth, DDP_ROLE_LOADER, -1, l->name)) {
        trust_reject(self, l->name, kind, "missing or wrong session token");
        return -1;
    }
    l->last_seen_ms = clock_mono_ms();
    return (int)(l - self->loaders);
}
