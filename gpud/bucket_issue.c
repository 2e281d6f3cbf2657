/* bucket_issue — see bucket_issue.h. */
#include "gpud/bucket_issue.h"

#include <stdlib.h>
#include <string.h>

#include "common/errbuf.h"

struct bucket_issue {
    const buckets_t *layout;
    int n, nb;
    int *left;               /* nb: gradients of bucket k not final yet */
    unsigned char *ready;    /* n */
    int next;                /* the next bucket to queue */
    int active, failed;
    float *base;
    bucket_enqueue_fn fn;
    void *ctx;
};

bucket_issue_t *bucket_issue_new(const buckets_t *layout, char *err, size_t errlen)
{
    bucket_issue_t *self = calloc(1, sizeof *self);
    if (!self) {
        err_set(err, errlen, "gradient buckets: out of memory");
        return NULL;
    }
    self->layout = layout;
    self->nb = buckets_count(layout);
    self->n = buckets_grads(layout);
    self->left = calloc((size_t)self->nb, sizeof *self->left);
    self->ready = calloc((size_t)self->n, 1);
    if (!self->left || !self->ready) {
        err_set(err, errlen, "gradient buckets: out of memory");
        bucket_issue_destroy(&self);
    }
    return self;
}

void bucket_issue_destroy(bucket_issue_t **self)
{
    if (!self || !*self)
        return;
    free((*self)->left);
    free((*self)->ready);
    free(*self);
    *self = NULL;
}

void bucket_issue_begin(bucket_issue_t *self, float *base, bucket_enqueue_fn fn, void *ctx)
{
    memset(self->left, 0, (size_t)self->nb * sizeof *self->left);
    memset(self->ready, 0, (size_t)self->n);
    for (int i = 0; i < self->n; i++)
        self->left[buckets_of(self->layout, i)]++;
    self->next = 0;
    self->failed = 0;
    self->active = 1;
    self->base = base;
    self->fn = fn;
    self->ctx = ctx;
}

/* Every complete bucket from next on, in order. */
static int drain(bucket_issue_t *self, char *err, size_t errlen)
{
    while (!self->failed && self->next < self->nb && self->left[self->next] == 0) {
        size_t lo, hi;
        buckets_range(self->layout, self->next, &lo, &hi);
        if (self->fn(self->ctx, self->base + lo, hi - lo, err, errlen) < 0) {
            self->failed = 1;
            return -1;
        }
        self->next++;
    }
    return self->failed ? -1 : 0;
}

/* Whether drain would queue a bucket now. */
static int drainable(const bucket_issue_t *self)
{
    return self->active && self->next < self->nb && self->left[self->next] == 0;
}

int bucket_issue_mark(bucket_issue_t *self, int i)
{
    if (self->failed)
        return -1;
    if (self->active && i >= 0 && i < self->n && !self->ready[i]) {
        self->ready[i] = 1;
        self->left[buckets_of(self->layout, i)]--;
    }
    return drainable(self);
}

int bucket_issue_flush(bucket_issue_t *self, char *err, size_t errlen)
{
    if (!self->active)
        return self->failed ? -1 : 0;
    return drain(self, err, errlen);
}

int bucket_issue_ready(bucket_issue_t *self, int i, char *err, size_t errlen)
{
    int r = bucket_issue_mark(self, i);
    return r <= 0 ? r : bucket_issue_flush(self, err, errlen);
}

int bucket_issue_finish(bucket_issue_t *self, char *err, size_t errlen)
{
    if (!self->active)
        return 0;
    for (int i = 0; i < self->n; i++)
        if (!self->ready[i]) {
            self->ready[i] = 1;
            self->left[buckets_of(self->layout, i)]--;
        }
    int rc = self->failed ? -1 : drain(self, err, errlen);
    self->active = 0;
    return rc;
}

void bucket_issue_abort(bucket_issue_t *self)
{
    self->active = 0;
}

int bucket_issue_active(const bucket_issue_t *self)
{
    return self->active;
}

int bucket_issue_queued(const bucket_issue_t *self)
{
    return self->next;
}
