/* token — session tokens of proto/PROTOCOL.md "Trust".
 *
 * reducerd draws a job secret and a session nonce at start; the token of a
 * peer is keyed BLAKE2b-128 (libsodium crypto_generichash, the secret as
 * key) over (session, role, rank, name). Holding the secret, anyone can
 * check a token without state: reducerd for its joiners, loaderd (which
 * gets the secret in its plan ack) for the gpud CREDITs it serves.
 */
#ifndef DDP_COMMON_TOKEN_H
#define DDP_COMMON_TOKEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TOKEN_LEN 16
#define TOKEN_SECRET_LEN 32

/* Fills buf with n bytes from the kernel's CSPRNG (getrandom). 0 or -1. */
int token_random(void *buf, size_t n);
/* A random non-zero session nonce into *session. 0 or -1. */
int token_new_session(uint64_t *session);

/* The token of (session, role, rank, name) under secret. */
void token_compute(const uint8_t secret[TOKEN_SECRET_LEN], uint64_t session, uint8_t role,
                   int32_t rank, const char *name, uint8_t out[TOKEN_LEN]);
/* True when token is the one of (session, role, rank, name); constant time
 * in the token bytes. */
bool token_valid(const uint8_t secret[TOKEN_SECRET_LEN], uint64_t session, uint8_t role,
                 int32_t rank, const char *name, const uint8_t token[TOKEN_LEN]);
#endif
