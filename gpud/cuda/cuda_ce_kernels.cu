/* cuda_ce_kernels — see cuda_ce_kernels.h. Cross-entropy and top-k: a
 * block a sample up to CE_KMAX classes, a thread a sample past it; each
 * value computed as gpud/cpu/ref_ops.c and gpud/model_topk.c do. */
#include "gpud/cuda/cuda_ce_kernels.h"
#include "gpud/cuda/cuda_launch.h"

#include <math.h>

__global__ static void k_ce(const float *logits, const int32_t *labels, int n, int k, float eps,
                            const float *dloss, float *loss, float *glogits)
{
    GRID_STRIDE(i, (size_t)n)   /* a thread a sample: k_ce_block's fallback past CE_KMAX */
    {
        const float *l = logits + i * (size_t)k;
        double mx = -INFINITY, s = 0.0, sum = 0.0;
        for (int c = 0; c < k; c++)
            mx = l[c] > mx ? l[c] : mx;
        for (int c = 0; c < k; c++) {
            s += exp((double)l[c] - mx);
            sum += l[c];
        }
        if (loss) {
            double lse = mx + log(s);
            loss[i] = (float)(lse - (1.0 - eps) * l[labels[i]] - (double)eps / k * sum);
        }
        if (glogits)
            for (int c = 0; c < k; c++) {
                double t = (double)eps / k + (c == labels[i] ? 1.0 - eps : 0.0);
                glogits[i * (size_t)k + c] = (float)(dloss[i] * (exp((double)l[c] - mx) / s - t));
            }
    }
}

/* k_ce with a block a sample (k <= CE_KMAX): the maximum and each class's
 * exp spread over the block's threads (a maximum is the same in any order;
 * each exp is the same expression), the two sums over the classes in
 * order by thread 0 (k_ce's order: the same bits), the gradient spread
 * again. k_ce ran a thread a sample: ResNet's 256 x 1,000 took 0.35 ms. */
#define CE_KMAX 4096
#define CE_THREADS 128

/* A row's k logits l: its maximum (returned to every thread; NaN skipped,
 * as a loop in class order skips it) and e[c] = exp(l[c] - max), spread
 * over the block's CE_THREADS threads. Every thread calls it; part:
 * CE_THREADS doubles of shared memory; e is complete when it returns. */
__device__ static double row_max_exps(const float *l, int k, double *part, double *e)
{
    int t = (int)threadIdx.x;
    double mx = -INFINITY;
    for (int c = t; c < k; c += CE_THREADS)
        mx = l[c] > mx ? l[c] : mx;
    part[t] = mx;
    __syncthreads();
    if (t == 0) {
        for (int j = 1; j < CE_THREADS; j++)
            mx = part[j] > mx ? part[j] : mx;
        part[0] = mx;
    }
    __syncthreads();
    mx = part[0];
    for (int c = t; c < k; c += CE_THREADS)
        e[c] = exp((double)l[c] - mx);
    __syncthreads();
    return mx;
}

__global__ static void k_ce_block(const float *logits, const int32_t *labels, int k, float eps,
                                  const float *dloss, float *loss, float *glogits)
{
    __shared__ double e[CE_KMAX];
    __shared__ double part[CE_THREADS];
    __shared__ double stat;   /* the sum of the exps */
    int i = (int)blockIdx.x, t = (int)threadIdx.x;
    const float *l = logits + (size_t)i * k;
    double mx = row_max_exps(l, k, part, e);
    if (t == 0) {
        double s = 0.0, sum = 0.0;
        for (int c = 0; c < k; c++) {
            s += e[c];
            sum += l[c];
        }
        stat = s;
        if (loss) {
            double lse = mx + log(s);
            loss[i] = (float)(lse - (1.0 - eps) * l[labels[i]] - (double)eps / k * sum);
        }
    }
    __syncthreads();
    if (glogits) {
        double s = stat;
        for (int c = t; c < k; c += CE_THREADS) {
            double tt = (double)eps / k + (c == labels[i] ? 1.0 - eps : 0.0);
            glogits[(size_t)i * k + c] = (float)(dloss[i] * (e[c] / s - tt));
        }
    }
}

cudaError_t ck_ce_fwd(cudaStream_t s, const float *logits, const int32_t *labels, int n,
                      int k, float eps, float *loss)
{
    if (n > 0 && k <= CE_KMAX)
        k_ce_block<<<(unsigned)n, CE_THREADS, 0, s>>>(logits, labels, k, eps, NULL, loss, NULL);
    else
        k_ce<<<blocks_for((size_t)n), THREADS, 0, s>>>(logits, labels, n, k, eps, NULL, loss,
                                                       NULL);
    return cudaGetLastError();
}

cudaError_t ck_ce_bwd(cudaStream_t s, const float *logits, const int32_t *labels, int n,
                      int k, float eps, const float *dloss, float *glogits)
{
    if (n > 0 && k <= CE_KMAX)
        k_ce_block<<<(unsigned)n, CE_THREADS, 0, s>>>(logits, labels, k, eps, dloss, NULL,
                                                      glogits);
    else
        k_ce<<<blocks_for((size_t)n), THREADS, 0, s>>>(logits, labels, n, k, eps, dloss, NULL,
                                                       glogits);
    return cudaGetLastError();
}

/* model.c's ranks_before: higher logit first, NaN first as torch.topk, ties by id */
__device__ static int ranks_before(const float *l, int a, int b)
{
    float x = l[a], y = l[b];
    if (isnan(x) || isnan(y))
        return isnan(x) && (!isnan(y) || a < b);
    return x > y || (x == y && a < b);
}

/* The best of the classes c0, c0 + step, ... below nc by ranks_before
 * that is not among the j ids already taken; -1 when every one is. */
__device__ static int best_untaken(const float *l, int nc, int c0, int step,
                                   const int32_t *taken_ids, int j)
{
    int best = -1;
    for (int c = c0; c < nc; c += step) {
        int taken = 0;
        for (int q = 0; q < j && !taken; q++)
            taken = taken_ids[q] == c;
        if (!taken && (best < 0 || ranks_before(l, c, best)))
            best = c;
    }
    return best;
}

/* a thread a sample: k_topk_block's fallback past CE_KMAX classes or
 * TOPK_KMAX ids */
__global__ static void k_topk_ce(const float *logits, int n, int nc, const int32_t *labels,
                                 int k, int32_t *topk, float *loss)
{
    GRID_STRIDE(i, (size_t)n)
    {
        const float *l = logits + i * (size_t)nc;
        int32_t *out = topk ? topk + i * (size_t)k : NULL;
        for (int j = 0; out && j < k; j++) {
            out[j] = best_untaken(l, nc, 0, 1, out, j);
        }
        if (!loss)
            continue;
        int32_t label = labels ? labels[i] : -1;
        double mx = -INFINITY, s = 0.0;
        for (int c = 0; c < nc; c++)
            mx = l[c] > mx ? l[c] : mx;
        if (label < 0 || label >= nc || !isfinite(mx)) {
            loss[i] = NAN;
            continue;
        }
        for (int c = 0; c < nc; c++)
            s += exp((double)l[c] - mx);
        loss[i] = (float)(mx + log(s) - (double)l[label]);
    }
}

/* k_topk_ce with a block a sample (classes <= CE_KMAX, k <= TOPK_KMAX).
 * Each of the k rounds, every thread takes the best not yet chosen of its
 * classes (t, t + CE_THREADS, ...), then the block the best of those in a
 * tree of halves: ranks_before is a strict total order (ties by id, NaN by
 * id), so the winner is the same whatever the tree. The loss as k_ce_block
 * does:
 * the maximum and the exps spread over the threads, their sum in class
 * order by thread 0 (k_topk_ce's order: the same bits). A thread a sample
 * ran a training step's 256 samples as one block on one SM, each thread
 * rescanning its 1,000 logits k times. */
#define TOPK_KMAX 64
__global__ static void k_topk_block(const float *logits, int nc, const int32_t *labels, int k,
                                    int32_t *topk, float *loss)
{
    __shared__ int best[CE_THREADS];
    __shared__ int chosen[TOPK_KMAX];
    __shared__ double e[CE_KMAX];
    __shared__ double part[CE_THREADS];
    int i = (int)blockIdx.x, t = (int)threadIdx.x;
    const float *l = logits + (size_t)i * nc;
    for (int j = 0; topk && j < k; j++) {
        int b = best_untaken(l, nc, t, CE_THREADS, chosen, j);
        best[t] = b;
        __syncthreads();
        for (int h = CE_THREADS / 2; h > 0; h >>= 1) {
            if (t < h) {
                int o = best[t + h];
                if (o >= 0 && (best[t] < 0 || ranks_before(l, o, best[t])))
                    best[t] = o;
            }
            __syncthreads();
        }
        if (t == 0)
            chosen[j] = topk[(size_t)i * k + j] = best[0];   /* -1: every class taken */
        __syncthreads();
    }
    if (!loss)
        return;
    double mx = row_max_exps(l, nc, part, e);
    int32_t label = labels ? labels[i] : -1;
    if (t == 0 && (label < 0 || label >= nc || !isfinite(mx)))
        loss[i] = NAN;
    else if (t == 0) {
        double s = 0.0;
        for (int c = 0; c < nc; c++)
            s += e[c];
        loss[i] = (float)(mx + log(s) - (double)l[label]);
    }
}

cudaError_t ck_topk_ce(cudaStream_t s, const float *logits, int n, int classes,
                       const int32_t *labels, int k, int32_t *topk, float *loss)
{
    if (n > 0 && classes <= CE_KMAX && k <= TOPK_KMAX)
        k_topk_block<<<(unsigned)n, CE_THREADS, 0, s>>>(logits, classes, labels, k, topk, loss);
    else
        k_topk_ce<<<blocks_for((size_t)n), THREADS, 0, s>>>(logits, n, classes, labels, k, topk,
                                                            loss);
    return cudaGetLastError();
}
