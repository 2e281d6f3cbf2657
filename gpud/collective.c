/* collective — see collective.h. The NCCL side compiles with
 * DDPIPE_HAVE_NCCL (gpud on ddp_compute with gpud/cuda and NCCL); the
 * package's cpu gpud and builds without NCCL have the ring only. */
#include "gpud/collective.h"

#include "common/env_switch.h"
#include "common/errbuf.h"
#include "common/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef DDPIPE_HAVE_NCCL
#include <cuda_runtime.h>

#include "gpud/cuda/cuda_nccl.h"
#endif

struct collective {
    allreduce_t *ring;
    allreduce_cancel_fn cancel;
    void *cancel_ctx;
    uint32_t gen;
    int rank, world;
    bool nccl;            /* this generation sums over NCCL */
    bool have_id;
    uint8_t id[DDP_NCCL_ID_LEN];
    bool failed;
#ifdef DDPIPE_HAVE_NCCL
    nccl_ar_t *comm;      /* made at the generation's first sum */
#endif
};

int collective_offer(const char *backend)
{
#ifdef DDPIPE_HAVE_NCCL
    if (!backend || strcmp(backend, "cuda") != 0 || !env_switch_on("DDPIPE_NCCL"))
        return 0;
    /* NCCL refuses two ranks of a communicator on one GPU (before 2.30.3
     * with NCCL_MULTI_RANK_GPU_ENABLE=1): a local rank past the visible
     * devices shares one with a lower rank (docs/CUDA.md "Devices"), so it
     * does not offer NCCL and the job sums on the ring, as before */
    const char *local = getenv("DDPIPE_LOCAL_RANK"), *multi = getenv("NCCL_MULTI_RANK_GPU_ENABLE");
    int count = 0;
    if (local && !(multi && strcmp(multi, "1") == 0) && cudaGetDeviceCount(&count) == cudaSuccess &&
        atol(local) >= count) {
        log_info("local rank %s shares one of %d GPU%s: not offering NCCL (the ring sums)", local,
                 count, count == 1 ? "" : "s");
        return 0;
    }
    return 1;
#else
    (void)backend;
    return 0;
#endif
}

collective_t *collective_new(allreduce_t *ring)
{
    collective_t *self = calloc(1, sizeof *self);
    if (self)
        self->ring = ring;
    return self;
}

/* The generation's communicator is given up: aborted, never finalized (a
 * membership change may have taken a peer that finalize would wait for). */
static void drop_comm(collective_t *self)
{
#ifdef DDPIPE_HAVE_NCCL
    nccl_ar_abort(self->comm);
    nccl_ar_destroy(&self->comm);
#else
    (void)self;
#endif
}

void collective_destroy(collective_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    drop_comm(*self_p);
    free(*self_p);
    *self_p = NULL;
}

void collective_set_cancel(collective_t *self, allreduce_cancel_fn fn, void *ctx)
{
    self->cancel = fn;
    self->cancel_ctx = ctx;
}

bool collective_nccl(const collective_t *self)
{
    return self->nccl;
}

bool collective_failed(const collective_t *self)
{
    return self->failed;
}

int collective_generation(collective_t *self, uint32_t gen, int rank, int world, bool nccl,
                          ddp_ncclid_t *out, char *err, size_t errlen)
{
    drop_comm(self);   /* a new generation is a new communicator */
    self->gen = gen;
    self->rank = rank;
    self->world = world;
    self->nccl = nccl;
    self->have_id = false;
    self->failed = false;
    if (!nccl)
        return 0;
#ifdef DDPIPE_HAVE_NCCL
    if (rank != 0)
        return 0;
    char hex[NCCL_AR_ID_LEN];
    if (nccl_ar_make_id(hex, sizeof hex, err, errlen) < 0) {
        self->failed = true;
        return -1;
    }
    for (int i = 0; i < DDP_NCCL_ID_LEN; i++) {
        unsigned v = 0;
        sscanf(hex + 2 * i, "%2x", &v);
        self->id[i] = (uint8_t)v;
    }
    self->have_id = true;
    *out = (ddp_ncclid_t){.gen = gen, .world = world};
    memcpy(out->id, self->id, sizeof out->id);
    return 1;
#else
    (void)out;
    err_set(err, errlen, "reducerd says generation %u sums over NCCL, but this gpud was built "
            "without NCCL (it did not offer it): mixed builds?", gen);
    self->failed = true;
    return -1;
#endif
}

int collective_take_id(collective_t *self, const ddp_ncclid_t *id, char *err, size_t errlen)
{
    if (!self->nccl || id->gen != self->gen || id->world != self->world || self->rank == 0 ||
        self->have_id) {
        err_set(err, errlen, "an NCCL id for generation %u of %d rank%s, but this rank %d is in "
                "generation %u of %d%s%s", id->gen, id->world, id->world == 1 ? "" : "s", self->rank, self->gen,
                self->world, self->nccl ? "" : " (without NCCL)",
                self->have_id ? " and has its id" : "");
        return -1;
    }
    memcpy(self->id, id->id, sizeof self->id);
    self->have_id = true;
    return 0;
}

#ifdef DDPIPE_HAVE_NCCL
#include <time.h>

/* The generation's communicator, made once its id is here (the cancel
 * callback reads reducerd's messages meanwhile). 0, or -1 with why. */
static int ensure_comm(collective_t *self, int timeout_ms, char *err, size_t errlen)
{
    if (self->comm)
        return 0;
    if (self->failed) {
        err_set(err, errlen, "the NCCL communicator of generation %u failed already",
                self->gen);
        return -1;
    }
    struct timespec nap = {0, 5 * 1000 * 1000};
    for (int waited = 0; !self->have_id; waited += 5) {
        const char *why = self->cancel ? self->cancel(self->cancel_ctx) : NULL;
        if (!self->have_id && (why || waited >= timeout_ms)) {
            err_set(err, errlen, "no NCCL id for generation %u from rank 0 (through reducerd): "
                    "%s", self->gen, why ? why : "timed out");
            self->failed = true;
            return -1;
        }
        if (!self->have_id)
            nanosleep(&nap, NULL);
    }
    char hex[NCCL_AR_ID_LEN];
    for (int i = 0; i < DDP_NCCL_ID_LEN; i++)
        snprintf(hex + 2 * i, 3, "%02x", self->id[i]);
    int device = 0;
    cudaError_t e = cudaGetDevice(&device);
    if (e != cudaSuccess) {
        err_set(err, errlen, "NCCL: which CUDA device: %s", cudaGetErrorString(e));
        self->failed = true;
        return -1;
    }
    self->comm = nccl_ar_new(self->rank, self->world, hex, device, timeout_ms, err, errlen);
    if (!self->comm) {
        self->failed = true;
        return -1;
    }
    nccl_ar_set_cancel_ctx(self->comm, self->cancel, self->cancel_ctx);
    int v = nccl_ar_version();
    char ver[48] = "NCCL's version unknown";
    if (v > 0)
        snprintf(ver, sizeof ver, "NCCL %d.%d.%d loaded", v / 10000, v / 100 % 100, v % 100);
    log_info("generation %u: NCCL communicator of %d rank%s on device %d (%s)", self->gen,
             self->world, self->world == 1 ? "" : "s", device, ver);
    return 0;
}
#endif

typedef enum { NCCL_ENQUEUE_F32, NCCL_MAX_U32, NCCL_SUM_I64 } nccl_op_t;

/* One device reduction of the NCCL generation: a float sum queued behind
 * stream `after`, or one of bitwise training's (done on return). The
 * generation's first makes the communicator: every member reaches it. */
static int nccl_op(collective_t *self, nccl_op_t op, void *dev, size_t n, void *after,
                   int timeout_ms, char *err, size_t errlen)
{
#ifdef DDPIPE_HAVE_NCCL
    if (self->nccl) {
        if (ensure_comm(self, timeout_ms, err, errlen) < 0)
            return -1;
        int rc = op == NCCL_MAX_U32
                     ? nccl_ar_max_u32_device(self->comm, dev, n, timeout_ms, err, errlen)
                 : op == NCCL_SUM_I64
                     ? nccl_ar_sum_i64_device(self->comm, dev, n, timeout_ms, err, errlen)
                     : nccl_ar_enqueue(self->comm, dev, n, after, timeout_ms, err, errlen);
        if (rc < 0) {
            self->failed = true;
            return -1;
        }
        return 0;
    }
#else
    (void)op;
    (void)dev;
    (void)n;
    (void)after;
    (void)timeout_ms;
#endif
    err_set(err, errlen, "a device sum outside an NCCL generation (generation %u)",
            self->gen);
    return -1;
}

int collective_trainer_enqueue(void *ctx, float *dev, size_t n, void *after, int timeout_ms,
                               char *err, size_t errlen)
{
    return nccl_op(ctx, NCCL_ENQUEUE_F32, dev, n, after, timeout_ms, err, errlen);
}

int collective_trainer_wait(void *ctx, int timeout_ms, char *err, size_t errlen)
{
    collective_t *self = ctx;
#ifdef DDPIPE_HAVE_NCCL
    if (self->nccl && self->comm) {
        if (nccl_ar_wait(self->comm, timeout_ms, err, errlen) < 0) {
            self->failed = true;
            return -1;
        }
        return 0;
    }
#else
    (void)timeout_ms;
#endif
    err_set(err, errlen, "no NCCL sum queued in generation %u", self->gen);
    return -1;
}

int collective_trainer_max_u32(void *ctx, uint32_t *dev, size_t n, int timeout_ms, char *err,
                               size_t errlen)
{
    return nccl_op(ctx, NCCL_MAX_U32, dev, n, NULL, timeout_ms, err, errlen);
}

int collective_trainer_sum_i64(void *ctx, int64_t *dev, size_t n, int timeout_ms, char *err,
                               size_t errlen)
{
    return nccl_op(ctx, NCCL_SUM_I64, dev, n, NULL, timeout_ms, err, errlen);
}

int collective_sum_device(collective_t *self, float *dev, size_t n, int timeout_ms, char *err,
                          size_t errlen)
{
    /* behind all device work (waited for), then done */
    if (collective_trainer_enqueue(self, dev, n, NULL, timeout_ms, err, errlen) < 0)
        return -1;
    return n == 0 ? 0 : collective_trainer_wait(self, timeout_ms, err, errlen);
}

int collective_trainer_sum(void *ctx, float *dev, size_t n, int timeout_ms, char *err,
                           size_t errlen)
{
    return collective_sum_device(ctx, dev, n, timeout_ms, err, errlen);
}

int collective_sum_f64(collective_t *self, double *data, size_t n, int timeout_ms, char *err,
                       size_t errlen)
{
#ifdef DDPIPE_HAVE_NCCL
    if (self->nccl) {
        if (ensure_comm(self, timeout_ms, err, errlen) < 0)
            return -1;
        if (nccl_ar_sum_f64(self->comm, data, n, timeout_ms, err, errlen) < 0) {
            self->failed = true;
            return -1;
        }
        return 0;
    }
#endif
    return allreduce_sum_f64(self->ring, data, n, timeout_ms, err, errlen);
}
