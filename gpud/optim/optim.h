/* optim — optimizers over flat float arrays, with PyTorch 1.13 semantics.
 *
 *   optim_cfg_t cfg = optim_cfg_default(OPTIM_SGD);
 *   cfg.momentum = 0.9; cfg.weight_decay = 5e-4;
 *   optim_t *o = optim_new(&cfg, err, sizeof err);
 *   optim_add_param(o, "fc.weight", w, g, 2, (int64_t[]){10, 640}, true, err, sizeof err);
 *   optim_add_param(o, "fc.bias", b, gb, 1, (int64_t[]){10}, false, err, sizeof err);
 *   for each step: fill g, gb (global-batch gradient, see gbatch.h); optim_step(o, lr);
 *   optim_destroy(&o);
 *
 * One optim_t is one PyTorch optimizer with (at most) two parameter groups
 * sharing every hyper-parameter: params added with decay=true use
 * cfg.weight_decay, params added with decay=false use 0 (the usual "no
 * weight decay on BatchNorm and bias" group). The learning rate is passed to
 * every step, so a scheduler (lr_sched.h) owns it.
 *
 * The update of each algorithm follows torch/optim/{sgd,adam,adamw}.py
 * (_single_tensor_*: foreach=False, maximize=False, capturable=False) in the
 * same order of operations, in float with the scalars rounded to float as
 * ATen does; NovoGrad follows torch_optimizer 0.3 (jettify/pytorch-optimizer,
 * torch_optimizer/novograd.py), which is NVIDIA DeepLearningExamples'
 * Novograd (per-tensor second moment of the squared gradient norm, first
 * non-zero norm copied in, grad_averaging scales by 1 - beta1, no bias
 * correction). Differences from the Python code: the gradient is never
 * modified (NovoGrad divides p.grad in place there), and a step is per
 * parameter as in PyTorch (a parameter whose gradient pointer is NULL is
 * skipped, its step count does not advance — PyTorch's `p.grad is None`).
 *
 * State (momentum buffers, Adam moments, steps) is owned by the optimizer,
 * the moments in ONE arena (gpud/backend_arena.h: host memory unless
 * optim_set_arena names a backend's; laid out on the first step or load,
 * each parameter's state at fixed offsets), and the update is that arena's
 * optimizer slot (optim_host.c on the host). It is saved to / loaded from
 * safetensors under PyTorch's state names:
 *   optim.<param>.momentum_buffer   SGD, momentum != 0, after the first step
 *   optim.<param>.exp_avg           Adam/AdamW/NovoGrad
 *   optim.<param>.exp_avg_sq        Adam/AdamW (param shape), NovoGrad (scalar)
 *   optim.<param>.max_exp_avg_sq    amsgrad
 *   optim.<param>.step              I64 scalar, every algorithm
 * plus __metadata__ "optim.kind" (sgd|adam|adamw|novograd), the
 * hyper-parameters and the lr of the latest step (informational),
 * "optim.params" (every parameter name, comma-separated, in the order they
 * were added: a PyTorch optimizer state_dict's index order) and
 * "optim.no_decay" (those added with decay=false).
 *
 * An optim_t is used by one thread at a time.
 */
#ifndef DDP_OPTIM_H
#define DDP_OPTIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/safetensors.h"

typedef enum { OPTIM_SGD, OPTIM_ADAM, OPTIM_ADAMW, OPTIM_NOVOGRAD, OPTIM_KIND_COUNT } optim_kind_t;

typedef struct {
    optim_kind_t kind;
    double weight_decay;   /* SGD/Adam/NovoGrad: L2 added to the gradient; AdamW: decoupled */
    double momentum;       /* SGD */
    double dampening;      /* SGD */
    bool nesterov;         /* SGD: needs momentum > 0 and dampening == 0 (as PyTorch) */
    double beta1, beta2;   /* Adam/AdamW/NovoGrad */
    double eps;            /* Adam/AdamW/NovoGrad */
    bool amsgrad;          /* Adam/AdamW/NovoGrad */
    bool grad_averaging;   /* NovoGrad */
} optim_cfg_t;

typedef struct optim optim_t;

/* PyTorch's defaults for the kind: SGD all 0; Adam betas (0.9, 0.999),
 * eps 1e-8, wd 0; AdamW the same with wd 1e-2; NovoGrad (torch_optimizer)
 * betas (0.95, 0), eps 1e-8, wd 0, grad_averaging false. */
optim_cfg_t optim_cfg_default(optim_kind_t kind);
/* "sgd" | "adam" | "adamw" | "novograd"; parse returns 0, or -1. Inline:
 * gpud's option checks (gpud/options.c) use them without this library. */
static inline const char *optim_kind_name(optim_kind_t kind)
{
    static const char *const names[OPTIM_KIND_COUNT] = {"sgd", "adam", "adamw", "novograd"};
    return (unsigned)kind < OPTIM_KIND_COUNT ? names[kind] : "?";
}

static inline int optim_kind_parse(const char *s, optim_kind_t *out)
{
    for (int k = 0; k < OPTIM_KIND_COUNT; k++)
        if (s && strcmp(s, optim_kind_name((optim_kind_t)k)) == 0) {
            *out = (optim_kind_t)k;
            return 0;
        }
    return -1;
}

/* NULL with the reason in err for an invalid config (PyTorch's checks:
 * negative momentum/wd/eps, betas outside [0,1), nesterov without momentum
 * or with dampening). */
optim_t *optim_new(const optim_cfg_t *cfg, char *err, size_t errlen);
void optim_destroy(optim_t **o);

/* Register a parameter: w (numel floats, updated in place) and its gradient
 * g (read only; NULL: skipped by optim_step until set). The optimizer keeps
 * the pointers and copies name and shape (ndim 0..ST_MAX_DIMS, shape NULL
 * when ndim is 0). Names must be unique. Returns the parameter's index
 * (0, 1, ... in order of addition), or -1 with the reason in err. */
int optim_add_param(optim_t *o, const char *name, float *w, const float *g, int ndim,
                    const int64_t *shape, bool decay, char *err, size_t errlen);
/* The arena the state lives in and the update runs on (a backend's,
 * backend_arena_ops; NULL: host memory), its copies counted in traffic
 * (may be NULL). Before the first step or load: 0, else -1 with err. */
struct bk_arena_ops;
struct bk_traffic;
int optim_set_arena(optim_t *o, const struct bk_arena_ops *ops, struct bk_traffic *traffic,
                    char *err, size_t errlen);
/* Point parameter i at new buffers (a backend that reallocates). */
void optim_set_ptrs(optim_t *o, int i, float *w, const float *g);

/* One step of every parameter whose gradient is set, at learning rate lr. */
void optim_step(optim_t *o, double lr);

const optim_cfg_t *optim_cfg(const optim_t *o);
int optim_param_count(const optim_t *o);
const char *optim_param_name(const optim_t *o, int i);
int optim_find(const optim_t *o, const char *name);   /* index or -1 */
int64_t optim_param_numel(const optim_t *o, int i);
int64_t optim_param_steps(const optim_t *o, int i);    /* steps taken by parameter i */

/* Named state of parameter i (see the list above, without the "optim.<param>."
 * prefix): numel floats, or NULL when the state does not exist (yet) or
 * is not in host memory. */
const float *optim_state(const optim_t *o, int i, const char *state, int64_t *numel);

/* Add every state tensor and the optimizer metadata to a safetensors
 * writer. Returns 0, or -1 with the reason in err. */
int optim_save_state(const optim_t *o, st_writer_t *w, char *err, size_t errlen);
/* Replace the state from an open file: every "optim.*" tensor must belong
 * to a registered parameter, be state this configuration keeps, and have
 * the expected dtype and shape; every registered parameter must have its
 * step, and with step > 0 all the state its algorithm needs; "optim.kind"
 * must match. Everything is validated before anything is changed.
 * Returns 0, or -1 with an error naming the offending tensor. */
int optim_load_state(optim_t *o, const safetensors_t *st, char *err, size_t errlen);

#endif
