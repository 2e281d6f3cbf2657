#include "common/errbuf.h"
#include "common/idx.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

/* First allocation for a gzip payload; it doubles as bytes arrive. */
#define GZ_FIRST_CHUNK ((size_t)1 << 20)

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int is_gzip(const uint8_t *p, size_t n) { return n >= 2 && p[0] == 0x1f && p[1] == 0x8b; }

/* Checks the N header bytes at HDR (N may be short: a truncated file) and
 * fills out's dims and len. */
static int parse_header(const uint8_t *hdr, size_t n, const char *name, int ndims,
                        idx_file_t *out, char *err, size_t errlen)
{
    size_t hlen = 4 + 4 * (size_t)ndims;
    if (n < 4) {
        err_set(err, errlen, "%s: file too short for an IDX header (%zu bytes)", name, n);
        return -1;
    }
    uint32_t want_magic = 0x00000800u | (uint32_t)ndims;
    if (be32(hdr) != want_magic) {
        err_set(err, errlen, "%s: bad IDX magic 0x%08x (want 0x%08x: uint8, %d dims): not an "
                 "IDX file of this kind", name, be32(hdr), want_magic, ndims);
        return -1;
    }
    if (n < hlen) {
        err_set(err, errlen, "%s: truncated IDX header (%zu of %zu bytes)", name, n, hlen);
        return -1;
    }
    out->ndims = ndims;
    out->len = 1;
    for (int d = 0; d < ndims; d++) {
        out->dims[d] = be32(hdr + 4 + 4 * d);
        if (out->dims[d] == 0) {
            err_set(err, errlen, "%s: dimension %d is zero", name, d);
            return -1;
        }
        if (out->len > IDX_MAX_BYTES / out->dims[d]) {
            err_set(err, errlen, "%s: the header's dimensions make more than %zu bytes: corrupt "
                     "or not an IDX file", name, (size_t)IDX_MAX_BYTES);
            return -1;
        }
        out->len *= out->dims[d];
    }
    return 0;
}

/* A plain file: the declared size must be the file's before any copy. With
 * OWN, RAW (malloc'd) becomes out->data; else the data is copied. */
static int parse_plain(uint8_t *raw, size_t rawlen, int own, const char *name, int ndims,
                       idx_file_t *out, int *took, char *err, size_t errlen)
{
    size_t hlen = 4 + 4 * (size_t)ndims;
    if (parse_header(raw, rawlen, name, ndims, out, err, errlen) != 0)
        return -1;
    size_t have = rawlen - hlen;
    if (have < out->len) {
        err_set(err, errlen, "%s: truncated: the header declares %zu data bytes, the file has "
                 "%zu", name, out->len, have);
        return -1;
    }
    if (have > out->len) {
        err_set(err, errlen, "%s: more data than the header declares (%zu bytes after its %zu "
                 "data bytes): corrupt or not an IDX file", name, have - out->len, out->len);
        return -1;
    }
    if (own) {
        memmove(raw, raw + hlen, out->len);
        out->data = raw;
        *took = 1;
        return 0;
    }
    if (!(out->data = malloc(out->len))) {
        err_set(err, errlen, "%s: out of memory for %zu bytes", name, out->len);
        return -1;
    }
    memcpy(out->data, raw + hlen, out->len);
    return 0;
}

/* Inflates into DST until WANT bytes are out or the input ends; *GOT says
 * how many. Concatenated gzip members are read as one stream (as gzip -d
 * does); anything else after the last member is an error. */
static int gz_pull(z_stream *z, uint8_t *dst, size_t want, size_t *got, const char *name,
                   char *err, size_t errlen)
{
    *got = 0;
    while (*got < want) {
        size_t step = want - *got > (1u << 30) ? (1u << 30) : want - *got;
        z->next_out = dst + *got;
        z->avail_out = (uInt)step;
        int rc = inflate(z, Z_NO_FLUSH);
        *got += step - z->avail_out;
        if (rc == Z_STREAM_END) {
            if (z->avail_in == 0)
                return 0;
            if (!is_gzip(z->next_in, z->avail_in)) {
                err_set(err, errlen, "%s: %u bytes of garbage after the gzip stream", name,
                         z->avail_in);
                return -1;
            }
            if (inflateReset(z) != Z_OK) {
                err_set(err, errlen, "%s: corrupt gzip stream", name);
                return -1;
            }
        } else if (rc == Z_BUF_ERROR && z->avail_in == 0) {
            err_set(err, errlen, "%s: truncated gzip stream (%zu of the wanted bytes inflated)",
                     name, *got);
            return -1;
        } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
            err_set(err, errlen, "%s: corrupt gzip data: %s", name, z->msg ? z->msg : "?");
            return -1;
        }
    }
    return 0;
}

/* Reads the payload a piece at a time: the buffer grows (doubling) only as
 * bytes arrive, and one byte more than declared tells "longer" apart. */
static int gz_payload(z_stream *z, const char *name, idx_file_t *out, char *err, size_t errlen)
{
    size_t want = out->len + 1, cap = 0, have = 0;
    uint8_t *buf = NULL;
    int rc = 0;
    while (rc == 0 && have < want) {
        size_t ncap = cap ? 2 * cap : GZ_FIRST_CHUNK;
        ncap = ncap < want ? ncap : want;
        uint8_t *p = realloc(buf, ncap);
        if (!p) {
            err_set(err, errlen, "%s: out of memory for %zu bytes", name, ncap);
            rc = -1;
            break;
        }
        buf = p;
        cap = ncap;
        size_t got;
        rc = gz_pull(z, buf + have, cap - have, &got, name, err, errlen);
        have += got;
        if (rc == 0 && have < cap)
            break; /* the stream ended */
    }
    if (rc == 0 && have < out->len) {
        err_set(err, errlen, "%s: truncated: the header declares %zu data bytes, the file has "
                 "%zu", name, out->len, have);
        rc = -1;
    } else if (rc == 0 && have > out->len) {
        err_set(err, errlen, "%s: more data than the header declares (over its %zu data "
                 "bytes): corrupt or not an IDX file", name, out->len);
        rc = -1;
    }
    if (rc != 0) {
        free(buf);
        return -1;
    }
    out->data = buf;
    return 0;
}

static int parse_gzip(const uint8_t *raw, size_t rawlen, const char *name, int ndims,
                      idx_file_t *out, char *err, size_t errlen)
{
    if (rawlen > UINT32_MAX) {
        err_set(err, errlen, "%s: gzip file too large (%zu bytes)", name, rawlen);
        return -1;
    }
    z_stream z = {0};
    if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) {
        err_set(err, errlen, "%s: cannot start zlib", name);
        return -1;
    }
    z.next_in = (Bytef *)raw;
    z.avail_in = (uInt)rawlen;
    uint8_t hdr[4 + 4 * IDX_MAX_DIMS];
    size_t got;
    int rc = gz_pull(&z, hdr, 4 + 4 * (size_t)ndims, &got, name, err, errlen);
    if (rc == 0)
        rc = parse_header(hdr, got, name, ndims, out, err, errlen);
    if (rc == 0)
        rc = gz_payload(&z, name, out, err, errlen);
    inflateEnd(&z);
    return rc;
}

static int parse_any(uint8_t *raw, size_t rawlen, int own, const char *name, int ndims,
                     idx_file_t *out, int *took, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    *took = 0;
    if (ndims < 1 || ndims > IDX_MAX_DIMS) {
        err_set(err, errlen, "%s: unsupported number of dimensions %d", name, ndims);
        return -1;
    }
    int rc = is_gzip(raw, rawlen)
                 ? parse_gzip(raw, rawlen, name, ndims, out, err, errlen)
                 : parse_plain(raw, rawlen, own, name, ndims, out, took, err, errlen);
    if (rc != 0)
        idx_file_free(out); /* parse_plain takes RAW only on success */
    return rc;
}

int idx_parse_buffer(const uint8_t *buf, size_t len, const char *name, int ndims,
                     idx_file_t *out, char *err, size_t errlen)
{
    int took;
    return parse_any((uint8_t *)buf, len, 0, name, ndims, out, &took, err, errlen);
}

/* The whole file, its size checked against the cap before the buffer. */
static uint8_t *read_file(const char *path, size_t *len, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        err_set(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    struct stat sb;
    uint8_t *buf = NULL;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        err_set(err, errlen, "%s: not a regular file", path);
    } else if ((unsigned long long)sb.st_size > IDX_MAX_BYTES + 64) {
        err_set(err, errlen, "%s: %lld bytes is more than an IDX file may hold (%zu)", path,
                 (long long)sb.st_size, (size_t)IDX_MAX_BYTES);
    } else if (!(buf = malloc(sb.st_size ? (size_t)sb.st_size : 1))) {
        err_set(err, errlen, "%s: out of memory for %lld bytes", path, (long long)sb.st_size);
    } else {
        size_t got = 0, want = (size_t)sb.st_size;
        while (got < want) {
            ssize_t n = read(fd, buf + got, want - got);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0) {
                err_set(err, errlen, "%s: read failed: %s", path, n < 0 ? strerror(errno)
                                                                          : "file shrank");
                free(buf);
                buf = NULL;
                break;
            }
            got += (size_t)n;
        }
        *len = got;
    }
    close(fd);
    return buf;
}

int idx_file_read(const char *path, int ndims, idx_file_t *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    size_t len = 0;
    uint8_t *raw = read_file(path, &len, err, errlen);
    if (!raw)
        return -1;
    int took;
    int rc = parse_any(raw, len, 1, path, ndims, out, &took, err, errlen);
    if (!took)
        free(raw);
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
            err_set(err, errlen, "out of memory");
            return NULL;
        }
        snprintf(path, len, "%s-%s%s", prefix, suffix, ext[i]);
        if (access(path, R_OK) == 0)
            return path;
        free(path);
    }
    err_set(err, errlen, "neither %s-%s nor %s-%s.gz is readable", prefix, suffix, prefix,
             suffix);
    return NULL;
}
