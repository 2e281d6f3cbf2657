/* mp — msgpack reading/writing helpers; see mp.h for the why. */
#include "proto/mp.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int scan_fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int scan_fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static uint64_t load_be(const uint8_t *p, size_t n)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v = (v << 8) | p[i];
    return v;
}

/* Sizes of one msgpack header: bytes of the fixed header (after the tag),
 * bytes of length field, payload bytes, and elements a container adds.
 * Returns -1 for the reserved tag 0xc1. */
typedef struct {
    size_t fixed;     /* bytes after the tag byte that are always there */
    size_t lenbytes;  /* big-endian length/count field size (part of fixed) */
    size_t extra;     /* extra bytes after the length (ext type byte) */
    int kind;         /* 0 scalar/raw, 1 array, 2 map */
} tag_info_t;

static int tag_info(uint8_t tag, tag_info_t *ti, uint64_t *inline_count)
{
    memset(ti, 0, sizeof *ti);
    *inline_count = 0;
    if (tag <= 0x7f || tag >= 0xe0 || tag == 0xc0 || tag == 0xc2 || tag == 0xc3)
        return 0;
    if (tag >= 0x80 && tag <= 0x8f) { ti->kind = 2; *inline_count = tag & 0x0f; return 0; }
    if (tag >= 0x90 && tag <= 0x9f) { ti->kind = 1; *inline_count = tag & 0x0f; return 0; }
    if (tag >= 0xa0 && tag <= 0xbf) { *inline_count = tag & 0x1f; return 1; /* fixstr */ }
    switch (tag) {
    case 0xc4: case 0xd9: ti->lenbytes = 1; return 1;
    case 0xc5: case 0xda: ti->lenbytes = 2; return 1;
    case 0xc6: case 0xdb: ti->lenbytes = 4; return 1;
    case 0xc7: ti->lenbytes = 1; ti->extra = 1; return 1;
    case 0xc8: ti->lenbytes = 2; ti->extra = 1; return 1;
    case 0xc9: ti->lenbytes = 4; ti->extra = 1; return 1;
    case 0xca: ti->fixed = 4; return 0;
    case 0xcb: ti->fixed = 8; return 0;
    case 0xcc: case 0xd0: ti->fixed = 1; return 0;
    case 0xcd: case 0xd1: ti->fixed = 2; return 0;
    case 0xce: case 0xd2: ti->fixed = 4; return 0;
    case 0xcf: case 0xd3: ti->fixed = 8; return 0;
    case 0xd4: ti->fixed = 2; return 0;
    case 0xd5: ti->fixed = 3; return 0;
    case 0xd6: ti->fixed = 5; return 0;
    case 0xd7: ti->fixed = 9; return 0;
    case 0xd8: ti->fixed = 17; return 0;
    case 0xdc: ti->kind = 1; ti->lenbytes = 2; return 0;
    case 0xdd: ti->kind = 1; ti->lenbytes = 4; return 0;
    case 0xde: ti->kind = 2; ti->lenbytes = 2; return 0;
    case 0xdf: ti->kind = 2; ti->lenbytes = 4; return 0;
    default: return -1; /* 0xc1: never used */
    }
}

int mp_prescan(const void *data, size_t size, char *err, size_t errlen)
{
    const uint8_t *p = data;
    size_t pos = 0;
    uint64_t pending = 1; /* values still to read; each takes >= 1 byte */
    while (pending > 0) {
        if (pos >= size)
            return scan_fail(err, errlen, "truncated msgpack (%zu bytes, %" PRIu64
                             " more values expected)", size, pending);
        uint8_t tag = p[pos++];
        pending--;
        tag_info_t ti;
        uint64_t count;
        int raw = tag_info(tag, &ti, &count);
        if (raw < 0)
            return scan_fail(err, errlen, "invalid msgpack tag 0xc1 at byte %zu", pos - 1);
        size_t head = ti.fixed + ti.lenbytes + ti.extra;
        if (size - pos < head)
            return scan_fail(err, errlen, "truncated msgpack header at byte %zu", pos - 1);
        if (ti.lenbytes)
            count = load_be(p + pos, ti.lenbytes);
        pos += head;
        if (raw) { /* str/bin/ext: count payload bytes follow */
            if (count > size - pos)
                return scan_fail(err, errlen, "msgpack string/bin of %" PRIu64
                                 " bytes at byte %zu overruns the frame", count, pos);
            pos += (size_t)count;
        } else if (ti.kind) {
            uint64_t add = ti.kind == 2 ? 2 * count : count;
            pending += add;
            if (pending > size - pos)
                return scan_fail(err, errlen, "msgpack %s of %" PRIu64
                                 " elements but only %zu bytes remain",
                                 ti.kind == 2 ? "map" : "array", count, size - pos);
        }
    }
    if (pos != size)
        return scan_fail(err, errlen, "%zu trailing bytes after the first msgpack value", size - pos);
    return 0;
}

int mp_parse(msgpack_unpacked *u, const void *data, size_t size, char *err, size_t errlen)
{
    msgpack_unpacked_init(u);
    if (size == 0)
        return scan_fail(err, errlen, "empty frame");
    if (mp_prescan(data, size, err, errlen) != 0)
        return -1;
    size_t off = 0;
    msgpack_unpack_return rc = msgpack_unpack_next(u, data, size, &off);
    if (rc == MSGPACK_UNPACK_NOMEM_ERROR)
        return scan_fail(err, errlen, "msgpack nested too deep or out of memory");
    if (rc != MSGPACK_UNPACK_SUCCESS)
        return scan_fail(err, errlen, "not valid msgpack (unpack returned %d)", (int)rc);
    if (off != size)
        return scan_fail(err, errlen, "%zu trailing bytes after the first msgpack value", size - off);
    if (u->data.type != MSGPACK_OBJECT_MAP)
        return scan_fail(err, errlen, "first frame is msgpack type %d, want a map",
                         (int)u->data.type);
    return 0;
}

int mp_fail(const mp_reader_t *r, const char *fmt, ...)
{
    if (!r->err || !r->errlen)
        return -1;
    int n = snprintf(r->err, r->errlen, "%s: ", r->what);
    if (n < 0 || (size_t)n >= r->errlen)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err + n, r->errlen - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

static bool key_is(const msgpack_object *k, const char *key)
{
    size_t len = strlen(key);
    return k->type == MSGPACK_OBJECT_STR && k->via.str.size == len &&
           memcmp(k->via.str.ptr, key, len) == 0;
}

const msgpack_object *mp_find(const mp_reader_t *r, const char *key, bool *bad)
{
    const msgpack_object *found = NULL;
    *bad = false;
    for (uint32_t i = 0; i < r->map->via.map.size; i++) {
        const msgpack_object_kv *kv = &r->map->via.map.ptr[i];
        if (!key_is(&kv->key, key))
            continue;
        if (found) {
            *bad = true;
            mp_fail(r, "key '%s' appears twice", key);
            return NULL;
        }
        found = &kv->val;
    }
    if (found && found->type == MSGPACK_OBJECT_NIL)
        return NULL;
    return found;
}

static const char *type_name(msgpack_object_type t)
{
    switch (t) {
    case MSGPACK_OBJECT_NIL: return "nil";
    case MSGPACK_OBJECT_BOOLEAN: return "bool";
    case MSGPACK_OBJECT_POSITIVE_INTEGER: return "uint";
    case MSGPACK_OBJECT_NEGATIVE_INTEGER: return "int";
    case MSGPACK_OBJECT_FLOAT32: return "float32";
    case MSGPACK_OBJECT_FLOAT64: return "float64";
    case MSGPACK_OBJECT_STR: return "str";
    case MSGPACK_OBJECT_ARRAY: return "array";
    case MSGPACK_OBJECT_MAP: return "map";
    case MSGPACK_OBJECT_BIN: return "bin";
    case MSGPACK_OBJECT_EXT: return "ext";
    }
    return "?";
}

/* The value of a required key, or NULL with the reason written. */
static const msgpack_object *need(const mp_reader_t *r, const char *key)
{
    bool bad;
    const msgpack_object *o = mp_find(r, key, &bad);
    if (!o && !bad)
        mp_fail(r, "missing key '%s'", key);
    return o;
}

int mp_get_uint(const mp_reader_t *r, const char *key, uint64_t lo, uint64_t hi, uint64_t *out)
{
    const msgpack_object *o = need(r, key);
    if (!o)
        return -1;
    if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
        return mp_fail(r, "'%s' is %" PRId64 ", want %" PRIu64 "..%" PRIu64, key, o->via.i64,
                       lo, hi);
    if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
        return mp_fail(r, "'%s' is a msgpack %s, want uint", key, type_name(o->type));
    if (o->via.u64 < lo || o->via.u64 > hi)
        return mp_fail(r, "'%s' is %" PRIu64 ", want %" PRIu64 "..%" PRIu64, key, o->via.u64,
                       lo, hi);
    *out = o->via.u64;
    return 0;
}

int mp_get_int(const mp_reader_t *r, const char *key, int64_t lo, int64_t hi, int64_t *out)
{
    const msgpack_object *o = need(r, key);
    if (!o)
        return -1;
    int64_t v = 0;
    if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
        if (o->via.u64 > (uint64_t)INT64_MAX)
            return mp_fail(r, "'%s' is %" PRIu64 ", want %" PRId64 "..%" PRId64, key,
                           o->via.u64, lo, hi);
        v = (int64_t)o->via.u64;
    } else if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
        v = o->via.i64;
    } else {
        return mp_fail(r, "'%s' is a msgpack %s, want int", key, type_name(o->type));
    }
    if (v < lo || v > hi)
        return mp_fail(r, "'%s' is %" PRId64 ", want %" PRId64 "..%" PRId64, key, v, lo, hi);
    *out = v;
    return 0;
}

int mp_opt_uint(const mp_reader_t *r, const char *key, uint64_t hi, uint64_t *out)
{
    bool dup;
    if (!mp_find(r, key, &dup))
        return dup ? -1 : 0;
    return mp_get_uint(r, key, 0, hi, out);
}

int mp_opt_double(const mp_reader_t *r, const char *key, double *out)
{
    bool dup;
    if (!mp_find(r, key, &dup))
        return dup ? -1 : 0;
    return mp_get_double(r, key, out);
}

int mp_opt_str(const mp_reader_t *r, const char *key, char *dst, size_t cap)
{
    bool dup;
    if (!mp_find(r, key, &dup))
        return dup ? -1 : 0;
    return mp_get_str(r, key, dst, cap);
}

int mp_get_double(const mp_reader_t *r, const char *key, double *out)
{
    const msgpack_object *o = need(r, key);
    if (!o)
        return -1;
    switch (o->type) {
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64: *out = o->via.f64; return 0;
    case MSGPACK_OBJECT_POSITIVE_INTEGER: *out = (double)o->via.u64; return 0;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER: *out = (double)o->via.i64; return 0;
    default: return mp_fail(r, "'%s' is a msgpack %s, want float", key, type_name(o->type));
    }
}

int mp_get_bool(const mp_reader_t *r, const char *key, bool *out)
{
    const msgpack_object *o = need(r, key);
    if (!o)
        return -1;
    if (o->type != MSGPACK_OBJECT_BOOLEAN)
        return mp_fail(r, "'%s' is a msgpack %s, want bool", key, type_name(o->type));
    *out = o->via.boolean;
    return 0;
}

int mp_get_u32(const mp_reader_t *r, const char *key, uint32_t lo, uint32_t hi, uint32_t *out)
{
    uint64_t v = 0;
    if (mp_get_uint(r, key, lo, hi, &v) != 0)
        return -1;
    *out = (uint32_t)v;
    return 0;
}

int mp_get_u8(const mp_reader_t *r, const char *key, uint8_t lo, uint8_t hi, uint8_t *out)
{
    uint64_t v = 0;
    if (mp_get_uint(r, key, lo, hi, &v) != 0)
        return -1;
    *out = (uint8_t)v;
    return 0;
}

int mp_get_i32(const mp_reader_t *r, const char *key, int32_t lo, int32_t hi, int32_t *out)
{
    int64_t v = 0;
    if (mp_get_int(r, key, lo, hi, &v) != 0)
        return -1;
    *out = (int32_t)v;
    return 0;
}

/* Checks one msgpack str for type, length < cap and embedded NULs. */
static int check_str(const mp_reader_t *r, const char *key, const msgpack_object *o, size_t cap)
{
    if (o->type != MSGPACK_OBJECT_STR)
        return mp_fail(r, "'%s' is a msgpack %s, want str", key, type_name(o->type));
    if (o->via.str.size >= cap)
        return mp_fail(r, "'%s' is %" PRIu32 " bytes, want at most %zu", key, o->via.str.size,
                       cap - 1);
    if (o->via.str.size && memchr(o->via.str.ptr, '\0', o->via.str.size))
        return mp_fail(r, "'%s' contains a NUL byte", key);
    return 0;
}

int mp_get_str(const mp_reader_t *r, const char *key, char *dst, size_t cap)
{
    const msgpack_object *o = need(r, key);
    if (!o || check_str(r, key, o, cap) != 0)
        return -1;
    if (o->via.str.size)
        memcpy(dst, o->via.str.ptr, o->via.str.size);
    dst[o->via.str.size] = '\0';
    return 0;
}

int mp_get_bin(const mp_reader_t *r, const char *key, size_t want, const char *formula,
               const void **ptr)
{
    const msgpack_object *o = need(r, key);
    if (!o)
        return -1;
    if (o->type != MSGPACK_OBJECT_BIN)
        return mp_fail(r, "'%s' is a msgpack %s, want bin", key, type_name(o->type));
    if (o->via.bin.size != want)
        return mp_fail(r, "'%s' bin is %" PRIu32 " bytes, want %s = %zu", key, o->via.bin.size,
                       formula, want);
    *ptr = o->via.bin.ptr;
    return 0;
}

int mp_dup_bin(const mp_reader_t *r, const char *key, size_t want, const char *formula,
               void **out)
{
    const void *p = NULL;
    *out = NULL;
    if (mp_get_bin(r, key, want, formula, &p) != 0)
        return -1;
    if (want == 0)
        return 0;
    *out = malloc(want);
    if (!*out)
        return mp_fail(r, "out of memory copying '%s' (%zu bytes)", key, want);
    memcpy(*out, p, want);
    return 0;
}

int mp_opt_u32v(const mp_reader_t *r, const char *key, uint32_t maxcount, uint32_t **out,
                uint32_t *n)
{
    bool bad = false;
    const msgpack_object *o = mp_find(r, key, &bad);
    *out = NULL;
    *n = 0;
    if (bad)
        return -1;
    if (!o)
        return 0;
    if (o->type != MSGPACK_OBJECT_BIN || o->via.bin.size % 4 != 0 ||
        o->via.bin.size / 4 > maxcount || o->via.bin.size == 0)
        return mp_fail(r, "'%s' must be a bin of n*4 bytes, 1 <= n <= %" PRIu32, key, maxcount);
    *n = o->via.bin.size / 4;
    return mp_dup_bin(r, key, (size_t)*n * 4, "n*4", (void **)out);
}

void mp_strv_free(char **v, size_t count)
{
    if (!v)
        return;
    for (size_t i = 0; i < count; i++)
        free(v[i]);
    free(v);
}

/* Copies the checked msgpack strings of arr into a new vector. */
static int copy_strv(const mp_reader_t *r, const char *key, const msgpack_object *arr,
                     size_t maxlen, char ***out)
{
    size_t n = arr->via.array.size;
    char **v = calloc(n ? n : 1, sizeof *v);
    if (!v)
        return mp_fail(r, "out of memory for '%s' (%zu strings)", key, n);
    for (size_t i = 0; i < n; i++) {
        const msgpack_object *s = &arr->via.array.ptr[i];
        char name[64];
        snprintf(name, sizeof name, "%s[%zu]", key, i);
        if (check_str(r, name, s, maxlen) != 0) {
            mp_strv_free(v, i);
            return -1;
        }
        v[i] = malloc(s->via.str.size + 1u);
        if (!v[i]) {
            mp_strv_free(v, i);
            return mp_fail(r, "out of memory for '%s'", name);
        }
        if (s->via.str.size)
            memcpy(v[i], s->via.str.ptr, s->via.str.size);
        v[i][s->via.str.size] = '\0';
    }
    *out = v;
    return 0;
}

int mp_get_strv(const mp_reader_t *r, const char *key, size_t want, size_t maxcount,
                size_t maxlen, bool optional, char ***out, size_t *count)
{
    bool bad;
    const msgpack_object *o = mp_find(r, key, &bad);
    *out = NULL;
    *count = 0;
    if (bad)
        return -1;
    if (!o)
        return optional ? 0 : mp_fail(r, "missing key '%s'", key);
    if (o->type != MSGPACK_OBJECT_ARRAY)
        return mp_fail(r, "'%s' is a msgpack %s, want array of str", key, type_name(o->type));
    size_t n = o->via.array.size;
    if (want != SIZE_MAX && n != want)
        return mp_fail(r, "'%s' has %zu entries, want %zu", key, n, want);
    if (n > maxcount)
        return mp_fail(r, "'%s' has %zu entries, want at most %zu", key, n, maxcount);
    if (copy_strv(r, key, o, maxlen, out) != 0)
        return -1;
    *count = n;
    return 0;
}

int mp_put_key(msgpack_packer *pk, const char *key)
{
    return msgpack_pack_str_with_body(pk, key, strlen(key));
}

int mp_put_uint(msgpack_packer *pk, const char *key, uint64_t v)
{
    return mp_put_key(pk, key) || msgpack_pack_uint64(pk, v);
}

int mp_put_int(msgpack_packer *pk, const char *key, int64_t v)
{
    return mp_put_key(pk, key) || msgpack_pack_int64(pk, v);
}

int mp_put_double(msgpack_packer *pk, const char *key, double v)
{
    return mp_put_key(pk, key) || msgpack_pack_double(pk, v);
}

int mp_put_bool(msgpack_packer *pk, const char *key, bool v)
{
    return mp_put_key(pk, key) || (v ? msgpack_pack_true(pk) : msgpack_pack_false(pk));
}

int mp_put_str(msgpack_packer *pk, const char *key, const char *s)
{
    return mp_put_key(pk, key) || msgpack_pack_str_with_body(pk, s, strlen(s));
}

int mp_put_bin(msgpack_packer *pk, const char *key, const void *p, size_t size)
{
    if (mp_put_key(pk, key) || msgpack_pack_bin(pk, size))
        return -1;
    return size ? msgpack_pack_bin_body(pk, p, size) : 0;
}

int mp_put_strv(msgpack_packer *pk, const char *key, char *const *v, size_t count)
{
    if (mp_put_key(pk, key) || msgpack_pack_array(pk, count))
        return -1;
    for (size_t i = 0; i < count; i++)
        if (msgpack_pack_str_with_body(pk, v[i], strlen(v[i])))
            return -1;
    return 0;
}
