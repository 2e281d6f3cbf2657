/* cuda_optim_kernels — see cuda_optim_kernels.h. The element updates are
 * written once (sgd_elem, adam_elem) for the one-parameter and the
 * multi-tensor kernels. */
#include "gpud/cuda/cuda_optim_kernels.h"
#include "gpud/cuda/cuda_launch.h"

#include <math.h>

/* torch/optim/sgd.py _single_tensor_sgd, element i */
__device__ static inline void sgd_elem(float *w, const float *g, float *buf, size_t i,
                                       const ck_sgd_t &c)
{
    float d = g[i];
    if (c.wd != 0)
        d = __fadd_rn(d, __fmul_rn(c.wd, w[i]));
    if (c.use_mom) {
        buf[i] = c.first ? d : __fadd_rn(__fmul_rn(buf[i], c.mom), __fmul_rn(c.keep, d));
        d = c.nesterov ? __fadd_rn(d, __fmul_rn(c.mom, buf[i])) : buf[i];
    }
    w[i] = __fadd_rn(w[i], __fmul_rn(c.neg_lr, d));
}

/* torch/optim/adam.py / adamw.py _single_tensor_adam(w), element i */
__device__ static inline void adam_elem(float *w, const float *g, float *m, float *v,
                                        float *vmax, size_t i, const ck_adam_t &c)
{
    float d = g[i];
    if (c.adamw)
        w[i] = __fmul_rn(w[i], c.decay_mul);
    else if (c.wd != 0)
        d = __fadd_rn(d, __fmul_rn(c.wd, w[i]));
    m[i] = __fadd_rn(__fmul_rn(m[i], c.b1), __fmul_rn(c.one_b1, d));
    v[i] = __fadd_rn(__fmul_rn(v[i], c.b2), __fmul_rn(__fmul_rn(c.one_b2, d), d));
    float vv = v[i];
    if (vmax) {
        vmax[i] = fmaxf(vmax[i], vv);
        vv = vmax[i];
    }
    const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vv), c.bc2_sqrt), c.eps);
    w[i] = __fadd_rn(w[i], __fdiv_rn(__fmul_rn(c.neg_step_size, m[i]), denom));
}

__global__ static void k_sgd(float *w, const float *g, float *buf, size_t n, ck_sgd_t c)
{
    GRID_STRIDE(i, n)
    sgd_elem(w, g, buf, i, c);
}

cudaError_t ck_sgd(cudaStream_t s, float *w, const float *g, float *buf, size_t n, ck_sgd_t c)
{
    k_sgd<<<blocks_for(n), THREADS, 0, s>>>(w, g, buf, n, c);
    return cudaGetLastError();
}

__global__ static void k_adam(float *w, const float *g, float *m, float *v, float *vmax,
                              size_t n, ck_adam_t c)
{
    GRID_STRIDE(i, n)
    adam_elem(w, g, m, v, vmax, i, c);
}

cudaError_t ck_adam(cudaStream_t s, float *w, const float *g, float *m, float *v, float *vmax,
                    size_t n, ck_adam_t c)
{
    k_adam<<<blocks_for(n), THREADS, 0, s>>>(w, g, m, v, vmax, n, c);
    return cudaGetLastError();
}

/* ------------------------------------------------- multi-tensor: a block a chunk */

__global__ static void k_sgd_multi(const ck_chunk_t *chunks, ck_sgd_groups_t c)
{
    const ck_chunk_t k = chunks[blockIdx.x];
    for (size_t i = threadIdx.x; i < k.n; i += blockDim.x)
        sgd_elem(k.w, k.g, k.buf, i, c.g[k.grp]);
}

cudaError_t ck_sgd_multi(cudaStream_t s, const ck_chunk_t *chunks, int nchunks,
                         ck_sgd_groups_t c)
{
    if (nchunks <= 0)
        return cudaSuccess;
    k_sgd_multi<<<(unsigned)nchunks, THREADS, 0, s>>>(chunks, c);
    return cudaGetLastError();
}

__global__ static void k_adam_multi(const ck_chunk_t *chunks, ck_adam_groups_t c)
{
    const ck_chunk_t k = chunks[blockIdx.x];
    for (size_t i = threadIdx.x; i < k.n; i += blockDim.x)
        adam_elem(k.w, k.g, k.buf, k.sq, k.sq_max, i, c.g[k.grp]);
}

cudaError_t ck_adam_multi(cudaStream_t s, const ck_chunk_t *chunks, int nchunks,
                          ck_adam_groups_t c)
{
    if (nchunks <= 0)
        return cudaSuccess;
    k_adam_multi<<<(unsigned)nchunks, THREADS, 0, s>>>(chunks, c);
    return cudaGetLastError();
}

/* ------------------------------------------------------------ NovoGrad */

__global__ static void k_sumsq(const float *g, size_t n, double *out)
{
    double acc = 0.0;
    for (size_t i = threadIdx.x; i < n; i += THREADS)
        acc += (double)__fmul_rn(g[i], g[i]);
    acc = block_sum(acc);
    if (threadIdx.x == 0)
        out[0] = acc;
}

cudaError_t ck_sumsq(cudaStream_t s, const float *g, size_t n, double *out)
{
    k_sumsq<<<1, THREADS, 0, s>>>(g, n, out);
    return cudaGetLastError();
}

/* optim_host.c's novograd_step scalars, in one thread */
__global__ static void k_novograd_moment(double *out, float *sq, float *sq_max, float b2,
                                         float one_b2, float eps)
{
    if (threadIdx.x != 0)
        return;
    const float norm = __double2float_rn(out[0]);
    float v = *sq == 0 ? norm : __fadd_rn(__fmul_rn(*sq, b2), __fmul_rn(one_b2, norm));
    *sq = v;
    if (sq_max) {
        *sq_max = fmaxf(*sq_max, v);
        v = *sq_max;
    }
    out[1] = (double)__fadd_rn(__fsqrt_rn(v), eps);
}

cudaError_t ck_novograd_moment(cudaStream_t s, double *out, float *sq, float *sq_max,
                               float b2, float one_b2, float eps)
{
    k_novograd_moment<<<1, 1, 0, s>>>(out, sq, sq_max, b2, one_b2, eps);
    return cudaGetLastError();
}

__global__ static void k_novograd(float *w, const float *g, float *m, size_t n,
                                  const double *denom, ck_novograd_t c)
{
    const float den = (float)denom[1];   /* exact: a float held in a double */
    GRID_STRIDE(i, n)
    {
        float d = __fdiv_rn(g[i], den);
        if (c.wd != 0)
            d = __fadd_rn(d, __fmul_rn(c.wd, w[i]));
        if (c.grad_averaging)
            d = __fmul_rn(d, c.avg);
        m[i] = __fadd_rn(__fmul_rn(m[i], c.b1), d);
        w[i] = __fadd_rn(w[i], __fmul_rn(c.neg_lr, m[i]));
    }
}

cudaError_t ck_novograd(cudaStream_t s, float *w, const float *g, float *m, size_t n,
                        const double *denom, ck_novograd_t c)
{
    k_novograd<<<blocks_for(n), THREADS, 0, s>>>(w, g, m, n, denom, c);
    return cudaGetLastError();
}
