/* testutil — small helpers shared by the loaderd unit tests. */
#ifndef DDP_LOADER_TESTUTIL_H
#define DDP_LOADER_TESTUTIL_H

#include "common/image/decode.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

extern int tu_failures;

/* Records a failure with its location and keeps going, so one run shows
 * every broken case. */
#define CHECK(cond, ...)                                                                     \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond);         \
            fprintf(stderr, __VA_ARGS__);                                                    \
            fputc('\n', stderr);                                                             \
            tu_failures++;                                                                   \
        }                                                                                    \
    } while (0)

/* Exit code: 0 when no CHECK failed, with a summary line. */
int tu_finish(const char *name);

/* PATH under the source tree ($DDPIPE_SRC, else the configure-time source
 * dir); a static buffer per call slot (4 slots, round robin). */
const char *tu_src(const char *rel);

/* Binary PGM (P5) / PPM (P6) with maxval 255. NULL with a message on error. */
image_t *tu_read_pnm(const char *path);

/* A fresh directory under $TMPDIR (malloc'd path) and its recursive removal. */
char *tu_mkdtemp(const char *tag);
void tu_rmtree(const char *path);

/* Creates PATH (and missing parent directories) with LEN bytes of DATA. */
int tu_write_file(const char *path, const void *data, size_t len);
/* Creates the directory PATH and its parents. */
int tu_mkdirs(const char *path);

/* Largest absolute difference of two equally long byte arrays, and how many
 * bytes differ at all (*ndiff may be NULL). */
int tu_maxdiff(const uint8_t *a, const uint8_t *b, size_t n, size_t *ndiff);

#endif
