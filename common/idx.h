/* idx — reader for the IDX files of MNIST / Fashion-MNIST (plain or .gz).
 *
 * An IDX file is: 2 zero bytes, a type byte (0x08 = uint8), the number of
 * dimensions, then each dimension as a big-endian uint32, then the data.
 * The reader checks every part of that against what the caller expects and
 * names the file in each error. Nothing is allocated on the header's word:
 * a plain file's declared size must equal its real size before the data
 * buffer exists, and a gzip stream is inflated in growing pieces, so memory
 * follows the bytes actually there (at most twice them), never the claim. */
#ifndef DDP_IDX_H
#define DDP_IDX_H

#include <stddef.h>
#include <stdint.h>

#define IDX_MAX_DIMS 4
/* Largest payload accepted: far above MNIST's 47 MB and EMNIST's 550 MB,
 * low enough that a corrupt or hostile file cannot take the machine. */
#define IDX_MAX_BYTES ((size_t)1 << 31)

typedef struct {
    int ndims;
    uint32_t dims[IDX_MAX_DIMS];
    uint8_t *data;  /* owned; dims[0] * ... * dims[ndims-1] bytes */
    size_t len;
} idx_file_t;

/* Reads PATH (gzip or plain, told apart by the gzip magic), requires uint8
 * data with exactly NDIMS dimensions, no zero dimension and a payload of
 * exactly the declared size (no byte missing, none after it, nothing after
 * the gzip stream). Returns 0, or -1 with a reason naming PATH in ERR. */
int idx_file_read(const char *path, int ndims, idx_file_t *out, char *err, size_t errlen);

/* The same checks on an in-memory image of a file (plain or gzip; copied,
 * the caller keeps BUF). NAME stands for the file in messages. */
int idx_parse_buffer(const uint8_t *buf, size_t len, const char *name, int ndims,
                     idx_file_t *out, char *err, size_t errlen);

void idx_file_free(idx_file_t *f);

/* The existing file PREFIX-SUFFIX or PREFIX-SUFFIX.gz (plain first), as a
 * malloc'd string; NULL with a reason naming both candidates. */
char *idx_find(const char *prefix, const char *suffix, char *err, size_t errlen);

#endif
