/* cuda_optim — see cuda_optim.h. The scalars are derived on the host exactly
 * as optim.c derives them; the kernels (cuda_kernels.cu) do the per-element
 * work with explicitly rounded float operations. */
#include "gpud/cuda/cuda_optim.h"
#include "common/errbuf.h"
#include "common/log.h"

#include <math.h>
#include <stdio.h>

#include "gpud/cuda/cuda_kernels.h"

static int ok(cudaError_t e, const char *what, char *err, size_t errlen)
{
    if (e == cudaSuccess)
        return 0;
    err_set(err, errlen, "cuda optimizer: %s failed: %s (%s)", what, cudaGetErrorName(e),
             cudaGetErrorString(e));
    return -1;
}

static int sgd(const optim_cfg_t *c, cuda_oparam_t *p, double lr, cudaStream_t s, char *err,
               size_t errlen)
{
    ck_sgd_t k = {.wd = p->decay ? (float)c->weight_decay : 0.0f,
                  .mom = (float)c->momentum,
                  .keep = (float)(1.0 - c->dampening),
                  .neg_lr = (float)-lr,
                  .use_mom = c->momentum != 0,
                  .first = c->momentum != 0 && !p->have_buf,
                  .nesterov = c->nesterov};
    if (ok(ck_sgd(s, p->w, p->g, p->buf, (size_t)p->numel, k), "SGD kernel", err, errlen) < 0)
        return -1;
    p->have_buf |= k.use_mom;
    p->step++;
    return 0;
}

static int adam(const optim_cfg_t *c, cuda_oparam_t *p, double lr, cudaStream_t s, char *err,
                size_t errlen)
{
    const double wdd = p->decay ? c->weight_decay : 0.0;
    p->step++;
    const double step = (double)(float)p->step;   /* PyTorch's float32 step */
    const double bc1 = 1.0 - pow(c->beta1, step), bc2 = 1.0 - pow(c->beta2, step);
    ck_adam_t k = {.b1 = (float)c->beta1,
                   .b2 = (float)c->beta2,
                   .one_b1 = (float)(1.0 - c->beta1),
                   .one_b2 = (float)(1.0 - c->beta2),
                   .wd = (float)wdd,
                   .decay_mul = (float)(1.0 - lr * wdd),
                   .neg_step_size = (float)-(lr / bc1),
                   .bc2_sqrt = (float)sqrt(bc2),
                   .eps = (float)c->eps,
                   .adamw = c->kind == OPTIM_ADAMW};
    return ok(ck_adam(s, p->w, p->g, p->buf, p->sq, c->amsgrad ? p->sq_max : NULL,
                      (size_t)p->numel, k), "Adam kernel", err, errlen);
}

static int novograd(const optim_cfg_t *c, cuda_oparam_t *p, double lr, cudaStream_t s,
                    char *err, size_t errlen)
{
    double sum = 0.0;
    p->step++;
    if (ok(ck_sumsq(s, p->g, (size_t)p->numel, p->dsum), "NovoGrad norm kernel", err, errlen) < 0 ||
        ok(cudaMemcpyAsync(&sum, p->dsum, sizeof sum, cudaMemcpyDeviceToHost, s), "copy", err,
           errlen) < 0 ||
        ok(cudaStreamSynchronize(s), "NovoGrad norm", err, errlen) < 0)
        return -1;
    const float norm = (float)sum;
    p->nv_sq = p->nv_sq == 0 ? norm : p->nv_sq * (float)c->beta2 + (float)(1.0 - c->beta2) * norm;
    float vv = p->nv_sq;
    if (c->amsgrad) {
        p->nv_sq_max = fmaxf(p->nv_sq_max, vv);
        vv = p->nv_sq_max;
    }
    ck_novograd_t k = {.denom = sqrtf(vv) + (float)c->eps,
                       .wd = p->decay ? (float)c->weight_decay : 0.0f,
                       .b1 = (float)c->beta1,
                       .avg = (float)(1.0 - c->beta1),
                       .neg_lr = (float)-lr,
                       .grad_averaging = c->grad_averaging};
    return ok(ck_novograd(s, p->w, p->g, p->buf, (size_t)p->numel, k), "NovoGrad kernel", err,
              errlen);
}

int cuda_optim_step(const optim_cfg_t *c, cuda_oparam_t *p, double lr, void *stream,
                    char *err, size_t errlen)
{
    cudaStream_t s = (cudaStream_t)stream;
    switch (c->kind) {
    case OPTIM_SGD:
        return sgd(c, p, lr, s, err, errlen);
    case OPTIM_NOVOGRAD:
        return novograd(c, p, lr, s, err, errlen);
    case OPTIM_ADAM:
    case OPTIM_ADAMW:
        return adam(c, p, lr, s, err, errlen);
    default:
        err_set(err, errlen, "cuda optimizer: unknown kind %d", (int)c->kind);
        return -1;
    }
}

/* ------------------------------------------------- the device arena
 *
 * The backend's stream is non-blocking: it does not order with the legacy
 * default stream these ops use (cudaMemcpy, cudaMemset, kernels on stream
 * 0). So every op first waits for all queued device work (the kernels that
 * wrote a gradient, the forward that reads a weight about to change) and
 * finishes its own work before returning, for the kernels queued after it.
 * The ops get no backend: failures are logged here (what failed, what to
 * do) and the caller gets -1. */

static int dev_ok(cudaError_t e, const char *what)
{
    if (e == cudaSuccess)
        return 0;
    log_error("cuda device arena: %s failed: %s (%s); %s", what, cudaGetErrorName(e),
              cudaGetErrorString(e),
              e == cudaErrorMemoryAllocation
                  ? "the GPU is out of memory: lower the batch or the model, or stop other "
                    "processes on the device (nvidia-smi)"
                  : "the CUDA context may be unusable: restart the process (run with "
                    "CUDA_LAUNCH_BLOCKING=1 to locate a failing kernel)");
    return -1;
}

/* All device work queued so far, on every stream, is done. */
static int dev_quiet(const char *what)
{
    return dev_ok(cudaDeviceSynchronize(), what);
}

static float *dev_alloc(size_t floats)
{
    void *p = NULL;
    size_t bytes = (floats ? floats : 1) * sizeof(float);
    if (dev_ok(cudaMalloc(&p, bytes), "cudaMalloc (arena)") < 0)
        return NULL;
    /* the memset is asynchronous: zero before any stream reads it */
    if (dev_ok(cudaMemset(p, 0, bytes), "cudaMemset (arena)") < 0 ||
        dev_quiet("zeroing a new arena") < 0) {
        cudaFree(p);
        return NULL;
    }
    return p;
}

static void dev_free(float *base)
{
    /* kernels queued on the backend's stream may still use the arena */
    dev_quiet("device work before freeing an arena");
    dev_ok(cudaFree(base), "cudaFree (arena)");
}

static int dev_read(const float *base, size_t off, size_t n, float *dst)
{
    if (!n)
        return 0;
    if (dev_quiet("device work before an arena read") < 0)
        return -1;
    /* device to pageable host memory: returns when the copy is done */
    return dev_ok(cudaMemcpy(dst, base + off, n * sizeof *dst, cudaMemcpyDeviceToHost),
                  "arena read (cudaMemcpy device to host)");
}

/* From pageable memory cudaMemcpy may return before the DMA lands, a
 * memset or a device-to-device copy before it ran: each op waits. */
static int dev_write(float *base, size_t off, size_t n, const float *src)
{
    if (!n)
        return 0;
    if (dev_quiet("device work before an arena write") < 0 ||
        dev_ok(cudaMemcpy(base + off, src, n * sizeof *src, cudaMemcpyHostToDevice),
               "arena write (cudaMemcpy host to device)") < 0)
        return -1;
    return dev_quiet("arena write");
}

static int dev_zero(float *base, size_t off, size_t n)
{
    if (!n)
        return 0;
    if (dev_quiet("device work before an arena zero") < 0 ||
        dev_ok(cudaMemset(base + off, 0, n * sizeof *base), "arena zero (cudaMemset)") < 0)
        return -1;
    return dev_quiet("arena zero");
}

static int dev_copy(float *dst, size_t doff, const float *src, size_t soff, size_t n)
{
    if (!n)
        return 0;
    if (dev_quiet("device work before an arena copy") < 0 ||
        dev_ok(cudaMemcpy(dst + doff, src + soff, n * sizeof *dst, cudaMemcpyDeviceToDevice),
               "arena copy (cudaMemcpy device to device)") < 0)
        return -1;
    return dev_quiet("arena copy");
}

/* One device word, all ones (= none found), that the kernel lowers to the
 * first bad index; read back (synchronously) after the kernel. */
static int dev_find_nonfinite(const float *base, size_t off, size_t n, int64_t *at)
{
    unsigned long long *word = NULL, first = ~0ull;
    *at = -1;
    if (!n)
        return 0;
    if (dev_quiet("device work before a non-finite scan") < 0 ||
        dev_ok(cudaMalloc((void **)&word, sizeof *word), "cudaMalloc (non-finite scan)") < 0)
        return -1;
    int rc = -1;
    if (dev_ok(cudaMemcpy(word, &first, sizeof first, cudaMemcpyHostToDevice),
               "non-finite scan start (cudaMemcpy)") == 0 &&
        dev_ok(ck_find_nonfinite(NULL, base + off, n, word), "non-finite scan kernel") == 0 &&
        dev_ok(cudaMemcpy(&first, word, sizeof first, cudaMemcpyDeviceToHost),
               "non-finite scan result (cudaMemcpy)") == 0 &&
        dev_quiet("non-finite scan") == 0)
        rc = 0;
    if (dev_ok(cudaFree(word), "cudaFree (non-finite scan)") < 0)
        rc = -1;
    if (rc == 0 && first != ~0ull)
        *at = (int64_t)first;
    return rc;
}

static int dev_scale(float *base, size_t off, size_t n, float factor)
{
    if (!n)
        return 0;
    if (dev_quiet("device work before an arena scale") < 0 ||
        dev_ok(ck_scale(NULL, base + off, n, factor), "arena scale kernel") < 0)
        return -1;
    return dev_quiet("arena scale");
}

/* NovoGrad's scalar second moments live in the state arena here, host
 * state in cuda_oparam_t: copied around the step. */
static int arena_step(const optim_cfg_t *c, double lr, bk_oparam_t *p, int n, char *err,
                      size_t errlen)
{
    double *dsum = NULL;
    int nv = c->kind == OPTIM_NOVOGRAD, rc = 0;
    /* the gradients come from kernels on the backend's (non-blocking) stream */
    if (ok(cudaDeviceSynchronize(), "device work before the optimizer step", err, errlen) < 0 ||
        (nv && ok(cudaMalloc((void **)&dsum, sizeof *dsum), "NovoGrad scratch", err, errlen) < 0))
        return -1;
    for (int i = 0; i < n && rc == 0; i++) {
        if (!p[i].g)
            continue;
        cuda_oparam_t q = {.w = p[i].w, .g = p[i].g, .buf = p[i].buf, .sq = p[i].sq,
                           .sq_max = p[i].sq_max, .numel = p[i].numel, .decay = p[i].decay,
                           .step = p[i].step, .have_buf = p[i].have_buf, .dsum = dsum};
        if (nv && (dev_read(p[i].sq, 0, 1, &q.nv_sq) < 0 ||
                   (c->amsgrad && dev_read(p[i].sq_max, 0, 1, &q.nv_sq_max) < 0))) {
            err_set(err, errlen, "cuda optimizer: cannot read NovoGrad's second moment");
            rc = -1;
            break;
        }
        rc = cuda_optim_step(c, &q, lr, NULL, err, errlen);
        if (rc == 0 && nv && (dev_write(p[i].sq, 0, 1, &q.nv_sq) < 0 ||
                              (c->amsgrad && dev_write(p[i].sq_max, 0, 1, &q.nv_sq_max) < 0))) {
            err_set(err, errlen, "cuda optimizer: cannot write NovoGrad's second moment");
            rc = -1;
        }
        p[i].step = q.step;
        p[i].have_buf = q.have_buf;
    }
    if (rc == 0)
        rc = ok(cudaDeviceSynchronize(), "optimizer step", err, errlen);
    cudaError_t fe = cudaFree(dsum);   /* the first failure keeps its message */
    if (rc == 0)
        rc = ok(fe, "cudaFree (NovoGrad scratch)", err, errlen);
    return rc;
}

const bk_arena_ops_t cuda_device_arena = {
    .name = "cuda device",
    .mem = BK_MEM_DEVICE,
    .alloc = dev_alloc,
    .free = dev_free,
    .read = dev_read,
    .write = dev_write,
    .zero = dev_zero,
    .copy = dev_copy,
    .find_nonfinite = dev_find_nonfinite,
    .scale = dev_scale,
    .optim_step = arena_step,
};
