/* mp — private msgpack helpers shared by the message and event codecs.
 *
 * Reading: mp_parse() turns one frame into a msgpack map after a bounds
 * pre-scan (msgpack-c allocates count*sizeof(object) for every container
 * header *before* it sees the elements, so a 5-byte "array of 4G" would
 * otherwise ask for ~100 GB). The mp_get_* readers look a key up in that
 * map, check its msgpack type and range and write a specific reason
 * ("RESULT: 'k' is 9, want 1..5") on failure. Unknown keys are ignored;
 * a key present twice is an error (which one would win is ambiguous).
 *
 * Writing: mp_put_* pack one key/value pair each.
 *
 * Numeric arrays travel as little-endian bin; ddpipe only builds on
 * little-endian hosts, so they are plain memcpy.
 */
#ifndef DDP_PROTO_MP_H
#define DDP_PROTO_MP_H

#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "ddpipe's wire arrays are little-endian memcpy; port mp.c before building on a big-endian host"
#endif

/* A map being read and where reasons go. `what` prefixes every reason. */
typedef struct {
    const msgpack_object *map;
    const char *what;
    char *err;
    size_t errlen;
} mp_reader_t;

/* Checks that data holds exactly one well-formed msgpack value whose
 * containers never claim more elements than bytes remain. 0 or -1 with the reason in err. */
int mp_prescan(const void *data, size_t size, char *err, size_t errlen);

/* Pre-scan + unpack one map filling the whole frame. The objects point into
 * data (keep it alive while reading). Caller destroys *u in every case. */
int mp_parse(msgpack_unpacked *u, const void *data, size_t size, char *err, size_t errlen);

/* Writes "<what>: <fmt...>" into r->err and returns -1. */
int mp_fail(const mp_reader_t *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The value of key, or NULL when absent (or nil: nil means absent). Sets
 * *bad (and the reason) when the key occurs twice. */
const msgpack_object *mp_find(const mp_reader_t *r, const char *key, bool *bad);

/* Required scalars. Integers accept either msgpack integer encoding as long
 * as the value is within [lo, hi]. Doubles accept float32/64 and integers. */
int mp_get_uint(const mp_reader_t *r, const char *key, uint64_t lo, uint64_t hi, uint64_t *out);
int mp_get_int(const mp_reader_t *r, const char *key, int64_t lo, int64_t hi, int64_t *out);
int mp_get_double(const mp_reader_t *r, const char *key, double *out);
int mp_get_bool(const mp_reader_t *r, const char *key, bool *out);
/* Narrowing conveniences over mp_get_uint/mp_get_int. */
int mp_get_u32(const mp_reader_t *r, const char *key, uint32_t lo, uint32_t hi, uint32_t *out);
int mp_get_u8(const mp_reader_t *r, const char *key, uint8_t lo, uint8_t hi, uint8_t *out);
int mp_get_i32(const mp_reader_t *r, const char *key, int32_t lo, int32_t hi, int32_t *out);

/* Optional keys (added within a version): absent (or nil) leaves *out as
 * the caller preset it and returns 0; present must be well-formed. The
 * range of mp_opt_uint is [0, hi]. */
int mp_opt_uint(const mp_reader_t *r, const char *key, uint64_t hi, uint64_t *out);
int mp_opt_double(const mp_reader_t *r, const char *key, double *out);
int mp_opt_str(const mp_reader_t *r, const char *key, char *dst, size_t cap);

/* Required string copied into dst[cap]: rejects length >= cap and NULs. */
int mp_get_str(const mp_reader_t *r, const char *key, char *dst, size_t cap);

/* Required bin of exactly `want` bytes; `formula` names the size in the
 * reason ("n*k*4"). *ptr points into the frame. */
int mp_get_bin(const mp_reader_t *r, const char *key, size_t want, const char *formula,
               const void **ptr);
/* Same, copied into a new malloc'ed buffer (NULL when want == 0). */
int mp_dup_bin(const mp_reader_t *r, const char *key, size_t want, const char *formula,
               void **out);

/* Optional bin of n uint32 (host order, as the other numeric bins),
 * 1 <= n <= maxcount, copied into *out (malloc'ed; NULL, *n 0 when absent). */
int mp_opt_u32v(const mp_reader_t *r, const char *key, uint32_t maxcount, uint32_t **out,
                uint32_t *n);

/* Array of strings (each < maxlen, no NUL). want == SIZE_MAX: any length up
 * to maxcount; else exactly want elements. optional: absent -> *out NULL.
 * *out is a malloc'ed vector of malloc'ed strings; free with mp_strv_free. */
int mp_get_strv(const mp_reader_t *r, const char *key, size_t want, size_t maxcount,
                size_t maxlen, bool optional, char ***out, size_t *count);
void mp_strv_free(char **v, size_t count);

/* Writers: each packs key then value; return 0 or msgpack's error. */
int mp_put_key(msgpack_packer *pk, const char *key);
int mp_put_uint(msgpack_packer *pk, const char *key, uint64_t v);
int mp_put_int(msgpack_packer *pk, const char *key, int64_t v);
int mp_put_double(msgpack_packer *pk, const char *key, double v);
int mp_put_bool(msgpack_packer *pk, const char *key, bool v);
int mp_put_str(msgpack_packer *pk, const char *key, const char *s);
int mp_put_bin(msgpack_packer *pk, const char *key, const void *p, size_t size);
int mp_put_strv(msgpack_packer *pk, const char *key, char *const *v, size_t count);

#endif
