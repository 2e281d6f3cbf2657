/* tape_timer — where a graph's device time goes: every op of a forward
 * (and backward) timed on the device by the backend (bk_ops_t.timer; on
 * cuda with cudaEvents when DDPIPE_CUDA_PROFILE is set, docs/CUDA.md
 * "Per-op timing"), summed per op kind, and one summary line per graph at
 * its end (and every N forwards when the backend asks): the shape of
 * DDPIPE_TRAIN_PROFILE's host-clock lines, in milliseconds per pass and
 * shares of the step. Each op is bracketed by two marks: the interval from
 * the one before it to the one after is the op's work on the device, the
 * interval from the previous op's end to its start is a gap in which the
 * device waited for the host to queue it, or ran what the tape queues
 * outside an op (a backward's gradient buckets), summed apart as "between
 * ops" so that a slow host does not show as a slow op. Nothing here runs
 * when the backend does not time. */
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "gpud/tape_priv.h"

static void report(const bk_graph_t *g);

int tape_timer_on(bk_graph_t *g)
{
    tape_timer_t *t = &g->timer;
    const bk_timer_ops_t *to = g->base.be->ops->timer;
    if (to && !t->tried) {
        t->tried = 1;
        t->t = to->create(g->base.be, &t->every);
    }
    return t->t != NULL;
}

void tape_timer_begin(bk_graph_t *g, int backward)
{
    tape_timer_t *t = &g->timer;
    if (!tape_timer_on(g))
        return;
    /* every N forwards: the steps so far (their backwards included) */
    if (!backward && t->every > 0 && t->passes[0] > 0 && t->passes[0] % (unsigned)t->every == 0)
        report(g);
    g->base.be->ops->timer->begin(t->t);
}

void tape_timer_mark(bk_graph_t *g, top_kind_t kind)
{
    if (g->timer.t)
        g->base.be->ops->timer->mark(g->timer.t, (int)kind);
}

void tape_timer_start(bk_graph_t *g)
{
    if (g->timer.t)
        g->base.be->ops->timer->mark(g->timer.t, TAPE_TIMER_GAP);
}

void tape_timer_end(bk_graph_t *g, int backward)
{
    tape_timer_t *t = &g->timer;
    if (!t->t)
        return;
    if (g->base.be->ops->timer->take(t->t, t->ms[backward], TAPE_TIMER_GAP + 1) < 0) {
        g->base.be->ops->timer->destroy(t->t);   /* the backend said why */
        t->t = NULL;
        return;
    }
    t->passes[backward]++;
}

/* One line: per pass, and per op kind the forward's and backward's
 * milliseconds and their share of a step (a forward plus a backward). */
static void report(const bk_graph_t *g)
{
    const tape_timer_t *t = &g->timer;
    if (t->passes[0] + t->passes[1] > 0) {
        double total = 0, per[2] = {0, 0};
        for (int b = 0; b < 2; b++)
            for (int k = 0; k <= TAPE_TIMER_GAP; k++) {
                per[b] += t->ms[b][k];
                total += t->ms[b][k] / (double)(t->passes[b] ? t->passes[b] : 1);
            }
        char line[1024];
        size_t at = 0;
        at += (size_t)snprintf(line, sizeof line, "%lu forwards %.3f ms, %lu backwards %.3f ms",
                               t->passes[0], t->passes[0] ? per[0] / t->passes[0] : 0.0,
                               t->passes[1], t->passes[1] ? per[1] / t->passes[1] : 0.0);
        /* each op kind that took time, then the gaps between ops, always */
        for (int k = 0; k <= TAPE_TIMER_GAP && at < sizeof line; k++) {
            double f = t->passes[0] ? t->ms[0][k] / t->passes[0] : 0.0;
            double b = t->passes[1] ? t->ms[1][k] / t->passes[1] : 0.0;
            if (f + b <= 0 && k != TAPE_TIMER_GAP)
                continue;
            at += (size_t)snprintf(line + at, sizeof line - at, "; %s fwd %.3f bwd %.3f (%.1f%%)",
                                   k == TAPE_TIMER_GAP ? "between ops"
                                                       : top_kind_name((top_kind_t)k),
                                   f, b, total > 0 ? 100.0 * (f + b) / total : 0.0);
        }
        log_info("%s profile graph [%d] %s: %s (device ms per pass; share of a step)",
                 g->base.be->ops->name, g->batch, g->forward_only ? "inference" : "training",
                 line);
    }
}

void tape_timer_report(bk_graph_t *g)
{
    if (!g->base.be)
        return;
    report(g);
    if (g->timer.t)
        g->base.be->ops->timer->destroy(g->timer.t);
    g->timer.t = NULL;
}
