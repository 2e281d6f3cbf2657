#include "reducerd/watchdog.h"

#include "common/clock.h"
#include "common/errbuf.h"
#include "common/log.h"
#include "reducerd/job.h"
#include "reducerd/publish.h"
#include "reducerd/membership.h"

#include <stdio.h>

void watchdog_check_liveness(reducer_t *self)
{
    /* training ranks wait for their gang without heartbeats: judge them
     * from the WELCOME on */
    if (self->options.train && !self->gang_formed)
        return;
    if (!self->options.train && !self->eval_started) /* so do eval's for --start-workers */
        return;
    int64_t now = clock_mono_ms();
    for (int i = 0; i < peers_count(self->peers) && !self->finished; i++) {
        peer_t *p = peers_at(self->peers, i);
        /* a joiner beats once it has a rank; its wait is bounded by the
         * admission's deadline and its own --join-timeout */
        if (p->role == DDP_ROLE_GPUD && !p->dead && !p->joining &&
            now - p->last_seen_ms > self->options.worker_timeout_s * 1000) {
            p->dead = true;
            log_warn("rank %d (%s) silent for %lds: declared dead%s", p->rank, p->name,
                     self->options.worker_timeout_s,
                     self->options.train ? "" : "; loaderd re-sends its batches");
            publish_log(self, "warn", "rank %d (%s) declared dead", p->rank, p->name);
            publish_worker(self, p, "dead");
            if (self->options.train)
                membership_rank_dead(self, p);
        }
    }
}

void watchdog_check_loaders(reducer_t *self, int64_t now_ms)
{
    if (self->finished || self->loader_shards <= 1)
        return; /* a lone loaderd may be restarted (trust.c); the stall rule bounds its wait */
    for (uint32_t i = 0; i < self->loader_shards; i++) {
        const loader_role_t *l = &self->loaders[i];
        int64_t silent = now_ms - l->last_seen_ms;
        if (!l->identity || silent <= self->options.worker_timeout_s * 1000)
            continue;
        char err[512];
        err_set(err, sizeof err, "loaderd %s (shard %u/%u) silent for %llds (--worker-timeout "
                 "%lds): it died or cannot reach reducerd, and its shard's samples cannot be "
                 "counted without it", l->name, i, self->loader_shards, (long long)silent / 1000,
                 self->options.worker_timeout_s);
        publish_log(self, "error", "%s", err);
        job_finish(self, 1, err);
        return;
    }
}

/* The shards no loaderd joined for, "1/3, 2/3" (empty: none missing). */
static void missing_shards(const reducer_t *self, char *buf, size_t cap)
{
    size_t off = 0;
    buf[0] = '\0';
    for (uint32_t i = 0; i < self->loader_shards && off + 24 < cap; i++)
        if (!self->loaders[i].identity)
            off += (size_t)snprintf(buf + off, cap - off, "%s%u/%u", off ? ", " : "", i,
                                    self->loader_shards);
}

/* Every live worker had its answers refused for classes outside the
 * dataset's and nothing moved for --worker-timeout: a model/dataset
 * mismatch, not noise; no worker is left whose answers can count (loaderd
 * gives refused workers no more batches), so waiting would only hang. A
 * worker refused while others count changes nothing. */
void watchdog_check_refused_workers(reducer_t *self, int64_t now_ms)
{
    /* runs after every message: the cheap test first, the peers only when quiet */
    if (now_ms - self->last_activity_ms <= self->options.worker_timeout_s * 1000)
        return;
    int live = 0, refused = 0;
    for (int i = 0; i < peers_count(self->peers); i++) {
        peer_t *p = peers_at(self->peers, i);
        if (p->role == DDP_ROLE_GPUD && !p->dead) {
            live++;
            refused += p->told_classes;
        }
    }
    if (live == 0 || refused < live)
        return;
    char err[1024];
    err_set(err, sizeof err, "every worker's answers were refused (%d of %d): %s", refused, live,
             self->class_mismatch_hint);
    log_error("%s", err);
    job_finish(self, 1, err);
}

/* No progress for --stall-timeout: fail, saying what is missing and why. */
void watchdog_check_stall(reducer_t *self, int64_t now_ms)
{
    if (self->options.stall_timeout_s <= 0 ||
        now_ms - self->last_activity_ms <= self->options.stall_timeout_s * 1000)
        return;
    char err[1536], what[512] = "no plan from loaderd yet (is loaderd running?)", missing[160];
    slot_t *slot = reducer_active_slot(self);
    missing_shards(self, missing, sizeof missing);
    if (slot)
        snprintf(what, sizeof what, "epoch %u %s has %llu of %llu samples accounted for%s%s%s",
                 slot_plan(slot)->epoch,
                 slot_plan(slot)->phase == DDP_PHASE_TRAIN ? "train" : "eval",
                 (unsigned long long)slot_accounted(slot),
                 (unsigned long long)slot_expected(slot),
                 missing[0] ? "; no loaderd joined for shard " : "", missing,
                 missing[0] ? " (is it running?)" : "");
    if (self->rejected_results)
        err_set(err, sizeof err, "no progress for %lds (--stall-timeout): %s; %llu RESULTs were "
                 "rejected (first: %s; latest: %s)", self->options.stall_timeout_s, what,
                 (unsigned long long)self->rejected_results,
                 self->first_rejected_result[0] ? self->first_rejected_result
                                                : "not from a joined rank",
                 self->last_rejected_result);
    else
        err_set(err, sizeof err, "no progress for %lds (--stall-timeout): %s; are loaderd and "
                 "the gpuds running and reachable?", self->options.stall_timeout_s, what);
    publish_log(self, "error", "%s", err);
    job_finish(self, 1, err);
}
