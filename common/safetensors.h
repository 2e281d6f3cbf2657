/* safetensors — read and write the safetensors format (weights, checkpoints).
 *
 * File layout: u64 little-endian N, N bytes of JSON header, then the data
 * section. The header maps tensor names to {"dtype","shape","data_offsets"}
 * (offsets relative to the data section) plus an optional "__metadata__"
 * map of strings. The header is UTF-8 JSON (jansson reads and writes it;
 * duplicate keys are refused). The reader maps the file read-only and
 * validates every field against the file size before exposing a tensor: a
 * malformed or truncated file is an error with a message, never a crash.
 *
 * Files: safetensors.c the reader, safetensors_writer.c the writer,
 * safetensors_dtype.c element types and conversions.
 *
 * Reader:
 *   char err[256];
 *   safetensors_t *st = safetensors_open("w.safetensors", err, sizeof err);
 *   const st_tensor_t *t = safetensors_get(st, "fc.weight");
 *   st_tensor_to_f32(t, buf, t->numel);   // F32/F16/BF16/F64 -> float
 *   safetensors_destroy(&st);             // tensors point into the mapping
 * Writer (atomic, through common/atomic_file.h):
 *   st_writer_t *w = st_writer_new();
 *   st_writer_add(w, "fc.weight", ST_F32, 2, shape, data, err, sizeof err);
 *   st_writer_save(w, "ckpt.safetensors", err, sizeof err);
 *   st_writer_destroy(&w);
 */
#ifndef DDP_SAFETENSORS_H
#define DDP_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    ST_F64, ST_F32, ST_F16, ST_BF16,
    ST_I64, ST_I32, ST_I16, ST_I8, ST_U8, ST_BOOL,
    ST_DTYPE_COUNT
} st_dtype_t;

#define ST_MAX_DIMS 8
/* Headers larger than this are refused (the reference implementation's cap). */
#define ST_MAX_HEADER (100u * 1024u * 1024u)

typedef struct {
    const char *name;           /* NUL-terminated, owned by the file object */
    st_dtype_t dtype;
    int ndim;                   /* 0 for a scalar */
    int64_t shape[ST_MAX_DIMS];
    int64_t numel;              /* product of shape (1 for a scalar) */
    const void *data;           /* into the mapping; may be unaligned */
    size_t nbytes;              /* numel * st_dtype_size(dtype) */
} st_tensor_t;

typedef struct safetensors safetensors_t;
typedef struct st_writer st_writer_t;

/* dtype helpers. st_dtype_parse returns 0 and sets *out, or -1. */
const char *st_dtype_name(st_dtype_t dt);
int st_dtype_parse(const char *s, st_dtype_t *out);
size_t st_dtype_size(st_dtype_t dt);

/* "[64,3,7,7]" (or "[]" for a scalar) into buf; returns buf. */
char *st_shape_str(const int64_t *shape, int ndim, char *buf, size_t len);

/* Open and validate a file. NULL on error with the reason in err. */
safetensors_t *safetensors_open(const char *path, char *err, size_t errlen);
/* Parse an in-memory image of a file (copied; the caller keeps buf).
 * `what` names it in error messages. */
safetensors_t *safetensors_open_buffer(const void *buf, size_t len, const char *what,
                                       char *err, size_t errlen);
void safetensors_destroy(safetensors_t **st);

/* Tensors in name order: index 0..count-1. */
size_t safetensors_count(const safetensors_t *st);
const st_tensor_t *safetensors_at(const safetensors_t *st, size_t i);
/* NULL when there is no tensor of that name. */
const st_tensor_t *safetensors_get(const safetensors_t *st, const char *name);
const char *safetensors_path(const safetensors_t *st);

/* __metadata__ entries, in file order. */
size_t safetensors_meta_count(const safetensors_t *st);
int safetensors_meta_at(const safetensors_t *st, size_t i, const char **key, const char **value);
const char *safetensors_meta(const safetensors_t *st, const char *key);

/* Convert a floating tensor (F32, F16, BF16, F64) to float. n must equal
 * t->numel. Returns 0, or -1 (wrong n or dtype not floating). */
int st_tensor_to_f32(const st_tensor_t *t, float *out, size_t n);
/* Convert an integer tensor (I64..U8, BOOL) to int64. Same contract. */
int st_tensor_to_i64(const st_tensor_t *t, int64_t *out, size_t n);

/* IEEE half / bfloat16 <-> float (round to nearest even on the way down). */
float st_f16_to_f32(uint16_t h);
float st_bf16_to_f32(uint16_t h);
uint16_t st_f32_to_f16(float f);
uint16_t st_f32_to_bf16(float f);

/* Writer. Tensors are copied on add; names must be unique and UTF-8, as must
 * metadata (a metadata key set twice keeps the last value). */
st_writer_t *st_writer_new(void);
int st_writer_add(st_writer_t *w, const char *name, st_dtype_t dt, int ndim,
                  const int64_t *shape, const void *data, char *err, size_t errlen);
int st_writer_meta(st_writer_t *w, const char *key, const char *value, char *err, size_t errlen);
/* Write atomically (common/atomic_file.h: temp file, fsync, rename, fsync the dir). */
int st_writer_save(const st_writer_t *w, const char *path, char *err, size_t errlen);
/* The same bytes in memory: *out (malloc'd, the caller frees it), *len. */
int st_writer_image(const st_writer_t *w, uint8_t **out, size_t *len, char *err, size_t errlen);
void st_writer_destroy(st_writer_t **w);

#endif
