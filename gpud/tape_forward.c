/* tape_forward — the forward of a graph: its ops in order (the recorded
 * ones, or the inference plan's fused ops), each on the backend's kernels,
 * with --precision bf16's rounding points (docs/BF16.md); an inference
 * graph's recorded once and replayed where the backend can
 * (tape_capture.c), each op's device time where it is asked
 * (tape_timer.c). */
#include "common/clock.h"
#include "gpud/tape_priv.h"

/* bf16: the weights (and bias) a conv or linear op computes with this step:
 * its master weights rounded to bf16, as autocast casts them (parameter
 * memory, rounded where it lives); a conv without a rounded copy casts
 * them in its kernels (tape_compile.c bf16_shadow): its master weights.
 * 0 or -1. */
static int bf16_weights(bk_graph_t *g, top_t *o, const float **w, const float **b)
{
    int conv = o->kind == TO_CONV;
    const float *mw = conv ? o->conv.weight : o->w, *mb = conv ? o->conv.bias : o->b;
    if (!o->w16) {
        *w = mw;
        *b = mb;
        return 0;
    }
    const bk_tensor_t *x = o->in[0];
    size_t nw = conv ? (size_t)o->conv.oc * o->conv.ic * o->conv.kh * o->conv.kw
                     : (size_t)o->lin_out * x->c * x->h * x->w;
    if (tape_pmem_round(g, o->w16, mw, nw) < 0 ||
        (mb && tape_pmem_round(g, o->b16, mb, (size_t)(conv ? o->conv.oc : o->lin_out)) < 0))
        return -1;
    *w = o->w16;
    *b = mb ? o->b16 : NULL;
    return 0;
}

/* bf16: ops whose output PyTorch's CPU autocast makes bf16 and that can
 * leave bf16 values (relu, flatten and concat of bf16 values are exact;
 * the loss is fp32). */
static int bf16_rounds(top_kind_t kind)
{
    return kind != TO_RELU && kind != TO_FLATTEN && kind != TO_CONCAT && kind != TO_CE;
}

static int op_forward(bk_graph_t *g, top_t *o, uint32_t index)
{
    const bk_kernels_t *k = g->k;
    backend_t *be = g->base.be;
    bk_ctx_t *bg = &g->base;
    bk_tensor_t *x = o->in[0], *y = op_dst(o);
    int s[4];
    shape_of(x, s);
    const float *w = o->kind == TO_CONV ? o->conv.weight : o->w;
    const float *b = o->kind == TO_CONV ? o->conv.bias : o->b;
    if (o->fw) {   /* a fused op's folded (or bf16) copy */
        w = o->fw;
        b = o->fb;
    } else if (g->half && !g->fops && (o->kind == TO_CONV || o->kind == TO_LINEAR)) {
        if (bf16_weights(g, o, &w, &b) < 0)
            return -1;
        if (x->is_input)   /* the model's fp32 input, cast at its first conv */
            tape_round(g, x->val, numel(x));
    }
    switch (o->kind) {
    case TO_CONV:   /* a fused conv's second input: the residual summed into y */
        return k->conv_fwd(bg, o->plan, x->val, w, b, o->nin == 2 ? o->in[1]->val : NULL,
                           y->val);
    case TO_BN:
        if (bn_training(g, o))
            return tape_bn_fwd(g, o, x, y);
        if (o->fwd_res)   /* fused (tape_fuse.c), in a training graph set to eval */
            return k->bn_add_relu(bg, o->plan, x->val, o->bn.weight, o->bn.bias,
                                  o->bn.running_mean, o->bn.running_var, o->fwd_res->val,
                                  y->val);
        /* with a dropout fused (tape_fuse.c: never a frozen BatchNorm), y is
         * the dropout's output, the identity in a graph set to eval */
        return k->bn_fwd(bg, o->plan, 0, x->val, o->bn.weight, o->bn.bias, o->bn.running_mean,
                         o->bn.running_var, y->val);
    case TO_RELU:
        return k->relu_fwd(bg, o->plan, x->val, y->val);
    case TO_POOL:
        return k->pool_fwd(bg, o->plan, x->val, y->val);
    case TO_FLATTEN:
        k->flatten(be, y->val, x->val, s, 0);
        return 0;
    case TO_LINEAR:
        return k->linear_fwd(bg, o->plan, x->val, w, b, y->val);
    case TO_ADD:
        /* fused with the relu after it (tape_fuse.c): y is the relu's output */
        k->add(be, y->val, x->val, o->in[1]->val, numel(y), o->post.n > 0 || o->fwd_out);
        return 0;
    case TO_CONCAT:
        for (int i = 0, off = 0; i < o->nin; off += o->in[i]->c, i++) {
            int xs[4];
            shape_of(o->in[i], xs);
            k->concat(be, y->val, y->c, o->in[i]->val, xs, off, 1);
        }
        return 0;
    case TO_DROPOUT:
        if (drop_p(g, o) == 0.0f) {
            k->dropout(be, y->val, x->val, s, 0.0f, index, NULL);
            return 0;
        }
        if (!tape_dropout_keys(g))
            return -1;
        k->dropout(be, y->val, x->val, s, drop_p(g, o), index, g->keys_k);
        return 0;
    case TO_CE:
        if (!g->have_labels) {
            bk_ctx_fail(bg, "cross-entropy without labels (call bk_set_labels)");
            return -1;
        }
        k->ce_fwd(be, x->val, g->labels_k, x->n, x->c, o->p, y->val);
        return 0;
    }
    return 0;
}

int tape_forward_op(bk_graph_t *g, size_t i)
{
    size_t n;
    top_t *ops = run_ops(g, &n);
    if (ops[i].fwd_skip)   /* an earlier op did its forward (tape_fuse.c) */
        return 0;
    bk_ctx_set_name(&g->base, ops[i].name);
    double t0 = g->profile ? clock_mono_s() : 0.0;
    tape_timer_start(g);
    if (op_forward(g, &ops[i], (uint32_t)i) < 0)
        return -1;
    bk_tensor_t *y = op_dst(&ops[i]);
    if (g->half && bf16_rounds(ops[i].kind))
        tape_round(g, y->val, numel(y));
    if (g->profile)
        g->prof[0][ops[i].kind] += clock_mono_s() - t0;
    tape_timer_mark(g, ops[i].kind);
    return 0;
}

int tape_forward_ops(bk_graph_t *g)
{
    size_t n;
    run_ops(g, &n);
    for (size_t i = 0; g->fops && g->half && i < g->nv; i++)   /* cast before any reader */
        if (g->v[i]->is_input)
            tape_round(g, g->v[i]->val, numel(g->v[i]));
    for (size_t i = 0; i < n; i++)
        if (tape_forward_op(g, i) < 0)
            return -1;
    return 0;
}

int bk_forward(bk_graph_t *g)
{
    if (!g || g->base.failed || tape_ready(g) < 0)
        return -1;
    tape_timer_begin(g, 0);
    /* a training graph is recorded as a whole pass (tape_pass.c) or not */
    int how = g->cap.pass ? TC_RUN : tape_capture_before(g);
    int rc = how == TC_DONE ? 0 : tape_forward_ops(g);
    if (how == TC_RECORDING && tape_capture_after(g, rc) == 1)
        rc = tape_forward_ops(g);   /* not recorded after all: op by op */
    if (rc < 0)
        return -1;
    tape_timer_end(g, 0);
    for (size_t i = 0; i < g->nv; i++)
        g->v[i]->grad_set = 0;
    return 0;
}
