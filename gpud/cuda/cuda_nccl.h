/* cuda_nccl — sum of a float array across the gpud ranks of a GPU job over
 * NCCL: the GPU counterpart of gpud/ring.h (same contract: in
 * place, the same bytes on every rank, a dead or silent peer fails the call
 * with a message instead of hanging it).
 *
 * Wiring (docs/CUDA.md "NCCL in gpud", gpud/collective.c): rank 0 of each
 * membership generation makes the id and sends it in NCCLID; reducerd
 * passes it on to the other members (so it works across hosts through
 * NCCL's socket transport):
 *
 *   char id[NCCL_AR_ID_LEN];
 *   if (rank == 0) nccl_ar_make_id(id, sizeof id, err, len);   ... JOIN/WELCOME ...
 *   nccl_ar_t *ar = nccl_ar_new(rank, world, id, device, 60000, err, len);
 *   nccl_ar_sum(ar, grads, n, 60000, err, len);          host array
 *   nccl_ar_sum_device(ar, dev_grads, n, 60000, err, len);   device array
 *   nccl_ar_sum_f64(ar, sums, n, 60000, err, len);       SyncBatchNorm's doubles
 *
 * The communicator is non-blocking (ncclConfig_t.blocking = 0): every wait
 * polls ncclCommGetAsyncError and the stream, and aborts the communicator
 * (ncclCommAbort) on an NCCL error, on the timeout or when the cancel
 * callback fires; after a failure only nccl_ar_destroy is valid.
 *
 * One GPU per rank: NCCL before 2.30.3 refuses two ranks of one
 * communicator on the same device (later ones take them with
 * NCCL_MULTI_RANK_GPU_ENABLE=1: nccl_ar_version). */
#ifndef DDP_CUDA_NCCL_H
#define DDP_CUDA_NCCL_H

#include <stddef.h>
#include <stdint.h>

/* hex of ncclUniqueId (128 bytes) + NUL */
#define NCCL_AR_ID_LEN 257

typedef struct nccl_ar nccl_ar_t;

/* A fresh id (ncclGetUniqueId) as hex in hex[NCCL_AR_ID_LEN]. 0 or -1. */
int nccl_ar_make_id(char *hex, size_t len, char *err, size_t errlen);
/* Join the communicator of id_hex as rank of world on CUDA device `device`;
 * waits at most timeout_ms for every rank to join. NULL with the reason. */
nccl_ar_t *nccl_ar_new(int rank, int world, const char *id_hex, int device, int timeout_ms,
                       char *err, size_t errlen);
void nccl_ar_destroy(nccl_ar_t **self);
/* ncclCommAbort now (a membership change: peers may be gone, so no
 * finalize that would wait for them); then only nccl_ar_destroy is valid. */
void nccl_ar_abort(nccl_ar_t *self);
/* Polled during waits; non-zero: fail with "interrupted" (gpud passes
 * zs_interrupted). */
void nccl_ar_set_cancel(nccl_ar_t *self, int (*cancelled)(void));
/* The same with a context and a reason (gpud/ring.h's allreduce_cancel_fn:
 * gpud passes members_ring_cancel, so a MEMBERS or a STOP read meanwhile
 * ends the wait: "membership changed"); the reason goes into err. */
void nccl_ar_set_cancel_ctx(nccl_ar_t *self, const char *(*cancel)(void *ctx), void *ctx);
/* In place sum over all ranks of n floats in host memory / device memory.
 * 0, or -1 with the reason in err (the communicator is aborted then). */
int nccl_ar_sum(nccl_ar_t *self, float *data, size_t n, int timeout_ms, char *err,
                size_t errlen);
int nccl_ar_sum_device(nccl_ar_t *self, float *dev, size_t n, int timeout_ms, char *err,
                       size_t errlen);
/* Queue the in-place sum over all ranks of n device floats behind the work
 * queued so far on stream `after` (a cudaStream_t: the backend's, whose
 * kernels write the gradients; NULL: behind all device work, waited for),
 * without waiting for the sum (an event orders NCCL's stream after it): a
 * gradient bucket while backward runs. Every rank queues the same sums in
 * the same order. The queued sums are done when nccl_ar_wait returns 0.
 * 0, or -1 with the reason (the communicator is aborted then). */
int nccl_ar_enqueue(nccl_ar_t *self, float *dev, size_t n, void *after, int timeout_ms,
                    char *err, size_t errlen);
/* Until every queued sum is done, polling NCCL's errors, the timeout and
 * the cancel callback meanwhile. 0, or -1 with the reason (aborted). */
int nccl_ar_wait(nccl_ar_t *self, int timeout_ms, char *err, size_t errlen);
/* In place sum over all ranks of n doubles in host memory (ncclDouble:
 * SyncBatchNorm's sums keep the ring's double precision). 0 or -1. */
int nccl_ar_sum_f64(nccl_ar_t *self, double *data, size_t n, int timeout_ms, char *err,
                    size_t errlen);
/* Bitwise training's exact sums on the device (gpud/cuda/cuda_xsum.h):
 * the in-place max over all ranks of n uint32 (the tops' magnitude bits)
 * and sum of n int64 (the limbs; integer addition, so the same bits in any
 * order), behind all device work and done on return. 0 or -1 (aborted). */
int nccl_ar_max_u32_device(nccl_ar_t *self, uint32_t *dev, size_t n, int timeout_ms, char *err,
                           size_t errlen);
int nccl_ar_sum_i64_device(nccl_ar_t *self, int64_t *dev, size_t n, int timeout_ms, char *err,
                           size_t errlen);
int nccl_ar_rank(const nccl_ar_t *self);
/* The loaded NCCL's version (ncclGetVersion: 23007 is 2.30.7), which may
 * differ from the header's the build saw; -1 when NCCL cannot say. Two
 * ranks of a communicator may share a device from 2.30.3 on (with
 * NCCL_MULTI_RANK_GPU_ENABLE=1). */
int nccl_ar_version(void);
int nccl_ar_world(const nccl_ar_t *self);

#endif
