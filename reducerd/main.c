/* reducerd — exact tally of per-sample results and the job's coordinator.
 *
 * Sockets: ROUTER --bind (JOIN, PLAN, RESULT, FAILED, HEARTBEAT, DONE in;
 * WELCOME, STOP out) and XPUB --pub (events to reporterd and monitors).
 * One epoch plan per job for eval: when every id of the plan has a result
 * or a failure, reducerd publishes the predictions, the final metric and
 * "end", tells every peer to stop, waits for reporterd's DONE and exits.
 * With --train it coordinates a training job instead (training.c).
 *
 * This file makes the state (reducer.h lists the files above it) and runs
 * the loop.
 */
#include "common/clock.h"
#include "common/log.h"
#include "common/zsockopt.h"
#include "reducerd/coordinator.h"
#include "reducerd/job.h"
#include "reducerd/membership.h"
#include "reducerd/options.h"
#include "reducerd/publish.h"
#include "reducerd/reducer.h"

static int run(reducer_t *self)
{
    zpoller_t *poller = zpoller_new(self->router, self->xpub, NULL);
    if (!poller) {
        log_error("cannot create a poller (out of memory?)");
        return 1;
    }
    self->last_activity_ms = clock_mono_ms();
    bool over = false;
    while (!over && !zs_interrupted()) {
        void *which = zpoller_wait(poller, 200);
        if (which == self->xpub) {
            if (publish_on_subscription(self))
                membership_replay(self);
        } else if (which != self->router && zpoller_terminated(poller))
            break;
        /* A readable router is drained (up to a burst) before the next
         * poll(2): one system call per burst, not per message, which was
         * ~10% of reducerd's CPU with small batches (bench/reducerd_load).
         * The tick still runs after every message. */
        bool more = which == self->router;
        int burst = 1024;
        do {
            more = more && coordinator_receive(self) && --burst > 0;
            int64_t now = clock_mono_ms();
            coordinator_tick(self, now);
            over = job_over(self, now);
        } while (more && !over);
    }
    if (zs_interrupted() && !self->finished) {
        log_warn("interrupted: stopping the job");
        job_finish(self, 130, "interrupted");
        self->exit_code = 130;
    }
    zpoller_destroy(&poller);
    return self->exit_code;
}

int main(int argc, char **argv)
{
    reducer_options_t options;
    int rc = reducer_options_parse(&options, argc, argv);
    if (rc != 0)
        return rc > 0 ? 0 : 2;
    log_init("reducerd", -1, options.verbose);
    zs_install_signals();
    reducer_t *self = reducer_new(&options);
    if (!self)
        return 1;
    if (options.train)
        log_info("listening on %s, publishing on %s: training %ld rank%s, epochs %ld..%ld, target "
                 "%g, patience %ld, streak %ld%s", options.bind, options.pub, options.workers,
                 options.workers == 1 ? "" : "s",
                 options.start_epoch, options.epochs - 1, options.target_accuracy,
                 options.patience, options.streak, options.no_val ? ", no validation" : "");
    else
        log_info("listening on %s, publishing on %s, expecting %ld worker%s", options.bind,
                 options.pub, options.workers, options.workers == 1 ? "" : "s");
    rc = run(self);
    log_info("exiting (%llu messages, %llu rejected); loaderd reported %llu rejected",
             (unsigned long long)self->stats.received, (unsigned long long)self->stats.rejected,
             (unsigned long long)reducer_loader_rejected(self));
    reducer_destroy(&self);
    return rc;
}
