#include "common/idx.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

/* Largest payload we accept: far above MNIST's 47 MB, low enough that a
 * corrupt header cannot make us allocate the machine away. */
#define IDX_MAX_BYTES ((size_t)1 << 32)

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Reads exactly LEN bytes; returns the number read (short on EOF) or -1. */
static long gz_read_full(gzFile gz, uint8_t *buf, size_t len)
{
    size_t got = 0;
    while (got < len) {
        size_t want = len - got > (1u << 30) ? (1u << 30) : len - got;
        int n = gzread(gz, buf + got, (unsigned)want);
        if (n < 0)
            return -1;
        if (n == 0)
            break;
        got += (size_t)n;
    }
    return (long)got;
}

static int read_header(gzFile gz, const char *path, int ndims, idx_file_t *out, char *err,
                       size_t errlen)
{
    uint8_t hdr[4 + 4 * IDX_MAX_DIMS];
    size_t hlen = 4 + 4 * (size_t)ndims;
    long n = gz_read_full(gz, hdr, hlen);
    if (n < 0) {
        int zerr;
        snprintf(err, errlen, "%s: cannot read: %s", path, gzerror(gz, &zerr));
        return -1;
    }
    if ((size_t)n < 4) {
        snprintf(err, errlen, "%s: file too short for an IDX header (%ld bytes)", path, n);
        return -1;
    }
    uint32_t want_magic = 0x00000800u | (uint32_t)ndims;
    if (be32(hdr) != want_magic) {
        snprintf(err, errlen, "%s: bad IDX magic 0x%08x (want 0x%08x: uint8, %d dims)", path,
                 be32(hdr), want_magic, ndims);
        return -1;
    }
    if ((size_t)n < hlen) {
        snprintf(err, errlen, "%s: truncated IDX header (%ld of %zu bytes)", path, n, hlen);
        return -1;
    }
    out->ndims = ndims;
    out->len = 1;
    for (int d = 0; d < ndims; d++) {
        out->dims[d] = be32(hdr + 4 + 4 * d);
        if (out->dims[d] == 0) {
            snprintf(err, errlen, "%s: dimension %d is zero", path, d);
            return -1;
        }
        if (out->len > IDX_MAX_BYTES / out->dims[d]) {
            snprintf(err, errlen, "%s: dimensions too large (over %zu bytes)", path,
                     (size_t)IDX_MAX_BYTES);
            return -1;
        }
        out->len *= out->dims[d];
    }
    return 0;
}

int idx_file_read(const char *path, int ndims, idx_file_t *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (ndims < 1 || ndims > IDX_MAX_DIMS) {
        snprintf(err, errlen, "%s: unsupported number of dimensions %d", path, ndims);
        return -1;
    }
    gzFile gz = gzopen(path, "rb");
    if (!gz) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno ? errno : ENOMEM));
        return -1;
    }
    int rc = read_header(gz, path, ndims, out, err, errlen);
    if (rc == 0) {
        /* one extra byte tells "exactly the declared size" from "longer" */
        out->data = malloc(out->len + 1);
        if (!out->data) {
            snprintf(err, errlen, "%s: out of memory for %zu bytes", path, out->len);
            rc = -1;
        }
    }
    if (rc == 0) {
        long n = gz_read_full(gz, out->data, out->len + 1);
        int zerr;
        if (n < 0) {
            snprintf(err, errlen, "%s: corrupt data: %s", path, gzerror(gz, &zerr));
            rc = -1;
        } else if ((size_t)n < out->len) {
            snprintf(err, errlen, "%s: truncated: %ld of %zu data bytes", path, n, out->len);
            rc = -1;
        } else if ((size_t)n > out->len) {
            snprintf(err, errlen, "%s: more data than the header declares (%zu bytes)", path,
                     out->len);
            rc = -1;
        }
    }
    gzclose(gz);
    if (rc != 0)
        idx_file_free(out);
    return rc;
}

void idx_file_free(idx_file_t *f)
{
    free(f->data);
    memset(f, 0, sizeof *f);
}

char *idx_find(const char *prefix, const char *suffix, char *err, size_t errlen)
{
    static const char *const ext[] = {"", ".gz"};
    for (int i = 0; i < 2; i++) {
        size_t len = strlen(prefix) + strlen(suffix) + 8;
        char *path = malloc(len);
        if (!path) {
            snprintf(err, errlen, "out of memory");
            return NULL;
        }
        snprintf(path, len, "%s-%s%s", prefix, suffix, ext[i]);
        if (access(path, R_OK) == 0)
            return path;
        free(path);
    }
    snprintf(err, errlen, "neither %s-%s nor %s-%s.gz is readable", prefix, suffix, prefix,
             suffix);
    return NULL;
}
