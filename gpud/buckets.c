/* buckets — DDP-style gradient buckets over the ring (see buckets.h). */
#include "gpud/buckets.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/errbuf.h"
#include "common/log.h"

struct buckets {
    int n, nb;
    size_t *off;            /* n + 1: gradient i is flat[off[i], off[i + 1]) */
    int *of;                /* n: its bucket */
    size_t *lo, *hi;        /* nb: bucket k's range */
    int *size;              /* nb: gradients per bucket */
    /* the step (under mu while the thread runs) */
    int *left;              /* nb: gradients not ready yet */
    unsigned char *ready;   /* n */
    float *flat;
    allreduce_t *ar;
    int timeout_ms, active, threaded, abort, failed;
    char err[512];
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

void buckets_destroy(buckets_t **sp)
{
    if (!sp || !*sp)
        return;
    buckets_t *b = *sp;
    if (b->active)
        buckets_abort(b);
    pthread_mutex_destroy(&b->mu);
    pthread_cond_destroy(&b->cv);
    free(b->off);
    free(b->of);
    free(b->lo);
    free(b->hi);
    free(b->size);
    free(b->left);
    free(b->ready);
    free(b);
    *sp = NULL;
}

/* Buckets from the last gradient back, each closed once it holds cap floats. */
static void plan(buckets_t *b, size_t cap)
{
    int k = 0, last = b->n - 1;
    for (int i = b->n - 1; i >= 0; i--) {
        b->of[i] = k;
        if (b->off[last + 1] - b->off[i] >= cap || i == 0) {
            b->lo[k] = b->off[i];
            b->hi[k] = b->off[last + 1];
            b->size[k] = last - i + 1;
            k++;
            last = i - 1;
        }
    }
    b->nb = k;
}

buckets_t *buckets_new(const size_t *numel, int n, size_t cap, char *err, size_t errlen)
{
    if (n < 1 || cap < 1) {
        err_set(err, errlen, "buckets: %d gradients, cap %zu floats (want >= 1 of each)", n, cap);
        return NULL;
    }
    buckets_t *b = calloc(1, sizeof *b);
    if (!b) {
        err_set(err, errlen, "buckets: out of memory");
        return NULL;
    }
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->cv, NULL);
    b->n = n;
    b->off = calloc((size_t)n + 1, sizeof *b->off);
    b->of = calloc((size_t)n, sizeof *b->of);
    b->lo = calloc((size_t)n, sizeof *b->lo);   /* at most one bucket per gradient */
    b->hi = calloc((size_t)n, sizeof *b->hi);
    b->size = calloc((size_t)n, sizeof *b->size);
    b->left = calloc((size_t)n, sizeof *b->left);
    b->ready = calloc((size_t)n, sizeof *b->ready);
    if (!b->off || !b->of || !b->lo || !b->hi || !b->size || !b->left || !b->ready) {
        buckets_destroy(&b);
        err_set(err, errlen, "buckets: out of memory for %d gradients", n);
        return NULL;
    }
    for (int i = 0; i < n; i++)
        b->off[i + 1] = b->off[i] + numel[i];
    plan(b, cap);
    return b;
}

/* bucket order: completion place, then the old number */
typedef struct {
    int done, k;
} bkey_t;

static int by_done(const void *a, const void *b)
{
    const bkey_t *x = a, *y = b;
    return x->done != y->done ? (x->done < y->done ? -1 : 1) : (x->k > y->k) - (x->k < y->k);
}

int buckets_order(buckets_t *b, const int *pos)
{
    bkey_t *key = calloc((size_t)b->nb, sizeof *key);
    int *renum = calloc((size_t)b->nb, sizeof *renum);
    size_t *lo = calloc((size_t)b->nb, sizeof *lo), *hi = calloc((size_t)b->nb, sizeof *hi);
    int *size = calloc((size_t)b->nb, sizeof *size);
    int rc = key && renum && lo && hi && size ? 0 : -1;
    if (rc == 0) {
        for (int k = 0; k < b->nb; k++)
            key[k] = (bkey_t){-1, k};
        for (int i = 0; i < b->n; i++)
            if (pos[i] > key[b->of[i]].done)
                key[b->of[i]].done = pos[i];
        qsort(key, (size_t)b->nb, sizeof *key, by_done);
        for (int k = 0; k < b->nb; k++) {
            int old = key[k].k;
            renum[old] = k;
            lo[k] = b->lo[old];
            hi[k] = b->hi[old];
            size[k] = b->size[old];
        }
        memcpy(b->lo, lo, (size_t)b->nb * sizeof *lo);
        memcpy(b->hi, hi, (size_t)b->nb * sizeof *hi);
        memcpy(b->size, size, (size_t)b->nb * sizeof *size);
        for (int i = 0; i < b->n; i++)
            b->of[i] = renum[b->of[i]];
    }
    free(key);
    free(renum);
    free(lo);
    free(hi);
    free(size);
    return rc;
}

int buckets_order_walk(buckets_t *b, const int *walk)
{
    int *pos = calloc((size_t)b->n, sizeof *pos);
    if (!pos)
        return -1;
    for (int i = 0; i < b->n; i++)   /* once per layout: n^2 over a model's tensors */
        for (int j = 0; j < b->n; j++)
            pos[i] += walk[j] > walk[i] || (walk[j] == walk[i] && j > i);
    int rc = buckets_order(b, pos);
    free(pos);
    return rc;
}

size_t buckets_cap_env(size_t dflt)
{
    const char *v = getenv("DDPIPE_BUCKET_KB");
    if (!v || !*v)
        return dflt;
    char *end;
    long kb = strtol(v, &end, 10);
    if (*end || kb < 4 || kb > 1048576) {
        log_warn("DDPIPE_BUCKET_KB=%s is not a whole number of KiB from 4 to 1048576: the "
                 "default %zu KiB is used", v, dflt / 256);
        return dflt;
    }
    return (size_t)kb * 256u;
}

int buckets_count(const buckets_t *b)
{
    return b->nb;
}

int buckets_grads(const buckets_t *b)
{
    return b->n;
}

void buckets_range(const buckets_t *b, int k, size_t *lo, size_t *hi)
{
    *lo = b->lo[k];
    *hi = b->hi[k];
}

int buckets_of(const buckets_t *b, int i)
{
    return b->of[i];
}

size_t buckets_floats(const buckets_t *b)
{
    return b->off[b->n];
}

void buckets_grad_range(const buckets_t *b, int i, size_t *lo, size_t *hi)
{
    *lo = b->off[i];
    *hi = b->off[i + 1];
}

int buckets_active(const buckets_t *b)
{
    return b->active;
}

/* Bucket by bucket, in order, each once its gradients are ready. */
static void run(buckets_t *b)
{
    for (int k = 0; k < b->nb; k++) {
        pthread_mutex_lock(&b->mu);
        while (b->left[k] > 0 && !b->abort)
            pthread_cond_wait(&b->cv, &b->mu);
        int stop = b->abort;
        pthread_mutex_unlock(&b->mu);
        if (stop)
            return;
        char err[512];
        if (allreduce_sum_range(b->ar, b->flat, b->off[b->n], b->lo[k], b->hi[k], b->timeout_ms,
                                err, sizeof err) < 0) {
            pthread_mutex_lock(&b->mu);
            b->failed = 1;
            snprintf(b->err, sizeof b->err, "%s", err);
            pthread_mutex_unlock(&b->mu);
            return;
        }
    }
}

static void *thread_main(void *arg)
{
    run(arg);
    return NULL;
}

int buckets_begin(buckets_t *b, float *flat, allreduce_t *ar, int timeout_ms, int overlap,
                  char *err, size_t errlen)
{
    if (b->active) {
        err_set(err, errlen, "buckets: a step is open already (buckets_end first)");
        return -1;
    }
    b->flat = flat;
    b->ar = ar;
    b->timeout_ms = timeout_ms;
    b->abort = b->failed = 0;
    b->err[0] = 0;
    memset(b->ready, 0, (size_t)b->n);
    memcpy(b->left, b->size, (size_t)b->nb * sizeof *b->left);
    b->threaded = 0;
    if (overlap) {
        int rc = pthread_create(&b->thread, NULL, thread_main, b);
        if (rc != 0) {
            err_set(err, errlen, "buckets: cannot start the all-reduce thread: %s", strerror(rc));
            return -1;
        }
        b->threaded = 1;
    }
    b->active = 1;
    return 0;
}

void buckets_ready(buckets_t *b, int i)
{
    if (!b->active || i < 0 || i >= b->n)
        return;
    pthread_mutex_lock(&b->mu);
    if (!b->ready[i]) {
        b->ready[i] = 1;
        if (--b->left[b->of[i]] == 0)
            pthread_cond_broadcast(&b->cv);
    }
    pthread_mutex_unlock(&b->mu);
}

void buckets_ready_range(buckets_t *b, size_t lo, size_t hi)
{
    if (!b->active)
        return;
    int woke = 0;
    pthread_mutex_lock(&b->mu);
    for (int i = 0; i < b->n; i++)
        if (b->off[i] >= lo && b->off[i + 1] <= hi && !b->ready[i]) {
            b->ready[i] = 1;
            woke |= --b->left[b->of[i]] == 0;
        }
    if (woke)
        pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
}

int buckets_is_ready(const buckets_t *b, int i)
{
    return b->active && i >= 0 && i < b->n && b->ready[i];
}

int buckets_end(buckets_t *b, char *err, size_t errlen)
{
    if (!b->active) {
        err_set(err, errlen, "buckets: no step open (buckets_begin first)");
        return -1;
    }
    for (int i = 0; i < b->n; i++)
        buckets_ready(b, i);
    if (b->threaded)
        pthread_join(b->thread, NULL);
    else
        run(b);
    b->active = b->threaded = 0;
    if (b->failed) {
        err_set(err, errlen, "%s", b->err);
        return -1;
    }
    return 0;
}

void buckets_abort(buckets_t *b)
{
    if (!b->active)
        return;
    pthread_mutex_lock(&b->mu);
    b->abort = 1;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
    if (b->threaded)
        pthread_join(b->thread, NULL);
    b->active = b->threaded = 0;
}
