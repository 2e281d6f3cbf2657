/* optim_host — the host arena's optimizer slot (backend_arena.h): one step
 * of SGD / Adam / AdamW / NovoGrad over parameters that are views into
 * host arenas, the arithmetic optim.h describes (PyTorch 1.13,
 * torch_optimizer 0.3). cuda_optim.c is the device twin, bit-identical. */
#ifndef DDP_OPTIM_HOST_H
#define DDP_OPTIM_HOST_H

#include <stddef.h>

#include "gpud/backend_arena.h"

/* Every parameter of p[0, n) whose gradient is set. 0 (never fails on the
 * host: the state is the caller's arena). */
int optim_host_step(const optim_cfg_t *c, double lr, bk_oparam_t *p, int n, char *err,
                    size_t errlen);

#endif
