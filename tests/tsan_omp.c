/* tsan_omp — the fork and join of our OpenMP regions made visible to
 * ThreadSanitizer (linked into ddp_compute by the DDPIPE_TSAN build only).
 *
 * Debian's libgomp is not built with TSan: its thread pool and barriers
 * synchronise through futexes and atomics TSan does not see, so every
 * variable shared by a `#pragma omp parallel` region (the loop's bounds,
 * the outputs the code after it reads) is reported as a race. GCC compiles
 * each region into GOMP_parallel(body, data, ...); the linker sends those
 * calls here (--wrap=GOMP_parallel) and each thread's share of the body is
 * bracketed by what libgomp guarantees: it starts after the code before the
 * region (fork) and ends before the code after it (join). Two addresses, so
 * the threads of one region get no order among themselves: a race between
 * them is still reported. oneDNN's own regions call libgomp from libdnnl
 * and are not wrapped. */
#include <sanitizer/tsan_interface.h>

void __real_GOMP_parallel(void (*fn)(void *), void *data, unsigned num_threads, unsigned flags);
void __wrap_GOMP_parallel(void (*fn)(void *), void *data, unsigned num_threads, unsigned flags);

typedef struct {
    void (*fn)(void *);
    void *data;
    char fork, join;  /* TSan sync addresses */
} region_t;

static void region_body(void *arg)
{
    region_t *r = arg;
    __tsan_acquire(&r->fork);
    r->fn(r->data);
    __tsan_release(&r->join);
}

void __wrap_GOMP_parallel(void (*fn)(void *), void *data, unsigned num_threads, unsigned flags)
{
    region_t r = {.fn = fn, .data = data};
    __tsan_release(&r.fork);
    __real_GOMP_parallel(region_body, &r, num_threads, flags);
    __tsan_acquire(&r.join);
}
