/* cuda_nccl — see cuda_nccl.h. */
#include "gpud/cuda/cuda_nccl.h"

#include <cuda_runtime.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/errbuf.h"

struct nccl_ar {
    int rank, world, device;
    ncclComm_t comm;
    cudaStream_t stream;
    float *staging;          /* device copy of host arrays */
    size_t staging_n;
    int broken;              /* aborted: only destroy is valid */
    int (*cancelled)(void);
    const char *(*cancel)(void *ctx);   /* nccl_ar_set_cancel_ctx */
    void *cancel_ctx;
    double *staging_d;       /* device copy of host doubles (nccl_ar_sum_f64) */
    size_t staging_d_n;
    cudaEvent_t after;       /* nccl_ar_enqueue: the producer stream's work so far */
};

static void nap(void)
{
    struct timespec ts = {0, 200 * 1000};   /* 200 us: latency vs. a spinning core */
    nanosleep(&ts, NULL);
}

static void ar_abort(nccl_ar_t *s)
{
    if (s->comm && !s->broken)
        ncclCommAbort(s->comm);
    s->comm = NULL;
    s->broken = 1;
}

/* Why waiting stops: 0 go on, else -1 with err (the communicator aborted). */
static int wait_check(nccl_ar_t *s, double deadline, const char *what, char *err, size_t errlen)
{
    ncclResult_t st = ncclSuccess;
    ncclResult_t q = ncclCommGetAsyncError(s->comm, &st);
    if (q != ncclSuccess || (st != ncclSuccess && st != ncclInProgress)) {
        err_set(err, errlen, "NCCL %s failed on rank %d/%d: %s (%s); a peer died or the "
                 "network failed: the job must stop (NCCL_DEBUG=INFO shows more)", what, s->rank,
                 s->world, ncclGetErrorString(q != ncclSuccess ? q : st),
                 ncclGetLastError(s->comm));
        ar_abort(s);
        return -1;
    }
    if (s->cancelled && s->cancelled()) {
        err_set(err, errlen, "NCCL %s: interrupted", what);
        ar_abort(s);
        return -1;
    }
    const char *why = s->cancel ? s->cancel(s->cancel_ctx) : NULL;
    if (why) {
        err_set(err, errlen, "NCCL %s: %s", what, why);
        ar_abort(s);
        return -1;
    }
    if (clock_mono_s() > deadline) {
        err_set(err, errlen, "NCCL %s timed out on rank %d/%d: a peer is dead or stuck; the "
                 "communicator was aborted", what, s->rank, s->world);
        ar_abort(s);
        return -1;
    }
    return 0;
}

/* Until the communicator has no operation in progress (a non-blocking call
 * may still be enqueuing). */
static int wait_enqueued(nccl_ar_t *s, double deadline, const char *what, char *err,
                         size_t errlen)
{
    for (;;) {
        ncclResult_t st = ncclSuccess;
        if (ncclCommGetAsyncError(s->comm, &st) == ncclSuccess && st == ncclSuccess)
            return 0;
        if (wait_check(s, deadline, what, err, errlen) < 0)
            return -1;
        nap();
    }
}

/* Until the stream's work is done, checking NCCL's async error meanwhile. */
static int wait_stream(nccl_ar_t *s, double deadline, const char *what, char *err,
                       size_t errlen)
{
    for (;;) {
        cudaError_t e = cudaStreamQuery(s->stream);
        if (e == cudaSuccess)
            return 0;
        if (e != cudaErrorNotReady) {
            err_set(err, errlen, "%s: CUDA error %s (%s); restart the process", what,
                     cudaGetErrorName(e), cudaGetErrorString(e));
            ar_abort(s);
            return -1;
        }
        if (wait_check(s, deadline, what, err, errlen) < 0)
            return -1;
        nap();
    }
}

int nccl_ar_make_id(char *hex, size_t len, char *err, size_t errlen)
{
    ncclUniqueId id;
    ncclResult_t r;
    if (len < NCCL_AR_ID_LEN || NCCL_UNIQUE_ID_BYTES * 2 + 1 != NCCL_AR_ID_LEN) {
        err_set(err, errlen, "nccl_ar_make_id: buffer of %zu bytes, need %d", len,
                 NCCL_AR_ID_LEN);
        return -1;
    }
    if ((r = ncclGetUniqueId(&id)) != ncclSuccess) {
        err_set(err, errlen, "ncclGetUniqueId failed: %s (%s); check NCCL_SOCKET_IFNAME and "
                 "that a network interface is up", ncclGetErrorString(r), ncclGetLastError(NULL));
        return -1;
    }
    for (int i = 0; i < NCCL_UNIQUE_ID_BYTES; i++)
        snprintf(hex + 2 * i, 3, "%02x", (unsigned char)id.internal[i]);
    return 0;
}

int nccl_ar_version(void)
{
    int v = 0;
    return ncclGetVersion(&v) == ncclSuccess && v > 0 ? v : -1;
}

static int parse_id(const char *hex, ncclUniqueId *id)
{
    if (!hex || strlen(hex) != 2 * NCCL_UNIQUE_ID_BYTES)
        return -1;
    for (int i = 0; i < NCCL_UNIQUE_ID_BYTES; i++) {
        unsigned v;
        char two[3] = {hex[2 * i], hex[2 * i + 1], 0};
        char *end;
        v = (unsigned)strtoul(two, &end, 16);
        if (*end)
            return -1;
        id->internal[i] = (char)v;
    }
    return 0;
}

nccl_ar_t *nccl_ar_new(int rank, int world, const char *id_hex, int device, int timeout_ms,
                       char *err, size_t errlen)
{
    ncclUniqueId id;
    if (world < 1 || rank < 0 || rank >= world || timeout_ms < 1 || parse_id(id_hex, &id) < 0) {
        err_set(err, errlen, "nccl_ar_new: rank %d of world %d, timeout %d ms, id of %zu hex "
                 "digits (need %d)", rank, world, timeout_ms, id_hex ? strlen(id_hex) : 0,
                 2 * NCCL_UNIQUE_ID_BYTES);
        return NULL;
    }
    nccl_ar_t *s = calloc(1, sizeof *s);
    if (!s) {
        err_set(err, errlen, "nccl_ar_new: out of memory");
        return NULL;
    }
    *s = (nccl_ar_t){.rank = rank, .world = world, .device = device};
    cudaError_t e = cudaSetDevice(device);
    if (e == cudaSuccess)
        e = cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
        err_set(err, errlen, "nccl_ar_new: CUDA device %d: %s; check nvidia-smi and "
                 "CUDA_VISIBLE_DEVICES", device, cudaGetErrorString(e));
        nccl_ar_destroy(&s);
        return NULL;
    }
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;   /* so that waits can time out and abort */
    ncclResult_t r = ncclCommInitRankConfig(&s->comm, world, id, rank, &cfg);
    if (r != ncclSuccess && r != ncclInProgress) {
        err_set(err, errlen, "ncclCommInitRankConfig (rank %d of %d) failed: %s (%s)", rank,
                 world, ncclGetErrorString(r), ncclGetLastError(NULL));
        s->comm = NULL;
        nccl_ar_destroy(&s);
        return NULL;
    }
    if (wait_enqueued(s, clock_mono_s() + timeout_ms / 1000.0, "communicator init", err,
                      errlen) < 0) {
        nccl_ar_destroy(&s);
        return NULL;
    }
    return s;
}

void nccl_ar_destroy(nccl_ar_t **sp)
{
    if (!sp || !*sp)
        return;
    nccl_ar_t *s = *sp;
    if (s->comm && !s->broken) {
        /* non-blocking finalize: poll, and abort if it does not finish */
        char err[64];
        if (ncclCommFinalize(s->comm) == ncclSuccess ||
            wait_enqueued(s, clock_mono_s() + 10.0, "finalize", err, sizeof err) == 0)
            ncclCommDestroy(s->comm);
        else
            ar_abort(s);
    }
    cudaFree(s->staging);
    cudaFree(s->staging_d);
    if (s->after)
        cudaEventDestroy(s->after);
    if (s->stream)
        cudaStreamDestroy(s->stream);
    free(s);
    *sp = NULL;
}

void nccl_ar_abort(nccl_ar_t *s)
{
    if (s)
        ar_abort(s);
}

void nccl_ar_set_cancel(nccl_ar_t *s, int (*cancelled)(void))
{
    s->cancelled = cancelled;
}

void nccl_ar_set_cancel_ctx(nccl_ar_t *s, const char *(*cancel)(void *ctx), void *ctx)
{
    s->cancel = cancel;
    s->cancel_ctx = ctx;
}

int nccl_ar_rank(const nccl_ar_t *s)
{
    return s->rank;
}

int nccl_ar_world(const nccl_ar_t *s)
{
    return s->world;
}

/* 1 (with err) when an earlier failure aborted the communicator. */
static int refused_broken(const nccl_ar_t *s, char *err, size_t errlen)
{
    if (s->broken)
        err_set(err, errlen, "NCCL all-reduce: the communicator was aborted by an earlier "
                 "failure");
    return s->broken;
}

/* The reduction (op) of n values at dev queued behind the work queued so
 * far on stream `after` (NULL: behind all device work, waited for here). */
static int enqueue_op(nccl_ar_t *s, void *dev, size_t n, ncclDataType_t type, ncclRedOp_t op,
                      void *after, double deadline, char *err, size_t errlen)
{
    if (refused_broken(s, err, errlen))
        return -1;
    /* world 1 too: a one-rank all-reduce is valid (an in-place copy), and
     * it keeps the enqueue and waits tested on a one-GPU machine */
    if (n == 0)
        return 0;
    cudaError_t ce = cudaSuccess;
    if (!after) {
        /* written on another stream (the backend's, where its kernels and
         * the arena's ops run): all of it must be done first */
        ce = cudaDeviceSynchronize();
    } else {
        if (!s->after)
            ce = cudaEventCreateWithFlags(&s->after, cudaEventDisableTiming);
        /* NCCL's stream waits on the device for what the producer queued so
         * far (a bucket's gradient kernels), the host does not */
        if (ce == cudaSuccess)
            ce = cudaEventRecord(s->after, (cudaStream_t)after);
        if (ce == cudaSuccess)
            ce = cudaStreamWaitEvent(s->stream, s->after, 0);
    }
    if (ce != cudaSuccess) {
        err_set(err, errlen, "NCCL all-reduce: ordering it after the data's kernels: %s; "
                 "restart the process", cudaGetErrorString(ce));
        ar_abort(s);
        return -1;
    }
    ncclResult_t r = ncclAllReduce(dev, dev, n, type, op, s->comm, s->stream);
    if (r != ncclSuccess && r != ncclInProgress) {
        err_set(err, errlen, "ncclAllReduce of %zu values failed on rank %d/%d: %s (%s)", n,
                 s->rank, s->world, ncclGetErrorString(r), ncclGetLastError(s->comm));
        ar_abort(s);
        return -1;
    }
    /* a non-blocking communicator takes its next call once this one is queued */
    return wait_enqueued(s, deadline, "all-reduce", err, errlen);
}

static int reduce_op(nccl_ar_t *s, void *dev, size_t n, ncclDataType_t type, ncclRedOp_t op,
                     int timeout_ms, char *err, size_t errlen)
{
    double deadline = clock_mono_s() + timeout_ms / 1000.0;
    if (enqueue_op(s, dev, n, type, op, NULL, deadline, err, errlen) < 0)
        return -1;
    return n == 0 ? 0 : wait_stream(s, deadline, "all-reduce", err, errlen);
}

static int sum_typed(nccl_ar_t *s, void *dev, size_t n, ncclDataType_t type, int timeout_ms,
                     char *err, size_t errlen)
{
    return reduce_op(s, dev, n, type, ncclSum, timeout_ms, err, errlen);
}

int nccl_ar_enqueue(nccl_ar_t *s, float *dev, size_t n, void *after, int timeout_ms,
                    char *err, size_t errlen)
{
    return enqueue_op(s, dev, n, ncclFloat, ncclSum, after, clock_mono_s() + timeout_ms / 1000.0,
                      err, errlen);
}

int nccl_ar_max_u32_device(nccl_ar_t *s, uint32_t *dev, size_t n, int timeout_ms, char *err,
                           size_t errlen)
{
    return reduce_op(s, dev, n, ncclUint32, ncclMax, timeout_ms, err, errlen);
}

int nccl_ar_sum_i64_device(nccl_ar_t *s, int64_t *dev, size_t n, int timeout_ms, char *err,
                           size_t errlen)
{
    return sum_typed(s, dev, n, ncclInt64, timeout_ms, err, errlen);
}

int nccl_ar_wait(nccl_ar_t *s, int timeout_ms, char *err, size_t errlen)
{
    if (refused_broken(s, err, errlen))
        return -1;
    return wait_stream(s, clock_mono_s() + timeout_ms / 1000.0, "all-reduce", err, errlen);
}

int nccl_ar_sum_device(nccl_ar_t *s, float *dev, size_t n, int timeout_ms, char *err,
                       size_t errlen)
{
    return sum_typed(s, dev, n, ncclFloat, timeout_ms, err, errlen);
}

int nccl_ar_sum_f64(nccl_ar_t *s, double *data, size_t n, int timeout_ms, char *err,
                    size_t errlen)
{
    if (s->broken || n == 0)
        return sum_typed(s, NULL, s->broken ? 1 : 0, ncclDouble, timeout_ms, err, errlen);
    if (n > s->staging_d_n) {
        cudaFree(s->staging_d);
        s->staging_d = NULL;
        s->staging_d_n = 0;
        cudaError_t e = cudaMalloc((void **)&s->staging_d, n * sizeof(double));
        if (e != cudaSuccess) {
            err_set(err, errlen, "NCCL all-reduce: cudaMalloc of %zu doubles: %s; the GPU is "
                     "out of memory", n, cudaGetErrorString(e));
            return -1;
        }
        s->staging_d_n = n;
    }
    cudaError_t e = cudaMemcpy(s->staging_d, data, n * sizeof(double), cudaMemcpyHostToDevice);
    if (e != cudaSuccess) {
        err_set(err, errlen, "NCCL all-reduce: copy to the GPU: %s", cudaGetErrorString(e));
        return -1;
    }
    if (sum_typed(s, s->staging_d, n, ncclDouble, timeout_ms, err, errlen) < 0)
        return -1;
    e = cudaMemcpy(data, s->staging_d, n * sizeof(double), cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) {
        err_set(err, errlen, "NCCL all-reduce: copy from the GPU: %s", cudaGetErrorString(e));
        return -1;
    }
    return 0;
}

int nccl_ar_sum(nccl_ar_t *s, float *data, size_t n, int timeout_ms, char *err, size_t errlen)
{
    if (n == 0)
        return s->broken ? nccl_ar_sum_device(s, NULL, 0, timeout_ms, err, errlen) : 0;
    if (n > s->staging_n) {
        cudaFree(s->staging);
        s->staging = NULL;
        s->staging_n = 0;
        cudaError_t e = cudaMalloc((void **)&s->staging, n * sizeof(float));
        if (e != cudaSuccess) {
            err_set(err, errlen, "NCCL all-reduce: cudaMalloc of %zu floats: %s; the GPU is out "
                     "of memory", n, cudaGetErrorString(e));
            return -1;
        }
        s->staging_n = n;
    }
    cudaError_t e = cudaMemcpyAsync(s->staging, data, n * sizeof(float), cudaMemcpyHostToDevice,
                                    s->stream);
    if (e != cudaSuccess) {
        err_set(err, errlen, "NCCL all-reduce: copy to the GPU: %s", cudaGetErrorString(e));
        return -1;
    }
    if (nccl_ar_sum_device(s, s->staging, n, timeout_ms, err, errlen) < 0)
        return -1;
    e = cudaMemcpyAsync(data, s->staging, n * sizeof(float), cudaMemcpyDeviceToHost, s->stream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(s->stream);
    if (e != cudaSuccess) {
        err_set(err, errlen, "NCCL all-reduce: copy from the GPU: %s", cudaGetErrorString(e));
        return -1;
    }
    return 0;
}
