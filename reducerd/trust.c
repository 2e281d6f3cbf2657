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
    ratelog_reject(self, peer, kind, msg);
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

static bool loader_alive(const reducer_t *self)
{
    return self->loader_identity &&
           clock_mono_ms() - self->loader_last_seen_ms <= self->options.worker_timeout_s * 1000;
}

/* The loader role belongs to the identity that joined as loader; a second
 * one is refused while the first is heard from (PLAN, ISSUED, FAILED,
 * HEARTBEAT), so a stranger cannot take the plan over. A loader silent for
 * --worker-timeout may be replaced (a restarted loaderd). */
bool trust_loader_join(reducer_t *self, zframe_t *route, const ddp_join_t *join)
{
    if (self->loader_identity && zframe_eq(self->loader_identity, route)) {
        self->loader_last_seen_ms = clock_mono_ms();
        return true;
    }
    if (loader_alive(self)) {
        trust_reject(self, join->name, "JOIN",
                     "a second loader while %s is alive: only one loaderd per job",
                     self->loader_name);
        return false;
    }
    if (self->loader_identity) {
        uint64_t dropped = issued_reset(self->issued);
        self->stats.rejected += dropped;
        log_warn("loader %s replaces %s (silent for more than %lds)", join->name,
                 self->loader_name, self->options.worker_timeout_s);
    }
    zframe_destroy(&self->loader_identity);
    self->loader_identity = zframe_dup(route);
    snprintf(self->loader_name, sizeof self->loader_name, "%s", join->name);
    self->loader_last_seen_ms = clock_mono_ms();
    return true;
}

bool trust_from_loader(reducer_t *self, zframe_t *route, const ddp_auth_t *auth, bool need_token,
                       const char *kind)
{
    char who[64];
    if (!self->loader_identity || !zframe_eq(self->loader_identity, route)) {
        trust_peer_label(self, route, who, sizeof who);
        trust_reject(self, who, kind, "only the loader that joined (%s) may send %s",
                     self->loader_identity ? self->loader_name : "none yet", kind);
        return false;
    }
    if ((need_token || auth->session) &&
        !trust_auth_ok(self, auth, DDP_ROLE_LOADER, -1, self->loader_name)) {
        trust_reject(self, self->loader_name, kind, "missing or wrong session token");
        return false;
    }
    self->loader_last_seen_ms = clock_mono_ms();
    return true;
}
