#include "reducerd/publish.h"

#include "common/clock.h"
#include "common/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static void publish(reducer_t *self, const ddp_event_t *ev)
{
    zmsg_t *m = event_encode(ev);
    if (!m) {
        log_error("cannot encode a %s event (bug: please report)", event_topic_name(ev->topic));
        return;
    }
    if (zmsg_send(&m, self->xpub) < 0) {
        log_warn("publishing a %s event failed: %s", event_topic_name(ev->topic),
                 zmq_strerror(zmq_errno()));
        zmsg_destroy(&m);
    }
}

void publish_log(reducer_t *self, const char *level, const char *fmt, ...)
{
    ddp_event_t ev = {.topic = EV_LOG};
    snprintf(ev.u.log.level, sizeof ev.u.log.level, "%s", level);
    snprintf(ev.u.log.daemon, sizeof ev.u.log.daemon, "reducerd");
    ev.u.log.rank = -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ev.u.log.msg, sizeof ev.u.log.msg, fmt, ap);
    va_end(ap);
    publish(self, &ev);
}

void publish_worker(reducer_t *self, const peer_t *p, const char *state)
{
    ddp_event_t ev = {.topic = EV_WORKER};
    ev.u.worker.rank = p->rank;
    snprintf(ev.u.worker.name, sizeof ev.u.worker.name, "%s", p->name);
    snprintf(ev.u.worker.host, sizeof ev.u.worker.host, "%s", p->host);
    snprintf(ev.u.worker.state, sizeof ev.u.worker.state, "%s", state);
    double dt = clock_mono_s() - self->job_started_s;
    ev.u.worker.images_per_sec = (self->job_started_s > 0 && dt > 0) ? p->results / dt : 0;
    publish(self, &ev);
}

void publish_progress(reducer_t *self)
{
    slot_t *slot = reducer_active_slot(self);
    if (!slot)
        return;
    const ddp_plan_t *plan = slot_plan(slot);
    ev_metric_t m;
    slot_fill_metric(slot, clock_mono_s(), false, &m);
    ddp_event_t ev = {.topic = EV_PROGRESS};
    ev.u.progress.epoch = plan->epoch;
    ev.u.progress.phase = plan->phase;
    ev.u.progress.done = slot_accounted(slot);
    ev.u.progress.total = slot_expected(slot);
    double dt = m.wall_s;
    ev.u.progress.images_per_sec = dt > 0 ? ev.u.progress.done / dt : 0;
    double rate = ev.u.progress.images_per_sec;
    ev.u.progress.eta_s = rate > 0 && ev.u.progress.total >= ev.u.progress.done
                              ? (ev.u.progress.total - ev.u.progress.done) / rate
                              : -1;
    ev.u.progress.workers = peers_alive(self->peers, DDP_ROLE_GPUD);
    ev.u.progress.elapsed_s = dt;
    ev.u.progress.failed = slot_failed(slot);
    ev.u.progress.rejected = reducer_rejected_total(self);
    /* per-rank result counts: reporterd plots and exports per-worker throughput */
    uint64_t rank_done[64] = {0};
    uint32_t nranks = self->options.workers < 64 ? (uint32_t)self->options.workers : 64;
    for (uint32_t rank = 0; rank < nranks; rank++) {
        const peer_t *p = peers_by_rank(self->peers, (int32_t)rank);
        rank_done[rank] = p ? p->results : 0;
    }
    ev.u.progress.nranks = nranks;
    ev.u.progress.rank_done = rank_done;
    publish(self, &ev);
}

void publish_failed_files(reducer_t *self, const slot_t *slot)
{
    const ddp_plan_t *plan = slot_plan(slot);
    for (uint64_t id = 0; id < plan->n && slot_failed(slot); id++) {
        const char *path_reason = slot_fail_reason(slot, id);
        if (!path_reason)
            continue;
        ddp_event_t ev = {.topic = EV_FAILED};
        ev.u.failed.epoch = plan->epoch;
        ev.u.failed.phase = plan->phase;
        ev.u.failed.id = id;
        const char *tab = strchr(path_reason, '\t');
        snprintf(ev.u.failed.path, sizeof ev.u.failed.path, "%.*s", (int)(tab - path_reason),
                 path_reason);
        snprintf(ev.u.failed.reason, sizeof ev.u.failed.reason, "%s", tab + 1);
        publish(self, &ev);
    }
}

void publish_predictions(reducer_t *self, const slot_t *slot)
{
    const ddp_plan_t *plan = slot_plan(slot);
    const uint64_t chunk = 8192;
    for (uint64_t first = 0; first < plan->n; first += chunk) {
        uint64_t n = plan->n - first < chunk ? plan->n - first : chunk;
        ddp_event_t ev = {.topic = EV_PREDICTIONS};
        if (tally_fill_predictions(slot_tally(slot), first, n, &ev.u.predictions) < 0) {
            log_error("cannot gather predictions %llu..%llu (bug)", (unsigned long long)first,
                      (unsigned long long)(first + n));
            return;
        }
        ev.u.predictions.paths = plan->paths ? plan->paths + first : NULL;
        publish(self, &ev);
    }
}

void publish_metric(reducer_t *self, const slot_t *slot, bool final, const ev_metric_t *decision)
{
    ddp_event_t ev = {.topic = EV_METRIC};
    ev_metric_t *m = &ev.u.metric;
    /* per-rank throughput only in training: an eval metric keeps its keys */
    slot_fill_metric(slot, clock_mono_s(), self->options.train, m);
    m->final = final;
    m->workers = peers_gpud_ranks(self->peers);
    m->rejected = reducer_rejected_total(self);
    if (decision) {
        m->has_decision = true;
        m->decision = decision->decision;
        m->streak = decision->streak;
        m->epochs = decision->epochs;
        snprintf(m->decision_reason, sizeof m->decision_reason, "%s", decision->decision_reason);
    }
    publish(self, &ev);
    const char *phase = m->phase ? "train" : self->options.train ? "val" : "eval";
    double n = m->samples ? (double)m->samples : 1.0;
    log_info("epoch %u %s: %llu samples, %llu failed, top1 %.4f, top5 %.4f, loss %.4f, %.1f img/s"
             ", %.2f s (first result at %.2f s, %.1f img/s after it)",
             m->epoch, phase, (unsigned long long)m->samples, (unsigned long long)m->failed,
             m->correct_top1 / n, m->correct_top5 / n, m->loss_sum / n, m->images_per_sec,
             m->wall_s, m->first_result_s, m->steady_images_per_sec);
    if (m->nonfinite_loss) {
        log_warn("epoch %u %s: %llu samples with a non-finite loss", m->epoch, phase,
                 (unsigned long long)m->nonfinite_loss);
        publish_log(self, "warn",
                    "epoch %u %s: %llu of %llu samples have a non-finite loss (NaN/inf logits: "
                    "the model diverged or its weights hold NaN/inf); they count as results, the "
                    "mean loss is NaN/inf", m->epoch, phase,
                    (unsigned long long)m->nonfinite_loss, (unsigned long long)m->samples);
    }
}

void publish_end(reducer_t *self, int code, const char *reason)
{
    ddp_event_t ev = {.topic = EV_END};
    ev.u.end.code = code;
    snprintf(ev.u.end.reason, sizeof ev.u.end.reason, "%s", reason);
    publish(self, &ev);
}

void publish_membership(reducer_t *self, const char *change, uint32_t n, const int32_t *ranks,
                        char *const *names, bool redone, uint64_t step, uint32_t epoch,
                        const char *reason)
{
    ddp_event_t ev = {.topic = EV_MEMBERSHIP};
    ev_membership_t *m = &ev.u.membership;
    m->gen = self->elastic->gen;
    m->world = self->elastic->world;
    snprintf(m->change, sizeof m->change, "%s", change);
    m->n = n;
    m->ranks = (int32_t *)ranks;  /* borrowed: ev is not cleared */
    m->names = (char **)names;
    m->step = step;
    m->epoch = epoch;
    m->redone = redone;
    snprintf(m->reason, sizeof m->reason, "%s", reason);
    publish(self, &ev);
}

/* XPUB hands us subscriptions: a reporter is listening once one arrives. */
bool publish_on_subscription(reducer_t *self)
{
    zframe_t *f = zframe_recv(self->xpub);
    if (!f)
        return false;
    /* reporterd subscribes to the never-published topic EVENT_REPORTER_TOPIC
     * as well, so monitors tapping the stream are not mistaken for it */
    size_t topic_len = strlen(EVENT_REPORTER_TOPIC);
    bool is_reporter = zframe_size(f) == topic_len + 1 &&
                       memcmp(zframe_data(f) + 1, EVENT_REPORTER_TOPIC, topic_len) == 0;
    bool subscribed = is_reporter && zframe_data(f)[0] == 1;
    if (subscribed) {
        self->reporters_subscribed++;
        log_debug("reporterd subscribed to the event stream (%d)", self->reporters_subscribed);
        if (self->job_lost) /* a reporterd reconnecting after the end: tell it too */
            publish_end(self, self->exit_code, self->end_reason);
    } else if (is_reporter && zframe_data(f)[0] == 0) {
        self->reporters_subscribed--;
    }
    zframe_destroy(&f);
    return subscribed;
}
