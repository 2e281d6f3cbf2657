/* tape_chunks — bitwise training's step (backend.h "bitwise training"): a
 * rank's chunk graphs, all of one structure, run op by op — op i of every
 * chunk, then op i + 1 — so that a training BatchNorm can combine the sums
 * of all chunks (tape_bn_chunks.c) before any chunk normalises, and each
 * op's parameter gradients reach the grad-ready hook chunk after chunk.
 * Every other op runs on one chunk graph exactly as bk_forward /
 * bk_backward would run it: a sample's arithmetic is that of its chunk. */
#include "gpud/tape_priv.h"

void bk_graph_set_exact(bk_graph_t *g, bk_xreduce_fn fn, void *ctx, int sync)
{
    if (!g)
        return;
    g->exact = 1;
    g->exact_sync = sync;
    g->xreduce = fn;
    g->xreduce_ctx = ctx;
}

/* Every graph compiled, of g[0]'s structure, in bitwise mode. */
static int chunks_ready(bk_graph_t **g, int n)
{
    if (!g || n < 1 || !g[0])
        return -1;
    for (int j = 0; j < n; j++) {
        if (!g[j] || g[j]->base.failed || tape_ready(g[j]) < 0)
            return g[j] ? tape_chunk_fail(g, j) : -1;
        if (!g[j]->exact || g[j]->nops != g[0]->nops || g[j]->fops) {
            bk_ctx_fail(&g[0]->base, "chunk %d: not a training chunk graph of chunk 0's "
                        "structure (bk_graph_set_exact on every chunk, same model)", j);
            return -1;
        }
    }
    return 0;
}

static int is_training_bn(const bk_graph_t *g, size_t i)
{
    return g->ops[i].kind == TO_BN && bn_training(g, &g->ops[i]);
}

int bk_chunks_forward(bk_graph_t **g, int n)
{
    if (chunks_ready(g, n) < 0 || tape_bn_chunks_xrun(g[0]) < 0)
        return -1;
    for (size_t i = 0; i < g[0]->nops; i++) {
        if (is_training_bn(g[0], i)) {
            if (tape_bn_chunks_fwd(g, n, i) < 0)
                return -1;
            for (int j = 0; j < n; j++)   /* autocast's rounding, as tape_forward_op's */
                if (g[j]->half)
                    tape_round(g[j], op_dst(&g[j]->ops[i])->val, numel(g[j]->ops[i].out));
            continue;
        }
        for (int j = 0; j < n; j++)
            if (tape_forward_op(g[j], i) < 0)
                return tape_chunk_fail(g, j);
    }
    for (int j = 0; j < n; j++)
        for (size_t i = 0; i < g[j]->nv; i++)
            g[j]->v[i]->grad_set = 0;
    return 0;
}

int bk_chunks_backward(bk_graph_t **g, int n, bk_tensor_t **y, const float *const *dy)
{
    if (chunks_ready(g, n) < 0 || !y || !dy)
        return -1;
    for (int j = 0; j < n; j++) {
        if (!y[j] || y[j]->producer != y[0]->producer) {
            bk_ctx_fail(&g[0]->base, "chunk %d: backward from another op than chunk 0's", j);
            return -1;
        }
        if (tape_backward_begin(g[j], y[j], dy[j]) < 0)
            return tape_chunk_fail(g, j);
    }
    for (int i = y[0]->producer; i >= 0; i--) {
        if (is_training_bn(g[0], (size_t)i) && g[0]->ops[i].out->needs_grad) {
            if (tape_bn_chunks_bwd(g, n, i) < 0)
                return -1;
            continue;
        }
        for (int j = 0; j < n; j++)
            if (tape_backward_op(g[j], i) < 0)
                return tape_chunk_fail(g, j);
    }
    return 0;
}

int bk_chunks_empty(bk_graph_t *g, bk_tensor_t *y)
{
    if (!g || g->base.failed || !y || tape_ready(g) < 0)
        return -1;
    if (!g->exact) {
        bk_ctx_fail(&g->base, "bk_chunks_empty on a graph not in bitwise mode");
        return -1;
    }
    if (tape_bn_chunks_xrun(g) < 0)
        return -1;
    for (size_t i = 0; i < g->nops; i++)   /* as bk_chunks_forward */
        if (is_training_bn(g, i) && tape_bn_chunks_fwd(&g, 0, i) < 0)
            return -1;
    for (int i = y->producer; i >= 0; i--)   /* as bk_chunks_backward */
        if (is_training_bn(g, (size_t)i) && g->ops[i].out->needs_grad &&
            tape_bn_chunks_bwd(&g, 0, i) < 0)
            return -1;
    return 0;
}

struct xsum *bk_chunks_running_sums(bk_graph_t *g)
{
    return g && g->exact && !g->exact_sync ? g->xrun : NULL;
}

int bk_chunks_running(bk_graph_t *g)
{
    if (!g || g->base.failed)
        return -1;
    return bk_chunks_running_sums(g) ? tape_bn_chunks_running(g) : 0;
}
