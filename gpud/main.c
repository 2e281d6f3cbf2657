/* gpud — one compute worker: holds the model, asks loaderd for batches by
 * credit, runs forward, sends per-sample top-k and loss to reducerd (never
 * averages), and acks the batch to loaderd after the result is sent so a
 * crash between the two only causes a harmless duplicate.
 *
 * With --train (docs/TRAINING.md) it is one data-parallel rank: train
 * batches run a train step, the gradients are summed over the ranks' ring
 * and every rank takes the same optimizer step; EPOCH messages from
 * reducerd drive checkpoints and the end of the job.
 *
 * This file makes the state (gpud.h lists the files above it), starts the
 * actors and runs the loop.
 */
#include "common/log.h"
#include "common/zsockopt.h"
#include "gpud/eval.h"
#include "gpud/gpud.h"
#include "gpud/link.h"
#include "gpud/options.h"
#include "gpud/joining.h"
#include "gpud/train.h"
#include "gpud/train_ahead.h"
#include "gpud/model.h"

#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

/* The model, the training state, the sockets, JOIN, then the heartbeat
 * actor (it beats with the WELCOME's rank and token). */
static int start(gpud_t *self)
{
    if (gpud_load_model(self) < 0) {
        link_report_failed_start(self, self->start_error);
        return -1;
    }
    if (self->options.train && train_open(self) < 0)
        return -1;
    if (gpud_connect(self) < 0 || link_join(self) < 0 || joining_enter(self) < 0)
        return -1;
    return rank_state_ended(&self->state) ? 0 : gpud_start_heartbeat(self);
}

static int run(gpud_t *self)
{
    if ((self->train ? train_start(self) : eval_start(self)) < 0)
        return 1;
    /* IDLE before the first CREDIT: a re-form from here on credits again */
    if (rank_state_to(&self->state, RANK_IDLE, self->train ? "training" : "evaluating") < 0)
        return 1;
    if (gpud_send_credit(self, (uint32_t)self->options.window, NULL) < 0) {
        log_error("cannot ask loaderd for work: %s", zmq_strerror(zmq_errno()));
        return 1;
    }
    zpoller_t *poller = zpoller_new(self->reducer, self->heartbeat, NULL);
    for (int i = 0; poller && i < self->n_loaders; i++)
        zpoller_add(poller, self->loaders[i]);
    while (poller && !rank_state_ended(&self->state) && !zs_interrupted()) {
        /* a kept eval batch is answered as soon as nothing else waits; a
         * message a train step read ahead comes before the loaders' next */
        int kept = train_ahead_kept(self);
        void *which = zpoller_wait(poller, eval_pending(self) || kept ? 0 : 500);
        int from = -1;
        for (int i = 0; which && i < self->n_loaders; i++)
            from = which == self->loaders[i] ? i : from;
        if (which == self->reducer)
            link_on_reducer(self);
        else if (which == self->heartbeat)
            link_on_heartbeat(self);
        else if (kept)
            link_on_kept(self);
        else if (from >= 0)
            link_on_loader(self, from);
        else if (zpoller_terminated(poller))
            break;
        else
            link_on_idle(self);
        if (self->train)
            train_idle(self);
        gpud_tick(self);
    }
    zpoller_destroy(&poller);
    if (eval_pending(self) && eval_finish(self) < 0 && !self->exit_code)
        self->exit_code = 1;
    eval_drop(self);
    if (self->train && zs_interrupted())
        train_interrupted(self);
    return self->exit_code;
}

/* gpud --list-models: each architecture's card (gpud/model.h), tab-separated,
 * for `ddpipe models`. */
static int list_models(void)
{
    char err[512];
    model_card_t c;
    int rc;
    for (int i = 0; (rc = model_card(i, &c, err, sizeof err)) == 0; i++)
        printf("%s\t%lld\t%lld\t%d\t%d\t%d\t%d\t%d\n", c.name, (long long)c.params,
               (long long)c.buffers, c.in_channels, c.h, c.w, c.hw_fixed, c.num_classes);
    if (rc < 0)
        fprintf(stderr, "gpud: --list-models: %s\n", err);
    return rc < 0 || fflush(stdout) != 0 ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--list-models") == 0)
        return list_models();
    gpud_options_t options;
    int rc = gpud_options_parse(&options, argc, argv);
    if (rc != 0)
        return rc > 0 ? 0 : 2;
    log_init("gpud", -1, options.verbose);
    zs_install_signals();
    gpud_t *self = gpud_new(&options);
    if (!self)
        return 1;
    rc = start(self) < 0 ? 1 : rank_state_ended(&self->state) ? self->exit_code : run(self);
    rc = train_finish(self, rc);
    struct rusage ru;   /* the peak resident memory, for the operator (and bench/) */
    long peak_mb = getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_maxrss / 1024 : -1;
    log_info("exiting: %llu batches, %llu samples, %.2fs compute (%.1f img/s); %llu messages, "
             "%llu rejected; peak RSS %ld MB", (unsigned long long)atomic_load(&self->batches),
             (unsigned long long)self->samples, self->compute_s,
             self->compute_s > 0 ? self->samples / self->compute_s : 0.0,
             (unsigned long long)self->stats.received, (unsigned long long)self->stats.rejected,
             peak_mb);
    if (self->staged_ahead)
        log_info("%s: %llu of %llu batches staged while the one before ran",
                 self->train ? "train" : "eval", (unsigned long long)self->staged_ahead,
                 (unsigned long long)atomic_load(&self->batches));
    gpud_destroy(&self);
    return rc;
}
