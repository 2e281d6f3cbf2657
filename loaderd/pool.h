/* pool — a fixed set of threads running parallel-for loops.
 *
 * pool_for(p, n, fn, ctx) calls fn(ctx, i) once for every i in [0, n) and
 * returns when all calls have returned. The calling thread takes part, so a
 * pool of T threads starts T - 1 workers and pool_new(1) runs everything in
 * the caller. Indices are handed out one at a time from a shared counter,
 * so slow samples (big JPEGs) do not hold up a whole static chunk. One
 * pool_for at a time per pool (calls from several threads are serialised). */
#ifndef DDP_POOL_H
#define DDP_POOL_H

typedef struct pool pool_t;

/* NULL when threads is not in [1, 256] or threads cannot be started. */
pool_t *pool_new(int threads);
void pool_destroy(pool_t **p);

int pool_threads(const pool_t *p);
void pool_for(pool_t *p, int n, void (*fn)(void *ctx, int i), void *ctx);

#endif
