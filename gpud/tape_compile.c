/* tape_compile — the tape's compile step: every op's kernel plan and every
 * var's buffers, made once the graph is complete (its first write, forward
 * or read) rather than op by op while it is built. Building stays a pure
 * description (shapes, bound parameters), so a graph without a backend can
 * describe a model, and the inference planner (graph_plan.c) can run the
 * same ops as a fused program without the tape's buffers ever existing. */
#include <stdlib.h>

#include "gpud/tape_priv.h"

/* The var's buffers, and its gradient's when it needs one. */
static int var_alloc(bk_graph_t *g, bk_tensor_t *t)
{
    size_t cnt = numel(t);
    t->val = g->k->alloc(&g->base, cnt);
    if (t->val && t->needs_grad)
        t->grad = g->k->alloc(&g->base, cnt);
    if (t->val && (!t->needs_grad || t->grad))
        return 0;
    bk_prog_fail(&g->base, "out of memory for a [%d,%d,%d,%d] tensor", t->n, t->c, t->h, t->w);
    return -1;
}

/* Every var's buffers and the gradient temporary (as large as the largest
 * tensor with a gradient). Allocation errors name the producing op. */
static int vars_alloc(bk_graph_t *g)
{
    size_t tmp = 0;
    for (size_t i = 0; i < g->nv; i++) {
        bk_tensor_t *t = g->v[i];
        bk_prog_set_name(&g->base, t->producer >= 0 ? g->ops[t->producer].name : "input");
        if (var_alloc(g, t) < 0)
            return -1;
        if (t->needs_grad && numel(t) > tmp)
            tmp = numel(t);
    }
    if (tmp == 0)
        return 0;
    g->tmp = g->k->alloc(&g->base, tmp);
    if (!g->tmp) {
        bk_prog_fail(&g->base, "out of memory for the gradient temporary");
        return -1;
    }
    g->tmp_count = tmp;
    return 0;
}

/* The op's kernel plan; NULL after bk_prog_fail, or for kinds that need none
 * (*none set). */
static bk_plan_t *op_plan(bk_graph_t *g, top_t *o, int *none)
{
    const bk_kernels_t *k = g->k;
    int in[4], out[4];
    shape_of(o->in[0], in);
    shape_of(o->out, out);
    *none = 0;
    switch (o->kind) {
    case TO_CONV:
        return k->conv_plan(&g->base, &o->conv, in, out);
    case TO_BN:
        return k->bn_plan(&g->base, in, o->bn.eps, o->bn.relu != 0);
    case TO_RELU:
        return k->relu_plan(&g->base, in);
    case TO_POOL:
        return k->pool_plan(&g->base, &o->pool, in, out);
    case TO_LINEAR:
        return k->linear_plan(&g->base, in, o->lin_out, o->b != NULL);
    default:
        *none = 1;
        return NULL;
    }
}

/* Plans, and each BN op's batch statistics (host, c floats each). */
static int ops_plan(bk_graph_t *g)
{
    for (size_t i = 0; i < g->nops; i++) {
        top_t *o = &g->ops[i];
        int none;
        bk_prog_set_name(&g->base, o->name);
        o->plan = op_plan(g, o, &none);
        if (!o->plan && !none)
            return -1;
        if (o->kind != TO_BN)
            continue;
        o->save_mean = calloc((size_t)o->bn.c, sizeof(float));
        o->save_var = calloc((size_t)o->bn.c, sizeof(float));
        if (!o->save_mean || !o->save_var) {
            bk_prog_fail(&g->base, "out of memory");
            return -1;
        }
    }
    return 0;
}

int tape_compile(bk_graph_t *g)
{
    g->compiled = 1;   /* what exists is released by tape_release, even half made */
    if (vars_alloc(g) < 0 || ops_plan(g) < 0)
        return -1;
    return 0;
}

void tape_release(bk_graph_t *g)
{
    backend_t *be = g->base.be;
    for (size_t i = 0; i < g->nops; i++) {
        top_t *o = &g->ops[i];
        if (o->plan)
            o->plan->destroy(o->plan);
        free(o->save_mean);
        free(o->save_var);
        free(o->sync);
        free(o->sync_d);
        o->plan = NULL;
        o->save_mean = o->save_var = o->sync = NULL;
        o->sync_d = NULL;
    }
    for (size_t i = 0; g->k && i < g->nv; i++) {
        g->k->release(be, g->v[i]->val);
        g->k->release(be, g->v[i]->grad);
        g->v[i]->val = g->v[i]->grad = NULL;
    }
    if (g->k)
        g->k->release(be, g->tmp);
    g->tmp = NULL;
    g->tmp_count = 0;
    g->compiled = 0;
}
