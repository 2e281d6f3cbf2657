/* cuda_optim — the optimizer step of parameters that live in device
 * memory, with exactly the arithmetic of gpud/optim/optim_host.c (SGD with
 * momentum/nesterov, Adam, AdamW, NovoGrad; PyTorch 1.13 / torch_optimizer
 * semantics), queued on a stream: nothing of it waits for the device or
 * copies a byte between host and device per step.
 *
 *   cuda_optim_t *o = cuda_optim_new(err, errlen);
 *   each step: cuda_optim_run(o, &cfg, lr, params, n, stream, err, errlen);
 *   cuda_optim_destroy(&o);
 *
 * SGD and Adam/AdamW run as ONE multi-tensor launch over every parameter
 * (cuda_optim_kernels.h's chunk table, uploaded when the parameters or
 * their grouping change, not per step): the parameters fall into groups of
 * equal scalars (weight decay or not; Adam's step, SGD's first momentum
 * step), at most CK_GROUPS of them, else (parameters whose steps diverged
 * that much) one launch per parameter. NovoGrad's per-tensor norm and
 * second moment are three small launches per parameter, all on the device
 * (its scalar moment is the state arena's float). */
#ifndef DDP_CUDA_OPTIM_H
#define DDP_CUDA_OPTIM_H

#include <stddef.h>
#include <stdint.h>

#include "gpud/backend_arena.h"
#include "gpud/optim/optim.h"

/* One parameter's step, per-parameter launches, on stream (a cudaStream_t;
 * NULL the legacy default stream). scratch: device memory of 2 doubles
 * (NovoGrad's norm and denominator; may be NULL for the others). p's
 * step/have_buf are updated. 0, or -1 with the reason in err. */
int cuda_optim_step(const optim_cfg_t *c, bk_oparam_t *p, double lr, double *scratch,
                    void *stream, char *err, size_t errlen);

typedef struct cuda_optim cuda_optim_t;

/* What ran, for tests. */
typedef struct {
    unsigned long multi_launches;   /* steps run as one multi-tensor launch */
    unsigned long param_launches;   /* parameters updated by their own launches */
    unsigned long table_uploads;    /* chunk tables copied to the device */
} cuda_optim_counts_t;

cuda_optim_t *cuda_optim_new(char *err, size_t errlen);
/* Waits for nothing: the caller makes sure no queued launch still reads the
 * chunk table (cuda_arena_destroy synchronises its stream first). */
void cuda_optim_destroy(cuda_optim_t **self);
/* One step at lr of the n parameters (those with g NULL are skipped, their
 * step does not advance), queued on stream. 0, or -1 with err. */
int cuda_optim_run(cuda_optim_t *self, const optim_cfg_t *c, double lr, bk_oparam_t *p, int n,
                   void *stream, char *err, size_t errlen);
cuda_optim_counts_t cuda_optim_counts(const cuda_optim_t *self);

#endif
