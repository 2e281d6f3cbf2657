/* tape_pass — a training graph's forward and backward as one pass
 * (bk_forward_backward), so that the backend may record the whole step's
 * kernels once and replay them (tape_capture.c; CUDA graphs: one launch a
 * step instead of one per kernel). What the pass takes from the host each
 * step is put in the backend's memory before it: the input (bk_write*),
 * the labels (bk_set_labels), dropout's sample keys (tape_dropout_keys),
 * both put in the graph's own backend memory (bk_kernels_t.put), and the
 * loss gradient (staged here); what
 * it gives back is read after it (bk_read). Host state the
 * ops would change as they run makes a pass unrecordable (tape_capture.c):
 * a replay runs no host code. */
#include "gpud/tape_priv.h"

/* The loss gradient dy (numel(y) floats, host) in g->dy, backend memory
 * allocated once per compile: the pass copies it from there. */
static int stage_dy(bk_graph_t *g, const bk_tensor_t *y, const float *dy)
{
    int s[4];
    shape_of(y, s);
    size_t cnt = numel(y);
    if (g->dy && g->dy_count != cnt) {
        tape_kv(g, y)->release(g->base.be, g->dy);
        g->dy = NULL;
    }
    if (!g->dy) {
        if (!(g->dy = tape_kv(g, y)->alloc(&g->base, cnt)))
            return -1;
        g->dy_count = cnt;
    }
    return tape_kv(g, y)->write(&g->base, g->dy, dy, s, 0);
}

/* Forward, then backward from the staged gradient (tape_backward_begin's
 * seed, on the backend: a copy, no host data). 0 or -1. */
static int run_pass(bk_graph_t *g, bk_tensor_t *y)
{
    if (tape_forward_ops(g) < 0)
        return -1;
    tape_kv(g, y)->copy(g->base.be, y->grad, g->dy, numel(y));
    tape_backward_seeded(g, y);
    for (int i = y->producer; i >= 0; i--)
        if (tape_backward_op(g, i) < 0)
            return -1;
    return 0;
}

int bk_forward_backward(bk_graph_t *g, bk_tensor_t *y, const float *dy)
{
    if (!g || g->base.failed || !y || !dy || tape_ready(g) < 0)
        return -1;
    if (!y->needs_grad) {
        bk_ctx_fail(&g->base, "backward from a tensor that depends on no parameter");
        return -1;
    }
    g->cap.pass = g->training && !g->forward_only;
    /* timed op by op: never recorded (the timer is made here, before the
     * first pass, or a training graph would never make it) */
    if (!g->cap.pass || g->profile || tape_timer_on(g))
        return bk_forward(g) < 0 ? -1 : bk_backward(g, y, dy);
    if (stage_dy(g, y, dy) < 0 || tape_dropout_keys_ready(g) < 0)
        return -1;
    int how = tape_capture_before(g);
    int rc = how == TC_DONE ? 0 : run_pass(g, y);
    if (how == TC_RECORDING && tape_capture_after(g, rc) == 1)
        rc = run_pass(g, y);   /* not recorded after all: op by op */
    return rc;
}
