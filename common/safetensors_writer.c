/* safetensors writer: tensors and metadata collected in memory, the header
 * built with jansson, the file written through common/atomic_file. */
#include "common/safetensors.h"

#include "common/atomic_file.h"
#include "common/errbuf.h"
#include "common/json.h"
#include "common/utf8.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint8_t *bytes;
    size_t nbytes;
} stw_data_t;

struct st_writer {
    json_t *entries;   /* name -> {"dtype","shape","data_offsets"}, in add order */
    json_t *meta;      /* __metadata__: key -> string */
    stw_data_t *data;  /* each tensor's bytes, in add order */
    size_t n, cap;
    size_t offset;     /* bytes of data so far: where the next tensor starts */
};

st_writer_t *st_writer_new(void)
{
    st_writer_t *w = calloc(1, sizeof *w);
    if (w && (!(w->entries = json_object()) || !(w->meta = json_object())))
        st_writer_destroy(&w);
    return w;
}

void st_writer_destroy(st_writer_t **wp)
{
    if (!wp || !*wp)
        return;
    st_writer_t *w = *wp;
    for (size_t i = 0; i < w->n; i++)
        free(w->data[i].bytes);
    free(w->data);
    json_decref(w->entries);
    json_decref(w->meta);
    free(w);
    *wp = NULL;
}

/* The header entry of a tensor whose bytes start at offset. */
static json_t *s_entry(st_dtype_t dt, int ndim, const int64_t *shape, size_t offset,
                       size_t nbytes)
{
    json_t *dims = json_array();
    for (int i = 0; dims && i < ndim; i++)
        if (json_array_append_new(dims, json_integer(shape[i])) != 0) {
            json_decref(dims);
            dims = NULL;
        }
    return json_pack("{s:s, s:o, s:[I,I]}", "dtype", st_dtype_name(dt), "shape", dims,
                     "data_offsets", (json_int_t)offset, (json_int_t)(offset + nbytes));
}

int st_writer_add(st_writer_t *w, const char *name, st_dtype_t dt, int ndim,
                  const int64_t *shape, const void *data, char *err, size_t errlen)
{
    if ((unsigned)dt >= ST_DTYPE_COUNT || ndim < 0 || ndim > ST_MAX_DIMS || !name ||
        !*name || strcmp(name, "__metadata__") == 0 || !utf8_is_valid(name)) {
        err_set(err, errlen, "safetensors writer: bad tensor '%s' (dtype, rank <= %d, UTF-8 name)",
                name ? name : "(null)", ST_MAX_DIMS);
        return -1;
    }
    if (json_object_get(w->entries, name)) {
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
        stw_data_t *d = realloc(w->data, cap * sizeof *d);
        if (!d)
            goto oom;
        w->data = d;
        w->cap = cap;
    }
    stw_data_t *d = &w->data[w->n];
    d->nbytes = numel * st_dtype_size(dt);
    d->bytes = malloc(d->nbytes ? d->nbytes : 1);
    if (!d->bytes)
        goto oom;
    if (json_object_set_new(w->entries, name, s_entry(dt, ndim, shape, w->offset, d->nbytes))) {
        free(d->bytes);
        goto oom;
    }
    if (d->nbytes)
        memcpy(d->bytes, data, d->nbytes);
    w->offset += d->nbytes;
    w->n++;
    return 0;
oom:
    err_set(err, errlen, "safetensors writer: out of memory adding '%s'", name);
    return -1;
}

int st_writer_meta(st_writer_t *w, const char *key, const char *value, char *err, size_t errlen)
{
    if (!utf8_is_valid(key) || !utf8_is_valid(value)) {
        err_set(err, errlen, "safetensors writer: metadata '%s' is not UTF-8", key);
        return -1;
    }
    if (json_object_set_new(w->meta, key, json_string(value)) != 0) {
        err_set(err, errlen, "safetensors writer: out of memory adding metadata '%s'", key);
        return -1;
    }
    return 0;
}

/* The header text, __metadata__ first, padded with spaces so that the data
 * section starts 8-aligned; *len its length. NULL when out of memory. */
static char *s_header(const st_writer_t *w, size_t *len)
{
    json_t *h = json_object();
    bool bad = !h;
    if (!bad && json_object_size(w->meta))
        bad = json_object_set(h, "__metadata__", w->meta) != 0;
    if (!bad)
        bad = json_object_update(h, w->entries) != 0;
    char *text = bad ? NULL : json_to_text(h, JSON_STYLE_COMPACT);
    json_decref(h);
    if (!text)
        return NULL;
    size_t n = strlen(text), padded = (n + 7) / 8 * 8;
    char *p = realloc(text, padded + 1);
    if (!p) {
        free(text);
        return NULL;
    }
    memset(p + n, ' ', padded - n);
    p[padded] = '\0';
    *len = padded;
    return p;
}

/* u64 little-endian header length, the header, the tensors' bytes. */
static int s_write(const st_writer_t *w, FILE *out, const char *hdr, size_t hdr_len)
{
    uint8_t len8[8];
    for (int i = 0; i < 8; i++)
        len8[i] = (uint8_t)((uint64_t)hdr_len >> (8 * i));
    if (fwrite(len8, 1, 8, out) != 8 || fwrite(hdr, 1, hdr_len, out) != hdr_len)
        return -1;
    for (size_t i = 0; i < w->n; i++)
        if (w->data[i].nbytes &&
            fwrite(w->data[i].bytes, 1, w->data[i].nbytes, out) != w->data[i].nbytes)
            return -1;
    return 0;
}

int st_writer_save(const st_writer_t *w, const char *path, char *err, size_t errlen)
{
    size_t hdr_len = 0;
    char *hdr = s_header(w, &hdr_len);
    if (!hdr) {
        err_set(err, errlen, "%s: out of memory building the header", path);
        return -1;
    }
    atomic_file_t *f = atomic_file_new(path, err, errlen);
    int rc = -1;
    if (f && s_write(w, atomic_file_stream(f), hdr, hdr_len) < 0) {
        err_set(err, errlen, "%s: writing %s failed: %s (disk full?)", path,
                atomic_file_tmp_path(f), strerror(errno));
        atomic_file_destroy(&f);
    } else if (f) {
        rc = atomic_file_commit(&f, err, errlen);
    }
    free(hdr);
    return rc;
}

int st_writer_image(const st_writer_t *w, uint8_t **out, size_t *len, char *err, size_t errlen)
{
    size_t hdr_len = 0;
    char *hdr = s_header(w, &hdr_len), *buf = NULL;
    FILE *mem = hdr ? open_memstream(&buf, len) : NULL;
    int rc = mem && s_write(w, mem, hdr, hdr_len) == 0 ? 0 : -1;
    if (mem && fclose(mem) != 0)
        rc = -1;
    free(hdr);
    if (rc < 0) {
        free(buf);
        err_set(err, errlen, "out of memory building a safetensors image");
        return -1;
    }
    *out = (uint8_t *)buf;
    return 0;
}
