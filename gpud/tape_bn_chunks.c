/* tape_bn_chunks — training BatchNorm in bitwise training (backend.h
 * "bitwise training"): every sum over samples is a chunk's own double sum
 * (the same bits whichever rank holds the chunk), and sums over chunks are
 * exact (common/xsum.h): over this rank's chunks here, over the ranks by
 * the graph's xreduce hook. So the statistics, and everything after them,
 * are the same bits for any number of ranks.
 *
 * sync (SyncBatchNorm): mean = exact sum x / N, then the variance from the
 * exact sum (x - mean)^2 / N, N the step's sample count; backward: the
 * exact global [sum dy', sum dy' xhat]. Not sync ("ghost batch norm"):
 * each chunk's own statistics and backward sums, as a one-chunk batch
 * would have them; the running stats move once per step towards the exact
 * mean over all chunks of the step of their means and unbiased variances
 * (collected here into the graph's xrun, summed over the ranks by the
 * caller with the gradients, then moved by tape_bn_chunks_running).
 * Either way gamma/beta get each chunk's sums in turn (the grad-ready hook
 * accumulates them exactly). */
#include <stdlib.h>
#include <string.h>

#include "common/xsum.h"
#include "gpud/bn_math.h"
#include "gpud/tape_priv.h"

/* The op i of chunk j (g[0]'s when n = 0: a rank without samples). */
static top_t *op_of(bk_graph_t **g, int j, size_t i)
{
    return &g[j]->ops[i];
}

/* Segments of c elements; the last of one when count (a sample count). */
static xsum_t *xs_new(bk_graph_t *g0, size_t c, int nseg, int count)
{
    size_t len[3] = {c, c, c};
    if (count)
        len[nseg - 1] = 1;
    xsum_t *x = xsum_new(len, nseg);
    if (!x)
        bk_ctx_fail(&g0->base, "out of memory");
    return x;
}

/* The sums of every rank (the hook; one rank: already the total). */
static int xreduce(bk_graph_t *g0, xsum_t *x, const char *what)
{
    char err[256] = "";
    if (!g0->xreduce || g0->xreduce(g0->xreduce_ctx, x, err, sizeof err) == 0)
        return 0;
    bk_ctx_fail(&g0->base, "bitwise BatchNorm: the exact all-reduce of %s failed: %s", what,
                err[0] ? err : "no reason given");
    return -1;
}

/* SyncBatchNorm's statistics: sum x with the count, then sum (x - mean)^2,
 * each summed exactly over chunks and ranks; every chunk (and g[0] when
 * n = 0) gets the same save_mean / save_var / sync_count. Returns the
 * global count (0: no rank had samples), or -1. */
static double sync_stats(bk_graph_t **g, int n, size_t i)
{
    top_t *o0 = op_of(g, 0, i);
    size_t c = (size_t)o0->bn.c;
    xsum_t *x = xs_new(g[0], c, 2, 1);   /* [sums (c), count] */
    double *tot = malloc(c * sizeof *tot), count = 0.0;
    if (!x || !tot) {
        xsum_destroy(&x);
        free(tot);
        if (!g[0]->base.failed)
            bk_ctx_fail(&g[0]->base, "out of memory");
        return -1;
    }
    for (int pass = 0; pass < 2; pass++) {
        xsum_clear(x);
        for (int j = 0; j < n; j++) {
            top_t *o = op_of(g, j, i);
            const bk_tensor_t *in = o->in[0];
            tape_bn_sums(g[j], o, in, pass ? o0->save_mean : NULL);
            xsum_add_f64(x, 0, o->sync_d);
            double cnt = (double)in->n * in->h * in->w;
            if (pass == 0)
                xsum_add_f64(x, 1, &cnt);
        }
        if (xreduce(g[0], x, pass ? "the centred sums" : "the sums") < 0)
            goto fail;
        xsum_get_f64(x, 0, tot);
        if (pass == 0) {
            xsum_get_f64(x, 1, &count);
            if (!(count >= 1.0))   /* the same on every rank: all skip pass 1 */
                break;
        }
        float *dst = pass ? o0->save_var : o0->save_mean;
        for (size_t k = 0; k < c; k++)
            dst[k] = bnm_stat(tot[k], count);
    }
    for (int j = 0; j < (n ? n : 1); j++) {
        top_t *o = op_of(g, j, i);
        o->sync_count = count >= 1.0 ? count : 0.0;
        if (o != o0) {
            memcpy(o->save_mean, o0->save_mean, c * sizeof *o->save_mean);
            memcpy(o->save_var, o0->save_var, c * sizeof *o->save_var);
        }
    }
    xsum_destroy(&x);
    free(tot);
    return count >= 1.0 ? count : 0.0;
fail:
    xsum_destroy(&x);
    free(tot);
    return -1;
}

/* Ghost BatchNorm's running stats, step one: every chunk's mean and
 * unbiased variance (and a 1, the chunk count) into the first chunk's
 * graph's xrun; the caller sums that over the ranks. */
static void ghost_collect(bk_graph_t **g, int n, size_t i, double *v)
{
    top_t *o0 = op_of(g, 0, i);
    size_t c = (size_t)o0->bn.c;
    for (int j = 0; j < n; j++) {
        top_t *o = op_of(g, j, i);
        double cnt = o->sync_count, unbias = cnt > 1.0 ? cnt / (cnt - 1.0) : 1.0;
        for (size_t k = 0; k < c; k++) {
            v[k] = o->save_mean[k];
            v[c + k] = (double)o->save_var[k] * unbias;
        }
        v[2 * c] = 1.0;
        for (int s = 0; s < 3; s++)
            xsum_add_f64(g[0]->xrun, o0->xrun_seg + s, v + (size_t)s * c);
    }
}

int tape_bn_chunks_xrun(bk_graph_t *g)
{
    if (g->exact_sync)
        return 0;
    if (g->xrun) {
        xsum_clear(g->xrun);
        return 0;
    }
    size_t nseg = 0, *len = malloc(3 * (g->nops + 1) * sizeof *len);
    if (!len) {
        bk_ctx_fail(&g->base, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < g->nops; i++) {
        top_t *o = &g->ops[i];
        if (o->kind != TO_BN || !bn_training(g, o))
            continue;
        o->xrun_seg = (int)nseg;
        len[nseg++] = (size_t)o->bn.c;   /* means */
        len[nseg++] = (size_t)o->bn.c;   /* unbiased variances */
        len[nseg++] = 1;                 /* chunks */
    }
    if (nseg > 0 && !(g->xrun = xsum_new(len, (int)nseg)))
        bk_ctx_fail(&g->base, "out of memory");
    free(len);
    return nseg > 0 && !g->xrun ? -1 : 0;
}

/* Step two, after the caller summed xrun: r = (1 - m) r + m s, s the exact
 * mean over every chunk of the step of its statistic. */
static int ghost_move(bk_graph_t *g, top_t *o0, double *v)
{
    size_t c = (size_t)o0->bn.c;
    for (int s = 0; s < 3; s++)
        xsum_get_f64(g->xrun, o0->xrun_seg + s, v + (size_t)s * c);
    double chunks = v[2 * c];
    if (!(chunks >= 1.0))   /* no rank had samples: nothing moves (as SyncBatchNorm) */
        return 0;
    for (size_t k = 0; k < 2 * c; k++)   /* the means over the chunks */
        v[k] /= chunks;
    return tape_bn_move(g, o0, v, v + c, 1.0);
}

int tape_bn_chunks_running(bk_graph_t *g)
{
    size_t cmax = 1;
    for (size_t i = 0; i < g->nops; i++)
        if (g->ops[i].kind == TO_BN && (size_t)g->ops[i].bn.c > cmax)
            cmax = (size_t)g->ops[i].bn.c;
    double *v = malloc((3 * cmax + 1) * sizeof *v);
    int rc = v ? 0 : -1;
    if (!v)
        bk_ctx_fail(&g->base, "out of memory");
    for (size_t i = 0; rc == 0 && i < g->nops; i++) {
        top_t *o = &g->ops[i];
        if (o->kind != TO_BN || !bn_training(g, o))
            continue;
        bk_ctx_set_name(&g->base, o->name);
        if (tape_bn_scratch(g, o) < 0 || ghost_move(g, o, v) < 0)
            rc = -1;
    }
    free(v);
    return rc;
}

int tape_bn_chunks_fwd(bk_graph_t **g, int n, size_t i)
{
    for (int j = 0; j < (n ? n : 1); j++)
        if (tape_bn_scratch(g[j], op_of(g, j, i)) < 0)
            return -1;
    bk_ctx_set_name(&g[0]->base, op_of(g, 0, i)->name);
    if (g[0]->exact_sync) {
        double count = sync_stats(g, n, i);
        if (count < 0)
            return -1;
        for (int j = 0; j < n; j++) {
            top_t *o = op_of(g, j, i);
            if (tape_bn_put_stats(g[j], o) < 0 ||
                tape_bn_normalize(g[j], o, o->in[0], op_dst(o)) < 0)
                return tape_chunk_fail(g, j);
        }
        return count >= 1.0 ? tape_bn_running(g[0], op_of(g, 0, i), (size_t)count) : 0;
    }
    for (int j = 0; j < n; j++) {   /* each chunk alone: no all-reduce hook on chunk graphs */
        top_t *o = op_of(g, j, i);
        if (tape_bn_stats(g[j], o, o->in[0]) < 0 ||
            tape_bn_normalize(g[j], o, o->in[0], op_dst(o)) < 0)
            return tape_chunk_fail(g, j);
    }
    double *v = malloc((3 * (size_t)op_of(g, 0, i)->bn.c + 1) * sizeof *v);
    if (!v) {
        bk_ctx_fail(&g[0]->base, "out of memory");
        return -1;
    }
    ghost_collect(g, n, i, v);
    free(v);
    return 0;
}

/* Chunk j's local backward sums (and gx's g * dy' part), its gamma/beta
 * gradients handed to the hook. gx[j]: where its input gradient goes. */
static int chunk_local(bk_graph_t **g, int j, size_t i, void **gx)
{
    bk_graph_t *gj = g[j];
    top_t *o = op_of(g, j, i);
    if (!o->out->grad_set) {   /* a branch that does not reach the loss */
        tape_kv(gj, o->out)->zero(gj->base.be, o->out->grad, numel(o->out));
        o->out->grad_set = 1;
    }
    bk_ctx_set_name(&gj->base, o->name);
    gx[j] = tape_grad_dst(gj, o->in[0]);
    if (tape_bn_grad_local(gj, o, o->in[0], o->out, gx[j]) < 0)
        return -1;
    if (o->bn.grad_weight) {
        if (tape_bn_param_grads(gj, o) < 0)
            return -1;
        if (gj->grad_ready)
            tape_grads_ready(gj, o);
    }
    return 0;
}

int tape_bn_chunks_bwd(bk_graph_t **g, int n, int i)
{
    size_t at = (size_t)i, c = (size_t)op_of(g, 0, at)->bn.c;
    void **gx = calloc(n ? (size_t)n : 1, sizeof *gx);
    xsum_t *x = g[0]->exact_sync ? xs_new(g[0], c, 2, 0) : NULL;
    int rc = gx && (x || !g[0]->exact_sync) ? 0 : -1;
    if (rc < 0 && !g[0]->base.failed)
        bk_ctx_fail(&g[0]->base, "out of memory");
    for (int j = 0; rc == 0 && j < n; j++) {
        rc = chunk_local(g, j, at, gx) < 0 ? tape_chunk_fail(g, j) : 0;
        if (rc == 0 && x) {
            top_t *o = op_of(g, j, at);
            xsum_add_f64(x, 0, o->sync_d);
            xsum_add_f64(x, 1, o->sync_d + c);
        }
    }
    if (rc == 0 && x && (rc = xreduce(g[0], x, "the backward sums")) == 0)
        for (int j = 0; j < n; j++) {   /* every chunk: the global sums */
            top_t *o = op_of(g, j, at);
            xsum_get_f64(x, 0, o->sync_d);
            xsum_get_f64(x, 1, o->sync_d + c);
        }
    for (int j = 0; rc == 0 && j < n; j++) {
        top_t *o = op_of(g, j, at);
        if (tape_bn_dx(g[j], o, o->in[0], o->out, gx[j]) < 0)
            rc = tape_chunk_fail(g, j);
        else
            tape_grad_commit(g[j], o->in[0]);
    }
    xsum_destroy(&x);
    free(gx);
    return rc;
}
