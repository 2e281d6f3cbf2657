/* cuda_arena — the cuda backend's device-resident arena (backend_arena.h):
 * the model's parameters, gradients and optimizer state are cudaMalloc'd
 * and the kernels use them in place.
 *
 * Every op is queued on ONE stream, the backend's (its kernels run there),
 * so the stream orders them with the training pass and with each other:
 * no op waits for the whole device, and only what must hand the host a
 * result waits for that stream (read, the non-finite scan's answer, free).
 * write, zero, copy, scale and the optimizer step return with their work
 * queued: the next kernel on the stream sees it, a host read waits for it.
 * The optimizer step is cuda_optim.h's: one multi-tensor launch for SGD
 * and Adam/AdamW, nothing copied per step. Work on another stream (NCCL's)
 * first waits for the device (cuda_nccl.c) and ends before the host goes
 * on, so it is ordered too.
 *
 *   cuda_arena_t *a = cuda_arena_new(stream, err, errlen);
 *   backend->arena = cuda_arena_ops(a);      ... the model's arenas ...
 *   cuda_arena_destroy(&a);                  after every arena is freed
 */
#ifndef DDP_CUDA_ARENA_H
#define DDP_CUDA_ARENA_H

#include <stddef.h>

#include "gpud/backend_arena.h"
#include "gpud/cuda/cuda_optim.h"

typedef struct cuda_arena cuda_arena_t;

/* stream: a cudaStream_t (NULL: the legacy default stream). NULL with err
 * when the device cannot give the arena's own scratch. */
cuda_arena_t *cuda_arena_new(void *stream, char *err, size_t errlen);
/* Waits for the stream, then frees the arena's own scratch. */
void cuda_arena_destroy(cuda_arena_t **self);
/* The ops (backend_arena.h), whose ctx is self. */
const bk_arena_ops_t *cuda_arena_ops(cuda_arena_t *self);
/* What the optimizer steps ran (tests). */
cuda_optim_counts_t cuda_arena_optim_counts(const cuda_arena_t *self);

#endif
