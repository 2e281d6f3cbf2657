/* tape_capture — an eval graph's forward (its inference plan, or the tape
 * where the precision has none), or a training graph's
 * whole pass (forward and backward, tape_pass.c), recorded once and replayed
 * (CUDA graphs, on backends with bk_ops_t.graphs; docs/CUDA.md "CUDA
 * graphs"). The first forward runs op by op, so that everything a kernel
 * makes on first use exists (plans, buffers, workspace, scratch, algorithm
 * choices); the second is recorded and the recording launched; later
 * forwards launch it again. A replay is valid because nothing it uses
 * moves: the vars' buffers and the plans are fixed once compiled, the
 * input is written (bk_write, bk_write_u8) into the same buffer before the
 * forward and the output read after it, and the fused ops' folded weights
 * (graph_plan.c fold_params) are refolded in place at the same addresses
 * when the parameters change (tape_ready runs before this file is asked).
 * Still, after a refold (params_version moved) the next forward runs op by
 * op and the one after records anew: backend_impl.h lets an inference plan
 * redo weight-derived work of its own when params_version moves, work a
 * recording made before would not contain. A backend reports memory of its
 * own that moved (a grown workspace) as stale: the engine records again. Any failure while recording or launching gives
 * the graph up for recording (logged once): it runs op by op from then on,
 * the ops run again at once, so no forward is lost or wrong. */
#include <stdio.h>

#include "common/log.h"
#include "gpud/tape_priv.h"

/* A training graph's pass (forward and backward, bk_forward_backward) the
 * backend may record: nothing in it may come from the host per step or go
 * to it. Labels and dropout's sample keys are the backend's copies
 * (put in the graph's own backend memory before the pass), the loss gradient is
 * staged the same way (tape_pass.c); so: no BatchNorm whose statistics the
 * host makes (SyncBatchNorm, --chunk: bn_on_device) or that counts its
 * batches in host memory (bk_bn_t.num_batches: a replay runs no host
 * code), no gradient hook (the ring's buckets copy each gradient to the
 * host as it is final). */
static int pass_recordable(const bk_graph_t *g)
{
    if (!g->training || g->forward_only || g->grad_ready || (g->labels && !g->k32->put))
        return 0;
    for (size_t i = 0; i < g->nops; i++) {
        const top_t *o = &g->ops[i];
        if ((o->kind == TO_DROPOUT && drop_p(g, o) != 0.0f && !g->k32->put) ||
            (o->kind == TO_BN && bn_training(g, o) && (!bn_on_device(g) || o->bn.num_batches)))
            return 0;
    }
    return 1;
}

/* A graph the backend may record: an eval-mode forward-only graph whose
 * ops take nothing from the host per call (no labels: no CE; no dropout
 * mask ids), run as its inference plan (fops) or as the tape (a precision
 * without one: fp16, whose eval keeps autocast's rounding points on the
 * tape; its BatchNorms normalise with the running statistics in place),
 * or a training pass (pass_recordable), and whose time is not being
 * measured op by op. */
static int recordable(const bk_graph_t *g)
{
    if (!g->base.be->ops->graphs || g->profile || g->timer.t)
        return 0;
    if (g->cap.pass)
        return pass_recordable(g);
    if (g->training || !g->forward_only)
        return 0;
    const top_t *ops = g->fops ? g->fops : g->ops;
    size_t n = g->fops ? g->nfops : g->nops;
    for (size_t i = 0; i < n; i++)
        if (ops[i].kind == TO_CE || (ops[i].kind == TO_DROPOUT && drop_p(g, &ops[i]) != 0.0f))
            return 0;
    return 1;
}

/* Op by op from now on; said once per graph. */
static void give_up(bk_graph_t *g, int chosen, const char *what, const char *why)
{
    tape_capture_drop(g);
    g->cap.state = CAP_OFF;
    if (chosen)
        log_debug("graph [%d]: %s not recorded: %s", g->batch,
                  g->cap.pass ? "training pass" : "forward", why);
    else
        log_warn("graph [%d]: %s of the %s failed (%s); it runs op by op from now on",
                 g->batch, what, g->cap.pass ? "training pass" : "forward", why);
}

static int start(bk_graph_t *g)
{
    char why[256] = "";
    int rc = g->base.be->ops->graphs->capture_begin(g->base.be, why, sizeof why);
    if (rc != 0) {
        give_up(g, rc > 0, "recording", why);
        return TC_RUN;
    }
    return TC_RECORDING;
}

int tape_capture_before(bk_graph_t *g)
{
    tape_cap_t *c = &g->cap;
    const bk_graph_ops_t *go = g->base.be->ops->graphs;
    char why[256] = "";
    switch (c->state) {
    case CAP_NEW:
        /* a pass's recordability can change from step to step (the ring's
         * gradient hook comes and goes with the world): it waits, WARM */
        c->state = c->pass || recordable(g) ? CAP_WARM : CAP_OFF;
        c->version = g->base.params_version;
        return TC_RUN;
    case CAP_WARM:
        if (!c->pass && c->version != g->base.params_version) {
            /* refolded since the op-by-op forward: a plan may redo
             * weight-derived work of its own at its next call (cuda_infer's
             * bf16 weights): let it run op by op first, so that the
             * recording holds none of it and a failed recording, whose ops
             * run again unrecorded, does not find that work marked done */
            c->version = g->base.params_version;
            return TC_RUN;
        }
        if (c->pass && g->base.be->ops->graphs && !recordable(g))
            return TC_RUN;   /* not this step */
        return recordable(g) ? start(g) : (give_up(g, 1, "", "not recordable"), TC_RUN);
    case CAP_LIVE: {
        if (c->pass && !recordable(g)) {   /* not this step: op by op */
            tape_capture_drop(g);
            return TC_RUN;
        }
        /* a training pass reads the parameters where they are: a reload
         * changes nothing it recorded */
        if (!c->pass && c->version != g->base.params_version) {
            /* refolded: a plan may redo weight-derived work of its own at
             * the next call (backend_impl.h conv_plan); let it, then record */
            tape_capture_drop(g);
            c->version = g->base.params_version;
            return TC_RUN;
        }
        int rc = go->replay(g->base.be, c->seg[0], why, sizeof why);
        if (rc == 0) {
            c->replays++;
            return TC_DONE;
        }
        if (rc < 0) {
            give_up(g, 0, "a replay", why);
            return TC_RUN;
        }
        log_debug("graph [%d]: recorded forward stale (%s): recording again", g->batch, why);
        tape_capture_drop(g);
        return start(g);
    }
    case CAP_OFF:
        break;
    }
    return TC_RUN;
}

/* The open recording ends as segment nseg, after backward op `op` (0: the
 * pass's or the forward's end), and is replayed once: 0; else given up
 * (logged, every segment released) and 1. why: the ops' failure (!ok). */
static int end_segment(bk_graph_t *g, int op, int ok, const char *why)
{
    tape_cap_t *c = &g->cap;
    const bk_graph_ops_t *go = g->base.be->ops->graphs;
    char ewhy[256] = "";
    bk_capture_t *rec = go->capture_end(g->base.be, ok, ewhy, sizeof ewhy);
    if (rec && !ok) {   /* the contract says NULL; never replay a partial one */
        go->release(g->base.be, rec);
        rec = NULL;
    }
    if (!rec) {
        give_up(g, 0, "recording", ok ? ewhy : why);
        return 1;
    }
    c->seg[c->nseg] = rec;
    c->seg_end[c->nseg++] = op;
    char lwhy[256] = "";
    if (go->replay(g->base.be, rec, lwhy, sizeof lwhy) != 0) {
        give_up(g, 0, "the first replay", lwhy);
        return 1;
    }
    c->replays++;
    return 0;
}

/* Whether the recorded ops went well (rc 0 and no error noted); if not,
 * their error in why, taken from the graph: an op that refused to be
 * recorded (a copy, a synchronisation) is not the graph's error; the ops
 * run again unrecorded and report a real one. */
static int recorded_ok(bk_graph_t *g, int rc, char *why, size_t len)
{
    if (rc == 0 && !g->base.failed)
        return 1;
    snprintf(why, len, "%s", g->base.failed ? g->base.err : "an op failed");
    g->base.failed = 0;
    g->base.err[0] = '\0';
    return 0;
}

int tape_capture_after(bk_graph_t *g, int rc)
{
    tape_cap_t *c = &g->cap;
    char why[640] = "";
    int ok = recorded_ok(g, rc, why, sizeof why);
    if (end_segment(g, 0, ok, why) != 0)
        return 1;
    c->version = g->base.params_version;
    c->state = CAP_LIVE;
    c->captures++;
    if (c->nseg > 1)
        log_debug("graph [%d]: training pass recorded (%zu ops) in %d segments, the gradient "
                  "queue's work between them; replayed from now on", g->batch, g->nops,
                  c->nseg);
    else
        log_debug("graph [%d]: %s recorded (%zu ops), replayed from now on", g->batch,
                  c->pass ? "training pass" : "forward", c->pass ? g->nops : g->nfops);
    return 0;
}

int tape_capture_cut(bk_graph_t *g, int op)
{
    char why[640] = "";
    int ok = recorded_ok(g, 0, why, sizeof why);
    return end_segment(g, op, ok, why) != 0 ? 1 : 0;
}

int tape_capture_resume(bk_graph_t *g)
{
    char why[256] = "";
    int rc = g->base.be->ops->graphs->capture_begin(g->base.be, why, sizeof why);
    if (rc != 0)
        give_up(g, rc > 0, "recording", why);
    return rc != 0;
}

int tape_capture_replay_seg(bk_graph_t *g, int k)
{
    tape_cap_t *c = &g->cap;
    char why[256] = "";
    int rc = k > 0 && k < c->nseg
                 ? g->base.be->ops->graphs->replay(g->base.be, c->seg[k], why, sizeof why)
                 : -1;
    if (rc == 0) {
        c->replays++;
        return 0;
    }
    /* segment 0 is queued: a stale one here (the workspace or the scratch
     * moved between two launches of one pass) cannot be recorded again */
    char msg[384];
    snprintf(msg, sizeof msg, "segment %d of %d: %s", k, c->nseg, why[0] ? why : "no such segment");
    give_up(g, 0, "a replay", msg);
    bk_ctx_fail(&g->base, "the recorded training pass failed in its %s; the step is lost", msg);
    return -1;
}

void tape_capture_drop(bk_graph_t *g)
{
    tape_cap_t *c = &g->cap;
    for (int k = 0; k < c->nseg; k++)
        g->base.be->ops->graphs->release(g->base.be, c->seg[k]);
    c->nseg = 0;
    if (c->state == CAP_LIVE)
        c->state = CAP_WARM;
}
