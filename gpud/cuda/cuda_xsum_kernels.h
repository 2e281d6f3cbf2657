/* cuda_xsum_kernels — bitwise training's exact sums in device memory
 * (cuda_xsum.h): common/xsum.h's limbs and slices, the per-element
 * arithmetic shared with the host through common/xsum_f32.h, so the limbs
 * are xsum_add_f32's bit for bit (gpud_cuemu checks them).
 *
 * A segment's window top lives on the device as two magnitude maxima
 * (|x|'s bits as unsigned integers, xsum_top_f32 turns one into a top):
 * run, the largest of every add so far, and cur, the add in flight's own.
 * One add is three launches on one stream: ck_xsum_amax (cur = the
 * vector's largest), ck_xsum_add (every element's limbs shifted from
 * run's top up to max(run, cur)'s, then its slices added) and
 * ck_xsum_commit (run = max(run, cur), cur = 0): the add reads run and cur
 * while no kernel writes them. Each launcher enqueues on s and returns the
 * launch status. */
#ifndef DDP_CUDA_XSUM_KERNELS_H
#define DDP_CUDA_XSUM_KERNELS_H

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* *cur = max(*cur, the largest magnitude bits of x[0, n)). */
cudaError_t ck_xsum_amax(cudaStream_t s, const float *x, size_t n, unsigned *cur);
/* limbs (n elements of XSUM_LIMBS) += x[0, n) at the window of max(*run,
 * *cur); nothing when that is non-finite or all zeros. */
cudaError_t ck_xsum_add(cudaStream_t s, const float *x, size_t n, int64_t *limbs,
                        const unsigned *run, const unsigned *cur);
/* *run = max(*run, *cur); *cur = 0. */
cudaError_t ck_xsum_commit(cudaStream_t s, unsigned *run, unsigned *cur);
/* Across ranks (the limbs summed as plain int64 after it, NCCL): limbs (n
 * elements) moved from the window of *own up to that of *all (>= own: the
 * ranks' maximum), as xsum_align. */
cudaError_t ck_xsum_align(cudaStream_t s, int64_t *limbs, size_t n, const unsigned *own,
                          const unsigned *all);
/* out[0, n) = the sums, each rounded once (xsum_get_f32), in the window
 * of *top (its magnitude bits). */
cudaError_t ck_xsum_round(cudaStream_t s, const int64_t *limbs, size_t n, const unsigned *top,
                          float *out);

#ifdef __cplusplus
}
#endif

#endif
