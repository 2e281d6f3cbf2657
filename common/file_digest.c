#include "common/file_digest.h"

#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int file_digest_hex(const char *path, char *out, size_t cap, char *err, size_t errlen)
{
    enum { CHUNK = 1 << 20, LEN = 32 };
    if (cap < FILE_DIGEST_HEX) {
        snprintf(err, errlen, "digest buffer too small");
        return -1;
    }
    if (sodium_init() < 0) {
        snprintf(err, errlen, "libsodium failed to initialise");
        return -1;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    unsigned char *buf = malloc(CHUNK);
    if (!buf) {
        fclose(f);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    crypto_generichash_state st;
    crypto_generichash_init(&st, NULL, 0, LEN);
    size_t n;
    while ((n = fread(buf, 1, CHUNK, f)) > 0)
        crypto_generichash_update(&st, buf, n);
    int rc = ferror(f) ? -1 : 0;
    if (rc < 0)
        snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
    fclose(f);
    free(buf);
    unsigned char h[LEN];
    crypto_generichash_final(&st, h, LEN);
    for (int i = 0; i < LEN; i++)
        snprintf(out + 2 * i, 3, "%02x", h[i]);
    return rc;
}
