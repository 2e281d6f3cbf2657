#include "reporterd/tensorboard.h"

#include "common/clock.h"
#include "proto/messages.h"

#include <math.h>
#include <stdio.h>

/* "train" or "val" in training (the validation of an epoch is its eval
 * phase), "eval" in an evaluation: the words of metrics.csv. */
static const char *phase_word(const ev_metric_t *m)
{
    if (m->phase == DDP_PHASE_TRAIN)
        return "train";
    return m->lr > 0 || m->epochs > 0 ? "val" : "eval";
}

static int put(tfevents_t *tb, const char *metric, const char *phase, int64_t step, double v,
               char *err, size_t errlen)
{
    char tag[96];
    if (phase)
        snprintf(tag, sizeof tag, "%s/%s", metric, phase);
    else
        snprintf(tag, sizeof tag, "%s", metric);
    if (!isfinite(v))   /* a diverged loss is no point on a chart */
        return 0;
    return tfevents_scalar(tb, tag, step, clock_wall_s(), (float)v, err, errlen);
}

int tensorboard_on_metric(tfevents_t *tb, const ev_metric_t *m, char *err, size_t errlen)
{
    if (!m->samples)
        return 0;
    const char *ph = phase_word(m);
    double n = (double)m->samples;
    int64_t step = m->epoch;
    int rc = put(tb, "loss", ph, step, m->loss_sum / n, err, errlen);
    if (rc == 0)
        rc = put(tb, "top1", ph, step, (double)m->correct_top1 / n, err, errlen);
    if (rc == 0)
        rc = put(tb, "top5", ph, step, (double)m->correct_top5 / n, err, errlen);
    if (rc == 0)
        rc = put(tb, "images_per_sec", ph, step, m->images_per_sec, err, errlen);
    if (rc == 0 && m->phase == DDP_PHASE_TRAIN)
        rc = put(tb, "lr", NULL, step, m->lr, err, errlen);
    for (uint32_t r = 0; rc == 0 && r < m->nranks && m->rank_images_per_sec; r++) {
        char rank[32];
        snprintf(rank, sizeof rank, "rank%u", r);
        rc = put(tb, "images_per_sec", rank, step, m->rank_images_per_sec[r], err, errlen);
    }
    return rc;
}

int tensorboard_on_progress(tfevents_t *tb, const ev_progress_t *p, int64_t tick, char *err,
                            size_t errlen)
{
    if (p->done == 0 || p->images_per_sec <= 0)
        return 0;
    return put(tb, "throughput", "images_per_sec", tick, p->images_per_sec, err, errlen);
}
