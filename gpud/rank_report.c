/* rank_report — see rank_report.h. */
#include "gpud/rank_report.h"

#include "common/clock.h"
#include "common/log.h"
#include "common/zsockopt.h"
#include "proto/wire.h"

#include <stdio.h>
#include <string.h>

void rank_report_done(gpud_t *self, int code, const char *reason)
{
    if (self->rank != 0 || !self->reducer)
        return;
    ddp_msg_t m = {.type = DDP_DONE};
    m.u.done.code = code;
    snprintf(m.u.done.reason, sizeof m.u.done.reason, "%s", reason);
    if (proto_send(zsock_resolve(self->reducer), NULL, &m) < 0)
        log_error("cannot tell reducerd (DONE %d): %s", code, zmq_strerror(zmq_errno()));
}

void rank_report_write_failed(gpud_t *self, const char *what, const char *why, const char *err,
                              char *reason, size_t cap)
{
    char good[1200];
    if (self->train->good_step >= 0)
        snprintf(good, sizeof good, "the last good checkpoint is %s (epoch %lld, step %lld)",
                 self->options.checkpoint, (long long)self->train->good_epoch,
                 (long long)self->train->good_step);
    else
        snprintf(good, sizeof good, "no checkpoint of this run was written");
    snprintf(reason, cap, "rank 0: %s (%s) not written: %s; %s", what, why, err, good);
    log_error("%s", reason);
}

/* Reads reducerd (and the heartbeat's STOPs) until STOP, at most until
 * deadline_ms; what else comes is of a job that ends here: dropped. */
static void await_stop(gpud_t *self, int64_t deadline_ms)
{
    zpoller_t *poller = gpud_reducer_poller(self);
    while (poller && !rank_state_ended(&self->state) && !zs_interrupted() &&
           clock_mono_ms() < deadline_ms) {
        ddp_msg_t m;
        if (!gpud_poll_reducer(self, poller, 200, &m))
            continue;
        if (m.type == DDP_STOP)
            gpud_stop(self, &m.u.stop);
        else
            log_debug("%s from reducerd while the job stops: dropped", proto_type_name(m.type));
        ddp_msg_clear(&m);
    }
    zpoller_destroy(&poller);
}

void rank_report_nonfinite(gpud_t *self, uint64_t step, const char *err, bool checkpoint)
{
    char reason[DDP_MAX_STR];
    snprintf(reason, sizeof reason, "rank %d: step %llu: %s%s: the model diverged, stopping "
             "(docs/TRAINING.md \"Non-finite values\"; %s)", self->rank, (unsigned long long)step,
             err, checkpoint ? "" : " after the optimizer step",
             checkpoint ? "resume with --resume and a lower --lr"
                        : "the last checkpoint is the one to resume from, with a lower --lr");
    log_error("%s", reason);
    self->train->checkpoint_on_exit = checkpoint;   /* of the last completed step */
    rank_report_done(self, DDP_STOP_NONFINITE, reason);
    /* every rank found the same tensor: each waits for reducerd to end the
     * job, so none exits as if it alone had failed */
    await_stop(self, clock_mono_ms() + gpud_commit_timeout_ms(self));
    if (!rank_state_ended(&self->state))
        log_error("reducerd did not end the job within --commit-timeout: stopping");
    rank_state_end(&self->state, RANK_STOPPED, "a non-finite step");
    self->exit_code = DDP_STOP_NONFINITE;
}
