/* tape_backward — the backward of a training graph: its ops in reverse,
 * each on the backend's kernels. A tensor that feeds several ops (a
 * residual's input) gets its gradient from each; the first writer writes it
 * directly, later ones write into a shared temporary that is then added, so
 * no gradient buffer needs zeroing first. Parameter gradients are handed to
 * the grad-ready hook as soon as they are final (DDP buckets). */
#include <stdlib.h>

#include "common/clock.h"
#include "gpud/tape_priv.h"

/* Where to write x's gradient: its own buffer the first time, else the
 * temporary (then grad_commit adds it). NULL: x needs no gradient. */
void *tape_grad_dst(bk_graph_t *g, bk_tensor_t *x)
{
    if (!x->needs_grad)
        return NULL;
    return x->grad_set ? g->tmp : x->grad;
}

void tape_grad_commit(bk_graph_t *g, bk_tensor_t *x)
{
    if (!x->needs_grad)
        return;
    /* bf16/fp16: the gradient of a 16-bit activation is 16-bit, each
     * branch's as autograd's sum of two (rounded, then added and rounded) */
    if (x->grad_set) {
        if (g->half)
            tape_round(g, g->tmp, numel(x));
        g->k->acc(g->base.be, x->grad, g->tmp, numel(x));
    }
    if (g->half)
        tape_round(g, x->grad, numel(x));
    x->grad_set = 1;
}

/* o's backward wrote its input x's gradient's last term (o->grad_fold,
 * tape_fuse.c): a later term stays in the temporary for the BatchNorm
 * whose fused ReLU made x, which runs backward next but for the ReLU's and
 * the add's (they move nothing) and adds it as it reads (its sums pass).
 * Not while that BatchNorm takes another path (the host's sums, or eval
 * mode), where the ReLU's backward reads x's gradient whole. */
static void grad_commit_op(bk_graph_t *g, const top_t *o, bk_tensor_t *x)
{
    if (o->grad_fold && x->needs_grad && x->grad_set && bn_on_device(g) &&
        bn_training(g, o->grad_fold)) {
        x->grad_left = 1;
        return;
    }
    tape_grad_commit(g, x);
}

/* bf16: a conv's or linear's weight gradient comes out of the bf16
 * backward as bf16 (autocast's cast back to the fp32 weight keeps it); a
 * conv that casts its weights itself gives it so already (w16 NULL:
 * bk_kernels_t.conv_casts_weights). */
static int bf16_param_grads(bk_graph_t *g, const top_t *o, float *gw, float *gb)
{
    if (!o->w16)
        return 0;
    int conv = o->kind == TO_CONV;
    const bk_tensor_t *x = o->in[0];
    size_t nw = conv ? (size_t)o->conv.oc * o->conv.ic * o->conv.kh * o->conv.kw
                     : (size_t)o->lin_out * x->c * x->h * x->w;
    if (gw && tape_pmem_round(g, gw, gw, nw) < 0)
        return -1;
    if (gb && tape_pmem_round(g, gb, gb, (size_t)(conv ? o->conv.oc : o->lin_out)) < 0)
        return -1;
    return 0;
}

/* Whether the BatchNorm that fused ReLU o's backward (tape_fuse.c
 * relu_bwd_pair: two ops before it) does it this pass: on the device, in
 * training mode. A training graph set to eval runs the ReLU's own
 * backward: the BatchNorm's eval-mode backward reads its gradient whole. */
static int relu_bwd_by_bn(const bk_graph_t *g, const top_t *o)
{
    size_t i = (size_t)(o - g->ops);
    return i >= 2 && g->ops[i - 2].bwd_relu == o && bn_on_device(g) &&
           bn_training(g, &g->ops[i - 2]);
}

static int op_backward(bk_graph_t *g, top_t *o, uint32_t index)
{
    const bk_kernels_t *k = g->k;
    backend_t *be = g->base.be;
    bk_ctx_t *bg = &g->base;
    bk_tensor_t *x = o->in[0], *y = o->out;
    void *gx = tape_grad_dst(g, x);
    int s[4], rc = 0;
    shape_of(x, s);
    switch (o->kind) {
    case TO_CONV:
        rc = k->conv_bwd(bg, o->plan, x->val, g->half && o->w16 ? o->w16 : o->conv.weight,
                         y->grad, gx, o->conv.grad_weight, o->conv.grad_bias);
        if (rc == 0 && g->half)
            rc = bf16_param_grads(g, o, o->conv.grad_weight, o->conv.grad_bias);
        break;
    case TO_BN:
        if (bn_training(g, o)) {
            rc = tape_bn_bwd(g, o, x, y, gx);
            break;
        }
        if (o->fwd_drop)   /* set to eval: the fused dropout is the identity */
            y = o->fwd_drop->out;
        rc = k->bn_bwd(bg, o->plan, 0, x->val, y->val, y->grad, o->bn.weight,
                       o->bn.running_mean, o->bn.running_var, gx, o->bn.grad_weight,
                       o->bn.grad_bias);
        break;
    case TO_RELU:
        if (o->bwd_fused && relu_bwd_by_bn(g, o)) {
            /* done by the BatchNorm before the add (tape_fuse.c), next but one */
            x->grad_set = 1;
            return 0;
        }
        if (gx)
            rc = k->relu_bwd(bg, o->plan, y->val, y->grad, gx);
        break;
    case TO_POOL:
        if (gx)
            rc = k->pool_bwd(bg, o->plan, x->val, y->grad, gx);
        break;
    case TO_FLATTEN:
        if (gx)
            k->flatten(be, gx, y->grad, s, 1);
        break;
    case TO_LINEAR:
        rc = k->linear_bwd(bg, o->plan, x->val, g->half ? o->w16 : o->w, y->grad, gx, o->gw,
                           o->gb);
        if (rc == 0 && g->half)
            rc = bf16_param_grads(g, o, o->gw, o->gb);
        break;
    case TO_ADD:
        for (int j = 0; j < 2; j++) {
            bk_tensor_t *in = o->in[j];
            if (in->grad_shared) {   /* its gradient is y's buffer already */
                in->grad_set = 1;
                continue;
            }
            if ((gx = tape_grad_dst(g, in)) != NULL)
                k->copy(be, gx, y->grad, numel(y));
            tape_grad_commit(g, in);
        }
        return 0;
    case TO_CONCAT:
        for (int i = 0, off = 0; i < o->nin; off += o->in[i]->c, i++) {
            int xs[4];
            shape_of(o->in[i], xs);
            if ((gx = tape_grad_dst(g, o->in[i])) != NULL)
                k->concat(be, y->grad, y->c, gx, xs, off, 0);
            tape_grad_commit(g, o->in[i]);
        }
        return 0;
    case TO_DROPOUT:
        if (x->producer >= 0 && g->ops[x->producer].fwd_drop == o) {
            /* fused into its BatchNorm, whose backward reads y's gradient (tape_fuse.c) */
            x->grad_set = 1;
            return 0;
        }
        if (gx && drop_p(g, o) != 0.0f && !tape_dropout_keys(g))
            return -1;
        if (gx)
            k->dropout(be, gx, y->grad, s, drop_p(g, o), index, g->keys_k);
        break;
    case TO_CE:
        if (gx)
            k->ce_bwd(be, x->val, g->labels_k, x->n, x->c, o->p, y->grad, gx);
        break;
    }
    if (rc == 0)
        grad_commit_op(g, o, x);
    return rc;
}

/* o's parameter gradient arrays in p (NULL where it has none). */
static void op_grads(const top_t *o, const float *p[2])
{
    p[0] = p[1] = NULL;
    if (o->kind == TO_CONV) {
        p[0] = o->conv.grad_weight;
        p[1] = o->conv.grad_bias;
    } else if (o->kind == TO_BN) {
        p[0] = o->bn.grad_weight;
        p[1] = o->bn.grad_bias;
    } else if (o->kind == TO_LINEAR) {
        p[0] = o->gw;
        p[1] = o->gb;
    }
}

/* o's parameter gradients are final (each parameter belongs to one op). */
void tape_grads_ready(bk_graph_t *g, const top_t *o)
{
    const float *p[2];
    op_grads(o, p);
    for (int i = 0; i < 2; i++)
        if (p[i])
            g->grad_ready(g->grad_ready_ctx, p[i]);
}

int tape_grads_mark(bk_graph_t *g, top_t *o)
{
    const float *p[2];
    op_grads(o, p);
    int want = 0;
    for (int i = 0; i < 2; i++)
        if (p[i])
            want |= g->grad_mark(g->grad_queue_ctx, p[i]) > 0;
    if (p[0] || p[1])
        o->cut_after = want;
    return want;
}

int tape_backward_begin(bk_graph_t *g, bk_tensor_t *y, const float *dy)
{
    if (!g || g->base.failed || !y || tape_ready(g) < 0)
        return -1;
    if (!y->needs_grad) {
        bk_ctx_fail(&g->base, "backward from a tensor that depends on no parameter");
        return -1;
    }
    int s[4];
    shape_of(y, s);
    size_t cnt = numel(y);
    if (dy) {
        if (tape_kv(g, y)->write(&g->base, y->grad, dy, s, 0) < 0)
            return -1;
    } else {
        float *ones = malloc(cnt * sizeof *ones);
        if (!ones) {
            bk_ctx_fail(&g->base, "out of memory");
            return -1;
        }
        for (size_t i = 0; i < cnt; i++)
            ones[i] = 1.0f;
        int rc = tape_kv(g, y)->write(&g->base, y->grad, ones, s, 0);
        free(ones);
        if (rc < 0)
            return -1;
    }
    tape_backward_seeded(g, y);
    return 0;
}

void tape_backward_seeded(bk_graph_t *g, bk_tensor_t *y)
{
    for (size_t i = 0; i < g->nv; i++)
        g->v[i]->grad_set = g->v[i]->grad_left = 0;
    /* bf16/fp16: the gradient of a 16-bit activation is 16-bit
     * (grad_commit); the loss is fp32 */
    if (g->half && y->producer >= 0 && g->ops[y->producer].kind != TO_CE)
        tape_round(g, y->grad, numel(y));
    y->grad_set = 1;
}

int tape_backward_op(bk_graph_t *g, int i)
{
    top_t *o = &g->ops[i];
    if (!o->out->needs_grad)
        return 0;
    if (!o->out->grad_set) {   /* a branch that does not reach y */
        tape_kv(g, o->out)->zero(g->base.be, o->out->grad, numel(o->out));
        o->out->grad_set = 1;
    }
    bk_ctx_set_name(&g->base, o->name);
    double t0 = g->profile ? clock_mono_s() : 0.0;
    tape_timer_start(g);
    if (op_backward(g, o, (uint32_t)i) < 0)
        return -1;
    if (g->profile)
        g->prof[1][o->kind] += clock_mono_s() - t0;
    tape_timer_mark(g, o->kind);
    if (g->grad_ready)
        tape_grads_ready(g, o);
    else if (g->grad_mark && !g->cap.defer && tape_grads_mark(g, o))
        g->grad_flush(g->grad_queue_ctx);   /* op by op: its kernels are queued */
    return 0;
}

int bk_backward(bk_graph_t *g, bk_tensor_t *y, const float *dy)
{
    if (tape_backward_begin(g, y, dy) < 0)
        return -1;
    tape_timer_begin(g, 1);
    for (int i = y->producer; i >= 0; i--)
        if (tape_backward_op(g, i) < 0)
            return -1;
    tape_timer_end(g, 1);
    return 0;
}
