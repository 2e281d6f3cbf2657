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
/* A JOIN as loader: false (rejected) while another loader identity is alive. */
bool trust_loader_join(reducer_t *self, zframe_t *route, const ddp_join_t *join);
/* A message only the loader sends: from the identity that joined as the
 * loader (and, once it has one, with its token); else rejected. */
bool trust_from_loader(reducer_t *self, zframe_t *route, const ddp_auth_t *auth, bool need_token,
                       const char *kind);

#endif
