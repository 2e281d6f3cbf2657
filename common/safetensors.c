/* safetensors — reader (mmap + own JSON header parser) and writer.
 * Nothing in the file is trusted: every length, offset and shape is checked
 * against the bytes actually present before a tensor is exposed. */
#include "common/safetensors.h"
#include "common/atomic_file.h"
#include "common/errbuf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------------ dtypes */

static const struct {
    const char *name;
    size_t size;
} DTYPES[ST_DTYPE_COUNT] = {
    [ST_F64] = {"F64", 8}, [ST_F32] = {"F32", 4}, [ST_F16] = {"F16", 2},
    [ST_BF16] = {"BF16", 2}, [ST_I64] = {"I64", 8}, [ST_I32] = {"I32", 4},
    [ST_I16] = {"I16", 2}, [ST_I8] = {"I8", 1}, [ST_U8] = {"U8", 1},
    [ST_BOOL] = {"BOOL", 1},
};

const char *st_dtype_name(st_dtype_t dt)
{
    return (unsigned)dt < ST_DTYPE_COUNT ? DTYPES[dt].name : "?";
}

size_t st_dtype_size(st_dtype_t dt)
{
    return (unsigned)dt < ST_DTYPE_COUNT ? DTYPES[dt].size : 0;
}

int st_dtype_parse(const char *s, st_dtype_t *out)
{
    for (int i = 0; i < ST_DTYPE_COUNT; i++)
        if (strcmp(s, DTYPES[i].name) == 0) {
            *out = (st_dtype_t)i;
            return 0;
        }
    return -1;
}

char *st_shape_str(const int64_t *shape, int ndim, char *buf, size_t len)
{
    size_t used = 0;
    if (len == 0)
        return buf;
    buf[0] = '\0';
    used += (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < ndim && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%lld", i ? "," : "",
                                 (long long)shape[i]);
    if (used < len)
        snprintf(buf + used, len - used, "]");
    return buf;
}

/* ------------------------------------------------------- half conversions */

float st_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (man << 13);    /* inf / nan */
    } else if (exp != 0) {
        bits = sign | ((exp + 112u) << 23) | (man << 13);
    } else if (man == 0) {
        bits = sign;                                /* signed zero */
    } else {                                        /* subnormal: normalise */
        int e = -1;
        do {
            e++;
            man <<= 1;
        } while ((man & 0x400u) == 0);
        bits = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3ffu) << 13);
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

float st_bf16_to_f32(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

uint16_t st_f32_to_bf16(float f)
{
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    if ((bits & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((bits >> 16) | 0x40u);    /* quiet nan */
    bits += 0x7fffu + ((bits >> 16) & 1u);          /* round to nearest even */
    return (uint16_t)(bits >> 16);
}

uint16_t st_f32_to_f16(float f)
{
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    uint16_t sign = (uint16_t)((bits >> 16) & 0x8000u);
    uint32_t absb = bits & 0x7fffffffu;
    if (absb > 0x7f800000u)
        return sign | 0x7e00u;                      /* nan */
    if (absb >= 0x477ff000u)                        /* rounds to >= 65520: inf */
        return sign | 0x7c00u;
    if (absb < 0x33000001u)                         /* < half the smallest subnormal */
        return sign;
    uint32_t exp = absb >> 23;
    uint32_t man = (absb & 0x7fffffu) | 0x800000u;
    int shift;
    uint32_t base;
    if (exp < 113) {                                /* subnormal half */
        shift = (int)(126 - exp);                   /* 14..24 */
        base = 0;
    } else {
        shift = 13;
        base = (exp - 112) << 10;
        man &= 0x7fffffu;
    }
    uint32_t q = man >> shift;
    uint32_t rem = man & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u)))
        q++;
    return (uint16_t)(sign | (base + q));           /* carry into exp is right */
}

/* ----------------------------------------------------------- file object */

typedef struct {
    char *key;
    char *value;
} st_meta_t;

struct safetensors {
    char *path;
    const uint8_t *map;     /* whole file */
    size_t map_len;
    int mapped;             /* 1: munmap, 0: free */
    const uint8_t *data;    /* data section */
    size_t data_len;
    st_tensor_t *tensors;   /* sorted by name */
    size_t n, cap;
    st_meta_t *meta;
    size_t n_meta, cap_meta;
};


/* ---------------------------------------------------------- JSON parser */

/* A cursor over the header; on the first error `err` is filled and every
 * later call fails fast. */
typedef struct {
    const char *s;
    size_t len, pos;
    const char *what;   /* file name for messages */
    char *err;
    size_t errlen;
    int failed;
} jp_t;

static int jp_fail(jp_t *p, const char *why)
{
    if (!p->failed)
        err_set(p->err, p->errlen, "%s: bad safetensors header: %s at byte %zu of %zu",
                p->what, why, p->pos, p->len);
    p->failed = 1;
    return -1;
}

static void jp_ws(jp_t *p)
{
    while (p->pos < p->len) {
        char c = p->s[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
            break;
        p->pos++;
    }
}

/* Consume character c after optional whitespace. */
static int jp_expect(jp_t *p, char c)
{
    jp_ws(p);
    if (p->pos >= p->len || p->s[p->pos] != c) {
        char why[48];
        snprintf(why, sizeof why, "expected '%c'", c);
        return jp_fail(p, why);
    }
    p->pos++;
    return 0;
}

/* Peek the next non-space character (0 at the end). */
static char jp_peek(jp_t *p)
{
    jp_ws(p);
    return p->pos < p->len ? p->s[p->pos] : 0;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static int jp_hex4(jp_t *p, uint32_t *out)
{
    if (p->len - p->pos < 4)
        return jp_fail(p, "truncated \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval(p->s[p->pos + (size_t)i]);
        if (h < 0)
            return jp_fail(p, "bad \\u escape");
        v = v << 4 | (uint32_t)h;
    }
    p->pos += 4;
    *out = v;
    return 0;
}

static size_t utf8_put(char *o, uint32_t cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xc0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xe0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        o[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    o[0] = (char)(0xf0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    o[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

static int jp_escape(jp_t *p, char *o, size_t *n)
{
    char c = p->s[p->pos++];
    const char *simple = "\"\\/bfnrt", *val = "\"\\/\b\f\n\r\t";
    const char *hit = c ? strchr(simple, c) : NULL;
    if (hit) {
        o[(*n)++] = val[hit - simple];
        return 0;
    }
    if (c != 'u')
        return jp_fail(p, "bad escape in string");
    uint32_t cp;
    if (jp_hex4(p, &cp) < 0)
        return -1;
    if (cp >= 0xd800 && cp < 0xdc00) {     /* surrogate pair */
        uint32_t lo;
        if (p->len - p->pos < 2 || p->s[p->pos] != '\\' || p->s[p->pos + 1] != 'u')
            return jp_fail(p, "lone surrogate in string");
        p->pos += 2;
        if (jp_hex4(p, &lo) < 0)
            return -1;
        if (lo < 0xdc00 || lo > 0xdfff)
            return jp_fail(p, "bad surrogate pair in string");
        cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
    } else if (cp >= 0xdc00 && cp <= 0xdfff) {
        return jp_fail(p, "lone surrogate in string");
    }
    if (cp == 0)
        return jp_fail(p, "NUL character in string");
    *n += utf8_put(o + *n, cp);
    return 0;
}

/* Parse a JSON string into a new NUL-terminated buffer (*out, caller frees).
 * Escaped output is never longer than its source, so the source length
 * bounds the allocation. */
static int jp_string(jp_t *p, char **out)
{
    *out = NULL;
    if (jp_expect(p, '"') < 0)
        return -1;
    size_t start = p->pos;
    char *o = malloc(p->len - start + 1);
    if (!o)
        return jp_fail(p, "out of memory");
    size_t n = 0;
    for (;;) {
        if (p->pos >= p->len) {
            free(o);
            return jp_fail(p, "unterminated string");
        }
        unsigned char c = (unsigned char)p->s[p->pos++];
        if (c == '"')
            break;
        if (c < 0x20) {
            free(o);
            return jp_fail(p, "control character in string");
        }
        if (c == '\\') {
            if (p->pos >= p->len || jp_escape(p, o, &n) < 0) {
                free(o);
                return jp_fail(p, "unterminated escape");
            }
            continue;
        }
        o[n++] = (char)c;
    }
    o[n] = '\0';
    *out = o;
    return 0;
}

/* Non-negative integer without sign, fraction or exponent, < 2^53. */
static int jp_uint(jp_t *p, uint64_t *out)
{
    jp_ws(p);
    size_t start = p->pos;
    uint64_t v = 0;
    while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') {
        v = v * 10 + (uint64_t)(p->s[p->pos] - '0');
        if (v > (1ull << 53))
            return jp_fail(p, "integer too large");
        p->pos++;
    }
    if (p->pos == start)
        return jp_fail(p, "expected a non-negative integer");
    if (p->pos - start > 1 && p->s[start] == '0')
        return jp_fail(p, "leading zero in integer");
    if (p->pos < p->len && strchr(".eE", p->s[p->pos]) && p->s[p->pos])
        return jp_fail(p, "expected an integer, got a fraction");
    *out = v;
    return 0;
}

/* Skip any JSON value (for fields we do not know), depth-limited. */
static int jp_skip(jp_t *p, int depth)
{
    if (depth > 32)
        return jp_fail(p, "nesting too deep");
    char c = jp_peek(p);
    if (c == '"') {
        char *s;
        if (jp_string(p, &s) < 0)
            return -1;
        free(s);
        return 0;
    }
    if (c == '{' || c == '[') {
        char close = c == '{' ? '}' : ']';
        p->pos++;
        if (jp_peek(p) == close) {
            p->pos++;
            return 0;
        }
        for (;;) {
            if (c == '{') {
                char *k;
                if (jp_string(p, &k) < 0)
                    return -1;
                free(k);
                if (jp_expect(p, ':') < 0)
                    return -1;
            }
            if (jp_skip(p, depth + 1) < 0)
                return -1;
            char d = jp_peek(p);
            p->pos++;
            if (d == close)
                return 0;
            if (d != ',')
                return jp_fail(p, "expected ',' or end of container");
        }
    }
    /* literal or number: a run of allowed characters */
    size_t start = p->pos;
    while (p->pos < p->len && strchr("0123456789+-.eEtruefalsn", p->s[p->pos]) &&
           p->s[p->pos])
        p->pos++;
    if (p->pos == start)
        return jp_fail(p, "expected a value");
    return 0;
}

/* ------------------------------------------------------ header contents */

static int tensor_reserve(safetensors_t *st)
{
    if (st->n < st->cap)
        return 0;
    size_t cap = st->cap ? st->cap * 2 : 64;
    st_tensor_t *t = realloc(st->tensors, cap * sizeof *t);
    if (!t)
        return -1;
    st->tensors = t;
    st->cap = cap;
    return 0;
}

static int meta_add(safetensors_t *st, char *key, char *value)
{
    if (st->n_meta == st->cap_meta) {
        size_t cap = st->cap_meta ? st->cap_meta * 2 : 8;
        st_meta_t *m = realloc(st->meta, cap * sizeof *m);
        if (!m)
            return -1;
        st->meta = m;
        st->cap_meta = cap;
    }
    st->meta[st->n_meta++] = (st_meta_t){key, value};
    return 0;
}

static int parse_metadata(jp_t *p, safetensors_t *st)
{
    if (jp_expect(p, '{') < 0)
        return -1;
    if (jp_peek(p) == '}') {
        p->pos++;
        return 0;
    }
    for (;;) {
        char *k = NULL, *v = NULL;
        if (jp_string(p, &k) < 0 || jp_expect(p, ':') < 0 ||
            (jp_peek(p) != '"' && jp_fail(p, "__metadata__ values must be strings") < 0) ||
            jp_string(p, &v) < 0 || meta_add(st, k, v) < 0) {
            free(k);
            free(v);
            return jp_fail(p, "bad __metadata__");
        }
        char d = jp_peek(p);
        p->pos++;
        if (d == '}')
            return 0;
        if (d != ',')
            return jp_fail(p, "expected ',' or '}' in __metadata__");
    }
}

static int parse_shape(jp_t *p, st_tensor_t *t)
{
    if (jp_expect(p, '[') < 0)
        return -1;
    t->ndim = 0;
    if (jp_peek(p) == ']') {
        p->pos++;
        return 0;
    }
    for (;;) {
        uint64_t d;
        if (t->ndim == ST_MAX_DIMS)
            return jp_fail(p, "too many dimensions");
        if (jp_uint(p, &d) < 0)
            return -1;
        t->shape[t->ndim++] = (int64_t)d;
        char c = jp_peek(p);
        p->pos++;
        if (c == ']')
            return 0;
        if (c != ',')
            return jp_fail(p, "expected ',' or ']' in shape");
    }
}

static int parse_offsets(jp_t *p, uint64_t off[2])
{
    if (jp_expect(p, '[') < 0 || jp_uint(p, &off[0]) < 0 || jp_expect(p, ',') < 0 ||
        jp_uint(p, &off[1]) < 0 || jp_expect(p, ']') < 0)
        return jp_fail(p, "data_offsets must be [begin,end]");
    return 0;
}

/* Bits of which fields were seen, so each appears exactly once. */
enum { SEEN_DTYPE = 1, SEEN_SHAPE = 2, SEEN_OFFS = 4 };

static int parse_tensor_field(jp_t *p, st_tensor_t *t, uint64_t off[2], int *seen)
{
    char *k;
    if (jp_string(p, &k) < 0 || jp_expect(p, ':') < 0) {
        free(k);
        return -1;
    }
    int rc = 0, bit = 0;
    if (strcmp(k, "dtype") == 0) {
        char *d = NULL;
        bit = SEEN_DTYPE;
        rc = jp_string(p, &d);
        if (rc == 0 && st_dtype_parse(d, &t->dtype) < 0)
            rc = jp_fail(p, "unknown dtype");
        free(d);
    } else if (strcmp(k, "shape") == 0) {
        bit = SEEN_SHAPE;
        rc = parse_shape(p, t);
    } else if (strcmp(k, "data_offsets") == 0) {
        bit = SEEN_OFFS;
        rc = parse_offsets(p, off);
    } else {
        rc = jp_skip(p, 2);   /* tolerate fields newer writers may add */
    }
    free(k);
    if (rc == 0 && (*seen & bit))
        rc = jp_fail(p, "duplicate field in tensor entry");
    *seen |= bit;
    return rc;
}

/* Check the entry against the data section: numel and byte count agree,
 * the range lies inside the file. */
static int check_tensor(jp_t *p, st_tensor_t *t, const uint64_t off[2], size_t data_len)
{
    uint64_t numel = 1;
    for (int i = 0; i < t->ndim; i++) {
        uint64_t d = (uint64_t)t->shape[i];
        if (d != 0 && numel > (UINT64_MAX / 8) / d)
            return jp_fail(p, "shape too large");
        numel *= d;
    }
    uint64_t bytes = numel * st_dtype_size(t->dtype);
    if (off[1] < off[0] || off[1] > data_len) {
        err_set(p->err, p->errlen,
                "%s: tensor '%s': data_offsets [%llu,%llu] outside the data section "
                "(%zu bytes; file truncated?)",
                p->what, t->name, (unsigned long long)off[0], (unsigned long long)off[1],
                data_len);
        p->failed = 1;
        return -1;
    }
    if (off[1] - off[0] != bytes) {
        char sh[160];
        err_set(p->err, p->errlen,
                "%s: tensor '%s': %s %s needs %llu bytes but data_offsets span %llu",
                p->what, t->name, st_dtype_name(t->dtype), st_shape_str(t->shape, t->ndim, sh,
                sizeof sh), (unsigned long long)bytes,
                (unsigned long long)(off[1] - off[0]));
        p->failed = 1;
        return -1;
    }
    t->numel = (int64_t)numel;
    t->nbytes = (size_t)bytes;
    return 0;
}

static int parse_tensor(jp_t *p, safetensors_t *st, char *name)
{
    if (tensor_reserve(st) < 0) {
        free(name);
        return jp_fail(p, "out of memory");
    }
    st_tensor_t *t = &st->tensors[st->n];
    memset(t, 0, sizeof *t);
    t->name = name;
    st->n++;    /* owned by st from here on, freed by destroy */
    uint64_t off[2] = {0, 0};
    int seen = 0;
    if (jp_expect(p, '{') < 0)
        return -1;
    if (jp_peek(p) != '}') {
        for (;;) {
            if (parse_tensor_field(p, t, off, &seen) < 0)
                return -1;
            char d = jp_peek(p);
            p->pos++;
            if (d == '}')
                break;
            if (d != ',')
                return jp_fail(p, "expected ',' or '}' in tensor entry");
        }
    } else {
        p->pos++;
    }
    if (seen != (SEEN_DTYPE | SEEN_SHAPE | SEEN_OFFS)) {
        err_set(p->err, p->errlen, "%s: tensor '%s' lacks dtype, shape or data_offsets",
                p->what, name);
        p->failed = 1;
        return -1;
    }
    if (check_tensor(p, t, off, st->data_len) < 0)
        return -1;
    t->data = st->data + off[0];
    return 0;
}

static int parse_header(jp_t *p, safetensors_t *st)
{
    int seen_meta = 0;
    if (jp_expect(p, '{') < 0)
        return -1;
    if (jp_peek(p) == '}') {
        p->pos++;
    } else {
        for (;;) {
            char *key;
            if (jp_string(p, &key) < 0 || jp_expect(p, ':') < 0) {
                free(key);
                return -1;
            }
            int rc;
            if (strcmp(key, "__metadata__") == 0) {
                free(key);
                if (seen_meta++)
                    return jp_fail(p, "duplicate __metadata__");
                rc = parse_metadata(p, st);
            } else {
                rc = parse_tensor(p, st, key);
            }
            if (rc < 0)
                return -1;
            char d = jp_peek(p);
            p->pos++;
            if (d == '}')
                break;
            if (d != ',')
                return jp_fail(p, "expected ',' or '}' after a tensor");
        }
    }
    jp_ws(p);
    if (p->pos != p->len)
        return jp_fail(p, "trailing bytes after the header object");
    return 0;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(((const st_tensor_t *)a)->name, ((const st_tensor_t *)b)->name);
}

/* By where the data starts, then ends (empty tensors sort before a
 * tensor starting at the same offset). */
static int cmp_span(const void *a, const void *b)
{
    const st_tensor_t *x = *(st_tensor_t *const *)a, *y = *(st_tensor_t *const *)b;
    const uint8_t *px = x->data, *py = y->data;
    if (px != py)
        return px < py ? -1 : 1;
    return x->nbytes < y->nbytes ? -1 : x->nbytes > y->nbytes;
}

/* The tensors must tile the data section exactly, as the reference reader
 * requires: no overlap, no gap, and no byte after the last tensor (trailing
 * bytes are where a truncated header or an appended payload would hide). */
static int check_tiling(safetensors_t *st, const st_tensor_t **order, char *err, size_t errlen)
{
    for (size_t i = 0; i < st->n; i++)
        order[i] = &st->tensors[i];
    qsort(order, st->n, sizeof *order, cmp_span);
    size_t end = 0;
    const char *prev = NULL;
    for (size_t i = 0; i < st->n; i++) {
        size_t begin = (size_t)((const uint8_t *)order[i]->data - st->data);
        if (begin < end) {
            err_set(err, errlen, "%s: tensors '%s' and '%s' overlap in the data section",
                    st->path, prev, order[i]->name);
            return -1;
        }
        if (begin > end) {
            err_set(err, errlen, "%s: %zu bytes before tensor '%s' (data_offsets %zu) belong to "
                    "no tensor: corrupt file", st->path, begin - end, order[i]->name, begin);
            return -1;
        }
        end = begin + order[i]->nbytes;
        prev = order[i]->name;
    }
    if (end != st->data_len) {
        err_set(err, errlen, "%s: %zu trailing bytes after the last tensor's data (the header's "
                "offsets cover %zu of the %zu-byte data section): corrupt or appended-to file",
                st->path, st->data_len - end, end, st->data_len);
        return -1;
    }
    return 0;
}

/* Duplicate names, overlapping, uncovered or trailing bytes all mean a
 * corrupt file. */
static int check_unique_and_tiled(safetensors_t *st, char *err, size_t errlen)
{
    if (st->n >= 2) /* qsort of a NULL array is undefined even when empty */
        qsort(st->tensors, st->n, sizeof *st->tensors, cmp_name);
    for (size_t i = 1; i < st->n; i++)
        if (strcmp(st->tensors[i - 1].name, st->tensors[i].name) == 0) {
            err_set(err, errlen, "%s: tensor '%s' appears twice in the header", st->path,
                    st->tensors[i].name);
            return -1;
        }
    const st_tensor_t **order = malloc((st->n ? st->n : 1) * sizeof *order);
    if (!order) {
        err_set(err, errlen, "%s: out of memory", st->path);
        return -1;
    }
    int rc = check_tiling(st, order, err, errlen);
    free(order);
    return rc;
}

/* Parse st->map (already set) into tensors. */
static int st_parse(safetensors_t *st, char *err, size_t errlen)
{
    if (st->map_len < 8) {
        err_set(err, errlen, "%s: not a safetensors file: %zu bytes, shorter than the 8-byte "
                "header length", st->path, st->map_len);
        return -1;
    }
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = hlen << 8 | st->map[i];
    if (hlen > ST_MAX_HEADER || hlen > st->map_len - 8) {
        err_set(err, errlen, "%s: header length %llu exceeds the file (%zu bytes) or the "
                "%u-byte limit: truncated or not a safetensors file", st->path,
                (unsigned long long)hlen, st->map_len, ST_MAX_HEADER);
        return -1;
    }
    st->data = st->map + 8 + hlen;
    st->data_len = st->map_len - 8 - (size_t)hlen;
    jp_t p = {.s = (const char *)st->map + 8, .len = (size_t)hlen, .what = st->path,
              .err = err, .errlen = errlen};
    if (memchr(p.s, '\0', p.len)) {
        err_set(err, errlen, "%s: bad safetensors header: NUL byte inside the JSON", st->path);
        return -1;
    }
    if (parse_header(&p, st) < 0)
        return -1;
    return check_unique_and_tiled(st, err, errlen);
}

static safetensors_t *st_alloc(const char *path)
{
    safetensors_t *st = calloc(1, sizeof *st);
    if (!st)
        return NULL;
    st->path = strdup(path);
    if (!st->path) {
        free(st);
        return NULL;
    }
    return st;
}

safetensors_t *safetensors_open(const char *path, char *err, size_t errlen)
{
    safetensors_t *st = st_alloc(path);
    if (!st) {
        err_set(err, errlen, "%s: out of memory", path);
        return NULL;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        err_set(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        safetensors_destroy(&st);
        return NULL;
    }
    struct stat sb;
    if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode)) {
        err_set(err, errlen, "%s: not a regular file", path);
        close(fd);
        safetensors_destroy(&st);
        return NULL;
    }
    st->map_len = (size_t)sb.st_size;
    if (st->map_len > 0) {
        void *m = mmap(NULL, st->map_len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            err_set(err, errlen, "%s: mmap failed: %s", path, strerror(errno));
            close(fd);
            st->map_len = 0;
            safetensors_destroy(&st);
            return NULL;
        }
        st->map = m;
        st->mapped = 1;
    }
    close(fd);
    if (st_parse(st, err, errlen) < 0)
        safetensors_destroy(&st);
    return st;
}

safetensors_t *safetensors_open_buffer(const void *buf, size_t len, const char *what,
                                       char *err, size_t errlen)
{
    safetensors_t *st = st_alloc(what ? what : "<buffer>");
    uint8_t *copy = st ? malloc(len ? len : 1) : NULL;
    if (!copy) {
        err_set(err, errlen, "%s: out of memory", what ? what : "<buffer>");
        safetensors_destroy(&st);
        return NULL;
    }
    if (len)
        memcpy(copy, buf, len);
    st->map = copy;
    st->map_len = len;
    if (st_parse(st, err, errlen) < 0)
        safetensors_destroy(&st);
    return st;
}

void safetensors_destroy(safetensors_t **stp)
{
    if (!stp || !*stp)
        return;
    safetensors_t *st = *stp;
    for (size_t i = 0; i < st->n; i++)
        free((char *)st->tensors[i].name);
    free(st->tensors);
    for (size_t i = 0; i < st->n_meta; i++) {
        free(st->meta[i].key);
        free(st->meta[i].value);
    }
    free(st->meta);
    if (st->mapped)
        munmap((void *)st->map, st->map_len);
    else
        free((void *)st->map);
    free(st->path);
    free(st);
    *stp = NULL;
}

size_t safetensors_count(const safetensors_t *st)
{
    return st->n;
}

const st_tensor_t *safetensors_at(const safetensors_t *st, size_t i)
{
    return i < st->n ? &st->tensors[i] : NULL;
}

const st_tensor_t *safetensors_get(const safetensors_t *st, const char *name)
{
    st_tensor_t key = {.name = name};
    return bsearch(&key, st->tensors, st->n, sizeof key, cmp_name);
}

const char *safetensors_path(const safetensors_t *st)
{
    return st->path;
}

size_t safetensors_meta_count(const safetensors_t *st)
{
    return st->n_meta;
}

int safetensors_meta_at(const safetensors_t *st, size_t i, const char **key, const char **value)
{
    if (i >= st->n_meta)
        return -1;
    *key = st->meta[i].key;
    *value = st->meta[i].value;
    return 0;
}

const char *safetensors_meta(const safetensors_t *st, const char *key)
{
    for (size_t i = 0; i < st->n_meta; i++)
        if (strcmp(st->meta[i].key, key) == 0)
            return st->meta[i].value;
    return NULL;
}

/* ------------------------------------------------------------ conversion */

int st_tensor_to_f32(const st_tensor_t *t, float *out, size_t n)
{
    if (!t || (int64_t)n != t->numel)
        return -1;
    const uint8_t *s = t->data;
    switch (t->dtype) {
    case ST_F32:
        memcpy(out, s, n * 4);
        return 0;
    case ST_F64:
        for (size_t i = 0; i < n; i++) {
            double d;
            memcpy(&d, s + 8 * i, 8);
            out[i] = (float)d;
        }
        return 0;
    case ST_F16:
    case ST_BF16:
        for (size_t i = 0; i < n; i++) {
            uint16_t h = (uint16_t)(s[2 * i] | s[2 * i + 1] << 8);
            out[i] = t->dtype == ST_F16 ? st_f16_to_f32(h) : st_bf16_to_f32(h);
        }
        return 0;
    default:
        return -1;
    }
}

int st_tensor_to_i64(const st_tensor_t *t, int64_t *out, size_t n)
{
    if (!t || (int64_t)n != t->numel)
        return -1;
    const uint8_t *s = t->data;
    for (size_t i = 0; i < n; i++) {
        switch (t->dtype) {
        case ST_I64: memcpy(&out[i], s + 8 * i, 8); break;
        case ST_I32: { int32_t v; memcpy(&v, s + 4 * i, 4); out[i] = v; break; }
        case ST_I16: { int16_t v; memcpy(&v, s + 2 * i, 2); out[i] = v; break; }
        case ST_I8: out[i] = (int8_t)s[i]; break;
        case ST_U8:
        case ST_BOOL: out[i] = s[i]; break;
        default: return -1;
        }
    }
    return 0;
}

/* ---------------------------------------------------------------- writer */

typedef struct {
    char *name;
    st_dtype_t dtype;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    uint8_t *data;
    size_t nbytes;
} stw_tensor_t;

struct st_writer {
    stw_tensor_t *t;
    size_t n, cap;
    st_meta_t *meta;
    size_t n_meta, cap_meta;
};

st_writer_t *st_writer_new(void)
{
    return calloc(1, sizeof(st_writer_t));
}

void st_writer_destroy(st_writer_t **wp)
{
    if (!wp || !*wp)
        return;
    st_writer_t *w = *wp;
    for (size_t i = 0; i < w->n; i++) {
        free(w->t[i].name);
        free(w->t[i].data);
    }
    free(w->t);
    for (size_t i = 0; i < w->n_meta; i++) {
        free(w->meta[i].key);
        free(w->meta[i].value);
    }
    free(w->meta);
    free(w);
    *wp = NULL;
}

static int writer_has(const st_writer_t *w, const char *name)
{
    for (size_t i = 0; i < w->n; i++)
        if (strcmp(w->t[i].name, name) == 0)
            return 1;
    return 0;
}

int st_writer_add(st_writer_t *w, const char *name, st_dtype_t dt, int ndim,
                  const int64_t *shape, const void *data, char *err, size_t errlen)
{
    if ((unsigned)dt >= ST_DTYPE_COUNT || ndim < 0 || ndim > ST_MAX_DIMS || !name ||
        !*name || strcmp(name, "__metadata__") == 0) {
        err_set(err, errlen, "safetensors writer: bad tensor '%s' (dtype, rank <= %d, name)",
                name ? name : "(null)", ST_MAX_DIMS);
        return -1;
    }
    if (writer_has(w, name)) {
        err_set(err, errlen, "safetensors writer: tensor '%s' added twice", name);
        return -1;
    }
    size_t numel = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0 || (shape[i] && numel > SIZE_MAX / 8 / (size_t)shape[i])) {
            err_set(err, errlen, "safetensors writer: tensor '%s': bad shape", name);
            return -1;
        }
        numel *= (size_t)shape[i];
    }
    if (w->n == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 32;
        stw_tensor_t *t = realloc(w->t, cap * sizeof *t);
        if (!t)
            goto oom;
        w->t = t;
        w->cap = cap;
    }
    stw_tensor_t *t = &w->t[w->n];
    memset(t, 0, sizeof *t);
    t->nbytes = numel * st_dtype_size(dt);
    t->name = strdup(name);
    t->data = malloc(t->nbytes ? t->nbytes : 1);
    if (!t->name || !t->data) {
        free(t->name);
        free(t->data);
        goto oom;
    }
    if (t->nbytes)
        memcpy(t->data, data, t->nbytes);
    t->dtype = dt;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++)
        t->shape[i] = shape[i];
    w->n++;
    return 0;
oom:
    err_set(err, errlen, "safetensors writer: out of memory adding '%s'", name);
    return -1;
}

int st_writer_meta(st_writer_t *w, const char *key, const char *value, char *err, size_t errlen)
{
    if (w->n_meta == w->cap_meta) {
        size_t cap = w->cap_meta ? w->cap_meta * 2 : 8;
        st_meta_t *m = realloc(w->meta, cap * sizeof *m);
        if (!m)
            goto oom;
        w->meta = m;
        w->cap_meta = cap;
    }
    char *k = strdup(key), *v = strdup(value);
    if (!k || !v) {
        free(k);
        free(v);
        goto oom;
    }
    w->meta[w->n_meta++] = (st_meta_t){k, v};
    return 0;
oom:
    err_set(err, errlen, "safetensors writer: out of memory adding metadata '%s'", key);
    return -1;
}

/* A growable text buffer for the header. */
typedef struct {
    char *s;
    size_t len, cap;
    int oom;
} sbuf_t;

static void sb_putn(sbuf_t *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *ns = realloc(b->s, cap);
        if (!ns) {
            b->oom = 1;
            return;
        }
        b->s = ns;
        b->cap = cap;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

static void sb_puts(sbuf_t *b, const char *s)
{
    sb_putn(b, s, strlen(s));
}

static void sb_json_str(sbuf_t *b, const char *s)
{
    sb_puts(b, "\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        char esc[8];
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            sb_putn(b, esc, 2);
        } else if (c < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            sb_puts(b, esc);
        } else {
            sb_putn(b, (const char *)&c, 1);
        }
    }
    sb_puts(b, "\"");
}

/* Header JSON, padded with spaces so the data section starts 8-aligned. */
static int build_header(const st_writer_t *w, sbuf_t *b)
{
    size_t off = 0;
    char num[64];
    sb_puts(b, "{");
    if (w->n_meta) {
        sb_puts(b, "\"__metadata__\":{");
        for (size_t i = 0; i < w->n_meta; i++) {
            if (i)
                sb_puts(b, ",");
            sb_json_str(b, w->meta[i].key);
            sb_puts(b, ":");
            sb_json_str(b, w->meta[i].value);
        }
        sb_puts(b, "}");
    }
    for (size_t i = 0; i < w->n; i++) {
        const stw_tensor_t *t = &w->t[i];
        if (i || w->n_meta)
            sb_puts(b, ",");
        sb_json_str(b, t->name);
        sb_puts(b, ":{\"dtype\":\"");
        sb_puts(b, st_dtype_name(t->dtype));
        sb_puts(b, "\",\"shape\":");
        sb_puts(b, st_shape_str(t->shape, t->ndim, num, sizeof num));
        snprintf(num, sizeof num, ",\"data_offsets\":[%zu,%zu]}", off, off + t->nbytes);
        sb_puts(b, num);
        off += t->nbytes;
    }
    sb_puts(b, "}");
    while (!b->oom && (b->len % 8) != 0)
        sb_puts(b, " ");
    return b->oom ? -1 : 0;
}

static int write_body(const st_writer_t *w, FILE *out, const sbuf_t *hdr)
{
    uint8_t len8[8];
    for (int i = 0; i < 8; i++)
        len8[i] = (uint8_t)((uint64_t)hdr->len >> (8 * i));
    if (fwrite(len8, 1, 8, out) != 8 || fwrite(hdr->s, 1, hdr->len, out) != hdr->len)
        return -1;
    for (size_t i = 0; i < w->n; i++)
        if (w->t[i].nbytes && fwrite(w->t[i].data, 1, w->t[i].nbytes, out) != w->t[i].nbytes)
            return -1;
    return 0;
}

int st_writer_save(const st_writer_t *w, const char *path, char *err, size_t errlen)
{
    sbuf_t hdr = {0};
    if (build_header(w, &hdr) < 0) {
        free(hdr.s);
        err_set(err, errlen, "%s: out of memory building the header", path);
        return -1;
    }
    atomic_file_t *f = atomic_file_new(path, err, errlen);
    int rc = -1;
    if (f && write_body(w, atomic_file_stream(f), &hdr) < 0) {
        err_set(err, errlen, "%s: writing %s failed: %s (disk full?)", path,
                atomic_file_tmp_path(f), strerror(errno));
        atomic_file_destroy(&f);
    } else if (f) {
        rc = atomic_file_commit(&f, err, errlen);
    }
    free(hdr.s);
    return rc;
}
