/* graph_plan — the inference plan: a forward-only, eval-mode tape graph
 * rewritten into fused ops of the same tape (g->fops), run by the same
 * forward on the backend's one kernel table, so that a model described
 * once infers as fast as a hand-folded eval graph.
 *
 * The rewrite, op by op in tape order:
 *   conv [-> bn] [-> relu | add | ...]  one conv: the BN folded into its
 *       weights (graph_fold.c), then post-ops while the chain's value has a
 *       single reader: a ReLU -> BK_PO_RELU, an add -> BK_PO_SUM whose
 *       residual is the add's other operand (the conv's second input), at
 *       most BK_MAX_POST;
 *   add [-> relu], relu, pool, linear   one op each;
 *   dropout (eval: the identity), flatten (the linear kernel flattens)  no
 *       op: the output var reads its input's value (bk_tensor_t.alias).
 * Any other op (BN not after a conv, concat, cross-entropy ...) has no
 * fused form and the graph runs its recorded ops instead: no partial
 * fusion.
 *
 * A fused op runs where the last tape op it absorbed stood, so a block's
 * main branch, recorded first (conv-bn-relu-conv-bn), takes the sum of its
 * shortcut (downsample conv-bn, recorded after it) as the hand-built eval
 * graphs did: same primitives, same bits. The sum accumulates into the
 * residual in place, so every other reader of it must have run before; a
 * reader whose place is not known yet counts as after (no sum, a plain
 * add: slower, never wrong).
 *
 * Parameters stay bound to the tape's ops: a fused op that folds a
 * BatchNorm (or runs bf16) owns a folded copy (fw, fb), refolded from the
 * live arrays after bk_graph_reload (plan_refold). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpud/tape_priv.h"

typedef enum { R_EMIT, R_ABSORBED, R_ALIAS } role_t;

/* One tape op's part in the inference graph. */
typedef struct {
    role_t role;
    int bn;         /* conv: the folded BatchNorm op, or -1 */
    int res;        /* conv: the residual var of BK_PO_SUM, or -1 */
    int relu;       /* add: a ReLU fused */
    int n_post;
    bk_postop_t post[BK_MAX_POST];
    int last;       /* the op whose output var the emitted op computes: also
                     * where it runs */
    int anchor;     /* the emitted op this one is part of; -1: not planned yet */
} pop_t;

typedef struct {
    const bk_graph_t *g;
    int *root;      /* per var: the var whose tensor it is (aliases: their input's) */
    int *nread;     /* per root var: inputs of non-alias ops reading it */
    int *reader;    /* per root var: the last such op */
    pop_t *op;      /* per op */
    int emitted;    /* ops of the inference graph */
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

/* An add that no conv absorbed, with a ReLU reading it alone. */
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

/* A flatten costs nothing when a linear (which flattens) is all that reads
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

/* The host copies a fold works on: the parameter memory itself on a host
 * arena, else stages read from the device (counted as parameter bytes). */
typedef struct {
    float *w, *b;           /* the folded weights and bias being made */
    float *bn;              /* device arena: gamma, beta, mean, var stages (4 oc) */
    int host;
} fold_stage_t;

static void stage_free(fold_stage_t *st)
{
    if (!st->host) {
        free(st->w);
        free(st->b);
        free(st->bn);
    }
}

/* The BatchNorm's vectors as host floats (views or stages). */
static int bn_vectors(bk_graph_t *g, const bk_bn_t *bn, fold_stage_t *st, int oc,
                      const float *v[4])
{
    const float *src[4] = {bn->weight, bn->bias, bn->running_mean, bn->running_var};
    for (int i = 0; i < 4; i++) {
        if (st->host) {
            v[i] = src[i];
            continue;
        }
        float *dst = st->bn + (size_t)i * oc;
        if (tape_pmem_get(g, dst, src[i], (size_t)oc, tape_count_params(g)) < 0)
            return -1;
        v[i] = dst;
    }
    return 0;
}

/* The weights and bias fused op f computes with, in f->fw / f->fb
 * (parameter memory, tape_mem.c): the bound arrays with its BatchNorm
 * folded in and, in bf16 (g->half), rounded to bf16 as autocast casts
 * them, after the fold (docs/BF16.md "bf16 inference plan"). Neither:
 * f->fw stays NULL, the bound arrays are used. Made on the first call,
 * refilled by the next (plan_refold). On a device arena the fold reads the
 * bound values into host stages and writes the result back (once per
 * params_version). -1: out of memory, or a copy failed (g failed). */
static int fold_params(bk_graph_t *g, top_t *f)
{
    int conv = f->kind == TO_CONV;
    if (!conv && f->kind != TO_LINEAR)
        return 0;
    const bk_bn_t *bn = conv && f->bn_op >= 0 ? &g->ops[f->bn_op].bn : NULL;
    const float *w = conv ? f->conv.weight : f->w, *b = conv ? f->conv.bias : f->b;
    int oc = conv ? f->conv.oc : f->lin_out;
    const bk_tensor_t *x = f->in[0];
    size_t per = conv ? (size_t)f->conv.ic * f->conv.kh * f->conv.kw
                      : (size_t)x->c * x->h * x->w;
    size_t nw = (size_t)oc * per;
    if (!bn && !g->half)
        return 0;
    if (!f->fw) {
        if (!(f->fw = tape_pmem_new(g, nw)))
            return -1;
        if ((bn || b) && !(f->fb = tape_pmem_new(g, (size_t)oc)))   /* a fold makes a bias */
            return -1;
    }
    fold_stage_t st = {.host = tape_pmem_host(g)};
    st.w = st.host ? f->fw : malloc(nw * sizeof *st.w);
    st.b = st.host || !f->fb ? f->fb : calloc((size_t)oc, sizeof *st.b);
    st.bn = st.host || !bn ? NULL : malloc(4 * (size_t)oc * sizeof *st.bn);
    if (!st.w || (f->fb && !st.b) || (bn && !st.host && !st.bn)) {
        stage_free(&st);
        bk_ctx_fail(&g->base, "out of memory folding the parameters");
        return -1;
    }
    const float *v[4];
    int rc = tape_pmem_get(g, st.w, w, nw, tape_count_params(g));
    if (rc == 0 && st.b && b)
        rc = tape_pmem_get(g, st.b, b, (size_t)oc, tape_count_params(g));
    else if (rc == 0 && st.b)
        memset(st.b, 0, (size_t)oc * sizeof *st.b);
    if (rc == 0 && bn && (rc = bn_vectors(g, bn, &st, oc, v)) == 0)
        bk_bn_fold(st.w, st.b, oc, per, v[0], v[1], v[2], v[3], bn->eps);
    if (rc == 0 && g->half && bk_fold_round16(g->half_fmt, st.w, nw, st.b, oc) < 0) {
        /* the format's name, its largest value and the setting that keeps the tape */
        static const char *const fmt[2][3] = {{"bf16", "3.39e38", "DDPIPE_BF16_EVAL"},
                                              {"fp16", "65504", "DDPIPE_FP16_EVAL"}};
        const char *const *h = fmt[g->half_fmt == BK_HALF_FP16];
        bk_ctx_set_name(&g->base, f->name);
        bk_ctx_fail(&g->base, "the %s inference plan: the weights with the BatchNorm folded in "
                    "are past %s's range (its largest value %s): evaluate with %s=tape "
                    "(autocast's own rounding points, BatchNorm in fp32)",
                    h[0], h[0], h[1], h[2]);
        rc = -1;
    }
    if (rc == 0 && !st.host)
        rc = tape_pmem_put(g, f->fw, st.w, nw, tape_count_params(g)) < 0 ||
                     (st.b && tape_pmem_put(g, f->fb, st.b, (size_t)oc, tape_count_params(g)) < 0)
                 ? -1
                 : 0;
    stage_free(&st);
    return rc;
}

/* The fused op of anchor a: a copy of the tape op reading its inputs'
 * values (aliases resolved), writing the output of the last op it
 * absorbed, with its post-ops and its residual as a second input. */
static void fop_make(bk_graph_t *g, const plan_t *pl, int a, top_t *f)
{
    const pop_t *p = &pl->op[a];
    *f = g->ops[a];
    f->plan = NULL;
    f->save_mean = f->save_var = f->sync = f->stat = NULL;
    f->sync_d = NULL;
    f->w16 = f->b16 = f->fw = f->fb = NULL;
    f->bn_op = -1;
    f->post = (bk_post_t){0};
    for (int j = 0; j < f->nin; j++)
        f->in[j] = g->v[root_of(pl, f->in[j])];
    f->out = g->ops[p->last].out;
    if (f->kind == TO_CONV) {
        f->bn_op = p->bn;
        f->post.n = p->n_post;
        memcpy(f->post.op, p->post, sizeof f->post.op);
        if (p->res >= 0) {
            f->in[1] = g->v[p->res];
            f->nin = 2;
        }
    } else if (f->kind == TO_ADD && p->relu) {
        f->post = (bk_post_t){.n = 1, .op = {BK_PO_RELU}};
    }
}

/* g->fops: each emitted op where its last tape op stood; each alias var
 * (a dropout's or flatten's output) reads its input's value. -1: out of
 * memory. */
static int build_fops(bk_graph_t *g, const plan_t *pl)
{
    g->fops = calloc(pl->emitted ? (size_t)pl->emitted : 1, sizeof *g->fops);
    if (!g->fops)
        return -1;
    g->nfops = 0;
    for (size_t q = 0; q < g->nops; q++) {
        const top_t *o = &g->ops[q];
        int a = pl->op[q].anchor;
        if (pl->op[q].role == R_ALIAS) {
            o->out->alias = g->v[root_of(pl, o->out)];
        } else if (a >= 0 && pl->op[a].last == (int)q) {
            top_t *f = &g->fops[g->nfops++];
            fop_make(g, pl, a, f);
            if (fold_params(g, f) < 0)
                return -1;
        }
    }
    return 0;
}

int plan_fused_build(bk_graph_t *g, char *why, size_t len)
{
    plan_t pl;
    int rc = plan_init(&pl, g, why, len) < 0 ? -1 : plan_ops(&pl);
    if (rc == 1 && build_fops(g, &pl) < 0) {
        plan_fused_drop(g);
        rc = -1;
    }
    if (rc < 0) {
        bk_ctx_set_name(&g->base, NULL);
        bk_fail(g, "out of memory planning the graph");
    }
    if (rc == 1)
        snprintf(why, len, "%zu tape ops run as %d fused ops", g->nops, pl.emitted);
    plan_free(&pl);
    return rc;
}

int plan_refold(bk_graph_t *g)
{
    for (size_t i = 0; i < g->nfops; i++)   /* the arrays exist: nothing to allocate */
        if (fold_params(g, &g->fops[i]) < 0)
            return -1;
    g->base.params_version++;
    g->fused_stale = 0;
    return 0;
}

void plan_fused_drop(bk_graph_t *g)
{
    for (size_t i = 0; i < g->nfops; i++) {
        tape_pmem_free(g, g->fops[i].fw);
        tape_pmem_free(g, g->fops[i].fb);
    }
    free(g->fops);
    g->fops = NULL;
    g->nfops = 0;
    for (size_t i = 0; i < g->nv; i++)
        g->v[i]->alias = NULL;
    g->fused_stale = 0;
}

/* ----------------------------------------------------- leaving it */

/* Host copies of the inputs (what the caller last wrote), in var order;
 * NULL after bk_fail. */
static float **inputs_save(bk_graph_t *g)
{
    float **saved = calloc(g->nv, sizeof *saved);
    if (!saved) {
        bk_fail(g, "out of memory");
        return NULL;
    }
    for (size_t i = 0; i < g->nv; i++) {
        bk_tensor_t *t = g->v[i];
        int s[4];
        shape_of(t, s);
        if (!t->is_input)
            continue;
        if (!(saved[i] = malloc(numel(t) * sizeof(float)))) {
            bk_fail(g, "saving input [%d,%d,%d,%d]: out of memory", t->n, t->c, t->h, t->w);
            return saved;   /* freed by inputs_restore */
        }
        if (g->k->read(&g->base, t->val, saved[i], s, t->layout) < 0)
            return saved;
    }
    return saved;
}

/* Write the saved inputs into the tape's buffers. */
static int inputs_restore(bk_graph_t *g, float **saved)
{
    int rc = g->base.failed ? -1 : 0;
    for (size_t i = 0; i < g->nv; i++) {
        bk_tensor_t *t = g->v[i];
        int s[4];
        shape_of(t, s);
        if (rc == 0 && saved[i])
            rc = g->k->write(&g->base, t->val, saved[i], s, t->layout);
        free(saved[i]);
    }
    free(saved);
    return rc;
}

int plan_fused_leave(bk_graph_t *g)
{
    float **saved = inputs_save(g);
    if (!saved)
        return -1;
    if (g->base.failed)
        return inputs_restore(g, saved);
    tape_release(g);
    plan_fused_drop(g);
    int rc = tape_compile(g);
    if (inputs_restore(g, saved) < 0 || rc < 0)
        return -1;
    return 0;
}
