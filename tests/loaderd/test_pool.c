/* Thread pool: every index runs exactly once, work really runs in
 * parallel, back-to-back and concurrent pool_for calls are safe. */
#include "common/clock.h"
#include "loaderd/pool.h"
#include "testutil.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

typedef struct {
    atomic_int *hits;
    atomic_long sum;
} count_ctx_t;

static void count_fn(void *arg, int i)
{
    count_ctx_t *c = arg;
    atomic_fetch_add(&c->hits[i], 1);
    atomic_fetch_add(&c->sum, i);
}

static void test_exactly_once(void)
{
    const int threads[] = {1, 2, 3, 8};
    const int sizes[] = {0, 1, 2, 7, 100, 1000};
    for (int a = 0; a < 4; a++) {
        pool_t *p = pool_new(threads[a]);
        CHECK(p && pool_threads(p) == threads[a], "pool_new(%d)", threads[a]);
        for (int b = 0; p && b < 6; b++) {
            int n = sizes[b];
            count_ctx_t c = {calloc((size_t)n + 1, sizeof(atomic_int)), 0};
            pool_for(p, n, count_fn, &c);
            int bad = 0;
            for (int i = 0; i < n; i++)
                bad += atomic_load(&c.hits[i]) != 1;
            CHECK(!bad && atomic_load(&c.sum) == (long)n * (n - 1) / 2,
                  "%d threads, n=%d: %d indices not run exactly once", threads[a], n, bad);
            free(c.hits);
        }
        pool_destroy(&p);
        CHECK(p == NULL, "destroy clears the pointer");
    }
    CHECK(pool_new(0) == NULL && pool_new(257) == NULL, "bad thread counts accepted");
    pool_destroy(NULL);
}

static void test_many_rounds(void)
{
    pool_t *p = pool_new(4);
    atomic_int hits[16];
    long total = 0;
    for (int r = 0; p && r < 2000; r++) {
        for (int i = 0; i < 16; i++)
            atomic_init(&hits[i], 0);
        count_ctx_t c = {hits, 0};
        pool_for(p, 1 + r % 16, count_fn, &c);
        for (int i = 0; i < 1 + r % 16; i++)
            total += atomic_load(&hits[i]);
    }
    long want = 0;
    for (int r = 0; r < 2000; r++)
        want += 1 + r % 16;
    CHECK(total == want, "2000 rounds: %ld calls, want %ld", total, want);
    pool_destroy(&p);
}

/* Index 0 and 1 each wait until the other has started: only possible when
 * two threads run them at once. A timeout fails instead of hanging. */
typedef struct {
    atomic_int started;
    atomic_int ok;
} meet_ctx_t;

static void meet_fn(void *arg, int i)
{
    meet_ctx_t *m = arg;
    (void)i;
    atomic_fetch_add(&m->started, 1);
    double until = clock_mono_s() + 10.0;
    while (atomic_load(&m->started) < 2 && clock_mono_s() < until)
        ;
    if (atomic_load(&m->started) >= 2)
        atomic_fetch_add(&m->ok, 1);
}

static void test_parallel(void)
{
    pool_t *p = pool_new(2);
    meet_ctx_t m = {0, 0};
    if (p)
        pool_for(p, 2, meet_fn, &m);
    CHECK(atomic_load(&m.ok) == 2, "two indices never ran at the same time");
    pool_destroy(&p);
}

typedef struct {
    pool_t *p;
    int ok;
} caller_t;

static void *caller_main(void *arg)
{
    caller_t *c = arg;
    c->ok = 1;
    for (int r = 0; r < 200; r++) {
        atomic_int hits[33];
        for (int i = 0; i < 33; i++)
            atomic_init(&hits[i], 0);
        count_ctx_t ctx = {hits, 0};
        pool_for(c->p, 33, count_fn, &ctx);
        for (int i = 0; i < 33; i++)
            c->ok &= atomic_load(&hits[i]) == 1;
    }
    return NULL;
}

static void test_concurrent_callers(void)
{
    pool_t *p = pool_new(3);
    caller_t c[3] = {{p, 0}, {p, 0}, {p, 0}};
    pthread_t th[3];
    for (int i = 0; p && i < 3; i++)
        pthread_create(&th[i], NULL, caller_main, &c[i]);
    for (int i = 0; p && i < 3; i++)
        pthread_join(th[i], NULL);
    CHECK(p && c[0].ok && c[1].ok && c[2].ok, "concurrent pool_for calls lost work");
    pool_destroy(&p);
}

int main(void)
{
    test_exactly_once();
    test_many_rounds();
    test_parallel();
    test_concurrent_callers();
    return tu_finish("test_pool");
}
