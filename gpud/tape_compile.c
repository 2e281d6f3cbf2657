/* tape_compile — the tape's compile step: every op's kernel plan and every
 * var's buffers, made once the graph is complete (its first write, forward
 * or read) rather than op by op while it is built. Building stays a pure
 * description (shapes, bound parameters), so a graph without a backend can
 * describe a model, and the inference planner (graph_plan.c) can rewrite
 * the ops first: then the fused ops (g->fops) are planned, and only their
 * outputs get buffers, in the layouts the backend picks. */
#include <stdlib.h>
#include <string.h>

#include "gpud/tape_priv.h"
#include "common/env_switch.h"

/* A 16-bit graph on the tape stores its activations in 16 bits where the
 * backend has kernels for that (bk_ops_t.train16), unless
 * DDPIPE_HALF_ACTIVATIONS=0; its losses stay fp32 (tape_kv). */
static void pick_kernels(bk_graph_t *g)
{
    const bk_ops_t *ops = g->base.be->ops;
    unsigned cap = g->half_fmt == BK_HALF_FP16 ? BK_CAP_ACT16_FP16 : BK_CAP_ACT16_BF16;
    g->store16 = g->half && !g->fops && ops->train16 && (ops->caps & cap) &&
                 env_switch_on("DDPIPE_HALF_ACTIVATIONS");
    g->k = g->store16 ? ops->train16 : ops->train;
    for (size_t i = 0; i < g->nops; i++)
        g->ops[i].out->f32 = g->store16 && g->ops[i].kind == TO_CE;
}

/* A BatchNorm's output with the dropout after it fused (tape_fuse.c):
 * its gradient is never written nor read (the dropout's backward is
 * skipped, the BatchNorm's reads the dropout's gradient). */
static int grad_unused(const bk_graph_t *g, const bk_tensor_t *t)
{
    return t->no_val && t->producer >= 0 && g->ops[t->producer].fwd_drop;
}

/* The var's buffers, and its gradient's when it needs one (unless it
 * shares an add's, share_add_grads); a var that is not kept got its value
 * from the pool already. */
static int var_alloc(bk_graph_t *g, bk_tensor_t *t)
{
    size_t cnt = numel(t), bytes = cnt * tape_esize(g, t);
    const bk_kernels_t *k = tape_kv(g, t);
    int own_grad = t->needs_grad && !t->grad_shared && !grad_unused(g, t);
    if (!t->val && !t->no_val)
        t->val = k->alloc(&g->base, cnt);
    int have_val = t->val || t->no_val;
    if (have_val && own_grad)
        t->grad = k->alloc(&g->base, cnt);
    if (have_val && (!own_grad || t->grad)) {
        g->bytes += (t->pooled || t->no_val ? 0 : bytes) + (t->grad ? bytes : 0);
        return 0;
    }
    bk_ctx_fail(&g->base, "out of memory for a [%d,%d,%d,%d] tensor", t->n, t->c, t->h, t->w);
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
        if (t->needs_grad || t->is_input || t->producer < 0 || last[i] < 0 || t->f32)
            t->keep = 1;
    }
}

/* An activation nobody reads after the forward: alive from its producer
 * to its last reader, count bytes placed at off bytes into the shared
 * arena. */
typedef struct {
    bk_tensor_t *t;
    int first, last;
    size_t count, off;
} slot_t;

static int by_size(const void *a, const void *b)
{
    const slot_t *x = a, *y = b;
    if (x->count != y->count)
        return x->count < y->count ? 1 : -1;
    return x->first - y->first;
}

static int by_offset(const void *a, const void *b)
{
    const slot_t *x = *(const slot_t *const *)a, *y = *(const slot_t *const *)b;
    return x->off < y->off ? -1 : x->off > y->off;
}

/* 64-byte steps: every activation starts on a cache line. */
static size_t align64(size_t bytes)
{
    return (bytes + 63) & ~(size_t)63;
}

/* Greedy by size (largest first): each slot takes the lowest offset where
 * it overlaps no placed slot alive at the same time. conflict: scratch of
 * n pointers. Returns the arena's size in bytes. */
static size_t place_all(slot_t *slot, size_t n, const slot_t **conflict)
{
    size_t total = 0;
    qsort(slot, n, sizeof *slot, by_size);
    for (size_t i = 0; i < n; i++) {
        size_t nc = 0;
        for (size_t j = 0; j < i; j++)
            if (!(slot[j].last < slot[i].first || slot[i].last < slot[j].first))
                conflict[nc++] = &slot[j];
        qsort(conflict, nc, sizeof *conflict, by_offset);
        size_t off = 0;
        for (size_t j = 0; j < nc && off + slot[i].count > conflict[j]->off; j++)
            if (conflict[j]->off + conflict[j]->count > off)
                off = align64(conflict[j]->off + conflict[j]->count);
        slot[i].off = off;
        if (off + slot[i].count > total)
            total = off + slot[i].count;
    }
    return total;
}

/* The activations nobody reads after the forward share one arena: each
 * lives from the op that makes it to its last reader, and two whose lives
 * overlap never share bytes (an op's output never aliases its inputs). */
static int pool_plan(bk_graph_t *g)
{
    size_t cap = g->nv ? g->nv : 1;
    int *last = calloc(cap, sizeof *last);
    slot_t *slot = calloc(cap, sizeof *slot);
    const slot_t **conflict = calloc(cap, sizeof *conflict);
    g->pool = calloc(1, sizeof *g->pool);
    g->pool_count = calloc(1, sizeof *g->pool_count);
    int rc = last && slot && conflict && g->pool && g->pool_count ? 0 : -1;
    size_t n = 0, es = tape_act_esize(g);   /* pooled vars are never f32 */
    if (rc == 0) {
        mark_kept(g, last);
        for (size_t i = 0; i < g->nops; i++) {   /* from the op whose forward writes it */
            const top_t *o = &g->ops[i];
            bk_tensor_t *t = op_dst(o);
            if (!o->fwd_skip && !t->keep)
                slot[n++] = (slot_t){t, (int)i, last[t->id], align64(numel(t) * es), 0};
        }
    }
    size_t total = rc == 0 && n ? place_all(slot, n, conflict) : 0;
    if (rc == 0 && total) {
        bk_ctx_set_name(&g->base, "activations");
        char *arena = g->k->alloc(&g->base, total / es);
        if (arena) {
            g->pool[0] = arena;
            g->pool_count[0] = total / es;
            g->npool = 1;
            g->bytes += total;
            for (size_t i = 0; i < n; i++) {
                slot[i].t->val = arena + slot[i].off;
                slot[i].t->pooled = 1;
            }
        } else {
            rc = -1;
        }
    }
    if (rc < 0 && !g->base.failed)
        bk_ctx_fail(&g->base, "out of memory planning the activations");
    free(last);
    free(slot);
    free(conflict);
    return rc;
}

/* The inference graph's buffers: one per input and per fused op's output,
 * in the layout the backend chooses for its shape; a conv summing into its
 * residual writes the residual's buffer. */
static int infer_alloc(bk_graph_t *g)
{
    for (size_t i = 0; i < g->nv; i++) {
        bk_tensor_t *t = g->v[i];
        int s[4];
        shape_of(t, s);
        t->layout = g->k->layout ? g->k->layout(g->base.be, s) : 0;
    }
    for (size_t i = 0; i < g->nv; i++)
        if (g->v[i]->is_input && var_alloc(g, g->v[i]) < 0)
            return -1;
    for (size_t i = 0; i < g->nfops; i++) {
        top_t *o = &g->fops[i];
        bk_ctx_set_name(&g->base, o->name);
        if (o->kind == TO_CONV && o->nin == 2) {
            o->out->val = o->in[1]->val;
            o->out->shares = 1;
            o->in[1]->consumed = 1;
        } else if (var_alloc(g, o->out) < 0) {
            return -1;
        }
    }
    return 0;
}

/* An add's backward hands its output gradient to both inputs unchanged.
 * An input that feeds nothing but that add (a residual branch's last op,
 * a projection shortcut) takes the add's gradient buffer as its own, so
 * the backward copies nothing for it, and its gradient costs no memory:
 * nobody else writes that buffer while the input's gradient is read (the
 * add's consumers wrote it before; the add is the input's only consumer).
 * Inputs of the graph keep their own (bk_read_grad after a backward).
 *
 * With the fusions on (tape_fuse.c), one input that other ops read too (a
 * block's identity shortcut, which its first conv also reads) may take the
 * buffer as well: the add's gradient then becomes its first term in place,
 * and its other readers' backward add theirs to it, as they added them to
 * the copy before (the same sums in the same order). That needs those
 * readers to come before the add in the forward, so their backward runs
 * after it, and before the producer of the add's other input when that
 * one shares the buffer too, so that it has read its gradient (the add's)
 * before they add to it; and the input to be no other add's. */
static int reads_before(const bk_graph_t *g, const bk_tensor_t *t, size_t skip, int lim)
{
    for (size_t i = 0; i < g->nops; i++)
        for (int j = 0; i != skip && j < g->ops[i].nin; j++)
            if (g->ops[i].in[j] == t && (int)i >= lim)
                return 0;
    return 1;
}

/* Whether add o's input t may take the add's gradient buffer at all: it
 * wants a gradient of the add's kind and is not the graph's own. */
static int may_share(const top_t *o, const bk_tensor_t *t)
{
    return t->needs_grad && !t->is_input && t->producer >= 0 && t->f32 == o->out->f32;
}

/* Whether t may share add i's gradient buffer though other ops read it
 * too (the comment above). q: the add's other input. */
static int wide_share(const bk_graph_t *g, const int *reads, size_t i, const bk_tensor_t *t,
                      const bk_tensor_t *q)
{
    const top_t *o = &g->ops[i];
    if (!may_share(o, t) || o->out->grad_shared || t->grad_shared || t == q ||
        reads[g->nv + (size_t)t->id] != 1)
        return 0;   /* the buffer is another add's, t's is decided, or t is another add's */
    int lim = (int)i;
    if (q->grad_shared) {   /* q's producer reads the add's gradient there */
        if (g->ops[q->producer].kind == TO_ADD)
            return 0;   /* and passes it on to readers further back */
        lim = q->producer;
    }
    return reads_before(g, t, i, lim);
}

/* reads: tape_compile's count of each var's readers (tape_priv.h). */
static void share_add_grads(bk_graph_t *g, const int *reads)
{
    for (size_t i = 0; i < g->nops; i++) {
        top_t *o = &g->ops[i];
        for (int j = 0; o->kind == TO_ADD && o->out->needs_grad && j < 2; j++)
            o->in[j]->grad_shared = may_share(o, o->in[j]) && reads[o->in[j]->id] == 1;
    }
    /* the wider sharing last to first: whether an add's own output shares
     * a later add's buffer is decided before the add is */
    for (size_t i = g->nops; tape_fuse_enabled() && i-- > 0;) {
        top_t *o = &g->ops[i];
        for (int j = 0; o->kind == TO_ADD && o->out->needs_grad && j < 2; j++)
            if (wide_share(g, reads, i, o->in[j], o->in[1 - j])) {
                o->in[j]->grad_shared = 1;
                break;
            }
    }
}

/* The shared gradients' pointers: from the last op back, so that an add's
 * output that itself shares a later add's buffer has it already. */
static void link_add_grads(bk_graph_t *g)
{
    for (size_t i = g->nops; i-- > 0;) {
        top_t *o = &g->ops[i];
        if (o->kind != TO_ADD)
            continue;
        for (int j = 0; j < 2; j++)
            if (o->in[j]->grad_shared)
                o->in[j]->grad = o->out->grad;
    }
}

/* Every var's buffers and the gradient temporary (as large as the largest
 * tensor with a gradient). Allocation errors name the producing op. */
static int vars_alloc(bk_graph_t *g, const int *reads)
{
    size_t tmp = 0;
    if (g->fops)
        return infer_alloc(g);
    if (pool_plan(g) < 0)
        return -1;
    share_add_grads(g, reads);
    for (size_t i = 0; i < g->nv; i++) {
        bk_tensor_t *t = g->v[i];
        bk_ctx_set_name(&g->base, t->producer >= 0 ? g->ops[t->producer].name : "input");
        if (var_alloc(g, t) < 0)
            return -1;
        if (t->needs_grad && numel(t) > tmp)
            tmp = numel(t);
    }
    link_add_grads(g);
    if (tmp == 0)
        return 0;
    g->tmp = g->k->alloc(&g->base, tmp);
    if (!g->tmp) {
        bk_ctx_fail(&g->base, "out of memory for the gradient temporary");
        return -1;
    }
    g->tmp_count = tmp;
    g->bytes += tmp * tape_act_esize(g);
    return 0;
}

/* The op's kernel plan; NULL after bk_ctx_fail, or for kinds that need none
 * (*none set). */
static bk_plan_t *op_plan(bk_graph_t *g, top_t *o, int *none)
{
    const bk_kernels_t *k = g->k;
    int in[4], out[4];
    shape_of(o->in[0], in);
    shape_of(o->out, out);
    *none = 0;
    switch (o->kind) {
    case TO_CONV: {
        bk_conv_t c = o->conv;   /* a fused op runs with its folded copy */
        if (o->fw) {
            c.weight = o->fw;
            c.bias = o->fb;
        }
        return k->conv_plan(&g->base, &c, g->fops ? &o->post : NULL, in, out);
    }
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

/* bf16: room for a conv's or linear's weights rounded to bf16 (the bound
 * fp32 arrays stay the master weights); none for a conv whose kernels cast
 * the master weights themselves (bk_kernels_t.conv_casts_weights: w16
 * stays NULL). */
static int bf16_shadow(bk_graph_t *g, top_t *o)
{
    size_t nw = 0, nb = 0;
    if (o->kind == TO_CONV && o->plan && g->k->conv_casts_weights &&
        g->k->conv_casts_weights(o->plan))
        return 0;
    if (o->kind == TO_CONV) {
        nw = (size_t)o->conv.oc * o->conv.ic * o->conv.kh * o->conv.kw;
        nb = o->conv.bias ? (size_t)o->conv.oc : 0;
    } else if (o->kind == TO_LINEAR) {
        nw = (size_t)o->lin_out * o->in[0]->c * o->in[0]->h * o->in[0]->w;
        nb = o->b ? (size_t)o->lin_out : 0;
    } else {
        return 0;
    }
    /* parameter memory: the kernels take them where they take weights */
    o->w16 = tape_pmem_new(g, nw);
    o->b16 = nb && o->w16 ? tape_pmem_new(g, nb) : NULL;
    return o->w16 && (!nb || o->b16) ? 0 : -1;
}

/* Plans, and each BN op's batch statistics (host, c floats each; on a
 * device arena also their parameter-memory copy, o->stat). */
static int ops_plan(bk_graph_t *g)
{
    size_t n;
    top_t *ops = run_ops(g, &n);
    for (size_t i = 0; i < n; i++) {
        top_t *o = &ops[i];
        int none;
        bk_ctx_set_name(&g->base, o->name);
        o->plan = op_plan(g, o, &none);
        if (!o->plan && !none)
            return -1;
        /* an inference graph's weights are rounded once, by the fold */
        if (g->half && !g->fops && bf16_shadow(g, o) < 0)
            return -1;
        if (o->kind != TO_BN)
            continue;
        o->save_mean = calloc((size_t)o->bn.c, sizeof(float));
        o->save_var = calloc((size_t)o->bn.c, sizeof(float));
        if (!o->save_mean || !o->save_var) {
            bk_ctx_fail(&g->base, "out of memory");
            return -1;
        }
        if (!tape_pmem_host(g) && !(o->stat = tape_pmem_new(g, 4 * (size_t)o->bn.c)))
            return -1;
    }
    return 0;
}

int tape_compile(bk_graph_t *g)
{
    g->compiled = 1;   /* what exists is released by tape_release, even half made */
    g->base.infer = g->fops != NULL;
    pick_kernels(g);
    int *reads = NULL;
    if (!g->fops && !(reads = tape_reads_new(g))) {
        bk_ctx_fail(&g->base, "out of memory");
        return -1;
    }
    if (reads)
        tape_fuse(g, reads);
    int rc = vars_alloc(g, reads) < 0 || ops_plan(g) < 0 ? -1 : 0;
    if (rc == 0 && reads)
        tape_fuse_bwd(g);
    free(reads);
    return rc;
}

int *tape_reads_new(const bk_graph_t *g)
{
    int *reads = calloc(2 * g->nv + 1, sizeof *reads);
    for (size_t i = 0; reads && i < g->nops; i++)
        for (int j = 0; j < g->ops[i].nin; j++) {
            reads[g->ops[i].in[j]->id]++;
            if (g->ops[i].kind == TO_ADD)
                reads[g->nv + (size_t)g->ops[i].in[j]->id]++;
        }
    return reads;
}

void tape_release(bk_graph_t *g)
{
    tape_capture_drop(g);   /* it replays the buffers and plans released below */
    backend_t *be = g->base.be;
    for (size_t i = 0; i < g->nops; i++) {
        top_t *o = &g->ops[i];
        if (o->plan)
            o->plan->destroy(o->plan);
        free(o->save_mean);
        free(o->save_var);
        free(o->sync);
        free(o->sync_d);
        tape_pmem_free(g, o->w16);
        tape_pmem_free(g, o->b16);
        tape_pmem_free(g, o->stat);
        o->w16 = o->b16 = o->stat = NULL;
        o->plan = NULL;
        o->save_mean = o->save_var = o->sync = NULL;
        o->sync_d = NULL;
    }
    for (size_t i = 0; i < g->nfops; i++) {
        if (g->fops[i].plan)
            g->fops[i].plan->destroy(g->fops[i].plan);
        tape_pmem_free(g, g->fops[i].stat);
        g->fops[i].plan = NULL;
        g->fops[i].stat = NULL;
    }
    for (size_t i = 0; g->k && i < g->nv; i++) {
        bk_tensor_t *t = g->v[i];
        if (!t->pooled && !t->shares)
            g->k->release(be, t->val);
        if (!t->grad_shared)
            g->k->release(be, t->grad);
        t->val = t->grad = NULL;
        t->pooled = t->shares = t->consumed = t->layout = t->grad_shared = 0;
    }
    tape_fuse_clear(g);
    for (size_t k = 0; g->k && k < g->npool; k++)
        g->k->release(be, g->pool[k]);
    free(g->pool);
    free(g->pool_count);
    g->pool = NULL;
    g->pool_count = NULL;
    g->npool = 0;
    if (g->k) {
        g->k->release(be, g->tmp);
        g->k->release(be, g->dy);
    }
    g->tmp = g->dy = NULL;
    g->tmp_count = g->dy_count = 0;
    g->bytes = 0;
    g->compiled = 0;
}
