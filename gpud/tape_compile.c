/* tape_compile — the tape's compile step: every op's kernel plan and every
 * var's buffers, made once the graph is complete (its first write, forward
 * or read) rather than op by op while it is built. Building stays a pure
 * description (shapes, bound parameters), so a graph without a backend can
 * describe a model, and the inference planner (graph_plan.c) can run the
 * same ops as a fused program without the tape's buffers ever existing. */
#include <stdlib.h>

#include "gpud/tape_priv.h"

/* The var's buffers, and its gradient's when it needs one; a var that
 * is not kept got its value from the pool already. */
static int var_alloc(bk_graph_t *g, bk_tensor_t *t)
{
    size_t cnt = numel(t);
    if (!t->val)
        t->val = g->k->alloc(&g->base, cnt);
    if (t->val && t->needs_grad)
        t->grad = g->k->alloc(&g->base, cnt);
    if (t->val && (!t->needs_grad || t->grad)) {
        g->bytes += (t->pooled ? 0 : cnt * sizeof(float)) + (t->grad ? cnt * sizeof(float) : 0);
        return 0;
    }
    bk_prog_fail(&g->base, "out of memory for a [%d,%d,%d,%d] tensor", t->n, t->c, t->h, t->w);
    return -1;
}

/* What is read after the forward is kept: what backward reads (a var with
 * a gradient, and every input of an op whose output has one: its backward
 * reads them), the graph's inputs and outputs (vars nobody consumes), and
 * what bk_keep asked for. last[v]: the last op reading var v, -1 none. */
static void mark_kept(bk_graph_t *g, int *last)
{
    for (size_t i = 0; i < g->nv; i++)
        last[i] = -1;
    for (size_t i = 0; i < g->nops; i++) {
        top_t *o = &g->ops[i];
        for (int j = 0; j < o->nin; j++) {
            last[o->in[j]->id] = (int)i;
            if (o->out->needs_grad)
                o->in[j]->keep = 1;
        }
    }
    for (size_t i = 0; i < g->nv; i++) {
        bk_tensor_t *t = g->v[i];
        if (t->needs_grad || t->is_input || t->producer < 0 || last[i] < 0)
            t->keep = 1;
    }
}

/* A pool buffer of at least count floats that is free (busy[k] < op),
 * the smallest that fits; else a new one. -1 after bk_prog_fail. */
static int pool_take(bk_graph_t *g, size_t count, int *busy, int op)
{
    int best = -1;
    for (size_t k = 0; k < g->npool; k++)
        if (busy[k] < op && g->pool_count[k] >= count &&
            (best < 0 || g->pool_count[k] < g->pool_count[best]))
            best = (int)k;
    if (best >= 0)
        return best;
    void *buf = g->k->alloc(&g->base, count);
    if (!buf) {
        bk_prog_fail(&g->base, "out of memory for a shared activation of %zu floats", count);
        return -1;
    }
    g->pool[g->npool] = buf;
    g->pool_count[g->npool] = count;
    g->bytes += count * sizeof(float);
    return (int)g->npool++;
}

/* The activations nobody reads after the forward share buffers: each op's
 * output takes a pool buffer that no live var holds, and gives it back
 * after its last reader ran (ops run in index order). */
static int pool_plan(bk_graph_t *g)
{
    int *last = calloc(g->nv ? g->nv : 1, sizeof *last);
    int *busy = calloc(g->nops ? g->nops : 1, sizeof *busy);   /* per buffer: busy until op */
    g->pool = calloc(g->nops ? g->nops : 1, sizeof *g->pool);
    g->pool_count = calloc(g->nops ? g->nops : 1, sizeof *g->pool_count);
    int rc = last && busy && g->pool && g->pool_count ? 0 : -1;
    if (rc < 0)
        bk_prog_fail(&g->base, "out of memory planning the activations");
    if (rc == 0)
        mark_kept(g, last);
    for (size_t i = 0; rc == 0 && i < g->nops; i++) {
        bk_tensor_t *t = g->ops[i].out;
        if (t->keep)
            continue;
        bk_prog_set_name(&g->base, g->ops[i].name);
        int k = pool_take(g, numel(t), busy, (int)i);
        if (k < 0) {
            rc = -1;
            break;
        }
        busy[k] = last[t->id];   /* free once its last reader ran */
        t->val = g->pool[k];
        t->pooled = 1;
    }
    free(last);
    free(busy);
    return rc;
}

/* Every var's buffers and the gradient temporary (as large as the largest
 * tensor with a gradient). Allocation errors name the producing op. */
static int vars_alloc(bk_graph_t *g)
{
    size_t tmp = 0;
    if (pool_plan(g) < 0)
        return -1;
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
    g->bytes += tmp * sizeof(float);
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
        if (!g->v[i]->pooled)
            g->k->release(be, g->v[i]->val);
        g->k->release(be, g->v[i]->grad);
        g->v[i]->val = g->v[i]->grad = NULL;
        g->v[i]->pooled = 0;
    }
    for (size_t k = 0; g->k && k < g->npool; k++)
        g->k->release(be, g->pool[k]);
    free(g->pool);
    free(g->pool_count);
    g->pool = NULL;
    g->pool_count = NULL;
    g->npool = 0;
    if (g->k)
        g->k->release(be, g->tmp);
    g->tmp = NULL;
    g->tmp_count = 0;
    g->bytes = 0;
    g->compiled = 0;
}
