/* cuda_prof — bk_timer_ops_t with cudaEvents: DDPIPE_CUDA_PROFILE=1 times
 * every op of a graph's forward and backward on the device (the engine's
 * tape_timer.c marks them and prints one line per graph at its end);
 * DDPIPE_CUDA_PROFILE=N (N > 1) prints it every N forwards too. Unset or
 * 0: no timer, nothing recorded. An event is recorded on the backend's
 * stream after every op and the sequence is read back (one
 * cudaEventSynchronize) when the pass ends, so profiling costs a
 * synchronisation per pass; CUDA graph recording is off meanwhile
 * (gpud/tape_capture.c). A failure turns the timer off (logged once);
 * the ops themselves never fail because of it. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "gpud/cuda/cuda_priv.h"

struct bk_timer {
    cudaStream_t stream;
    cudaEvent_t *ev;        /* made: events created; ev[0] the sequence's start */
    int *slot;              /* slot[i]: the interval (ev[i-1], ev[i])'s */
    int n, made, off;
};

/* Timing off for good; the error cleared so that the next kernel's check
 * does not take it for its own. */
static int give_up(bk_timer_t *t, const char *what, cudaError_t e)
{
    if (e != cudaSuccess)
        cudaGetLastError();
    if (!t->off)
        log_warn("DDPIPE_CUDA_PROFILE: %s failed: %s; per-op timing is off from now on", what,
                 e != cudaSuccess ? cudaGetErrorString(e) : "out of memory");
    t->off = 1;
    return -1;
}

int cu_profile_env(int *every)
{
    const char *v = getenv("DDPIPE_CUDA_PROFILE");
    if (every)
        *every = 0;
    if (!v || !*v || strcmp(v, "0") == 0)
        return 0;
    char *end;
    long n = strtol(v, &end, 10);
    if (every)
        *every = *end == '\0' && n > 1 && n < INT_MAX ? (int)n : 0;
    return 1;
}

static bk_timer_t *cp_create(backend_t *be, int *every)
{
    if (!cu_profile_env(every))
        return NULL;
    bk_timer_t *t = calloc(1, sizeof *t);
    if (!t) {
        log_warn("DDPIPE_CUDA_PROFILE: out of memory; no per-op timing");
        return NULL;
    }
    t->stream = cu_be(be)->stream;
    return t;
}

static int grow(bk_timer_t *t)
{
    int cap = t->made ? 2 * t->made : 64;
    cudaEvent_t *ev = realloc(t->ev, (size_t)cap * sizeof *ev);
    if (ev)
        t->ev = ev;
    int *slot = ev ? realloc(t->slot, (size_t)cap * sizeof *slot) : NULL;
    if (!slot)
        return give_up(t, "growing the event list", cudaSuccess);
    t->slot = slot;
    while (t->made < cap) {
        cudaError_t e = cudaEventCreate(&t->ev[t->made]);   /* with timing */
        if (e != cudaSuccess)
            return give_up(t, "cudaEventCreate", e);
        t->made++;
    }
    return 0;
}

static void record(bk_timer_t *t, int slot)
{
    if (t->off || (t->n == t->made && grow(t) < 0))
        return;
    cudaError_t e = cudaEventRecord(t->ev[t->n], t->stream);
    if (e != cudaSuccess) {
        give_up(t, "cudaEventRecord", e);
        return;
    }
    t->slot[t->n++] = slot;
}

static void cp_begin(bk_timer_t *t)
{
    t->n = 0;
    record(t, -1);
}

static void cp_mark(bk_timer_t *t, int slot)
{
    if (t->n > 0)   /* begun */
        record(t, slot);
}

static int cp_take(bk_timer_t *t, double *ms, int nslot)
{
    int n = t->n;
    t->n = 0;
    if (t->off)
        return -1;
    if (n < 2)
        return 0;
    cudaError_t e = cudaEventSynchronize(t->ev[n - 1]);
    if (e != cudaSuccess)
        return give_up(t, "cudaEventSynchronize", e);
    for (int i = 1; i < n; i++) {
        float f = 0;
        if ((e = cudaEventElapsedTime(&f, t->ev[i - 1], t->ev[i])) != cudaSuccess)
            return give_up(t, "cudaEventElapsedTime", e);
        if (t->slot[i] >= 0 && t->slot[i] < nslot)
            ms[t->slot[i]] += f;
    }
    return 0;
}

static void cp_destroy(bk_timer_t *t)
{
    if (!t)
        return;
    for (int i = 0; i < t->made; i++) {
        cudaError_t e = cudaEventDestroy(t->ev[i]);
        if (e != cudaSuccess)
            log_warn("DDPIPE_CUDA_PROFILE: cudaEventDestroy failed: %s", cudaGetErrorString(e));
    }
    free(t->ev);
    free(t->slot);
    free(t);
}

const bk_timer_ops_t CUDA_TIMER_OPS = {
    .create = cp_create,
    .begin = cp_begin,
    .mark = cp_mark,
    .take = cp_take,
    .destroy = cp_destroy,
};

/* ------------------------------------------ the convolution backward split */

#define SPLIT_MAX 8192      /* events: ~2,700 backward calls, then no more */

struct cu_split {
    cudaEvent_t ev[SPLIT_MAX];
    signed char tag[SPLIT_MAX];   /* 0: a call's start; else what the interval since was */
    int n, calls, off;
};

cu_split_t *cu_split_new(void)
{
    if (!cu_profile_env(NULL))
        return NULL;
    cu_split_t *sp = calloc(1, sizeof *sp);
    if (!sp)
        log_warn("DDPIPE_CUDA_PROFILE: out of memory; no backward split");
    return sp;
}

static void split_record(cuda_backend_t *cb, int tag)
{
    cu_split_t *sp = cb->split;
    if (!sp || sp->off)
        return;
    if (sp->n == SPLIT_MAX) {
        sp->off = 1;   /* the sums so far stand; logged with them */
        return;
    }
    cudaError_t e = cudaEventCreate(&sp->ev[sp->n]);
    if (e == cudaSuccess)
        e = cudaEventRecord(sp->ev[sp->n], cb->stream);
    if (e != cudaSuccess) {
        cudaGetLastError();   /* not the next kernel's error */
        log_warn("DDPIPE_CUDA_PROFILE: the backward split's event failed: %s; split off",
                 cudaGetErrorString(e));
        sp->off = 1;
        return;
    }
    sp->tag[sp->n++] = (signed char)tag;
    sp->calls += tag == 0;
}

void cu_split_begin(backend_t *be)
{
    split_record(cu_be(be), 0);
}

void cu_split_mark(backend_t *be, int what)
{
    split_record(cu_be(be), what);
}

void cu_split_report(backend_t *be)
{
    cuda_backend_t *cb = cu_be(be);
    cu_split_t *sp = cb->split;
    if (!sp)
        return;
    double ms[3] = {0, 0, 0};
    cudaError_t e = sp->n ? cudaEventSynchronize(sp->ev[sp->n - 1]) : cudaSuccess;
    for (int i = 1; i < sp->n && e == cudaSuccess; i++) {
        float f = 0;
        if (sp->tag[i] > 0 && sp->tag[i] < 3 &&
            (e = cudaEventElapsedTime(&f, sp->ev[i - 1], sp->ev[i])) == cudaSuccess)
            ms[sp->tag[i]] += f;
    }
    if (e != cudaSuccess)
        log_warn("DDPIPE_CUDA_PROFILE: reading the backward split failed: %s",
                 cudaGetErrorString(e));
    else if (sp->calls > 0)
        log_info("cuda profile conv backward: data %.1f ms, filter %.1f ms over %d calls%s",
                 ms[CU_SPLIT_DATA], ms[CU_SPLIT_FILTER], sp->calls,
                 sp->off ? " (the first ones: the event list filled)" : "");
    for (int i = 0; i < sp->n; i++)
        cudaEventDestroy(sp->ev[i]);
    free(sp);
    cb->split = NULL;
}
