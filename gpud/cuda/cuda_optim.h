/* cuda_optim — one optimizer step of a parameter that lives in device
 * memory, with exactly the arithmetic of gpud/optim/optim_host.c (SGD with
 * momentum/nesterov, Adam, AdamW, NovoGrad; PyTorch 1.13 / torch_optimizer
 * semantics). The caller owns the device arrays; the state arrays must be
 * zeroed device memory of numel floats (NovoGrad: exp_avg numel, the scalar
 * second moment is host state here).
 *
 * cuda_device_arena: the device-resident arena (backend_arena.h) of the
 * cuda backend (cuda_backend_new sets it: the model's parameters,
 * gradients and optimizer state are cudaMalloc'd, the kernels use them in
 * place); its optimizer slot runs cuda_optim_step per parameter. */
#ifndef DDP_CUDA_OPTIM_H
#define DDP_CUDA_OPTIM_H

#include <stdbool.h>
#include <stdint.h>

#include "gpud/backend_arena.h"
#include "gpud/optim/optim.h"

typedef struct {
    float *w;                 /* device, numel */
    const float *g;           /* device, numel */
    float *buf;               /* SGD momentum / Adam exp_avg / NovoGrad exp_avg (device) */
    float *sq;                /* Adam exp_avg_sq (device) */
    float *sq_max;            /* Adam amsgrad max_exp_avg_sq (device) or NULL */
    int64_t numel;
    bool decay;               /* weight decay applies (optim_add_param's decay) */
    int64_t step;             /* steps taken (host state) */
    int have_buf;             /* SGD: momentum buffer initialised */
    float nv_sq, nv_sq_max;   /* NovoGrad second moments (host state) */
    double *dsum;             /* device, 1 double: NovoGrad's norm */
} cuda_oparam_t;

/* 0, or -1 with the reason in err. stream: a cudaStream_t (void * here so
 * that callers need no CUDA headers). */
int cuda_optim_step(const optim_cfg_t *c, cuda_oparam_t *p, double lr, void *stream,
                    char *err, size_t errlen);

/* cudaMalloc'd arenas. Every op (read, write, zero, copy, find_nonfinite,
 * optim_step) first waits for all queued device work (the backend's stream
 * is non-blocking, these run on the legacy default stream) and returns
 * with its own work finished; a failure is logged with its cause. */
extern const bk_arena_ops_t cuda_device_arena;

#endif
