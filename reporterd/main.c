/* reporterd — subscribes to reducerd's events, writes the run directory
 * (summary.json, CSVs, classification report, plots), re-publishes every
 * event on its tap for monitors (an XPUB that replays the last state to a
 * late subscriber), serves Prometheus metrics on --metrics-http, and tells
 * reducerd when the files are written. Nothing here blocks on a consumer:
 * the tap drops for a slow subscriber at its high-water mark and the HTTP
 * server has its own thread.
 *
 * This file makes the state (reporter.h lists the files above it) and runs
 * the loop. */
#include "common/log.h"
#include "common/zsockopt.h"
#include "reporterd/events.h"
#include "reporterd/options.h"
#include "reporterd/plot.h"
#include "reporterd/reporter.h"
#include "reporterd/tap.h"

/* Until the end event is handled or a signal comes; the exit status. */
static int run(reporter_t *self)
{
    zpoller_t *poller = zpoller_new(self->sub, self->reducer, NULL);
    if (!poller) {
        log_error("cannot create a poller (out of memory?)");
        return 1;
    }
    if (self->tap)
        zpoller_add(poller, self->tap);
    while (!self->done && !zs_interrupted()) {
        void *which = zpoller_wait(poller, 200);
        if (which == self->sub)
            events_receive(self);
        else if (self->tap && which == self->tap)
            tap_on_subscription(self);
        else if (which == self->reducer)
            events_on_reducer(self);
    }
    zpoller_destroy(&poller);
    if (!self->done)
        return 130;
    if (self->options.linger_s > 0)
        tap_linger(self);
    return self->exit_code;
}

int main(int argc, char **argv)
{
    reporter_options_t options;
    int rc = reporter_options_parse(&options, argc, argv);
    if (rc != 0)
        return rc > 0 ? 0 : 2;
    log_init("reporterd", -1, options.verbose);
    zs_install_signals();
    reporter_t *self = reporter_new(&options);
    rc = self ? run(self) : 1;
    if (self)
        log_info("exiting (%llu events, %llu rejected, %llu tap replays)",
                 (unsigned long long)self->events, (unsigned long long)self->rejected,
                 (unsigned long long)self->replays);
    reporter_destroy(&self);
    plot_shutdown();   /* fontconfig's caches, or LeakSanitizer reports them */
    return rc;
}
