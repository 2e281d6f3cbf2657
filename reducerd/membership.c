#include "reducerd/membership.h"

#include "common/clock.h"
#include "common/errbuf.h"
#include "common/log.h"
#include "reducerd/admission.h"
#include "reducerd/generation.h"
#include "reducerd/job.h"
#include "reducerd/publish.h"
#include "reducerd/results.h"
#include "reducerd/trust.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The formed event of generation 0's members. */
static void publish_formed(reducer_t *self)
{
    int32_t world = (int32_t)self->options.workers;
    int32_t *ranks = calloc((size_t)world, sizeof *ranks);
    char **names = calloc((size_t)world, sizeof *names);
    for (int32_t r = 0; ranks && names && r < world; r++) {
        ranks[r] = r;
        names[r] = peers_by_rank(self->peers, r)->name;
    }
    if (ranks && names)
        publish_membership(self, "formed", (uint32_t)world, ranks, names, false,
                           (uint64_t)self->options.start_step, self->epoch, "the gang formed");
    free(ranks);
    free(names);
}

void membership_replay(reducer_t *self)
{
    if (!self->formed_unheard || !self->elastic || self->elastic->gen != 0)
        return;
    self->formed_unheard = false;
    for (int32_t r = 0; r < (int32_t)self->options.workers; r++) {
        peer_t *p = peers_by_rank(self->peers, r);
        if (p)
            publish_worker(self, p, "joined");
    }
    publish_formed(self);
    log_debug("generation 0 formed before reporterd listened: its events published again");
}

void membership_start(reducer_t *self)
{
    int32_t world = (int32_t)self->options.workers;
    int32_t *ids = calloc((size_t)world, sizeof *ids);
    for (int32_t r = 0; ids && r < world; r++)
        ids[r] = peers_index_of(self->peers, peers_by_rank(self->peers, r));
    if (ids)
        self->elastic = elastic_new(world, ids, (uint64_t)self->options.start_step);
    if (self->elastic) {
        publish_formed(self);
        self->formed_unheard = self->reporters_subscribed == 0;
    } else {
        job_finish(self, 1, "out of memory forming the gang");
    }
    free(ids);
}

void membership_fence(reducer_t *self, zframe_t *route, peer_t *p, const char *kind)
{
    self->fenced_messages++;
    if (p->told_fenced) {
        log_debug("%s from %s, removed at generation %u: dropped", kind, p->name, p->removed_gen);
        return;
    }
    p->told_fenced = true;
    char reason[512];
    snprintf(reason, sizeof reason, "fenced: removed from the job at generation %u (it was rank "
             "%d, %s); nothing it sends counts", p->removed_gen, p->rank, p->name);
    log_warn("%s from %s: %s", kind, p->name, reason);
    job_stop_peer(self, route, 1, reason);
}

/* ---- deciding ---- */

/* The epoch of the step in flight: a report says it; else the epoch being
 * trained, or the next one once its train tally is complete. */
static uint32_t epoch_in_flight(const reducer_t *self)
{
    if (self->elastic->reports)
        return self->elastic->step_epoch;
    const slot_t *train = self->slot[DDP_PHASE_TRAIN];
    return train && slot_complete(train) ? self->epoch + 1 : self->epoch;
}

/* The --pause-at-step test hook: the same ranks in a new, paused
 * generation, until one more rank joined (a scale-up at a known step). */
static void pause_hook(reducer_t *self, uint64_t step, uint32_t epoch)
{
    elastic_t *e = self->elastic;
    bool *none = calloc((size_t)e->world, sizeof *none);
    int32_t *map = calloc((size_t)e->world, sizeof *map);
    char reason[256] = "--pause-at-step (a test hook)";
    self->options.pause_at_step = -1;   /* once */
    if (!none || !map) {
        job_finish(self, 1, "out of memory pausing the job");
    } else {
        elastic_change(e, none, map);
        admission_pause(self, e->world + 1, step, epoch, reason, sizeof reason);
        generation_announce(self, step, epoch, reason);
        admission_pump(self);
    }
    free(none);
    free(map);
}

static void commit(reducer_t *self)
{
    elastic_t *e = self->elastic;
    ddp_msg_t m = {.type = DDP_COMMIT};
    m.u.commit = (ddp_commit_t){.gen = e->gen, .epoch = e->step_epoch, .step = e->step};
    elastic_commit(e);
    /* the step's RESULTs count now: every member sent them before its STEP */
    pending_item_t item;
    while (pending_pop(self->pending, m.u.commit.step, &item)) {
        results_count_committed(self, peers_at(self->peers, item.id), &item.res, item.labels);
        pending_item_free(&item);
    }
    /* the --pause-at-step hook pauses after the step before; else a joiner
     * that waits enters now: rank 0 sends its state once it applied the step */
    bool hook = self->options.pause_at_step >= 0 && !self->paused &&
                (uint64_t)self->options.pause_at_step == m.u.commit.step + 1;
    bool snapshot = !hook && admission_begin(self, m.u.commit.step, m.u.commit.epoch);
    for (int32_t r = 0; r < e->world; r++) {
        m.u.commit.snapshot = r == 0 && snapshot;
        reducer_send(self, generation_member(self, r)->identity, &m);
    }
    m.u.commit.snapshot = 0;
    reducer_send_loaders(self, &m);
    log_debug("generation %u: step %" PRIu64 " of epoch %u committed", m.u.commit.gen,
              m.u.commit.step, m.u.commit.epoch);
    if (hook)
        pause_hook(self, m.u.commit.step + 1, m.u.commit.epoch);
}

/* Below --min-workers: the job fails as it always did on a dead rank. */
static void fail_below_min(reducer_t *self, const peer_t *p, int32_t left)
{
    char err[1024];
    err_set(err, sizeof err, "rank %d (%s) died at epoch %u step %llu; resume with ddpipe train "
             "--resume %s", p->rank, p->name, self->epoch,
             (unsigned long long)(self->have_step ? self->last_step : 0), job_resume_dir(self));
    log_error("%d rank%s would be left, fewer than --min-workers %ld", left, left == 1 ? "" : "s",
              self->options.min_workers);
    publish_log(self, "error", "%s", err);
    job_finish(self, 1, err);
}

/* Why rank r is lost, from the reports of the step in flight. */
static void cause_of(reducer_t *self, int32_t r, char *buf, size_t cap)
{
    const elastic_t *e = self->elastic;
    if (e->dead[r]) {
        snprintf(buf, cap, "silent for more than %lds (--worker-timeout)",
                 self->options.worker_timeout_s);
        return;
    }
    for (int32_t s = 0; s < e->world; s++)
        if (e->report[s] == ELASTIC_FAILED && e->suspect[s] == r) {
            snprintf(buf, cap, "rank %d timed out waiting for it in the ring%s", s,
                     e->report[r] != ELASTIC_NONE ? " (the first broken link)" : "");
            return;
        }
    snprintf(buf, cap, "lost");
}

/* The lost ranks leave: renumbered survivors, dropped uncommitted RESULTs,
 * issued batches following their rank, MEMBERS, the event. */
static void change(reducer_t *self, const bool *lost)
{
    elastic_t *e = self->elastic;
    int32_t old_world = e->world, nlost = 0, first = -1;
    for (int32_t r = 0; r < old_world; r++)
        if (lost[r]) {
            nlost++;
            first = first < 0 ? r : first;
        }
    int32_t left = old_world - nlost;
    if (left < self->options.min_workers && (left < 1 || !self->options.rejoin_timeout_s)) {
        fail_below_min(self, generation_member(self, first), left);
        return;
    }
    uint64_t step = elastic_next_step(e);
    uint32_t epoch = epoch_in_flight(self);
    const slot_t *train = self->slot[DDP_PHASE_TRAIN];
    int32_t *map = calloc((size_t)old_world, sizeof *map), *ranks = calloc((size_t)nlost, sizeof *ranks);
    char **names = calloc((size_t)nlost, sizeof *names);
    if (!map || !ranks || !names) {
        job_finish(self, 1, "out of memory re-forming the ring");
        free(map), free(ranks), free(names);
        return;
    }
    char reason[1024] = "", cause[160];
    size_t off = 0;
    for (int32_t r = 0, i = 0; r < old_world; r++) {
        if (!lost[r])
            continue;
        peer_t *p = generation_member(self, r);
        cause_of(self, r, cause, sizeof cause);
        off += (size_t)snprintf(reason + off, off < sizeof reason ? sizeof reason - off : 0,
                                "%srank %d (%s) lost: %s", i ? "; " : "", r, p->name, cause);
        ranks[i] = r;
        names[i++] = p->name;
        p->removed = true;
        p->removed_gen = e->gen + 1;
        if (!p->dead)
            publish_worker(self, p, "dead");
        p->dead = true;
    }
    elastic_change(e, lost, map);
    for (int32_t r = 0; r < e->world; r++) {
        peer_t *p = generation_member(self, r);
        p->prev_rank = p->rank;
        p->rank = r;
    }
    size_t dropped = pending_drop_after(self->pending, e->have_committed, e->committed);
    self->stale_messages += issued_renumber(self->issued, map, old_world);
    bool redone = dropped || (train && !slot_complete(train));
    admission_cancel(self, "a rank was lost");
    if (left < self->options.min_workers)   /* too few: wait for joiners */
        admission_pause(self, (int32_t)self->options.min_workers, step, epoch, reason,
                        sizeof reason);
    generation_announce(self, step, epoch, reason);
    self->ranks_lost += (uint32_t)nlost;
    self->steps_redone += redone;
    self->last_activity_ms = clock_mono_ms();
    log_warn("generation %u: %s; %d rank%s go on%s", e->gen, reason, e->world,
             e->world == 1 ? "" : "s", redone ? ", redoing the interrupted step" : "");
    publish_log(self, "warn", "generation %u: %s; the survivors continue with %d rank%s from "
                "step %llu", e->gen, reason, e->world, e->world == 1 ? "" : "s",
                (unsigned long long)step);
    publish_membership(self, "lost", (uint32_t)nlost, ranks, names, redone, step, epoch, reason);
    admission_pump(self);   /* a joiner may be waiting already */
    free(map);
    free(ranks);
    free(names);
}

void membership_decide(reducer_t *self)
{
    while (!self->finished && self->elastic) {
        bool *lost = calloc((size_t)self->elastic->world, sizeof *lost);
        if (!lost) {
            job_finish(self, 1, "out of memory judging the ranks");
            return;
        }
        elastic_verdict_t v = elastic_judge(self->elastic, lost);
        if (v == ELASTIC_COMMIT && admission_holds(self)) {
            free(lost);   /* the joiner enters first; this step is then redone */
            return;
        }
        if (v == ELASTIC_COMMIT)
            commit(self);
        else if (v == ELASTIC_CHANGE)
            change(self, lost);
        free(lost);
        if (v == ELASTIC_STUCK) {
            char err[1024];
            err_set(err, sizeof err, "step %llu of epoch %u: the ring failed on every rank and "
                     "none could name a silent one; resume with ddpipe train --resume %s",
                     (unsigned long long)self->elastic->step, self->elastic->step_epoch,
                     job_resume_dir(self));
            publish_log(self, "error", "%s", err);
            job_finish(self, 1, err);
        }
        if (v == ELASTIC_WAIT || v == ELASTIC_STUCK)
            return;
    }
}

void membership_rank_dead(reducer_t *self, peer_t *p)
{
    if (!self->elastic)
        return;
    int32_t r = elastic_rank_of(self->elastic, peers_index_of(self->peers, p));
    if (r < 0)
        return;
    elastic_dead(self->elastic, r);
    membership_decide(self);
}

/* A STEP from the socket that holds its rank in the current generation,
 * with its token; else rejected (or, of an older generation, dropped). */
static bool step_trusted(reducer_t *self, zframe_t *route, const ddp_step_t *st)
{
    peer_t *p = peers_by_identity(self->peers, route);
    char who[64];
    trust_peer_label(self, route, who, sizeof who);
    if (!p || p->role != DDP_ROLE_GPUD || !self->elastic) {
        trust_reject(self, who, "STEP", "not from a rank of a formed training gang");
        return false;
    }
    if (reducer_stale_gen(self, st->gen, p->name, "STEP"))
        return false;
    if (st->gen > self->elastic->gen || st->rank != p->rank) {
        trust_reject(self, who, "STEP", "claims rank %d of generation %u but this socket holds "
                     "rank %d of generation %u", st->rank, st->gen, p->rank, self->elastic->gen);
        return false;
    }
    if (!trust_auth_ok(self, &st->auth, DDP_ROLE_GPUD, p->rank, p->name)) {
        trust_reject(self, who, "STEP", "missing or wrong job/session token");
        return false;
    }
    p->last_seen_ms = clock_mono_ms();
    return true;
}

void membership_on_step(reducer_t *self, zframe_t *route, const ddp_step_t *st)
{
    if (self->finished || !step_trusted(self, route, st))
        return;
    char err[256];
    if (elastic_report(self->elastic, st->rank, st->step, st->epoch, st->status, st->suspect, err,
                       sizeof err) < 0) {
        trust_reject(self, generation_member(self, st->rank)->name, "STEP", "%s", err);
        return;
    }
    if (st->status != DDP_STEP_SUMMED) {
        char suspect[48] = "";
        if (st->suspect >= 0)
            snprintf(suspect, sizeof suspect, ": rank %d was silent", st->suspect);
        log_warn("rank %d (%s): its ring failed at step %llu%s", st->rank,
                 generation_member(self, st->rank)->name, (unsigned long long)st->step, suspect);
    }
    membership_decide(self);
}
