/* graph_plan — the inference plan: a forward-only, eval-mode tape graph
 * run as the backend's fused program (the eval builders of backend.h), so
 * that a model described once, on the tape, infers as fast as a
 * hand-folded eval graph.
 *
 * The rewrite, op by op in tape order:
 *   conv [-> bn] [-> relu | add | ...]  one conv: the BN folded into its
 *       weights (graph_fold.c), then post-ops while the chain's value has a
 *       single reader: a ReLU -> BK_PO_RELU, an add -> BK_PO_SUM whose
 *       residual is the add's other operand, at most BK_MAX_POST;
 *   add [-> relu], relu, pool, linear   one op each;
 *   dropout (eval: the identity), flatten (bk_prog_linear flattens)  no op: the
 *       output is its input's tensor.
 * Any other op (BN not after a conv, concat, cross-entropy ...) has no
 * fused form and the whole graph runs on the tape instead: no partial
 * fusion, so the two paths never mix buffers.
 *
 * A fused op runs where the last tape op it absorbed stood, so a block's
 * main branch, recorded first (conv-bn-relu-conv-bn), takes the sum of its
 * shortcut (downsample conv-bn, recorded after it) as the hand-built eval
 * graphs did: same primitives, same bits. The sum accumulates into the
 * residual in place, so every other reader of it must have run before; a
 * reader whose place is not known yet counts as after (no sum, a plain
 * add: slower, never wrong).
 *
 * Parameters stay bound to the tape's ops: the program copies (folds) them
 * when it is built, and bk_graph_reload rebuilds it from the live arrays. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpud/bf16.h"
#include "gpud/tape_priv.h"

typedef enum { R_EMIT, R_ABSORBED, R_ALIAS } role_t;

/* One tape op's part in the fused program. */
typedef struct {
    role_t role;
    int bn;         /* conv: the folded BatchNorm op, or -1 */
    int res;        /* conv: the residual var of BK_PO_SUM, or -1 */
    int relu;       /* add: a ReLU fused */
    int n_post;
    bk_postop_t post[BK_MAX_POST];
    int last;       /* the op whose output var the emitted op computes: also
                     * where in the program it runs */
    int anchor;     /* the emitted op this one is part of; -1: not planned yet */
} pop_t;

typedef struct {
    const bk_graph_t *g;
    int *root;      /* per var: the var whose tensor it is (aliases: their input's) */
    int *nread;     /* per root var: inputs of non-alias ops reading it */
    int *reader;    /* per root var: the last such op */
    pop_t *op;      /* per op */
    int emitted;    /* ops of the fused program */
    char *why;      /* the first op without a fused form */
    size_t whylen;
} plan_t;

static int is_alias(top_kind_t k)
{
    return k == TO_DROPOUT || k == TO_FLATTEN;
}

static int root_of(const plan_t *pl, const bk_tensor_t *v)
{
    return pl->root[v->id];
}

/* The one op reading var v's tensor, or -1 when none or several do. */
static int sole_reader(const plan_t *pl, int v)
{
    int r = pl->root[v];
    return pl->nread[r] == 1 ? pl->reader[r] : -1;
}

static int plan_init(plan_t *pl, const bk_graph_t *g, char *why, size_t len)
{
    *pl = (plan_t){.g = g, .why = why, .whylen = len};
    size_t nv = g->nv ? g->nv : 1, nops = g->nops ? g->nops : 1;
    pl->root = malloc(nv * sizeof *pl->root);
    pl->nread = calloc(nv, sizeof *pl->nread);
    pl->reader = malloc(nv * sizeof *pl->reader);
    pl->op = calloc(nops, sizeof *pl->op);
    if (!pl->root || !pl->nread || !pl->reader || !pl->op)
        return -1;
    for (size_t i = 0; i < g->nv; i++)
        pl->root[i] = (int)i;
    for (size_t i = 0; i < g->nops; i++)
        pl->op[i].anchor = -1;
    for (size_t i = 0; i < g->nops; i++) {   /* tape order: inputs' roots are known */
        const top_t *o = &g->ops[i];
        if (is_alias(o->kind)) {
            pl->root[o->out->id] = root_of(pl, o->in[0]);
            continue;
        }
        for (int j = 0; j < o->nin; j++) {
            int r = root_of(pl, o->in[j]);
            pl->nread[r]++;
            pl->reader[r] = (int)i;
        }
    }
    return 0;
}

static void plan_free(plan_t *pl)
{
    free(pl->root);
    free(pl->nread);
    free(pl->reader);
    free(pl->op);
}

static int no_fusion(plan_t *pl, const top_t *o, const char *reason)
{
    snprintf(pl->why, pl->whylen, "%s: %s", o->name[0] ? o->name : "an unnamed op", reason);
    return 0;
}

/* Where op k runs in the program; -1 while not planned. */
static int place(const plan_t *pl, int k)
{
    int a = pl->op[k].anchor;
    return a < 0 ? -1 : pl->op[a].last;
}

/* The var whose tensor conv op i may accumulate add j into (the add's
 * operand other than cur), or -1: not an input (the caller's data) nor the
 * conv's own input, and every other op reading it placed before j (the
 * sum, which runs at j or later, overwrites it). */
static int residual_for(const plan_t *pl, int i, int j, int cur)
{
    const bk_graph_t *g = pl->g;
    const top_t *add = &g->ops[j], *conv = &g->ops[i];
    int a = root_of(pl, add->in[0]), b = root_of(pl, add->in[1]);
    if (a == b)
        return -1;
    int r = a == cur ? b : a;
    const bk_tensor_t *rv = g->v[r];
    if (rv->is_input || r == root_of(pl, conv->in[0]) || rv->n != conv->out->n ||
        rv->c != conv->out->c || rv->h != conv->out->h || rv->w != conv->out->w)
        return -1;
    for (size_t k = 0; k < g->nops; k++) {
        const top_t *o = &g->ops[k];
        if ((int)k == j || is_alias(o->kind))   /* aliases' readers count themselves */
            continue;
        int at = place(pl, (int)k);
        for (int m = 0; m < o->nin; m++)
            if (root_of(pl, o->in[m]) == r && (at < 0 || at >= j))
                return -1;
    }
    return r;
}

static void post_add(pop_t *p, bk_postop_t po)
{
    p->post[p->n_post++] = po;
}

/* Conv op i and what it absorbs: its BatchNorm, then ReLUs and one
 * residual add while the chain's value has a single reader. */
static void plan_conv(plan_t *pl, int i)
{
    const bk_graph_t *g = pl->g;
    pop_t *p = &pl->op[i];
    *p = (pop_t){.role = R_EMIT, .bn = -1, .res = -1, .last = i, .anchor = i};
    int cur = g->ops[i].out->id, j = sole_reader(pl, cur);
    if (j >= 0 && g->ops[j].kind == TO_BN) {
        p->bn = p->last = j;
        pl->op[j] = (pop_t){.role = R_ABSORBED, .anchor = i};
        if (g->ops[j].bn.relu)
            post_add(p, BK_PO_RELU);
        cur = g->ops[j].out->id;
    }
    while (p->n_post < BK_MAX_POST && (j = sole_reader(pl, cur)) >= 0 &&
           pl->op[j].role != R_ABSORBED) {
        const top_t *o = &g->ops[j];
        int res = o->kind == TO_ADD && p->res < 0 ? residual_for(pl, i, j, cur) : -1;
        if (o->kind != TO_RELU && res < 0)
            break;
        if (res >= 0)
            p->res = res;
        post_add(p, res >= 0 ? BK_PO_SUM : BK_PO_RELU);
        pl->op[j] = (pop_t){.role = R_ABSORBED, .anchor = i};
        p->last = j;
        cur = o->out->id;
    }
}

/* An add that no conv absorbed: bk_prog_add, with a ReLU reading it alone. */
static void plan_add(plan_t *pl, int i)
{
    const bk_graph_t *g = pl->g;
    pop_t *p = &pl->op[i];
    *p = (pop_t){.role = R_EMIT, .bn = -1, .res = -1, .last = i, .anchor = i};
    int j = sole_reader(pl, g->ops[i].out->id);
    if (j >= 0 && g->ops[j].kind == TO_RELU) {
        p->relu = 1;
        p->last = j;
        pl->op[j] = (pop_t){.role = R_ABSORBED, .anchor = i};
    }
}

/* A flatten costs nothing when bk_prog_linear (which flattens) is all that reads
 * it, or when it changes no layout (1x1 spatial). */
static int flatten_free(const plan_t *pl, int i)
{
    const bk_graph_t *g = pl->g;
    const bk_tensor_t *x = g->ops[i].in[0], *y = g->ops[i].out;
    if (x->h == 1 && x->w == 1)
        return 1;
    for (size_t k = (size_t)i + 1; k < g->nops; k++)
        for (int m = 0; m < g->ops[k].nin; m++)
            if (g->ops[k].in[m] == y && g->ops[k].kind != TO_LINEAR)
                return 0;
    return 1;
}

/* Every op's role: 1 when the graph has a fused form, else 0 (why set). */
static int plan_ops(plan_t *pl)
{
    const bk_graph_t *g = pl->g;
    for (size_t i = 0; i < g->nops; i++) {
        const top_t *o = &g->ops[i];
        if (pl->op[i].role == R_ABSORBED)
            continue;
        switch (o->kind) {
        case TO_CONV:
            plan_conv(pl, (int)i);
            break;
        case TO_ADD:
            plan_add(pl, (int)i);
            break;
        case TO_RELU:
        case TO_POOL:
        case TO_LINEAR:
            pl->op[i] = (pop_t){.role = R_EMIT, .bn = -1, .res = -1, .last = (int)i,
                                .anchor = (int)i};
            break;
        case TO_FLATTEN:
            if (!flatten_free(pl, (int)i))
                return no_fusion(pl, o, "flatten read by more than linear layers");
            /* fall through */
        case TO_DROPOUT:
            pl->op[i] = (pop_t){.role = R_ALIAS, .anchor = -1};
            continue;
        case TO_BN:
            return no_fusion(pl, o, "batchnorm not after a convolution that only it reads");
        case TO_CONCAT:
            return no_fusion(pl, o, "concat has no fused form");
        case TO_CE:
            return no_fusion(pl, o, "cross-entropy has no fused form");
        }
        pl->emitted++;
    }
    return 1;
}

/* ------------------------------------------------------------- building */

/* The weights and bias a program op computes with: the folded BatchNorm's
 * copy, or the bound arrays; in bf16 (g->bf16), copies rounded to bf16 as
 * autocast casts them, after the fold (docs/BF16.md "bf16 inference
 * plan"). Owned copies are left in *w_own / *b_own for the caller to free;
 * -1: out of memory. */
static int op_params(const bk_graph_t *g, const bk_bn_t *bn, const float *w, const float *b,
                     int oc, size_t per, const float **wo, const float **bo, float **w_own,
                     float **b_own)
{
    *w_own = *b_own = NULL;
    *wo = w;
    *bo = b;
    if (!bn && !g->bf16)
        return 0;
    size_t nw = (size_t)oc * per;
    *w_own = malloc(nw * sizeof **w_own);
    *b_own = calloc((size_t)oc, sizeof **b_own);   /* a fold makes a bias */
    if (!*w_own || !*b_own)
        return -1;
    memcpy(*w_own, w, nw * sizeof **w_own);
    if (b)
        memcpy(*b_own, b, (size_t)oc * sizeof **b_own);
    if (bn)
        bk_bn_fold(*w_own, *b_own, oc, per, bn->weight, bn->bias, bn->running_mean,
                   bn->running_var, bn->eps);
    if (g->bf16) {
        bf16_round(*w_own, *w_own, nw);
        bf16_round(*b_own, *b_own, (size_t)oc);
    }
    *wo = *w_own;
    *bo = bn || b ? *b_own : NULL;
    return 0;
}

/* Conv op i with its post-ops; a folded BN (or bf16) gets its own copy of
 * the weights (the bound arrays stay the unfolded parameters). */
static bk_ptensor_t *build_conv(bk_prog_t *fg, const plan_t *pl, int i)
{
    const bk_graph_t *g = pl->g;
    const top_t *o = &g->ops[i];
    const pop_t *p = &pl->op[i];
    const bk_conv_t *c = &o->conv;
    bk_pconv_t cv = {.ic = c->ic, .oc = c->oc, .kh = c->kh, .kw = c->kw,
                    .stride_h = c->stride_h, .stride_w = c->stride_w, .pad_h = c->pad_h,
                    .pad_w = c->pad_w, .n_post = p->n_post};
    memcpy(cv.post, p->post, sizeof cv.post);
    float *w = NULL, *b = NULL;
    const bk_bn_t *bn = p->bn >= 0 ? &g->ops[p->bn].bn : NULL;
    bk_ptensor_t *y = NULL;
    if (op_params(g, bn, c->weight, c->bias, c->oc, (size_t)c->ic * c->kh * c->kw, &cv.weight,
                  &cv.bias, &w, &b) < 0) {
        bk_prog_fail(fg, "out of memory folding the batchnorm");
    } else {
        bk_ptensor_t *res = p->res >= 0 ? g->v[p->res]->ft : NULL;
        y = bk_prog_conv2d(fg, o->in[0]->ft, &cv, res);
    }
    free(w);
    free(b);
    return y;
}

static bk_ptensor_t *build_linear(bk_prog_t *fg, const plan_t *pl, int i)
{
    const top_t *o = &pl->g->ops[i];
    const bk_tensor_t *x = o->in[0];
    const float *wo, *bo;
    float *w = NULL, *b = NULL;
    bk_ptensor_t *y = NULL;
    if (op_params(pl->g, NULL, o->w, o->b, o->lin_out, (size_t)x->c * x->h * x->w, &wo, &bo,
                  &w, &b) < 0)
        bk_prog_fail(fg, "out of memory rounding the weights to bf16");
    else
        y = bk_prog_linear(fg, x->ft, o->lin_out, wo, bo);
    free(w);
    free(b);
    return y;
}

static bk_ptensor_t *build_op(bk_prog_t *fg, const plan_t *pl, int i)
{
    const top_t *o = &pl->g->ops[i];
    switch (o->kind) {
    case TO_CONV:
        return build_conv(fg, pl, i);
    case TO_ADD:
        return bk_prog_add(fg, o->in[0]->ft, o->in[1]->ft, pl->op[i].relu);
    case TO_RELU:
        return bk_prog_relu(fg, o->in[0]->ft);
    case TO_POOL:
        return bk_prog_pool2d(fg, o->in[0]->ft, &o->pool);
    case TO_LINEAR:
        return build_linear(fg, pl, i);
    default:
        return bk_prog_fail(fg, "no fused form (planner bug)");
    }
}

/* The program: inputs, then each emitted op where its last tape op stood.
 * Each var gets the tensor holding its value; vars fused away keep NULL. */
static bk_prog_t *build_program(bk_graph_t *g, const plan_t *pl)
{
    bk_prog_t *fg = bk_prog_new(g->base.be);
    if (!fg)
        return NULL;
    for (size_t i = 0; i < g->nv; i++) {
        bk_tensor_t *t = g->v[i];
        t->ft = NULL;
        if (t->is_input) {
            bk_prog_set_name(fg, "input");
            t->ft = bk_prog_input(fg, t->n, t->c, t->h, t->w);
        }
    }
    for (size_t q = 0; q < g->nops && !bk_prog_error(fg); q++) {
        const top_t *o = &g->ops[q];
        int a = pl->op[q].anchor;
        if (pl->op[q].role == R_ALIAS) {
            o->out->ft = o->in[0]->ft;
        } else if (a >= 0 && pl->op[a].last == (int)q) {
            bk_prog_set_name(fg, g->ops[a].name);
            o->out->ft = build_op(fg, pl, a);
        }
    }
    return fg;
}

int plan_fused_build(bk_graph_t *g, char *why, size_t len)
{
    plan_t pl;
    int rc = plan_init(&pl, g, why, len) < 0 ? -1 : plan_ops(&pl);
    if (rc < 0)
        bk_fail(g, "out of memory planning the graph");
    if (rc == 1) {
        g->fused = build_program(g, &pl);
        const char *err = g->fused ? bk_prog_error(g->fused) : "out of memory";
        if (err) {
            bk_prog_set_name(&g->base, NULL);
            bk_prog_fail(&g->base, "%s", err);
            plan_fused_drop(g);
            rc = -1;
        } else {
            snprintf(why, len, "%zu tape ops run as %d fused ops", g->nops, pl.emitted);
        }
    }
    plan_free(&pl);
    return rc;
}

void plan_fused_drop(bk_graph_t *g)
{
    bk_prog_destroy(&g->fused);
    for (size_t i = 0; i < g->nv; i++)
        g->v[i]->ft = NULL;
    g->fused_stale = 0;
}

/* ----------------------------------------------------- replacing it */

/* Host copies of the program's inputs (what the caller last wrote), in var
 * order; NULL after bk_fail. */
static float **inputs_save(bk_graph_t *g)
{
    float **saved = calloc(g->nv, sizeof *saved);
    if (!saved) {
        bk_fail(g, "out of memory");
        return NULL;
    }
    for (size_t i = 0; i < g->nv; i++) {
        bk_tensor_t *t = g->v[i];
        if (!t->is_input)
            continue;
        if (!(saved[i] = malloc(numel(t) * sizeof(float))) ||
            bk_prog_read(g->fused, t->ft, saved[i]) < 0) {
            bk_fail(g, "saving input [%d,%d,%d,%d]: %s", t->n, t->c, t->h, t->w,
                     saved[i] ? bk_prog_error(g->fused) : "out of memory");
            return saved;   /* freed by inputs_restore */
        }
    }
    return saved;
}

/* Write the saved inputs into whatever now runs g (fused or tape). */
static int inputs_restore(bk_graph_t *g, float **saved)
{
    int rc = g->base.failed ? -1 : 0;
    for (size_t i = 0; i < g->nv; i++) {
        bk_tensor_t *t = g->v[i];
        int s[4];
        shape_of(t, s);
        if (rc == 0 && saved[i])
            rc = g->fused ? bk_prog_write(g->fused, t->ft, saved[i])
                          : g->k->write(&g->base, t->val, saved[i], s);
        free(saved[i]);
    }
    free(saved);
    if (rc < 0 && g->fused && !g->base.failed)
        bk_prog_fail(&g->base, "%s", bk_prog_error(g->fused));
    return rc;
}

int plan_fused_replace(bk_graph_t *g, int refold)
{
    float **saved = inputs_save(g);
    if (!saved)
        return -1;
    if (g->base.failed)
        return inputs_restore(g, saved);
    plan_fused_drop(g);
    char why[256];
    int rc = refold ? plan_fused_build(g, why, sizeof why) : 0;
    if (rc == 0)   /* training mode: the tape (a refold always fuses again) */
        rc = tape_compile(g);
    if (inputs_restore(g, saved) < 0 || rc < 0)
        return -1;
    return 0;
}
