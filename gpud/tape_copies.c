/* tape_copies — the plan of what one training step of a graph copies
 * between host and device memory on a backend whose kernels take the
 * parameters as host arrays (backend_impl.h's contract) and copy them per
 * op: today's cuda kernels (gpud/cuda/cuda_train.c), call for call, so
 * that a change there is a change here (scripts/gpu-check.sh compares
 * this with the bytes the cuda backend counts). With device-resident
 * arenas (issue 30) every one of these copies goes and a step moves only
 * its batch in and its outputs (model_step_plan). */
#include "gpud/tape_priv.h"

#define F4 ((uint64_t)sizeof(float))
#define D8 ((uint64_t)sizeof(double))

/* conv and linear: the forward uploads the weights (and bias); the
 * backward uploads them again for the input's gradient and downloads the
 * weight's and bias's gradients (a conv's bias gradient as doubles). */
static void weights(const top_t *o, int backward, bk_copy_plan_t *p)
{
    int conv = o->kind == TO_CONV;
    const bk_tensor_t *x = o->in[0];
    uint64_t nw = conv ? (uint64_t)o->conv.oc * o->conv.ic * o->conv.kh * o->conv.kw
                       : (uint64_t)o->lin_out * x->c * x->h * x->w;
    uint64_t nb = (uint64_t)(conv ? o->conv.oc : o->lin_out);
    const float *b = conv ? o->conv.bias : o->b;
    const float *gw = conv ? o->conv.grad_weight : o->gw, *gb = conv ? o->conv.grad_bias : o->gb;
    p->weights_up += nw * F4 + (b ? nb * F4 : 0);
    if (!backward)
        return;
    p->weights_up += x->needs_grad ? nw * F4 : 0;
    p->grads_down += (gw ? nw * F4 : 0) + (gb ? nb * (conv ? D8 : F4) : 0);
}

/* BatchNorm of c channels. Training mode (tape_bn.c): the channel sums,
 * then the centred sums (mean up), then the eval-mode kernel (gamma, beta,
 * mean, var up); backward: the gradient sums (mean up, 2c doubles down),
 * then the input's gradient (mean, scale, a, b up). Eval mode (frozen):
 * gamma, beta, mean, var up; backward gamma, mean, var up and, with
 * gradients, their 2c doubles down. */
static void batchnorm(const bk_graph_t *g, const top_t *o, int backward, bk_copy_plan_t *p)
{
    uint64_t c = (uint64_t)o->bn.c;
    int gx = o->in[0]->needs_grad;
    if (bn_training(g, o)) {
        p->bn += c * D8 + (c * F4 + c * D8) + 4 * c * F4;
        if (backward)
            p->bn += c * F4 + 2 * c * D8 + (gx ? 4 * c * F4 : 0);
        return;
    }
    p->bn += 4 * c * F4;
    if (backward)
        p->bn += 3 * c * F4 + (o->bn.grad_weight || o->bn.grad_bias ? 2 * c * D8 : 0);
}

void bk_graph_copy_plan(const bk_graph_t *g, const bk_tensor_t *loss, bk_copy_plan_t *p)
{
    *p = (bk_copy_plan_t){0};
    if (!g || !loss)
        return;
    for (size_t i = 0; i < g->nops; i++) {
        const top_t *o = &g->ops[i];
        /* bk_backward runs the ops up to the loss's producer whose output
         * needs a gradient */
        int backward = (int)i <= loss->producer && o->out->needs_grad;
        if (o->kind == TO_CONV || o->kind == TO_LINEAR)
            weights(o, backward, p);
        else if (o->kind == TO_BN)
            batchnorm(g, o, backward, p);
        if (o->kind == TO_BN)
            p->bn_tape += tape_bn_copy_plan(g, o, backward);
    }
}
