/* graph_ctx — what every kernel of a backend gets: the backend, and the
 * graph's sticky error (graph_error.c). The first failure is kept with the
 * name of the op that failed; later ones are dropped. Private to the
 * engine and the backends. */
#ifndef DDP_GRAPH_CTX_H
#define DDP_GRAPH_CTX_H

#include "gpud/backend.h"

typedef struct bk_ctx {
    backend_t *be;
    int failed;
    char name[128];     /* current op name, for messages */
    char err[640];
    int infer;                  /* the plans are an inference graph's (graph_plan.c) */
    unsigned params_version;    /* bumped when a fused op's weights are refolded */
} bk_ctx_t;

/* The first error ("conv layer3.0.conv1: ..."), or NULL. */
const char *bk_ctx_error(const bk_ctx_t *g);
/* Name the next op for error messages and profiles (copied; NULL: none). */
void bk_ctx_set_name(bk_ctx_t *g, const char *name);
/* Record the first failure of g as "NAME: message" (later ones are
 * dropped). Returns NULL so that builders can `return bk_ctx_fail(...)`. */
void *bk_ctx_fail(bk_ctx_t *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
