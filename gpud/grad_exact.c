/* grad_exact — see grad_exact.h. */
#include "gpud/grad_exact.h"

#include <stdlib.h>

#include "common/errbuf.h"
#include "common/log.h"
#include "common/xsum.h"
#include "gpud/xsum_ring.h"

struct grad_exact {
    float *flat;
    int n;
    size_t *off;        /* n + 1: gradient i is flat[off[i], off[i + 1]) */
    xsum_t *sum;        /* the sums (a device's, read into it in reduce) */
    const bk_arena_t *dev;   /* grad_exact_use_arena: the arena its ops sum on */
    void *dsum;              /* the device's sums (dev->ops->xsum_new) */
    int dev_failed;          /* a device clear or add failed this step */
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
    grad_exact_t *e = *self;
    if (e->dsum)
        e->dev->ops->xsum->free(e->dev->ops->ctx, e->dsum);
    xsum_destroy(&e->sum);
    free(e->off);
    free(e);
    *self = NULL;
}

int grad_exact_use_arena(grad_exact_t *self, const bk_arena_t *grads, char *err,
                         size_t errlen)
{
    const bk_arena_ops_t *o = grads->ops;
    if (!o->xsum)
        return 0;
    if (grads->floats < self->off[self->n]) {
        err_set(err, errlen, "the exact sums: %zu gradient floats, the %s arena holds %zu "
                "(a bug)", self->off[self->n], o->name, grads->floats);
        return -1;
    }
    size_t *len = malloc((size_t)self->n * sizeof *len);
    for (int i = 0; len && i < self->n; i++)
        len[i] = self->off[i + 1] - self->off[i];
    self->dsum = len ? o->xsum->new(o->ctx, len, self->n) : NULL;
    free(len);
    if (!self->dsum) {
        err_set(err, errlen, "cannot keep the exact gradient sums in %s memory (%zu floats "
                "as %d-limb integers; see the log)", o->name, self->off[self->n], XSUM_LIMBS);
        return -1;
    }
    self->dev = grads;
    return 1;
}

int grad_exact_on_device(const grad_exact_t *self)
{
    return self->dsum != NULL;
}

void grad_exact_begin(grad_exact_t *self)
{
    xsum_clear(self->sum);
    self->dev_failed = self->dsum && self->dev->ops->xsum->clear(self->dev->ops->ctx,
                                                               self->dsum) < 0;
}

void grad_exact_add(grad_exact_t *self, int i)
{
    if (i < 0 || i >= self->n)
        return;
    if (!self->dsum)
        xsum_add_f32(self->sum, i, self->flat + self->off[i]);
    else if (!self->dev_failed)
        self->dev_failed = self->dev->ops->xsum->add(self->dev->ops->ctx, self->dsum, i,
                                                    self->dev->base + self->off[i]) < 0;
}

int grad_exact_reduce(grad_exact_t *self, allreduce_t *ar, int timeout_ms, char *err,
                      size_t errlen)
{
    if (self->dsum) {
        const bk_arena_ops_t *o = self->dev->ops;
        if (self->dev_failed || o->xsum->read(o->ctx, self->dsum, self->sum) < 0) {
            err_set(err, errlen, "the exact gradient sums on the %s failed (the log says "
                    "what failed and what to do)", o->name);
            return -1;
        }
        if (self->dev->traffic && o->xsum->read_bytes)
            self->dev->traffic->params += o->xsum->read_bytes(o->ctx, self->dsum);
    }
    if (ar && xsum_allreduce(self->sum, ar, timeout_ms, err, errlen) < 0)
        return -1;
    for (int i = 0; i < self->n; i++)
        xsum_get_f32(self->sum, i, self->flat + self->off[i]);
    if (log_verbose())
        log_debug("bitwise gradient sum: %zu floats, limbs made %s, %llu bytes sent over the "
                  "ring (int64 limbs)", self->off[self->n],
                  self->dsum ? "on the device" : "on the host",
                  (unsigned long long)grad_exact_ring_bytes(self, ar));
    return 0;
}

int grad_exact_device_reduce_ok(const grad_exact_t *self)
{
    return self->dsum && self->dev->ops->xsum->reduce;
}

int grad_exact_reduce_device(grad_exact_t *self, const bk_xsum_coll_t *coll, char *err,
                             size_t errlen)
{
    if (!grad_exact_device_reduce_ok(self)) {
        err_set(err, errlen, "the exact sums are not made on a device that can reduce them "
                "(a bug)");
        return -1;
    }
    const bk_arena_ops_t *o = self->dev->ops;
    if (self->dev_failed) {
        err_set(err, errlen, "the exact gradient sums on the %s failed (the log says what "
                "failed and what to do)", o->name);
        return -1;
    }
    if (o->xsum->reduce(o->ctx, self->dsum, coll, self->dev->base, err, errlen) < 0)
        return -1;
    log_debug("bitwise gradient sum: %zu floats, limbs made on the device and summed there "
              "(int64 limbs, NCCL)", self->off[self->n]);
    return 0;
}

uint64_t grad_exact_ring_bytes(const grad_exact_t *self, const allreduce_t *ar)
{
    return ar ? xsum_allreduce_sent(self->sum, ar) : 0;
}
