#include "reducerd/eval.h"

#include "common/clock.h"
#include "common/errbuf.h"
#include "common/log.h"
#include "reducerd/admission.h"
#include "reducerd/curves.h"
#include "reducerd/job.h"
#include "reducerd/publish.h"
#include "reducerd/trust.h"

#include <stdio.h>

/* A gpud proves the model it runs (docs/SECURITY.md "Job identity"): its
 * settings and weights' digest in JOIN `config`, which must equal the
 * first worker's; a refused one is counted with the rejected messages and
 * told why (STOP). A JOIN without one (not a ddpipe gpud) is taken only
 * while no worker has fixed the job's model. */
static bool model_ok(reducer_t *self, zframe_t *route, const ddp_join_t *join)
{
    if (!join->config[0] && !self->have_job_config) {
        log_warn("gpud %s proves no model (its JOIN has no weights digest): its results count "
                 "unchecked", join->name);
        return true;
    }
    if (join->config[0] && admission_config_ok(self, route, join))
        return true;
    if (!join->config[0]) {
        char err[DDP_MAX_STR];
        snprintf(err, sizeof err, "gpud %s refused: its JOIN proves no model (no weights digest) "
                 "and the job's is fixed; the job goes on without it", join->name);
        log_warn("%s", err);
        publish_log(self, "warn", "%s", err);
        job_stop_peer(self, route, 1, err);
    }
    self->stats.rejected++;
    return false;
}

static void welcome(reducer_t *self, const peer_t *p)
{
    long workers = self->options.workers;
    ddp_msg_t w = {.type = DDP_WELCOME};
    w.u.welcome.rank = p->rank;
    w.u.welcome.world = p->rank < workers ? (int32_t)workers : p->rank + 1;
    snprintf(w.u.welcome.job, sizeof w.u.welcome.job, "%s", self->options.job);
    trust_welcome_auth(self, &w.u.welcome, DDP_ROLE_GPUD, p->rank, p->name);
    reducer_send(self, p->identity, &w);
}

/* The held gpuds go together: each credits loaderd only once welcomed, so
 * none has taken a batch before the others could. */
static void start_workers(reducer_t *self)
{
    self->eval_started = true;
    int64_t now_ms = clock_mono_ms();
    for (int i = 0; i < peers_count(self->peers); i++) {
        peer_t *p = peers_at(self->peers, i);
        if (p->role != DDP_ROLE_GPUD || p->rank < 0)
            continue;
        p->last_seen_ms = now_ms; /* they waited without heartbeats */
        welcome(self, p);
    }
}

/* The gpuds the hold waits for: --start-workers less those that said they
 * could not start and have not joined since (a restart under the same
 * name), at least one. */
static long start_needed(reducer_t *self)
{
    long failed = 0;
    for (int i = 0; i < self->n_start_failed; i++) {
        const peer_t *p = peers_by_name(self->peers, self->start_failed[i]);
        failed += !p || p->role != DDP_ROLE_GPUD || p->dead;
    }
    long need = self->options.start_workers - failed;
    return need < 1 ? 1 : need;
}

void eval_on_failed_start(reducer_t *self)
{
    if (self->eval_started || self->finished || !self->eval_first_join_ms)
        return;
    int joined = peers_gpud_ranks(self->peers);
    if (joined < start_needed(self))
        return;
    log_info("%d of --start-workers %ld gpuds joined and the others could not start: they start "
             "now", joined, self->options.start_workers);
    start_workers(self);
}

/* A gpud gets its rank and the world once --start-workers gpuds joined
 * (at once with the default 1), every later one at its JOIN (the loader
 * and reporters just start). A name is a rank's: a second socket may take
 * it only once the first fell silent (a restarted gpud), never from a
 * live one. */
void eval_on_join(reducer_t *self, zframe_t *route, const ddp_join_t *join)
{
    char refused[DDP_MAX_STR];
    if (join->role == DDP_ROLE_LOADER &&
        !trust_loader_join(self, route, join, refused, sizeof refused)) {
        if (refused[0]) /* told, so it exits naming why instead of waiting for an ack */
            job_stop_peer(self, route, 1, refused);
        return;
    }
    if (join->role == DDP_ROLE_GPUD && !model_ok(self, route, join))
        return;
    peer_t *held = peers_by_name(self->peers, join->name);
    bool known = held != NULL;
    if (held && !zframe_eq(held->identity, route) && !held->dead &&
        clock_mono_ms() - held->last_seen_ms <= self->options.worker_timeout_s * 1000) {
        trust_reject(self, join->name, "JOIN", "the name is held by a live %s (rank %d)",
                     proto_role_name(held->role), held->rank);
        return;
    }
    peer_t *p = peers_join(self->peers, route, join);
    if (!p)
        return;
    long workers = self->options.workers;
    if (p->role == DDP_ROLE_GPUD) {
        if (self->eval_started || self->finished)
            welcome(self, p);
        else if (peers_gpud_ranks(self->peers) >= start_needed(self))
            start_workers(self);
        else if (!self->eval_first_join_ms)
            self->eval_first_join_ms = clock_mono_ms();
        if (!known)
            self->last_activity_ms = clock_mono_ms(); /* a new worker is progress */
    }
    log_info("%s %s joined from %s (pid %u)", proto_role_name(join->role), join->name, join->host,
             join->pid);
    if (p->role == DDP_ROLE_GPUD) {
        log_info("%s is rank %d of %ld", p->name, p->rank, workers);
        publish_worker(self, p, "joined");
        if (!self->eval_started && !self->finished && !known)
            log_info("%d of --start-workers %ld gpuds joined: they wait for the others (at most "
                     "--start-timeout %lds after the first)", peers_gpud_ranks(self->peers),
                     self->options.start_workers, self->options.start_timeout_s);
    }
    /* a late joiner (e.g. restarted by supervisord) after the end: tell it to go home */
    if (self->finished && p->role != DDP_ROLE_REPORTER)
        job_stop_peer(self, route, 0, "job already finished");
}

void eval_on_plan(reducer_t *self, zframe_t *route, ddp_plan_t *plan)
{
    slot_t *have = self->slot[DDP_PHASE_EVAL] ? self->slot[DDP_PHASE_EVAL]
                                              : self->slot[DDP_PHASE_TRAIN];
    if (have) {
        const ddp_plan_t *counting = slot_plan(have);
        if (plan->n != counting->n || plan->epoch != counting->epoch ||
            plan->num_classes != counting->num_classes) {
            char who[64];
            trust_peer_label(self, route, who, sizeof who);
            if (self->loader_shards > 1) {
                /* shards of different datasets: no union is exact, and the
                 * loaderd would re-send its plan for ever */
                char err[768];
                err_set(err, sizeof err, "loaderd %s plans %llu samples of %u classes, but the "
                         "job counts %llu of %u (the first plan): every loaderd of a sharded "
                         "dataset must scan the same data with the same --limit and --classes",
                         who, (unsigned long long)plan->n, plan->num_classes,
                         (unsigned long long)counting->n, counting->num_classes);
                publish_log(self, "error", "%s", err);
                job_finish(self, 1, err);
                return;
            }
            trust_reject(self, who, "PLAN", "a second, different plan (n=%llu, %u classes); a "
                         "restarted loaderd, and every loaderd of a sharded dataset, must plan "
                         "the same dataset", (unsigned long long)plan->n, plan->num_classes);
            return;
        }
        /* a restarted loader, or another shard's: the same plan, carry on */
        job_ack_plan(self, route);
        return;
    }
    slot_t *opened = plan->phase > DDP_PHASE_TRAIN ? NULL : reducer_open_slot(self, plan, true);
    if (!opened) {
        self->exit_code = 1;
        return;
    }
    if (self->options.probs && slot_enable_probs(opened, self->options.probs) < 0) {
        /* logged (e.g. more classes than the probability histograms take):
         * end now, not after every sample was computed for nothing */
        char err[256];
        err_set(err, sizeof err, "--probs %s: the probability metrics cannot be kept for "
                "%u classes (at most %u): drop --predictions probs/all", self->options.probs,
                plan->num_classes, CURVES_MAX_CLASSES);
        publish_log(self, "error", "%s", err);
        job_finish(self, 1, err);
        return;
    }
    job_ack_plan(self, route);
}

void eval_tick(reducer_t *self)
{
    if (!self->eval_started && self->eval_first_join_ms &&
        clock_mono_ms() - self->eval_first_join_ms >= self->options.start_timeout_s * 1000) {
        int joined = peers_gpud_ranks(self->peers);
        log_warn("only %d of --start-workers %ld gpuds joined within --start-timeout %lds of the "
                 "first: they start now, and later ones join as they come", joined,
                 self->options.start_workers, self->options.start_timeout_s);
        publish_log(self, "warn", "only %d of %ld gpuds joined within %lds: starting with them",
                    joined, self->options.start_workers, self->options.start_timeout_s);
        start_workers(self);
    }
    slot_t *slot = reducer_active_slot(self);
    if (!slot || !slot_complete(slot) || !job_reporter_listening(self))
        return;
    publish_progress(self); /* a last one at done == total for monitors and plots */
    publish_failed_files(self, slot);
    if (self->options.predictions)
        publish_predictions(self, slot);
    publish_metric(self, slot, true, NULL);
    job_finish(self, 0, "all samples accounted for");
}
