/* cuda_xsum — bitwise training's exact sums kept in device memory
 * (docs/TRAINING.md "Bitwise training", docs/CUDA.md): common/xsum.h's
 * segments, limbs and tops, made by kernels (cuda_xsum_kernels.h) where
 * backward wrote each chunk's gradient, so a chunk costs three launches a
 * gradient and no copy; the limbs come to the host once a step, into an
 * xsum_t of the same segments, for the ring and the one rounding. The
 * limbs are xsum_add_f32's bit for bit, whatever the order of the adds.
 *
 *   cuda_xsum_t *x = cuda_xsum_new(len, nseg);
 *   per step: cuda_xsum_clear(x, stream);
 *             per chunk and segment: cuda_xsum_add(x, seg, grad, stream);
 *             cuda_xsum_read(x, host_xsum, stream);   (waits; the ring's path)
 *          or cuda_xsum_reduce(x, nccl, grads, stream, err, len);   (NCCL's)
 *   cuda_xsum_destroy(&x);
 *
 * Every call but new and destroy is queued on the stream it gets (the
 * backend's, where backward runs); read waits for it. Failures are logged
 * (what failed, what to do) and return -1. */
#ifndef DDP_CUDA_XSUM_H
#define DDP_CUDA_XSUM_H

#include <stddef.h>

#include "common/xsum.h"
#include "gpud/backend_arena.h"

typedef struct cuda_xsum cuda_xsum_t;

/* nseg >= 1 segments of len[s] floats, zero. NULL when the device (or the
 * host) is out of memory, logged. */
cuda_xsum_t *cuda_xsum_new(const size_t *len, int nseg);
/* Waits for stream (NULL: the legacy stream) before freeing. */
void cuda_xsum_destroy(cuda_xsum_t **self, void *stream);
/* Every segment back to zero. 0 or -1. */
int cuda_xsum_clear(cuda_xsum_t *self, void *stream);
/* Segment seg += x[0, len[seg]) (device memory). 0 or -1. */
int cuda_xsum_add(cuda_xsum_t *self, int seg, const float *x, void *stream);
/* dst (an xsum_t of the same segments, host memory) = the sums so far,
 * after the stream's queued work. 0 or -1. */
int cuda_xsum_read(cuda_xsum_t *self, xsum_t *dst, void *stream);
/* The sums over every rank of coll (backend_arena.h: NCCL's uint32 max of
 * the tops' magnitude bits, then int64 sum of the limbs, each aligned to
 * the ranks' widest window first), each rounded once into out (device
 * memory, the segments one after the other, xsum_get_f32's bits), nothing
 * through the host. The sums are left as the reduced ones. 0, or -1 with
 * the reason in err. */
int cuda_xsum_reduce(cuda_xsum_t *self, const bk_xsum_coll_t *coll, float *out, void *stream,
                     char *err, size_t errlen);
/* Bytes a read copies to the host (the limbs and the tops' maxima). */
size_t cuda_xsum_read_bytes(const cuda_xsum_t *self);

#endif
