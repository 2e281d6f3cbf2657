#include "reducerd/admission.h"

#include "common/clock.h"
#include "common/log.h"
#include "reducerd/generation.h"
#include "reducerd/job.h"
#include "reducerd/publish.h"
#include "reducerd/trust.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* ---- the job's settings ---- */

/* The value of `flag` in a config ("--lr 0.1 --sync-bn ..."): 1 with the
 * value in val ("" for a flag without one), 0 when absent. */
static int config_value(const char *config, const char *flag, char *val, size_t cap)
{
    size_t n = strlen(flag);
    for (const char *p = config; (p = strstr(p, flag)) != NULL; p += n) {
        if ((p != config && p[-1] != ' ') || (p[n] != ' ' && p[n] != '\0'))
            continue;
        const char *v = p + n + (p[n] == ' ');
        size_t len = strncmp(v, "--", 2) == 0 ? 0 : strcspn(v, " ");
        snprintf(val, cap, "%.*s", (int)len, v);
        return 1;
    }
    return 0;
}

/* The flags of b whose value differs in a (or that a lacks), as
 * "--lr 0.2 (the job's: 0.1)"; then those a has and b lacks. */
static void config_diff(const char *a, const char *b, char *out, size_t cap)
{
    size_t off = 0;
    out[0] = '\0';
    for (int pass = 0; pass < 2; pass++) {
        const char *from = pass ? a : b, *other = pass ? b : a;
        for (const char *p = from; (p = strstr(p, "--")) != NULL; p += 2) {
            if (p != from && p[-1] != ' ')
                continue;
            char flag[64], va[256], vb[256];
            snprintf(flag, sizeof flag, "%.*s", (int)strcspn(p, " "), p);
            config_value(from, flag, va, sizeof va);
            int has = config_value(other, flag, vb, sizeof vb);
            if (has && (pass || strcmp(va, vb) == 0))
                continue;
            int k = pass ? snprintf(out + off, cap - off, "%s%s%s%s missing (the job has it)",
                                    off ? "; " : "", flag, va[0] ? " " : "", va)
                         : snprintf(out + off, cap - off, "%s%s%s%s (the job's: %s)",
                                    off ? "; " : "", flag, va[0] ? " " : "", va,
                                    has ? (vb[0] ? vb : "set") : "not given");
            if (k < 0 || (size_t)k >= cap - off)
                return;
            off += (size_t)k;
        }
    }
}

static void refuse(reducer_t *self, zframe_t *route, const char *name, const char *why)
{
    char err[DDP_MAX_STR];
    /* a long peer name or reason is cut, the message stays one line */
    if (snprintf(err, sizeof err, "gpud %s refused: %s; the job goes on without it", name,
                 why) >= (int)sizeof err)
        err[sizeof err - 2] = '.';
    log_warn("%s", err);
    publish_log(self, "warn", "%s", err);
    self->joins_refused++;
    job_stop_peer(self, route, 1, err);
}

bool admission_config_ok(reducer_t *self, zframe_t *route, const ddp_join_t *join)
{
    if (!self->have_job_config) {
        snprintf(self->job_config, sizeof self->job_config, "%s", join->config);
        self->have_job_config = true;
        return true;
    }
    if (strcmp(self->job_config, join->config) == 0)
        return true;
    char diff[2048], why[DDP_MAX_STR];
    config_diff(self->job_config, join->config, diff, sizeof diff);
    snprintf(why, sizeof why, "its settings differ from the job's: %s", diff[0] ? diff : "?");
    refuse(self, route, join->name, why);
    return false;
}

/* ---- the queue ---- */

static void welcome_joiner(reducer_t *self, const peer_t *p)
{
    ddp_msg_t w = {.type = DDP_WELCOME};
    ddp_welcome_t *m = &w.u.welcome;
    m->rank = -1;
    m->world = self->elastic->world;
    m->train = 1;
    m->joining = 1;
    m->gen = self->elastic->gen;
    snprintf(m->job, sizeof m->job, "%s", self->options.job);
    trust_welcome_auth(self, m, DDP_ROLE_GPUD, -1, p->name);
    reducer_send(self, p->identity, &w);
}

static int max_world(const reducer_t *self)
{
    return (int)(self->options.max_workers ? self->options.max_workers : self->options.workers);
}

static int queued(reducer_t *self)
{
    int n = 0;
    for (int i = 0; i < peers_count(self->peers); i++) {
        const peer_t *p = peers_at(self->peers, i);
        n += p->joining && !p->dead;
    }
    return n;
}

void admission_on_join(reducer_t *self, zframe_t *route, const ddp_join_t *join)
{
    peer_t *known = peers_by_name(self->peers, join->name);
    if (known && known->joining && !known->dead) {
        welcome_joiner(self, known);   /* it asked again before our WELCOME came */
        return;
    }
    char why[512];
    if (!join->ring[0]) {
        refuse(self, route, join->name, "it joined a training job without --train");
        return;
    }
    for (int32_t r = 0; r < self->elastic->world; r++)
        if (strcmp(generation_member(self, r)->ring, join->ring) == 0) {
            snprintf(why, sizeof why, "its ring endpoint %s is rank %d's: give it its own "
                     "--ring-bind", join->ring, r);
            refuse(self, route, join->name, why);
            return;
        }
    if (!admission_config_ok(self, route, join))
        return;
    if (self->elastic->world + queued(self) >= max_world(self)) {
        int world = self->elastic->world, waiting = queued(self);
        snprintf(why, sizeof why, "the job is full: %d rank%s train%s, %d wait%s to join "
                 "(reducerd --max-workers %d)", world, world == 1 ? "" : "s", world == 1 ? "s" : "",
                 waiting, waiting == 1 ? "s" : "", max_world(self));
        refuse(self, route, join->name, why);
        return;
    }
    peer_t *p = peers_join(self->peers, route, join);
    if (!p)
        return;
    p->rank = -1;
    p->joining = true;
    welcome_joiner(self, p);
    admission_pump(self);
    log_info("gpud %s joins the running job from %s (pid %u); it enters at the next step "
             "boundary", p->name, p->host, join->pid);
    publish_log(self, "info", "gpud %s joins the running job; it enters at the next step "
                "boundary", p->name);
}

/* ---- one admission ---- */

static peer_t *joiner(reducer_t *self)
{
    return self->admit.peer >= 0 ? peers_at(self->peers, self->admit.peer) : NULL;
}

static peer_t *rank0(reducer_t *self)
{
    return generation_member(self, 0);
}

/* The first queued joiner's admission at step; false when none waits. */
static bool start(reducer_t *self, uint64_t step, uint32_t epoch)
{
    for (int i = 0; i < peers_count(self->peers); i++) {
        peer_t *p = peers_at(self->peers, i);
        if (!p->joining || p->dead)
            continue;
        self->admit.peer = i;
        self->admit.state_sent = false;
        self->admit.step = step;
        self->admit.epoch = epoch;
        self->admit.deadline_ms = clock_mono_ms() + self->options.worker_timeout_s * 1000;
        log_info("admitting gpud %s at step %" PRIu64 ": asking rank 0 (%s) for the state",
                 p->name, step, rank0(self)->name);
        return true;
    }
    return false;
}

bool admission_begin(reducer_t *self, uint64_t step, uint32_t epoch)
{
    const slot_t *train = self->slot[DDP_PHASE_TRAIN];
    if (self->paused || self->admit.peer >= 0 || !train || slot_complete(train) ||
        self->elastic->world >= max_world(self))
        return false;   /* one at a time, inside a train phase, with room */
    return start(self, step + 1, epoch);
}

void admission_pump(reducer_t *self)
{
    if (!self->paused || self->finished || self->admit.peer >= 0 ||
        self->elastic->world >= max_world(self) || !start(self, self->pause_step, self->pause_epoch))
        return;
    /* nobody trains: rank 0 answers at once with the committed state */
    ddp_msg_t m = {.type = DDP_STATE};
    m.u.state = (ddp_state_t){.gen = self->elastic->gen, .epoch = self->pause_epoch,
                              .step = self->pause_step};
    reducer_send(self, rank0(self)->identity, &m);
}

void admission_pause(reducer_t *self, int32_t until_world, uint64_t step, uint32_t epoch,
                     char *reason, size_t cap)
{
    self->paused = true;
    self->pause_until_world = until_world;
    self->pause_step = step;
    self->pause_epoch = epoch;
    self->pause_deadline_ms = clock_mono_ms() + self->options.rejoin_timeout_s * 1000;
    size_t len = strlen(reason);
    snprintf(reason + len, cap - len, "; paused with %d rank%s until %d train: waiting up to "
             "%lds (--rejoin-timeout) for gpuds to join (gpud --join)", self->elastic->world,
             self->elastic->world == 1 ? "" : "s", until_world, self->options.rejoin_timeout_s);
    log_warn("generation %u: %s", self->elastic->gen, reason);
    publish_log(self, "warn", "generation %u: %s", self->elastic->gen, reason);
}

bool admission_holds(const reducer_t *self)
{
    return self->admit.peer >= 0;
}

void admission_cancel(reducer_t *self, const char *why)
{
    peer_t *p = joiner(self);
    if (!p)
        return;
    log_warn("admission of gpud %s put off (%s): it waits for a later step", p->name, why);
    self->admit.peer = -1;
}

/* The joiner failed its admission: it leaves the queue and the job. */
static void send_away(reducer_t *self, peer_t *p, const char *why)
{
    char err[512];
    snprintf(err, sizeof err, "not admitted: %s", why);
    log_warn("gpud %s %s", p->name, err);
    publish_log(self, "warn", "gpud %s %s", p->name, err);
    p->joining = false;
    p->dead = true;
    p->removed = true;
    p->removed_gen = self->elastic->gen;
    p->told_fenced = true;   /* the STOP below is its answer */
    job_stop_peer(self, p->identity, 1, err);
}

/* The joiner holds the state: the next generation takes it in. */
static void admit(reducer_t *self, peer_t *p)
{
    elastic_t *e = self->elastic;
    bool redone = e->reports > 0 || pending_count(self->pending) > 0;
    int32_t rank = elastic_grow(e, peers_index_of(self->peers, p));
    self->admit.peer = -1;
    if (rank < 0) {
        send_away(self, p, "out of memory (or the largest world) growing the ring");
        return;
    }
    p->joining = false;
    p->prev_rank = -1;
    p->rank = rank;
    p->last_seen_ms = clock_mono_ms();
    pending_drop_after(self->pending, e->have_committed, e->committed);
    char reason[256];
    snprintf(reason, sizeof reason, "rank %d (%s) joined", rank, p->name);
    if (self->paused && e->world >= self->pause_until_world) {
        self->paused = false;
        snprintf(reason + strlen(reason), sizeof reason - strlen(reason), "; training resumes");
    }
    generation_announce(self, self->admit.step, self->admit.epoch, reason);
    self->ranks_joined++;
    self->steps_redone += redone;
    self->last_activity_ms = clock_mono_ms();
    const char *ranks = e->world == 1 ? "rank goes" : "ranks go";
    log_warn("generation %u: %s; %d %s on from step %" PRIu64 "%s", e->gen, reason, e->world, ranks,
             self->admit.step, redone ? ", redoing the step in flight" : "");
    publish_log(self, "warn", "generation %u: %s; %d %s on from step %llu", e->gen, reason,
                e->world, ranks, (unsigned long long)self->admit.step);
    publish_worker(self, p, "joined");
    char *names[1] = {p->name};
    publish_membership(self, "joined", 1, &rank, names, redone, self->admit.step,
                       self->admit.epoch, reason);
    admission_pump(self);   /* still paused: the next joiner */
}

/* rank 0's state, for the joiner; else a STATE nobody asked for. */
static bool forward_state(reducer_t *self, peer_t *from, ddp_state_t *st, char *why, size_t cap)
{
    peer_t *p = joiner(self);
    if (!p || self->admit.state_sent || from != rank0(self) || !st->image) {
        snprintf(why, cap, "no state was asked of this peer");
        return false;
    }
    if (st->gen != self->elastic->gen || st->step != self->admit.step ||
        !trust_auth_ok(self, &st->auth, DDP_ROLE_GPUD, 0, from->name)) {
        snprintf(why, cap, "generation %u step %" PRIu64 " or its token is not what was asked "
                 "(generation %u step %" PRIu64 ")", st->gen, st->step, self->elastic->gen,
                 self->admit.step);
        return false;
    }
    ddp_msg_t m = {.type = DDP_STATE};
    m.u.state = (ddp_state_t){.gen = st->gen, .epoch = st->epoch, .step = st->step,
                              .image = st->image};
    self->admit.epoch = st->epoch;
    reducer_send(self, p->identity, &m);
    self->admit.state_sent = true;
    log_info("state of step %" PRIu64 " (%zu bytes) passed on to gpud %s", st->step,
             zframe_size(st->image), p->name);
    return true;
}

void admission_on_state(reducer_t *self, zframe_t *route, ddp_state_t *st)
{
    peer_t *from = peers_by_identity(self->peers, route);
    char who[64], why[256] = "";
    trust_peer_label(self, route, who, sizeof who);
    if (self->finished || !self->elastic || !from || from->role != DDP_ROLE_GPUD) {
        trust_reject(self, who, "STATE", "not from a rank of a running training job");
        return;
    }
    peer_t *p = joiner(self);
    if (st->image) {
        if (!forward_state(self, from, st, why, sizeof why))
            trust_reject(self, who, "STATE", "%s", why);
        return;
    }
    if (from != p || !self->admit.state_sent || st->step != self->admit.step ||
        !trust_auth_ok(self, &st->auth, DDP_ROLE_GPUD, -1, from->name)) {
        trust_reject(self, who, "STATE", "an answer nobody waits for (or without its token)");
        return;
    }
    admit(self, p);
}

/* Paused past --rejoin-timeout: the job stops, resumable. */
static void pause_expired(reducer_t *self)
{
    char err[1024];
    snprintf(err, sizeof err, "only %d rank%s train, fewer than the %d the job waits for, and "
             "no gpud joined within --rejoin-timeout %lds; resume with ddpipe train --resume %s",
             self->elastic->world, self->elastic->world == 1 ? "" : "s",
             self->pause_until_world, self->options.rejoin_timeout_s, job_resume_dir(self));
    log_error("%s", err);
    publish_log(self, "error", "%s", err);
    job_finish(self, 1, err);
}

bool admission_tick(reducer_t *self, int64_t now_ms)
{
    if (self->paused) {
        self->last_activity_ms = now_ms;   /* a pause is bounded by --rejoin-timeout */
        if (now_ms >= self->pause_deadline_ms && self->admit.peer < 0) {
            pause_expired(self);
            return false;
        }
    }
    peer_t *p = joiner(self);
    if (!p || now_ms < self->admit.deadline_ms)
        return false;
    char why[256];
    snprintf(why, sizeof why, "%s within %lds (--worker-timeout)",
             self->admit.state_sent ? "it did not load the state" : "rank 0 sent no state",
             self->options.worker_timeout_s);
    self->admit.peer = -1;
    send_away(self, p, why);
    if (!self->paused)
        return true;               /* the step held for it may commit now */
    admission_pump(self);          /* the next joiner, if any */
    return false;
}
