#include "loaderd/dispatch.h"

#include "common/clock.h"
#include "common/log.h"

#include <stdlib.h>
#include <string.h>

#define MAX_WORKERS 4096

typedef struct {
    char name[64];
    zframe_t *identity;
    uint32_t credits;
    int64_t last_seen_ms;
    int32_t rank;              /* training: the rank its CREDITs name; -1 none */
    uint32_t gen;              /* training: the generation of its CREDITs */
    bool dead;
    bool lost_eval;            /* eval batches of it were re-queued while it was dead */
    bool banned;               /* reducerd refused its answer: no more batches */
    int64_t last_ack_ms;       /* its last ack: a batch's deadline runs from here */
    double batch_ms;           /* moving average of its answer times (0: none yet) */
} worker_t;

typedef struct {
    uint64_t seq;
    batch_range_t range;
    int worker;                /* index into workers */
    bool train;                /* a train shard: never re-queued */
    int64_t sent_ms;
} flight_t;

struct dispatch {
    uint64_t n;
    uint32_t batch_size;
    int64_t timeout_ms;
    uint64_t next_first;       /* next fresh range starts here */
    batch_range_t *requeue;    /* ranges of dead workers, sent before fresh ones */
    size_t n_requeue, cap_requeue;
    flight_t *flights;
    size_t n_flights, cap_flights;
    flight_t *answered;        /* acked eval batches of this plan (a REISSUE may want one back) */
    size_t n_answered, cap_answered;
    flight_t *overdue;         /* eval batches of this plan re-queued from a worker declared
                                * dead: its late answer still tells its answer time */
    size_t n_overdue, cap_overdue;
    size_t n_train_flights;    /* of n_flights */
    worker_t workers[MAX_WORKERS];
    int n_workers;
    uint64_t next_seq;
    uint64_t requeued;
    uint64_t lost_train;
    uint32_t gen;              /* training: the current membership generation */
};

dispatch_t *dispatch_new(uint64_t n, uint32_t batch_size, int64_t worker_timeout_ms)
{
    dispatch_t *self = calloc(1, sizeof *self);
    if (!self)
        return NULL;
    self->n = n;
    self->batch_size = batch_size;
    self->timeout_ms = worker_timeout_ms;
    self->next_seq = 1;
    return self;
}

void dispatch_set_seq_base(dispatch_t *self, uint64_t first) { self->next_seq = first; }

void dispatch_destroy(dispatch_t **self)
{
    if (!self || !*self)
        return;
    for (int i = 0; i < (*self)->n_workers; i++)
        zframe_destroy(&(*self)->workers[i].identity);
    free((*self)->requeue);
    free((*self)->flights);
    free((*self)->answered);
    free((*self)->overdue);
    free(*self);
    *self = NULL;
}

static int find_worker(dispatch_t *self, const char *name)
{
    for (int i = 0; i < self->n_workers; i++)
        if (strcmp(self->workers[i].name, name) == 0)
            return i;
    return -1;
}

static int push_requeue(dispatch_t *self, batch_range_t r)
{
    if (self->n_requeue == self->cap_requeue) {
        size_t cap = self->cap_requeue ? self->cap_requeue * 2 : 16;
        batch_range_t *p = realloc(self->requeue, cap * sizeof *p);
        if (!p)
            return -1;
        self->requeue = p;
        self->cap_requeue = cap;
    }
    self->requeue[self->n_requeue++] = r;
    return 0;
}

static void drop_flight(dispatch_t *self, size_t i)
{
    if (self->flights[i].train)
        self->n_train_flights--;
    self->flights[i] = self->flights[--self->n_flights];
}

/* Append a copy of f to a list kept until the next plan (false: out of
 * memory, logged; the copy is only lost, nothing else goes wrong). */
static bool keep_flight(flight_t **list, size_t *n, size_t *cap, const flight_t *f)
{
    if (*n == *cap) {
        size_t grown = *cap ? *cap * 2 : 64;
        flight_t *p = realloc(*list, grown * sizeof *p);
        if (!p) {
            log_error("out of memory remembering batch %llu", (unsigned long long)f->seq);
            return false;
        }
        *list = p;
        *cap = grown;
    }
    (*list)[(*n)++] = *f;
    return true;
}

/* Eval batches of dead worker W go back to the queue; its train shards
 * cannot (the other ranks' halves of the step are already computed), so
 * they are only counted and logged. */
static void requeue_worker(dispatch_t *self, int w)
{
    uint64_t lost = 0;
    for (size_t i = 0; i < self->n_flights;) {
        if (self->flights[i].worker == w) {
            if (self->flights[i].train) {
                lost++;
            } else {
                if (push_requeue(self, self->flights[i].range) < 0)
                    log_error("out of memory re-queueing a batch; the job will stall");
                keep_flight(&self->overdue, &self->n_overdue, &self->cap_overdue,
                            &self->flights[i]);
                self->requeued++;
                self->workers[w].lost_eval = true;
            }
            drop_flight(self, i);
        } else {
            i++;
        }
    }
    if (lost) {
        log_error("worker %s (rank %d) died with %llu train shards in flight: reducerd decides "
                  "whether the survivors go on (their step is then sent again) or the job stops",
                  self->workers[w].name, self->workers[w].rank, (unsigned long long)lost);
        self->lost_train += lost;
    }
}

/* A worker's answer time for batch f (from when it was sent, or from the
 * worker's previous answer if later: it computes its batches in turn). */
static void note_answer_time(worker_t *wk, const flight_t *f, int64_t now_ms)
{
    int64_t from = f->sent_ms > wk->last_ack_ms ? f->sent_ms : wk->last_ack_ms;
    double t = now_ms > from ? (double)(now_ms - from) : 0.0;
    wk->batch_ms = wk->batch_ms > 0 ? 0.75 * wk->batch_ms + 0.25 * t : t;
    wk->last_ack_ms = now_ms;
}

static int64_t answer_deadline_ms(const dispatch_t *self, int w);

/* Worker w answered batch seq after it was declared dead and the batch
 * re-queued: it is slow, not gone. Its answer time counts, so its next
 * deadline (timeout + 4x that time) fits its speed; without this a model
 * slower than --worker-timeout per batch would lose every batch it gets. */
static bool late_ack(dispatch_t *self, int w, uint64_t seq)
{
    for (size_t i = 0; i < self->n_overdue; i++) {
        flight_t *f = &self->overdue[i];
        if (f->seq != seq || f->worker != w)
            continue;
        worker_t *wk = &self->workers[w];
        note_answer_time(wk, f, clock_mono_ms());
        log_warn("worker %s answered batch %llu late: its answer deadline is now %lld ms",
                 wk->name, (unsigned long long)seq, (long long)answer_deadline_ms(self, w));
        *f = self->overdue[--self->n_overdue];
        return true;
    }
    return false;
}

static void ack(dispatch_t *self, int w, uint64_t seq)
{
    for (size_t i = 0; i < self->n_flights; i++) {
        if (self->flights[i].seq == seq) {
            if (self->flights[i].worker != w) {
                log_warn("%s acked batch %llu of another worker: ignored", self->workers[w].name,
                         (unsigned long long)seq);
            } else {
                /* kept: reducerd may refuse the answer (REISSUE) */
                if (!self->flights[i].train)
                    keep_flight(&self->answered, &self->n_answered, &self->cap_answered,
                                &self->flights[i]);
                note_answer_time(&self->workers[w], &self->flights[i], clock_mono_ms());
                drop_flight(self, i);
            }
            return;
        }
    }
    if (late_ack(self, w, seq))
        return;
    log_debug("%s acked unknown batch %llu (already re-queued?)", self->workers[w].name,
              (unsigned long long)seq);
}

void dispatch_credit(dispatch_t *self, zframe_t *identity, const char *name, uint32_t credits,
                     const uint64_t *acks, uint32_t n_acks)
{
    dispatch_credit_gen(self, identity, name, credits, acks, n_acks, self->gen);
}

void dispatch_credit_gen(dispatch_t *self, zframe_t *identity, const char *name,
                         uint32_t credits, const uint64_t *acks, uint32_t n_acks, uint32_t gen)
{
    int w = find_worker(self, name);
    if (w < 0) {
        if (self->n_workers >= MAX_WORKERS) {
            log_error("more than %d workers: ignoring %s", MAX_WORKERS, name);
            return;
        }
        w = self->n_workers++;
        memset(&self->workers[w], 0, sizeof self->workers[w]);
        self->workers[w].rank = -1;
        self->workers[w].gen = gen;
        snprintf(self->workers[w].name, sizeof self->workers[w].name, "%s", name);
        log_info("worker %s connected", name);
    }
    worker_t *wk = &self->workers[w];
    if (gen < wk->gen || gen < self->gen) {
        log_debug("a CREDIT of generation %u from %s ignored: stale (generation %u)", gen, name,
                  wk->gen > self->gen ? wk->gen : self->gen);
        return;
    }
    if (gen > wk->gen) {   /* its credits of the generation before went with that one */
        wk->gen = gen;
        wk->credits = 0;
    }
    if (!wk->identity || !zframe_eq(wk->identity, identity)) {
        zframe_destroy(&wk->identity);
        wk->identity = zframe_dup(identity);
    }
    if (wk->dead && (wk->banned || (wk->lost_eval && n_acks == 0))) {
        /* a worker that lost batches by not answering comes back only
         * with an answer (an ack), never by asking for more */
        wk->last_seen_ms = clock_mono_ms();
        return;
    }
    if (wk->dead) {
        /* it came back (e.g. a network blip) after its batches were re-queued:
         * whatever it still answers is a harmless duplicate at reducerd */
        log_warn("worker %s is back after being declared dead", name);
        wk->dead = false;
        /* a worker that lost nothing (training: its shards are not taken
         * away) keeps its credit count, or it would starve */
        if (wk->lost_eval)
            wk->credits = 0;
        wk->lost_eval = false;
    }
    for (uint32_t i = 0; i < n_acks; i++)
        ack(self, w, acks[i]);
    /* cap credits: a bad or buggy worker must not make us buffer unboundedly */
    wk->credits = wk->credits + credits > 64 ? 64 : wk->credits + credits;
    wk->last_seen_ms = clock_mono_ms();
}

void dispatch_heartbeat(dispatch_t *self, const char *name)
{
    int w = find_worker(self, name);
    if (w >= 0)
        self->workers[w].last_seen_ms = clock_mono_ms();
}

/* A worker's first batch also builds its model's primitives, and nobody
 * knows its speed yet: before any worker has answered, it gets this many
 * timeouts (a job of slow batches on a small box otherwise loses, and
 * recomputes, its whole first round). */
#define COLD_TIMEOUTS 3

/* How long worker w may take for a batch: the timeout plus four times its
 * usual answer time, so a model slower than --worker-timeout per batch is
 * not dropped batch after batch; before its first answer, the slowest
 * other worker's answer time stands in (the same model and batch size),
 * and before anyone's, COLD_TIMEOUTS x the timeout. Answers (acks) alone
 * set it, never heartbeats, so it stays finite for a worker that stops
 * answering. */
static int64_t answer_deadline_ms(const dispatch_t *self, int w)
{
    double t = self->workers[w].batch_ms;
    if (t <= 0)   /* no answer of its own yet */
        for (int i = 0; i < self->n_workers; i++)
            t = self->workers[i].batch_ms > t ? self->workers[i].batch_ms : t;
    if (t <= 0)
        return COLD_TIMEOUTS * self->timeout_ms;
    return self->timeout_ms + (int64_t)(4.0 * t);
}

int64_t dispatch_answer_deadline_ms(dispatch_t *self, const char *name)
{
    int w = find_worker(self, name);
    return w < 0 ? -1 : answer_deadline_ms(self, w);
}

/* The oldest eval batch of worker w has waited past its deadline for an
 * answer: from when it was sent, or from w's last ack if later (a worker
 * computes its batches one after the other). Heartbeats do not count. */
static bool overdue(const dispatch_t *self, int w, int64_t now_ms, int64_t *waited)
{
    for (size_t i = 0; i < self->n_flights; i++) {
        const flight_t *f = &self->flights[i];
        if (f->worker != w || f->train)
            continue;
        int64_t from = f->sent_ms > self->workers[w].last_ack_ms ? f->sent_ms
                                                                 : self->workers[w].last_ack_ms;
        if (now_ms - from > answer_deadline_ms(self, w)) {
            *waited = now_ms - from;
            return true;
        }
    }
    return false;
}

int dispatch_reap(dispatch_t *self, int64_t now_ms)
{
    int died = 0;
    for (int w = 0; w < self->n_workers; w++) {
        worker_t *wk = &self->workers[w];
        int64_t waited = 0;
        if (!wk->dead && overdue(self, w, now_ms, &waited)) {
            wk->dead = true;
            size_t before = self->n_requeue;
            requeue_worker(self, w);
            log_warn("worker %s has not answered a batch for %lld ms (heartbeats do not count): "
                     "declared dead, %zu batches re-queued to the others", wk->name, (long long)waited,
                     self->n_requeue - before);
            died++;
            continue;
        }
        if (!wk->dead && now_ms - wk->last_seen_ms > self->timeout_ms) {
            wk->dead = true;
            size_t before = self->n_requeue;
            requeue_worker(self, w);
            log_warn("worker %s silent for %lld ms: declared dead, %zu batches re-queued", wk->name,
                     (long long)(now_ms - wk->last_seen_ms), self->n_requeue - before);
            died++;
        }
    }
    return died;
}

bool dispatch_pop(dispatch_t *self, batch_range_t *out)
{
    if (self->n_requeue) {
        *out = self->requeue[--self->n_requeue];
        return true;
    }
    if (self->next_first >= self->n)
        return false;
    out->first = self->next_first;
    uint64_t left = self->n - self->next_first;
    out->count = left < self->batch_size ? (uint32_t)left : self->batch_size;
    self->next_first += out->count;
    return true;
}

const char *dispatch_ready_worker(dispatch_t *self, zframe_t **identity)
{
    /* the worker with most free credits first: spreads load, a slow worker
     * (few credits back) gets less */
    int best = -1;
    for (int w = 0; w < self->n_workers; w++) {
        worker_t *wk = &self->workers[w];
        if (!wk->dead && wk->credits > 0 && (best < 0 || wk->credits > self->workers[best].credits))
            best = w;
    }
    if (best < 0)
        return NULL;
    *identity = self->workers[best].identity;
    return self->workers[best].name;
}

static uint64_t record_flight(dispatch_t *self, const char *name, batch_range_t r, bool train)
{
    int w = find_worker(self, name);
    if (self->n_flights == self->cap_flights) {
        size_t cap = self->cap_flights ? self->cap_flights * 2 : 64;
        flight_t *p = realloc(self->flights, cap * sizeof *p);
        if (!p) {
            log_error("out of memory tracking batches in flight");
            return 0;
        }
        self->flights = p;
        self->cap_flights = cap;
    }
    uint64_t seq = self->next_seq++;
    self->flights[self->n_flights++] =
        (flight_t){.seq = seq, .range = r, .worker = w, .train = train, .sent_ms = clock_mono_ms()};
    self->n_train_flights += train;
    if (w >= 0 && self->workers[w].credits > 0)
        self->workers[w].credits--;
    return seq;
}

uint64_t dispatch_sent(dispatch_t *self, const char *name, batch_range_t r)
{
    return record_flight(self, name, r, false);
}

uint64_t dispatch_sent_train(dispatch_t *self, const char *name)
{
    return record_flight(self, name, (batch_range_t){0, 0}, true);
}

uint64_t dispatch_lost_train(const dispatch_t *self) { return self->lost_train; }

uint32_t dispatch_gen(const dispatch_t *self) { return self->gen; }

void dispatch_set_gen(dispatch_t *self, uint32_t gen)
{
    if (gen < self->gen)
        return;
    self->gen = gen;
    for (int w = 0; w < self->n_workers; w++) {
        worker_t *wk = &self->workers[w];
        if (wk->gen < gen) {   /* it has not spoken in this generation yet */
            wk->credits = 0;
            wk->rank = -1;
        }
    }
    for (size_t i = 0; i < self->n_flights;) {
        if (self->flights[i].train)
            drop_flight(self, i);
        else
            i++;
    }
}

int dispatch_replan(dispatch_t *self, uint64_t n, uint32_t batch_size)
{
    if (!dispatch_all_acked(self))
        return -1;
    self->n = n;
    self->batch_size = batch_size;
    self->next_first = 0;
    self->n_answered = 0;
    self->n_overdue = 0;
    return 0;
}

int dispatch_reissue(dispatch_t *self, uint64_t seq, bool ban)
{
    flight_t f;
    bool found = false;
    for (size_t i = 0; i < self->n_flights && !found; i++) {
        if (self->flights[i].seq == seq && !self->flights[i].train) {
            f = self->flights[i];
            drop_flight(self, i);
            found = true;
        }
    }
    for (size_t i = 0; i < self->n_answered && !found; i++) {
        if (self->answered[i].seq == seq) {
            f = self->answered[i];
            self->answered[i] = self->answered[--self->n_answered];
            found = true;
        }
    }
    if (!found)
        return -1;
    if (push_requeue(self, f.range) < 0) {
        log_error("out of memory re-queueing batch %llu", (unsigned long long)seq);
        return -1;
    }
    self->requeued++;
    if (ban && f.worker >= 0 && f.worker < self->n_workers) {
        worker_t *wk = &self->workers[f.worker];
        if (!wk->banned)
            log_warn("worker %s (rank %d) gets no more batches: reducerd refused its answer",
                     wk->name, wk->rank);
        wk->banned = true;
        wk->dead = true;
        requeue_worker(self, f.worker);
    }
    return 0;
}

int32_t dispatch_worker_rank(dispatch_t *self, const char *name)
{
    int w = find_worker(self, name);
    return w < 0 ? -1 : self->workers[w].rank;
}

void dispatch_set_rank(dispatch_t *self, const char *name, int32_t rank)
{
    int w = find_worker(self, name);
    if (w < 0 || self->workers[w].rank == rank)
        return;
    /* A worker of a newer generation holds the rank (its CREDIT came before
     * loaderd's MEMBERS): a late CREDIT of the generation before (the lost
     * rank's last words) must not take it back. Seen under load in
     * loaderd.train: the survivor lost its rank and the job stalled. */
    for (int o = 0; o < self->n_workers; o++)
        if (o != w && self->workers[o].rank == rank &&
            self->workers[o].gen > self->workers[w].gen) {
            log_debug("rank %d stays with %s (generation %u), not %s (generation %u)", rank,
                      self->workers[o].name, self->workers[o].gen, name, self->workers[w].gen);
            return;
        }
    for (int o = 0; o < self->n_workers; o++) {
        if (o != w && self->workers[o].rank == rank) {
            if (self->workers[o].gen >= self->workers[w].gen)   /* else: renumbered */
                log_warn("rank %d moves from worker %s to %s (a restarted gpud?)", rank,
                         self->workers[o].name, name);
            self->workers[o].rank = -1;
        }
    }
    if (self->workers[w].rank >= 0)
        log_info("worker %s changes its rank from %d to %d (generation %u)", name,
                 self->workers[w].rank, rank, self->workers[w].gen);
    self->workers[w].rank = rank;
    log_info("worker %s is rank %d", name, rank);
}

const char *dispatch_rank_worker(dispatch_t *self, int32_t rank, zframe_t **identity, bool *alive,
                                 uint32_t *credits)
{
    for (int w = 0; w < self->n_workers; w++) {
        worker_t *wk = &self->workers[w];
        if (wk->rank == rank && rank >= 0 && wk->gen == self->gen) {
            *identity = wk->identity;
            *alive = !wk->dead;
            *credits = wk->credits;
            return wk->name;
        }
    }
    return NULL;
}

size_t dispatch_in_flight(const dispatch_t *self) { return self->n_flights; }

bool dispatch_all_sent(const dispatch_t *self)
{
    return self->n_requeue == 0 && self->next_first >= self->n;
}

bool dispatch_all_acked(const dispatch_t *self)
{
    /* train shards in flight do not hold up the validation's END */
    return dispatch_all_sent(self) && self->n_flights == self->n_train_flights;
}

int dispatch_live_workers(const dispatch_t *self)
{
    int n = 0;
    for (int w = 0; w < self->n_workers; w++)
        n += !self->workers[w].dead;
    return n;
}

uint64_t dispatch_requeued(const dispatch_t *self) { return self->requeued; }

zframe_t *dispatch_worker_identity(dispatch_t *self, int i, bool *alive)
{
    if (i < 0 || i >= self->n_workers)
        return NULL;
    *alive = !self->workers[i].dead;
    return self->workers[i].identity;
}
