/* loaderd — scans the dataset, plans the epoch, decodes and transforms
 * images on a thread pool and hands uint8 batches to whichever gpud has
 * credit. A batch a dead worker never acked is decoded and sent again;
 * reducerd ignores what was already counted, so the count stays exact.
 *
 * With --train it drives the epochs of docs/TRAINING.md instead: every
 * global step's shards go to their ranks (training.c), then the
 * validation set goes out as in eval mode, then reducerd's EPOCH decides
 * whether another epoch follows.
 *
 * This file makes the state (loader.h lists the files above it) and runs
 * the loop.
 */
#include "common/clock.h"
#include "common/log.h"
#include "common/zsockopt.h"
#include "loaderd/loader.h"
#include "loaderd/options.h"
#include "loaderd/phases.h"
#include "loaderd/reducer_link.h"
#include "loaderd/workers.h"

/* Everything that queued up (a step can take a while to load): credits
 * and heartbeats are seen before the next reap, so a worker is never
 * declared dead for our own delay. Capped so sending is not starved. */
static void drain(loader_t *self)
{
    for (int i = 0; i < 1024; i++) {
        bool from_workers = zsock_events(self->router) & ZMQ_POLLIN;
        bool from_reducer = zsock_events(self->reducer) & ZMQ_POLLIN;
        if (!from_workers && !from_reducer)
            return;
        if (from_workers)
            workers_receive(self);
        if (from_reducer)
            reducer_link_receive(self);
    }
}

static int run(loader_t *self)
{
    zpoller_t *poller = zpoller_new(self->router, self->reducer, NULL);
    if (!poller)
        return 1;
    int64_t last_reap = clock_mono_ms();
    while (!self->stopped && !zs_interrupted()) {
        void *which = zpoller_wait(poller, phases_busy(self) ? 0 : 100);
        if (!which && zpoller_terminated(poller))
            break;
        drain(self);
        reducer_link_beat(self);
        int64_t now = clock_mono_ms();
        if (now - last_reap >= 250) {
            last_reap = now;
            workers_reap(self, now);
        }
        if (phases_advance(self) < 0) {
            self->exit_code = 1;
            break;
        }
    }
    zpoller_destroy(&poller);
    if (zs_interrupted())
        log_info("interrupted");
    return self->exit_code;
}

int main(int argc, char **argv)
{
    loader_options_t options;
    int rc = loader_options_parse(&options, argc, argv);
    if (rc != 0)
        return rc > 0 ? 0 : 2;
    log_init("loaderd", -1, options.verbose);
    zs_install_signals();
    loader_t *self = loader_new(&options);
    rc = !self || phases_start(self) < 0 ? 1 : run(self);
    static const loader_t none; /* a state that could not be made counts nothing */
    const loader_t *counts = self ? self : &none;
    log_info("exiting (%llu samples sent, %llu failed, %llu train shards lost, %llu messages, "
             "%llu rejected)", (unsigned long long)counts->sent_samples,
             (unsigned long long)counts->failed,
             (unsigned long long)(counts->dispatch ? dispatch_lost_train(counts->dispatch) : 0),
             (unsigned long long)counts->stats.received,
             (unsigned long long)counts->stats.rejected);
    loader_destroy(&self);
    return rc;
}
