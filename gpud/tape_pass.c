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
 * a replay runs no host code. The one exception is a grad queue
 * (bk_graph_set_grad_queue: NCCL's gradient buckets): the pass is then
 * recorded in segments, and the queue's marks and flushes run between
 * their launches, outside any recording (docs/CUDA.md "NCCL's buckets and
 * the recorded pass"). */
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

/* Backward ops from `from` down to 0, op by op (the grad queue's marks and
 * flushes as they come). */
static int run_backward(bk_graph_t *g, int from)
{
    for (int i = from; i >= 0; i--)
        if (tape_backward_op(g, i) < 0)
            return -1;
    return 0;
}

/* Forward, then backward from the staged gradient (tape_backward_begin's
 * seed, on the backend: a copy, no host data). 0 or -1. */
static int run_pass(bk_graph_t *g, bk_tensor_t *y)
{
    if (tape_forward_ops(g) < 0)
        return -1;
    tape_kv(g, y)->copy(g->base.be, y->grad, g->dy, numel(y));
    tape_backward_seeded(g, y);
    return run_backward(g, y->producer);
}

/* The grad queue's marks of backward ops from..to (their kernels queued:
 * run or replayed), then its flush if one asked. stale: set when an op
 * other than `to` asked (the cuts learned before no longer match). */
static void mark_segment(bk_graph_t *g, int from, int to, int *stale)
{
    if (!g->grad_mark)
        return;
    int want = 0;
    for (int i = from; i >= to; i--) {
        top_t *o = &g->ops[i];
        if (!o->out->needs_grad)
            continue;
        int w = tape_grads_mark(g, o);
        if (w && i != to && i > 0)
            *stale = 1;
        want |= w;
    }
    if (want)
        g->grad_flush(g->grad_queue_ctx);
}

/* Cuts that no longer match the marks (the queue's layout changed) are
 * learned again from the next pass, op by op, and recorded at the one
 * after: the marks of a pass whose flushes came late say nothing of where
 * they go op by op. A capped recording's later flushes are inside its last
 * segment by design: not stale. */
static void relearn_if_stale(bk_graph_t *g, int stale)
{
    if (stale && !g->cap.capped) {
        tape_capture_drop(g);
        g->cap.state = CAP_NEW;
    }
}

/* The pass recorded (tape_capture_before said TC_RECORDING: the recording is
 * open). With a grad queue, in segments: one ends after each backward op
 * whose marks asked for a flush in the op-by-op pass before
 * (top_t.cut_after), is queued, and its ops' gradients are marked and
 * flushed then, outside the recording, as op by op; a segment that could
 * not be recorded runs again op by op, and so does the rest of the pass. */
static int record_pass(bk_graph_t *g, bk_tensor_t *y)
{
    tape_cap_t *c = &g->cap;
    int stale = 0, first = y->producer, rc = tape_forward_ops(g);
    if (rc == 0) {
        tape_kv(g, y)->copy(g->base.be, y->grad, g->dy, numel(y));
        tape_backward_seeded(g, y);
    }
    c->defer = 1;
    c->capped = 0;
    for (int i = y->producer; rc == 0 && i > 0; i--) {
        if ((rc = tape_backward_op(g, i)) < 0 || !g->grad_mark || !g->ops[i].cut_after)
            continue;
        if (c->nseg + 2 > TAPE_MAX_SEGS) {   /* the last segment takes the rest */
            c->capped = 1;
            continue;
        }
        c->defer = 0;
        if (tape_capture_cut(g, i) != 0)   /* this segment's ops did not run */
            return first == y->producer ? run_pass(g, y) : run_backward(g, first);
        /* outside any recording: the flush may wait, copy or queue NCCL */
        mark_segment(g, first, i, &stale);
        if (tape_capture_resume(g) != 0)   /* the rest cannot be recorded */
            return run_backward(g, i - 1);
        c->defer = 1;
        first = i - 1;
    }
    if (rc == 0)
        rc = tape_backward_op(g, 0);
    c->defer = 0;
    if (tape_capture_after(g, rc) == 1)   /* not recorded after all: op by op */
        return first == y->producer ? run_pass(g, y) : run_backward(g, first);
    mark_segment(g, first, 0, &stale);
    relearn_if_stale(g, stale);   /* the cuts came from a pass whose queue differed */
    return 0;
}

/* The rest of a replayed pass (tape_capture_before queued segment 0): each
 * segment's gradients marked and flushed after it is queued, then the next
 * (relearn_if_stale). */
static int replay_rest(bk_graph_t *g, bk_tensor_t *y)
{
    tape_cap_t *c = &g->cap;
    int stale = 0, first = y->producer, n = c->nseg;
    for (int k = 0; k < n; k++) {
        if (k > 0 && tape_capture_replay_seg(g, k) < 0)
            return -1;
        mark_segment(g, first, c->seg_end[k], &stale);
        first = c->seg_end[k] - 1;
    }
    relearn_if_stale(g, stale);
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
    if (how == TC_DONE)
        return replay_rest(g, y);
    return how == TC_RECORDING ? record_pass(g, y) : run_pass(g, y);
}
