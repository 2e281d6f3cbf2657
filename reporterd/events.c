/* events — reducerd's events into the run directory. */
#include "reporterd/events.h"

#include "common/clock.h"
#include "common/errbuf.h"
#include "common/log.h"
#include "proto/event.h"
#include "proto/wire.h"
#include "reporterd/tap.h"
#include "reporterd/tensorboard.h"

#include <stdio.h>

static void send_done(reporter_t *self, int code, const char *reason)
{
    ddp_msg_t m = {.type = DDP_DONE};
    m.u.done.code = code;
    snprintf(m.u.done.reason, sizeof m.u.done.reason, "%s", reason);
    if (proto_send(zsock_resolve(self->reducer), NULL, &m) < 0)
        log_error("cannot tell reducerd the run directory is written: %s", zmq_strerror(zmq_errno()));
}

static void on_end(reporter_t *self, const ev_end_t *end)
{
    const char *out = self->options.out;
    char err[512] = "";
    int code = 0;
    /* a job stopped by a failed checkpoint write or a non-finite step
     * still gets its summary, saying so */
    bool stopped = end->code == DDP_STOP_CHECKPOINT_FAILED || end->code == DDP_STOP_NONFINITE;
    if (stopped)
        rundir_job_stopped(self->rundir, end->code, end->reason);
    if (end->code == 0 || stopped) {
        if (rundir_finish(self->rundir, err, sizeof err) < 0) {
            log_error("cannot write the run directory %s: %s", out, err);
            code = 1;
        } else if (self->write_error[0]) {
            /* finished, but a file written during the run was lost: say so */
            err_set(err, sizeof err, "%s", self->write_error);
            log_error("the run directory %s is incomplete: %s", out, err);
            code = 1;
        } else {
            log_info("run directory %s written", out);
        }
    } else {
        log_error("the job failed (code %d: %s): no summary written", end->code, end->reason);
    }
    send_done(self, code, code ? err : "ok");
    /* our exit status tells the launcher whether the run directory is whole */
    self->exit_code = code                                   ? code
                      : end->code == DDP_STOP_JOB_LOST         ? DDP_STOP_JOB_LOST
                      : stopped                                ? end->code
                                                               : (end->code != 0);
    self->done = true;
}

static int to_tensorboard(reporter_t *self, const ddp_event_t *ev, char *err, size_t errlen)
{
    if (ev->topic == EV_METRIC)
        return tensorboard_on_metric(self->tb, &ev->u.metric, err, errlen);
    if (ev->topic == EV_PROGRESS)
        return tensorboard_on_progress(self->tb, &ev->u.progress, ++self->tb_ticks, err, errlen);
    return 0;
}

static void handle(reporter_t *self, const ddp_event_t *ev)
{
    char err[512] = "";
    int rc = 0;
    switch (ev->topic) {
    case EV_METRIC: rc = rundir_on_metric(self->rundir, &ev->u.metric, err, sizeof err); break;
    case EV_PREDICTIONS:
        rc = rundir_on_predictions(self->rundir, &ev->u.predictions, err, sizeof err);
        break;
    case EV_FAILED: rc = rundir_on_failed(self->rundir, &ev->u.failed); break;
    case EV_PROGRESS:
        rc = rundir_on_progress(self->rundir, &ev->u.progress, clock_mono_s(), err, sizeof err);
        break;
    case EV_MEMBERSHIP:
        rc = rundir_on_membership(self->rundir, &ev->u.membership, err, sizeof err);
        break;
    case EV_END: on_end(self, &ev->u.end); break;
    default: break;
    }
    if (rc == 0 && self->tb)
        rc = to_tensorboard(self, ev, err, sizeof err);
    if (rc < 0) {
        log_error("writing %s for a %s event failed: %s", self->options.out,
                  event_topic_name(ev->topic), err);
        if (!self->write_error[0])
            snprintf(self->write_error, sizeof self->write_error, "%s", err);
    }
}

void events_receive(reporter_t *self)
{
    zmsg_t *m = zmsg_recv(self->sub);
    if (!m)
        return;
    self->events++;
    ddp_event_t ev;
    char err[256];
    bool ok = event_decode(m, &ev, err, sizeof err) == 0;
    if (self->tap && ok)
        tap_forward(self, &ev, m);
    if (!ok) {
        self->rejected++;
        promstate_add_rejected(self->prom, 1);
        log_warn("rejected an event: %s", err);
    } else {
        double now_s = clock_mono_s();
        promstate_on_event(self->prom, &ev, now_s);
        if (self->web && webfeed_on_event(self->web, &ev, now_s) != 0)
            log_warn("out of memory: a %s event did not reach the dashboard",
                     event_topic_name(ev.topic));
        handle(self, &ev);
        event_clear(&ev);
    }
    zmsg_destroy(&m);
}

void events_on_reducer(reporter_t *self)
{
    ddp_msg_t m;
    uint64_t before = self->reducer_stats.rejected;
    if (proto_recv(zsock_resolve(self->reducer), NULL, &m, &self->reducer_stats) == 0)
        ddp_msg_clear(&m);   /* WELCOME: nothing to do */
    uint64_t rejected = self->reducer_stats.rejected - before;
    self->rejected += rejected;
    promstate_add_rejected(self->prom, rejected);
}
