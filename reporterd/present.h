/* present — the report of a dataset that holds only some of the model's
 * classes (`ddpipe eval --classes`). The metric's `present` lists them;
 * top-k and the confusion matrix span every model output. The report
 * follows sklearn's classification_report(y_true, y_pred, labels=present):
 * a row per present class, each with its full support (predictions of
 * classes outside the dataset included) and precision over every sample
 * predicted as it; averages over the present classes only; "micro avg"
 * instead of "accuracy" when some prediction falls outside them.
 *
 * present_restrict turns rundir's copy of such a metric into one of the
 * present classes in order, plus, only when some sample was predicted as
 * a class outside the dataset, one last class "(not in the dataset)" with
 * those predictions: its row is empty, so the labelled classes' numbers
 * are unchanged. Every writer then works on the small metric; npresent
 * (present NULL) says how many leading classes are labelled. */
#ifndef DDP_REPORTERD_PRESENT_H
#define DDP_REPORTERD_PRESENT_H

#include "proto/event.h"

#define PRESENT_OTHER_NAME "(not in the dataset)"

/* m: an owned copy (rundir's) with the event's present/npresent (borrowed).
 * 0, or -1 out of memory (m unchanged then). Without present: 0, nothing. */
int present_restrict(ev_metric_t *m);

/* The labelled classes of a metric: all, or a restricted one's npresent. */
static inline uint32_t present_labelled(const ev_metric_t *m)
{
    return !m->present && m->npresent && m->npresent <= m->num_classes ? m->npresent
                                                                        : m->num_classes;
}

#endif
