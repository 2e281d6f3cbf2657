/* exact_grads — a test's stand-in for gpud's trainer in bitwise training
 * (gpud/grad_exact.c): every parameter gradient the model hands the
 * grad-ready hook (once per chunk: the next chunk overwrites it) summed
 * exactly into an xsum with one segment per parameter, in model_param_at
 * order; exact_grads_write rounds the sums into the gradient arrays.
 *
 *   exact_grads_t e;
 *   exact_grads_open(&e, m);
 *   model_set_grad_ready(m, exact_grads_hook, &e);
 *   per step: xsum_clear(e.x); model_train_step_*(...); [all-reduce e.x]
 *             exact_grads_write(&e);
 *   exact_grads_close(&e);
 */
#ifndef DDP_TEST_EXACT_GRADS_H
#define DDP_TEST_EXACT_GRADS_H

#include <stdlib.h>

#include "common/xsum.h"
#include "gpud/model.h"
#include "tcheck.h"

typedef struct {
    xsum_t *x;
    float **grad;       /* n: each segment's gradient array */
    size_t *numel;
    int n;
} exact_grads_t;

static inline void exact_grads_open(exact_grads_t *e, model_t *m)
{
    int np = model_param_count(m);
    *e = (exact_grads_t){0};
    e->grad = calloc((size_t)(np > 0 ? np : 1), sizeof *e->grad);
    e->numel = calloc((size_t)(np > 0 ? np : 1), sizeof *e->numel);
    REQUIRE(e->grad && e->numel, "alloc");
    for (int i = 0; i < np; i++) {
        model_param_t p;
        if (model_param_at(m, i, &p) == 0 && p.grad) {
            e->grad[e->n] = p.grad;
            e->numel[e->n++] = p.numel;
        }
    }
    REQUIRE((e->x = xsum_new(e->numel, e->n)) != NULL, "xsum");
}

/* model_grad_ready_fn (ctx: the exact_grads_t): one chunk's gradient. */
static inline void exact_grads_hook(void *ctx, const float *grad)
{
    exact_grads_t *e = ctx;
    for (int i = 0; i < e->n; i++)
        if (e->grad[i] == grad) {
            xsum_add_f32(e->x, i, grad);
            return;
        }
    REQUIRE(0, "a gradient the hook does not know");
}

static inline void exact_grads_write(const exact_grads_t *e)
{
    for (int i = 0; i < e->n; i++)
        xsum_get_f32(e->x, i, e->grad[i]);
}

static inline void exact_grads_close(exact_grads_t *e)
{
    xsum_destroy(&e->x);
    free(e->grad);
    free(e->numel);
    *e = (exact_grads_t){0};
}

#endif
