/* backend_impl — what an implementation of backend.h provides. Not for
 * model code. The generic layer (backend.c) validates arguments, computes
 * output shapes and keeps the sticky error; an implementation only creates
 * and runs primitives for shapes that are already known to be valid. */
#ifndef DDP_BACKEND_IMPL_H
#define DDP_BACKEND_IMPL_H

#include <stdarg.h>

#include "gpud/backend.h"

/* Every implementation's tensor starts with this. */
struct bk_tensor {
    int n, c, h, w;
    int is_input;
    int consumed;   /* a residual that an op accumulated into */
};

/* Every implementation's graph starts with this. */
struct bk_graph {
    backend_t *be;
    int failed;
    char name[128];     /* current op name, for messages */
    char err[640];
};

typedef struct bk_ops {
    const char *name;
    void (*destroy)(backend_t *be);
    bk_graph_t *(*graph_new)(backend_t *be);
    void (*graph_destroy)(bk_graph_t *g);
    /* Builders get validated arguments and the output shape in `out`
     * (n, c, h, w); they return a tensor of that shape or NULL after
     * bk_fail. */
    bk_tensor_t *(*input)(bk_graph_t *g, const int out[4]);
    bk_tensor_t *(*conv2d)(bk_graph_t *g, bk_tensor_t *x, const bk_conv_t *p,
                           bk_tensor_t *residual, const int out[4]);
    bk_tensor_t *(*pool2d)(bk_graph_t *g, bk_tensor_t *x, const bk_pool_t *p,
                           const int out[4]);
    bk_tensor_t *(*linear)(bk_graph_t *g, bk_tensor_t *x, const float *weight,
                           const float *bias, const int out[4]);
    bk_tensor_t *(*relu)(bk_graph_t *g, bk_tensor_t *x, const int out[4]);
    bk_tensor_t *(*add)(bk_graph_t *g, bk_tensor_t *a, bk_tensor_t *b, int relu,
                        const int out[4]);
    int (*write)(bk_graph_t *g, bk_tensor_t *t, const float *src);
    int (*run)(bk_graph_t *g);
    int (*read)(bk_graph_t *g, bk_tensor_t *t, float *dst);
} bk_ops_t;

/* Every implementation's backend starts with this. */
struct backend {
    const bk_ops_t *ops;
    int threads;
};

/* Constructors of the implementations (threads already resolved, >= 1). */
backend_t *cpu_backend_new(int threads, char *err, size_t errlen);
backend_t *ref_backend_new(int threads, char *err, size_t errlen);

#endif
