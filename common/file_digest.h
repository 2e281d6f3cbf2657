/* file_digest — a file's content digest: BLAKE2b-256 (libsodium
 * crypto_generichash, unkeyed), as 64 hex digits. gpud sends the digest of
 * its --weights in an eval JOIN so reducerd can tell that every worker of
 * the job runs the same model (docs/SECURITY.md "Job identity"). */
#ifndef DDP_COMMON_FILE_DIGEST_H
#define DDP_COMMON_FILE_DIGEST_H

#include <stddef.h>

#define FILE_DIGEST_HEX 65   /* 64 hex digits and the NUL */

/* 0 with the digest of path's bytes in out (cap >= FILE_DIGEST_HEX), or -1
 * with what failed in err. */
int file_digest_hex(const char *path, char *out, size_t cap, char *err, size_t errlen);

#endif
