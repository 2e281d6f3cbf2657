/* optim_host — SGD, Adam, AdamW, NovoGrad on host arenas (see optim_host.h).
 *
 * Each update mirrors the Python reference line by line: the same order of
 * float operations, with every Python scalar rounded to float where ATen
 * rounds it, so results agree with PyTorch to a few ulps (ATen's vector
 * kernels may fuse a multiply-add; we do not). */
#include "gpud/optim/optim_host.h"

#include <math.h>

/* torch/optim/sgd.py _single_tensor_sgd. The first step copies d_p into
 * the momentum buffer (no dampening), later steps buf = buf*m + (1-damp)*d_p. */
static void sgd_step(const optim_cfg_t *c, bk_oparam_t *p, double lr)
{
    const float wd = p->decay ? (float)c->weight_decay : 0.0f;
    const float mom = (float)c->momentum, keep = (float)(1.0 - c->dampening);
    const float neg_lr = (float)-lr;
    const bool use_mom = c->momentum != 0, first = use_mom && !p->have_buf;
    float *w = p->w, *buf = p->buf;
    const float *g = p->g;
    for (int64_t i = 0; i < p->numel; i++) {
        float d = g[i];
        if (wd != 0)
            d = d + wd * w[i];
        if (use_mom) {
            buf[i] = first ? d : buf[i] * mom + keep * d;
            d = c->nesterov ? d + mom * buf[i] : buf[i];
        }
        w[i] = w[i] + neg_lr * d;
    }
    p->have_buf |= use_mom;
    p->step++;
}

/* torch/optim/adam.py and adamw.py, _single_tensor_adam(w). Adam adds the
 * L2 term to the gradient; AdamW scales the weights by 1 - lr*wd first. */
static void adam_step(const optim_cfg_t *c, bk_oparam_t *p, double lr)
{
    const double wdd = p->decay ? c->weight_decay : 0.0;
    const bool adamw = c->kind == OPTIM_ADAMW;
    p->step++;
    /* PyTorch keeps step in a float32 tensor and reads it back as a double. */
    const double step = (double)(float)p->step;
    const double bc1 = 1.0 - pow(c->beta1, step), bc2 = 1.0 - pow(c->beta2, step);
    const float neg_step_size = (float)-(lr / bc1), bc2_sqrt = (float)sqrt(bc2);
    const float b1 = (float)c->beta1, b2 = (float)c->beta2, eps = (float)c->eps;
    const float one_b1 = (float)(1.0 - c->beta1), one_b2 = (float)(1.0 - c->beta2);
    const float wd = (float)wdd, decay_mul = (float)(1.0 - lr * wdd);
    float *w = p->w, *m = p->buf, *v = p->sq, *vmax = c->amsgrad ? p->sq_max : NULL;
    const float *g = p->g;
    for (int64_t i = 0; i < p->numel; i++) {
        float d = g[i];
        if (adamw)
            w[i] = w[i] * decay_mul;
        else if (wd != 0)
            d = d + wd * w[i];
        m[i] = m[i] * b1 + one_b1 * d;
        v[i] = v[i] * b2 + one_b2 * d * d;
        float vv = v[i];
        if (vmax) {
            vmax[i] = fmaxf(vmax[i], vv);
            vv = vmax[i];
        }
        const float denom = sqrtf(vv) / bc2_sqrt + eps;
        w[i] = w[i] + neg_step_size * m[i] / denom;
    }
}

/* torch_optimizer/novograd.py (NVIDIA DeepLearningExamples' Novograd):
 * one second moment per tensor, of the squared gradient norm; while it is
 * 0 (the first step) the norm is copied in. */
static void novograd_step(const optim_cfg_t *c, bk_oparam_t *p, double lr)
{
    p->step++;
    const float *g = p->g;
    double sum = 0;   /* torch.sum(grad**2) in float32; a double sum rounds once */
    for (int64_t i = 0; i < p->numel; i++)
        sum += (double)(g[i] * g[i]);
    const float norm = (float)sum;
    float *v = p->sq;
    if (*v == 0)
        *v = norm;
    else
        *v = *v * (float)c->beta2 + (float)(1.0 - c->beta2) * norm;
    float vv = *v;
    if (c->amsgrad) {
        *p->sq_max = fmaxf(*p->sq_max, vv);
        vv = *p->sq_max;
    }
    const float denom = sqrtf(vv) + (float)c->eps;
    const float wd = p->decay ? (float)c->weight_decay : 0.0f;
    const float b1 = (float)c->beta1, avg = (float)(1.0 - c->beta1), neg_lr = (float)-lr;
    float *w = p->w, *m = p->buf;
    for (int64_t i = 0; i < p->numel; i++) {
        float d = g[i] / denom;
        if (wd != 0)
            d = d + wd * w[i];
        if (c->grad_averaging)
            d = d * avg;
        m[i] = m[i] * b1 + d;
        w[i] = w[i] + neg_lr * m[i];
    }
}

int optim_host_step(const optim_cfg_t *c, double lr, bk_oparam_t *p, int n, char *err,
                    size_t errlen)
{
    (void)err;
    (void)errlen;
    for (int i = 0; i < n; i++) {
        if (!p[i].g)
            continue;
        switch (c->kind) {
        case OPTIM_SGD:
            sgd_step(c, &p[i], lr);
            break;
        case OPTIM_NOVOGRAD:
            novograd_step(c, &p[i], lr);
            break;
        default:
            adam_step(c, &p[i], lr);
            break;
        }
    }
    return 0;
}
