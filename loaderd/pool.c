#include "loaderd/pool.h"

#include "common/log.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define POOL_MAX_THREADS 256

struct pool {
    int nthreads;  /* including the caller */
    int nworkers;  /* threads started */
    pthread_t *workers;
    pthread_mutex_t mu;
    pthread_cond_t start, done;
    pthread_mutex_t call_mu; /* one pool_for at a time */
    /* current job, guarded by mu except the counters */
    unsigned long generation;
    int stop;
    int busy;  /* workers still inside the current job */
    void (*fn)(void *ctx, int i);
    void *ctx;
    int n;
    atomic_int next;
};

static void run_job(pool_t *p)
{
    for (;;) {
        int i = atomic_fetch_add(&p->next, 1);
        if (i >= p->n)
            return;
        p->fn(p->ctx, i);
    }
}

static void *worker_main(void *arg)
{
    pool_t *p = arg;
    unsigned long seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stop && p->generation == seen)
            pthread_cond_wait(&p->start, &p->mu);
        if (p->stop)
            break;
        seen = p->generation;
        pthread_mutex_unlock(&p->mu);
        run_job(p);
        pthread_mutex_lock(&p->mu);
        if (--p->busy == 0)
            pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

pool_t *pool_new(int threads)
{
    if (threads < 1 || threads > POOL_MAX_THREADS)
        return NULL;
    pool_t *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->nthreads = threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_mutex_init(&p->call_mu, NULL);
    pthread_cond_init(&p->start, NULL);
    pthread_cond_init(&p->done, NULL);
    atomic_init(&p->next, 0);
    p->workers = calloc((size_t)threads, sizeof *p->workers);
    if (!p->workers) {
        pool_destroy(&p);
        return NULL;
    }
    for (int t = 0; t < threads - 1; t++) {
        int rc = pthread_create(&p->workers[t], NULL, worker_main, p);
        if (rc != 0) {
            log_error("pool: cannot start thread %d of %d: %s", t + 1, threads, strerror(rc));
            pool_destroy(&p);
            return NULL;
        }
        p->nworkers++;
    }
    return p;
}

void pool_destroy(pool_t **pp)
{
    pool_t *p = pp ? *pp : NULL;
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->start);
    pthread_mutex_unlock(&p->mu);
    for (int t = 0; t < p->nworkers; t++)
        pthread_join(p->workers[t], NULL);
    free(p->workers);
    pthread_cond_destroy(&p->start);
    pthread_cond_destroy(&p->done);
    pthread_mutex_destroy(&p->mu);
    pthread_mutex_destroy(&p->call_mu);
    free(p);
    *pp = NULL;
}

int pool_threads(const pool_t *p) { return p->nthreads; }

void pool_for(pool_t *p, int n, void (*fn)(void *ctx, int i), void *ctx)
{
    if (n <= 0)
        return;
    pthread_mutex_lock(&p->call_mu);
    if (p->nworkers == 0 || n == 1) {
        for (int i = 0; i < n; i++)
            fn(ctx, i);
        pthread_mutex_unlock(&p->call_mu);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    p->n = n;
    atomic_store(&p->next, 0);
    p->busy = p->nworkers;
    p->generation++;
    pthread_cond_broadcast(&p->start);
    pthread_mutex_unlock(&p->mu);
    run_job(p);
    /* every worker must leave the job before fn/ctx may change */
    pthread_mutex_lock(&p->mu);
    while (p->busy > 0)
        pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
    pthread_mutex_unlock(&p->call_mu);
}
