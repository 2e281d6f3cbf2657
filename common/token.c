#include "common/token.h"

#include <sodium.h>
#include <string.h>

static int s_init(void)
{
    /* idempotent and thread-safe; -1 only when no entropy source exists */
    return sodium_init() < 0 ? -1 : 0;
}

int token_random(void *buf, size_t n)
{
    if (s_init() < 0)
        return -1;
    randombytes_buf(buf, n);
    return 0;
}

int token_new_session(uint64_t *session)
{
    do {
        if (token_random(session, sizeof *session) < 0)
            return -1;
    } while (*session == 0); /* 0 means "no session" on the wire */
    return 0;
}

void token_compute(const uint8_t secret[TOKEN_SECRET_LEN], uint64_t session, uint8_t role,
                   int32_t rank, const char *name, uint8_t out[TOKEN_LEN])
{
    /* fixed-width little-endian fields, then the name with its NUL: no
     * two (role, rank, name) tuples hash the same bytes */
    uint8_t head[8 + 1 + 4];
    for (int i = 0; i < 8; i++)
        head[i] = (uint8_t)(session >> (8 * i));
    head[8] = role;
    for (int i = 0; i < 4; i++)
        head[9 + i] = (uint8_t)((uint32_t)rank >> (8 * i));
    crypto_generichash_state st;
    (void)s_init();
    crypto_generichash_init(&st, secret, TOKEN_SECRET_LEN, TOKEN_LEN);
    crypto_generichash_update(&st, head, sizeof head);
    crypto_generichash_update(&st, (const uint8_t *)name, strlen(name) + 1);
    crypto_generichash_final(&st, out, TOKEN_LEN);
}

bool token_valid(const uint8_t secret[TOKEN_SECRET_LEN], uint64_t session, uint8_t role,
                 int32_t rank, const char *name, const uint8_t token[TOKEN_LEN])
{
    uint8_t want[TOKEN_LEN];
    token_compute(secret, session, role, rank, name, want);
    return sodium_memcmp(want, token, TOKEN_LEN) == 0;
}
