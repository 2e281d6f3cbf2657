/* cuda_optim_kernels — the optimizer's kernels (cuda_optim_kernels.cu),
 * callable from C: SGD (momentum, nesterov), Adam / AdamW (amsgrad) and
 * NovoGrad updates on device arrays with the arithmetic of
 * gpud/optim/optim_host.c, every float operation an explicit
 * round-to-nearest intrinsic (no FMA contraction), so that they are
 * bit-exact. Each launcher enqueues on `s` and returns the launch status.
 *
 * Two forms of SGD and Adam: one parameter per launch (ck_sgd, ck_adam),
 * and the multi-tensor form (ck_sgd_multi, ck_adam_multi: PyTorch's
 * "foreach"/"fused" idea): one launch over a device table of chunks, each
 * chunk a slice of one parameter's arrays and the index of its group of
 * scalars. Both run the same per-element function, so they give the same
 * bits. */
#ifndef DDP_CUDA_OPTIM_KERNELS_H
#define DDP_CUDA_OPTIM_KERNELS_H

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    float wd, mom, keep, neg_lr;
    int use_mom, first, nesterov;
} ck_sgd_t;
cudaError_t ck_sgd(cudaStream_t s, float *w, const float *g, float *buf, size_t n,
                   ck_sgd_t c);
typedef struct {
    float b1, b2, one_b1, one_b2, wd, decay_mul, neg_step_size, bc2_sqrt, eps;
    int adamw;
} ck_adam_t;
/* vmax NULL: no amsgrad */
cudaError_t ck_adam(cudaStream_t s, float *w, const float *g, float *m, float *v, float *vmax,
                    size_t n, ck_adam_t c);

/* The multi-tensor form. A chunk: n <= CK_CHUNK elements of one parameter
 * (w, g and its state from the same element on), updated with the
 * scalars of group grp (< CK_GROUPS). One block per chunk. */
#define CK_CHUNK 8192
#define CK_GROUPS 8
typedef struct {
    float *w;
    const float *g;
    float *buf;            /* SGD momentum / Adam exp_avg */
    float *sq, *sq_max;    /* Adam exp_avg_sq, amsgrad's max (NULL: none) */
    uint32_t n, grp;
} ck_chunk_t;
typedef struct {
    ck_sgd_t g[CK_GROUPS];
} ck_sgd_groups_t;
typedef struct {
    ck_adam_t g[CK_GROUPS];
} ck_adam_groups_t;
/* chunks: DEVICE memory, nchunks entries */
cudaError_t ck_sgd_multi(cudaStream_t s, const ck_chunk_t *chunks, int nchunks,
                         ck_sgd_groups_t c);
cudaError_t ck_adam_multi(cudaStream_t s, const ck_chunk_t *chunks, int nchunks,
                          ck_adam_groups_t c);

/* NovoGrad (torch_optimizer 0.3), every scalar on the device so that no
 * step waits for the host. ck_sumsq: out[0] = sum (double)(g*g in float).
 * ck_novograd_moment: from that sum, the per-tensor second moment *sq
 * (and amsgrad's *sq_max, NULL: none) moved as optim_host.c moves it, and
 * out[1] = its denominator sqrt(v) + eps (a float held in a double). */
cudaError_t ck_sumsq(cudaStream_t s, const float *g, size_t n, double *out);
cudaError_t ck_novograd_moment(cudaStream_t s, double *out, float *sq, float *sq_max,
                               float b2, float one_b2, float eps);
typedef struct {
    float wd, b1, avg, neg_lr;
    int grad_averaging;
} ck_novograd_t;
/* denom: ck_novograd_moment's out (its out[1] is read) */
cudaError_t ck_novograd(cudaStream_t s, float *w, const float *g, float *m, size_t n,
                        const double *denom, ck_novograd_t c);

#ifdef __cplusplus
}
#endif
#endif
