/* grad_exact — see grad_exact.h. */
#include "gpud/grad_exact.h"

#include <stdlib.h>

#include "common/errbuf.h"
#include "common/xsum.h"
#include "gpud/xsum_ring.h"

struct grad_exact {
    float *flat;
    int n;
    size_t *off;        /* n + 1: gradient i is flat[off[i], off[i + 1]) */
    xsum_t *sum;
};

grad_exact_t *grad_exact_new(float *flat, const size_t *numel, int n, char *err,
                             size_t errlen)
{
    grad_exact_t *self = n >= 1 ? calloc(1, sizeof *self) : NULL;
    if (self && (self->off = malloc(((size_t)n + 1) * sizeof *self->off)) != NULL &&
        (self->sum = xsum_new(numel, n)) != NULL) {
        self->flat = flat;
        self->n = n;
        self->off[0] = 0;
        for (int i = 0; i < n; i++)
            self->off[i + 1] = self->off[i] + numel[i];
        return self;
    }
    err_set(err, errlen, n >= 1 ? "out of memory for the exact gradient sums (%d tensors)"
                                : "no gradient to sum (%d tensors)", n);
    grad_exact_destroy(&self);
    return NULL;
}

void grad_exact_destroy(grad_exact_t **self)
{
    if (!self || !*self)
        return;
    xsum_destroy(&(*self)->sum);
    free((*self)->off);
    free(*self);
    *self = NULL;
}

void grad_exact_begin(grad_exact_t *self)
{
    xsum_clear(self->sum);
}

void grad_exact_add(grad_exact_t *self, int i)
{
    if (i >= 0 && i < self->n)
        xsum_add_f32(self->sum, i, self->flat + self->off[i]);
}

int grad_exact_reduce(grad_exact_t *self, allreduce_t *ar, int timeout_ms, char *err,
                      size_t errlen)
{
    if (ar && xsum_allreduce(self->sum, ar, timeout_ms, err, errlen) < 0)
        return -1;
    for (int i = 0; i < self->n; i++)
        xsum_get_f32(self->sum, i, self->flat + self->off[i]);
    return 0;
}

uint64_t grad_exact_ring_bytes(const grad_exact_t *self, const allreduce_t *ar)
{
    return ar ? xsum_allreduce_sent(self->sum, ar) : 0;
}
