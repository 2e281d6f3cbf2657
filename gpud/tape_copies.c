/* tape_copies — the plan of what one training step of a graph copies
 * between host and device memory on a backend whose arenas are device
 * memory (cuda: backend_impl.h's contract): the parameters, gradients and
 * optimizer state stay on the device, so besides the batch in and the
 * outputs (model_step_plan) only training-mode BatchNorm's per-channel
 * vectors cross where the host computes and all-reduces them (tape_bn.c:
 * SyncBatchNorm; without it the backend's bn_train_* keep them on the
 * device and nothing crosses).
 * bn_kernels is what the kernels copy for them, call for call as
 * gpud/cuda/cuda_train.c does (chan_sums, bn_grad_sums, bn_grad_apply:
 * change both together; scripts/gpu-check.sh compares this with the bytes
 * the cuda backend counts); bn_tape what the tape itself copies of them. */
#include "gpud/tape_priv.h"

#define F4 ((uint64_t)sizeof(float))
#define D8 ((uint64_t)sizeof(double))

/* The kernel-side bytes of a BatchNorm of c channels. Training mode
 * (tape_bn.c): chan_sums(x, NULL) c doubles down; chan_sums(x, mean) the
 * centre c floats up, c doubles down; the normalising kernel reads the
 * device copies of the statistics (nothing). Backward, when its output
 * needs a gradient: bn_grad_sums the centre up, 2c doubles down; then,
 * when its input needs one, bn_grad_apply centre, scale, a, b up (4c
 * floats). Eval mode (frozen): every vector is device memory, nothing. */
static uint64_t batchnorm(const bk_graph_t *g, const top_t *o, int backward)
{
    uint64_t c = (uint64_t)o->bn.c;
    if (!bn_training(g, o))
        return 0;
    uint64_t b = c * D8 + (c * F4 + c * D8);
    if (backward)
        b += c * F4 + 2 * c * D8 + (o->in[0]->needs_grad ? 4 * c * F4 : 0);
    return b;
}

void bk_graph_copy_plan(const bk_graph_t *g, const bk_tensor_t *loss, const backend_t *be,
                        int host_sums, bk_copy_plan_t *p)
{
    *p = (bk_copy_plan_t){0};
    if (!g || !loss || (!host_sums && backend_bn_on_device(be)))
        return;   /* nothing: BatchNorm's vectors stay on the device */
    for (size_t i = 0; i < g->nops; i++) {
        const top_t *o = &g->ops[i];
        /* bk_backward runs the ops up to the loss's producer whose output
         * needs a gradient; conv and linear copy nothing */
        int backward = (int)i <= loss->producer && o->out->needs_grad;
        if (o->kind == TO_BN) {
            p->bn_kernels += batchnorm(g, o, backward);
            p->bn_tape += tape_bn_copy_plan(g, o, backward);
        }
    }
}
