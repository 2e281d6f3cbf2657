/* trust — who may say what to reducerd (PROTOCOL.md "Trust"): session
 * tokens, the identity bound to the loader role, printable peer names, and
 * the count and rate-limited log of what is rejected. */
#ifndef DDP_REDUCERD_TRUST_H
#define DDP_REDUCERD_TRUST_H

#include "reducerd/reducer.h"

/* Counts a rejected message and logs why, at most once per (peer, kind)
 * per RATELOG_WINDOW_S. */
void trust_reject(reducer_t *self, const char *peer, const char *kind, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Job, session and token of a message claiming (role, rank, name). */
bool trust_auth_ok(const reducer_t *self, const ddp_auth_t *auth, uint8_t role, int32_t rank,
                   const char *name);
/* WELCOME fields of a trusted joiner: session and its token. */
void trust_welcome_auth(reducer_t *self, ddp_welcome_t *welcome, uint8_t role, int32_t rank,
                        const char *name);
/* A printable name for a ROUTER identity: the joined peer's name, or hex. */
void trust_peer_label(reducer_t *self, zframe_t *route, char *buf, size_t cap);
/* A JOIN as loader (docs/SCALE.md "Several loaderds": one per shard):
 * false (rejected) while another identity holds its shard and is alive,
 * or when its shard count is not the job's; then STOP (cap bytes) says
 * why if the joiner must be told to go (empty: only rejected). */
bool trust_loader_join(reducer_t *self, zframe_t *route, const ddp_join_t *join, char *stop,
                       size_t cap);
/* A message only a loader sends: from an identity that joined as a
 * loader (and, once it has one, with its token): its shard, else -1
 * (rejected). */
int trust_from_loader(reducer_t *self, zframe_t *route, const ddp_auth_t *auth, bool need_token,
                      const char *kind);
/* The joined loader of a ROUTER identity, or of a JOIN name; NULL: none. */
loader_role_t *trust_loader_at(reducer_t *self, zframe_t *route);
loader_role_t *trust_loader_named(reducer_t *self, const char *name);

#endif
