/* safetensors reader: the file mapped read-only (or a copy of a buffer),
 * its JSON header parsed by jansson and checked field by field. Nothing in
 * the file is trusted: every length, offset and shape is checked against the
 * bytes actually present before a tensor is exposed, and a refusal says what
 * is wrong and where. */
#include "common/safetensors.h"

#include "common/errbuf.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* An unknown field of a tensor entry may nest at most this many arrays or
 * objects (newer writers may add fields; nothing sane nests deeper). */
#define ST_MAX_NESTING 31

typedef struct {
    const char *key;        /* into the header document */
    const char *value;
} st_meta_t;

struct safetensors {
    char *path;
    const uint8_t *map;     /* whole file */
    size_t map_len;
    int mapped;             /* 1: munmap, 0: free */
    const uint8_t *data;    /* data section */
    size_t data_len;
    json_t *header;         /* the parsed header; tensor names and metadata point into it */
    st_tensor_t *tensors;   /* sorted by name */
    size_t n;
    st_meta_t *meta;        /* in file order */
    size_t n_meta;
};

/* ------------------------------------------------------ header contents */

/* "PATH: bad safetensors header: [tensor 'NAME': ]why"; returns -1. */
static int s_bad(const safetensors_t *st, const char *tensor, const char *why, char *err,
                 size_t errlen)
{
    if (tensor)
        err_set(err, errlen, "%s: bad safetensors header: tensor '%s': %s", st->path, tensor, why);
    else
        err_set(err, errlen, "%s: bad safetensors header: %s", st->path, why);
    return -1;
}

/* A dimension or an offset: a non-negative integer up to 2^53 (what every
 * writer's JSON, Python's included, keeps exact). NULL, or what is wrong. */
static const char *s_uint(const json_t *v, uint64_t *out)
{
    if (json_is_real(v))
        return "expected an integer, got a fraction";
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return "expected a non-negative integer";
    if ((uint64_t)json_integer_value(v) > (1ull << 53))
        return "integer too large";
    *out = (uint64_t)json_integer_value(v);
    return NULL;
}

static const char *s_shape(const json_t *v, st_tensor_t *t)
{
    if (!json_is_array(v))
        return "shape must be an array of integers";
    if (json_array_size(v) > ST_MAX_DIMS)
        return "too many dimensions";
    size_t i;
    const json_t *d;
    t->ndim = 0;
    json_array_foreach(v, i, d) {
        uint64_t dim;
        const char *why = s_uint(d, &dim);
        if (why)
            return why;
        t->shape[t->ndim++] = (int64_t)dim;
    }
    return NULL;
}

static const char *s_offsets(const json_t *v, uint64_t off[2])
{
    if (!json_is_array(v) || json_array_size(v) != 2)
        return "data_offsets must be [begin,end]";
    const char *why = s_uint(json_array_get(v, 0), &off[0]);
    return why ? why : s_uint(json_array_get(v, 1), &off[1]);
}

/* Arrays and objects nested in v, itself included (0 for a scalar). */
static int s_nesting(const json_t *v)
{
    int deepest = 0;
    if (json_is_array(v)) {
        size_t i;
        const json_t *item;
        json_array_foreach(v, i, item) {
            int d = s_nesting(item);
            deepest = d > deepest ? d : deepest;
        }
    } else if (json_is_object(v)) {
        const char *key;
        const json_t *item;
        json_object_foreach((json_t *)v, key, item) {
            int d = s_nesting(item);
            deepest = d > deepest ? d : deepest;
        }
    } else {
        return 0;
    }
    return deepest + 1;
}

/* Fields other than dtype, shape and data_offsets are tolerated (newer
 * writers may add some), as long as they are not absurdly deep. */
static const char *s_unknown_fields(const json_t *entry)
{
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)entry, key, v) {
        if (strcmp(key, "dtype") != 0 && strcmp(key, "shape") != 0 &&
            strcmp(key, "data_offsets") != 0 && s_nesting(v) > ST_MAX_NESTING)
            return "nesting too deep";
    }
    return NULL;
}

/* Check the entry against the data section: numel and byte count agree,
 * the range lies inside the file. */
static int check_tensor(const safetensors_t *st, st_tensor_t *t, const uint64_t off[2],
                        char *err, size_t errlen)
{
    uint64_t numel = 1;
    for (int i = 0; i < t->ndim; i++) {
        uint64_t d = (uint64_t)t->shape[i];
        if (d != 0 && numel > (UINT64_MAX / 8) / d)
            return s_bad(st, t->name, "shape too large", err, errlen);
        numel *= d;
    }
    uint64_t bytes = numel * st_dtype_size(t->dtype);
    if (off[1] < off[0] || off[1] > st->data_len) {
        err_set(err, errlen,
                "%s: tensor '%s': data_offsets [%llu,%llu] outside the data section "
                "(%zu bytes; file truncated?)",
                st->path, t->name, (unsigned long long)off[0], (unsigned long long)off[1],
                st->data_len);
        return -1;
    }
    if (off[1] - off[0] != bytes) {
        char sh[160];
        err_set(err, errlen, "%s: tensor '%s': %s %s needs %llu bytes but data_offsets span %llu",
                st->path, t->name, st_dtype_name(t->dtype),
                st_shape_str(t->shape, t->ndim, sh, sizeof sh), (unsigned long long)bytes,
                (unsigned long long)(off[1] - off[0]));
        return -1;
    }
    t->numel = (int64_t)numel;
    t->nbytes = (size_t)bytes;
    t->data = st->data + off[0];
    return 0;
}

static int parse_tensor(safetensors_t *st, const char *name, const json_t *entry, char *err,
                        size_t errlen)
{
    st_tensor_t *t = &st->tensors[st->n++];
    memset(t, 0, sizeof *t);
    t->name = name;
    if (!json_is_object(entry))
        return s_bad(st, name, "expected '{': an entry is an object", err, errlen);
    const char *why = s_unknown_fields(entry);
    if (why)
        return s_bad(st, name, why, err, errlen);
    const json_t *dtype = json_object_get(entry, "dtype");
    const json_t *shape = json_object_get(entry, "shape");
    const json_t *offsets = json_object_get(entry, "data_offsets");
    if (!dtype || !shape || !offsets) {
        err_set(err, errlen, "%s: tensor '%s' lacks dtype, shape or data_offsets", st->path, name);
        return -1;
    }
    if (!json_is_string(dtype) || st_dtype_parse(json_string_value(dtype), &t->dtype) < 0) {
        err_set(err, errlen, "%s: bad safetensors header: tensor '%s': unknown dtype %s (F64, "
                "F32, F16, BF16, I64, I32, I16, I8, U8 or BOOL)", st->path, name,
                json_is_string(dtype) ? json_string_value(dtype) : "(not a string)");
        return -1;
    }
    uint64_t off[2];
    why = s_shape(shape, t);
    if (!why)
        why = s_offsets(offsets, off);
    if (why)
        return s_bad(st, name, why, err, errlen);
    return check_tensor(st, t, off, err, errlen);
}

static int parse_metadata(safetensors_t *st, const json_t *meta, char *err, size_t errlen)
{
    if (!json_is_object(meta))
        return s_bad(st, NULL, "__metadata__ must be an object of strings", err, errlen);
    st->meta = malloc((json_object_size(meta) ? json_object_size(meta) : 1) * sizeof *st->meta);
    if (!st->meta)
        return s_bad(st, NULL, "out of memory", err, errlen);
    const char *key;
    const json_t *value;
    json_object_foreach((json_t *)meta, key, value) {
        if (!json_is_string(value))
            return s_bad(st, NULL, "__metadata__ values must be strings", err, errlen);
        st->meta[st->n_meta++] = (st_meta_t){key, json_string_value(value)};
    }
    return 0;
}

/* The header document into tensors (file order) and metadata. */
static int parse_header(safetensors_t *st, const char *text, size_t len, char *err,
                        size_t errlen)
{
    json_error_t jerr;
    /* duplicate keys would let one tensor entry silently hide another */
    st->header = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!st->header) {
        err_set(err, errlen, "%s: bad safetensors header: %s at byte %d of %zu", st->path,
                jerr.text, jerr.position, len);
        return -1;
    }
    if (!json_is_object(st->header))
        return s_bad(st, NULL, "expected '{': the header is a JSON object", err, errlen);
    size_t n = json_object_size(st->header);
    st->tensors = malloc((n ? n : 1) * sizeof *st->tensors);
    if (!st->tensors)
        return s_bad(st, NULL, "out of memory", err, errlen);
    const char *key;
    const json_t *value;
    json_object_foreach(st->header, key, value) {
        int rc = strcmp(key, "__metadata__") == 0 ? parse_metadata(st, value, err, errlen)
                                                   : parse_tensor(st, key, value, err, errlen);
        if (rc < 0)
            return -1;
    }
    return 0;
}

/* ------------------------------------------------------------ the layout */

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

/* Parse st->map (already set) into tensors: the header, then the tiling
 * (overlapping, uncovered or trailing bytes all mean a corrupt file). */
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
    const char *text = (const char *)st->map + 8;
    if (memchr(text, '\0', (size_t)hlen))
        return s_bad(st, NULL, "NUL byte inside the JSON", err, errlen);
    if (parse_header(st, text, (size_t)hlen, err, errlen) < 0)
        return -1;
    if (st->n >= 2) /* qsort of a NULL array is undefined even when empty */
        qsort(st->tensors, st->n, sizeof *st->tensors, cmp_name);
    const st_tensor_t **order = malloc((st->n ? st->n : 1) * sizeof *order);
    if (!order)
        return s_bad(st, NULL, "out of memory", err, errlen);
    int rc = check_tiling(st, order, err, errlen);
    free(order);
    return rc;
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
    free(st->tensors);
    free(st->meta);
    json_decref(st->header);
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

