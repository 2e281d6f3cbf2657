/* collective — where a training rank's sums go (docs/CUDA.md "NCCL in
 * gpud"): the ZeroMQ ring on the host (gpud/ring.h), or, in a generation
 * whose WELCOME/MEMBERS said `nccl`, that generation's NCCL communicator
 * on the device (gpud/cuda/cuda_nccl.h). The trainer's gradient sum
 * (collective_trainer_sum, trainer_set_device_sum) and SyncBatchNorm's
 * (collective_sum_f64) call this one interface; which path a sum takes is
 * the generation's.
 *
 * One communicator per generation: collective_generation aborts the
 * previous one (a membership change) and, on rank 0 of an NCCL generation,
 * makes the id that reducerd relays (NCCLID); the others take it with
 * collective_take_id. The communicator is made at the generation's first
 * sum (every member reaches it; NCCL's init is collective), waiting for
 * the id meanwhile through the cancel callback (which reads the reducer
 * socket); a failed NCCL call aborts it (collective_failed), and the
 * elastic path takes over as for a failed ring (members.c): the step is
 * reported, a new generation forms with a new id.
 *
 * Broadcasts (initial weights, BatchNorm buffers) and the failed-sample
 * agreement stay on the ring through the host mirror. Without NCCL in the
 * build (or on a cpu backend) every generation is a ring generation and
 * nothing here changes a byte. */
#ifndef DDP_GPUD_COLLECTIVE_H
#define DDP_GPUD_COLLECTIVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpud/ring.h"
#include "proto/messages.h"

typedef struct collective collective_t;

/* 1 when this gpud can sum over NCCL (its JOIN `nccl`): a build with
 * NCCL, the cuda backend, not DDPIPE_NCCL=0, and a GPU of its own (its
 * local rank below the visible devices, or NCCL_MULTI_RANK_GPU_ENABLE=1). */
int collective_offer(const char *backend);

/* Over ring (not owned; its cancel callback is shared). NULL when out of memory. */
collective_t *collective_new(allreduce_t *ring);
void collective_destroy(collective_t **self_p);
/* Polled while waiting for the id, the communicator and its sums. */
void collective_set_cancel(collective_t *self, allreduce_cancel_fn fn, void *ctx);

/* Generation gen (rank of world) starts; nccl: it sums over NCCL. The
 * previous communicator is aborted. Rank 0 of an NCCL generation makes
 * its id: returns 1 with *out filled (the caller sends it to reducerd);
 * else 0; -1 with the reason (no NCCL in this build, ncclGetUniqueId
 * failed). */
int collective_generation(collective_t *self, uint32_t gen, int rank, int world, bool nccl,
                          ddp_ncclid_t *out, char *err, size_t errlen);
/* reducerd's NCCLID: kept when it is the current NCCL generation's (gen,
 * world) and none was taken yet. 0, or -1 with why (the caller counts it). */
int collective_take_id(collective_t *self, const ddp_ncclid_t *id, char *err, size_t errlen);
/* The current generation sums over NCCL. */
bool collective_nccl(const collective_t *self);
/* The last NCCL operation failed (the communicator is aborted; the step
 * must be reported as a failed collective). Cleared by collective_generation. */
bool collective_failed(const collective_t *self);

/* n floats of device memory summed in place over the NCCL generation.
 * 0, or -1 with the reason. */
int collective_sum_device(collective_t *self, float *dev, size_t n, int timeout_ms, char *err,
                          size_t errlen);
/* trainer_set_device_sum's functions (ctx: the collective_t; gpud/trainer.h's
 * trainer_dsum_t): the whole arena in one sum; a bucket's sum queued behind
 * the work queued so far on stream `after` (the grads arena's, a
 * cudaStream_t) without waiting for it, in the same order on every rank;
 * and the wait for every queued sum. 0, or -1 with the reason (the
 * communicator is aborted: collective_failed). */
int collective_trainer_sum(void *ctx, float *dev, size_t n, int timeout_ms, char *err,
                           size_t errlen);
int collective_trainer_enqueue(void *ctx, float *dev, size_t n, void *after, int timeout_ms,
                               char *err, size_t errlen);
int collective_trainer_wait(void *ctx, int timeout_ms, char *err, size_t errlen);
/* Bitwise training's exact sums (trainer_dsum_t max_u32, sum_i64): the
 * max of n uint32 / the sum of n int64 of device memory, in place, behind
 * all device work and done on return. 0, or -1 (aborted). */
int collective_trainer_max_u32(void *ctx, uint32_t *dev, size_t n, int timeout_ms, char *err,
                               size_t errlen);
int collective_trainer_sum_i64(void *ctx, int64_t *dev, size_t n, int timeout_ms, char *err,
                               size_t errlen);
/* n host doubles summed in place: NCCL in an NCCL generation, else the ring
 * (allreduce_sum_f64, the same bytes as before). */
int collective_sum_f64(collective_t *self, double *data, size_t n, int timeout_ms, char *err,
                       size_t errlen);

#endif
