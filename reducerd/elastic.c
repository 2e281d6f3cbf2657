#include "reducerd/elastic.h"
#include "common/errbuf.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* The per-rank arrays of a generation of `world` ranks; 0 or -1 (OOM). */
static int alloc_ranks(elastic_t *self, int32_t world)
{
    size_t n = (size_t)world;
    self->member = calloc(n, sizeof *self->member);
    self->report = calloc(n, sizeof *self->report);
    self->suspect = calloc(n, sizeof *self->suspect);
    self->order = calloc(n, sizeof *self->order);
    self->dead = calloc(n, sizeof *self->dead);
    return self->member && self->report && self->suspect && self->order && self->dead ? 0 : -1;
}

static void free_ranks(elastic_t *self)
{
    free(self->member);
    free(self->report);
    free(self->suspect);
    free(self->order);
    free(self->dead);
}

/* A new step in flight: nobody has reported it. */
static void clear_reports(elastic_t *self)
{
    for (int32_t r = 0; r < self->world; r++) {
        self->report[r] = ELASTIC_NONE;
        self->suspect[r] = -1;
        self->order[r] = 0;
    }
    self->reports = 0;
}

elastic_t *elastic_new(int32_t world, const int32_t *member, uint64_t first_step)
{
    if (world < 1 || world > DDP_MAX_WORLD)
        return NULL;
    elastic_t *self = calloc(1, sizeof *self);
    if (!self || alloc_ranks(self, world) < 0) {
        if (self)
            free_ranks(self);
        free(self);
        return NULL;
    }
    self->world = world;
    memcpy(self->member, member, (size_t)world * sizeof *member);
    self->step = first_step;
    clear_reports(self);
    return self;
}

void elastic_destroy(elastic_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    free_ranks(*self_p);
    free(*self_p);
    *self_p = NULL;
}

int32_t elastic_rank_of(const elastic_t *self, int32_t id)
{
    for (int32_t r = 0; r < self->world; r++)
        if (self->member[r] == id)
            return r;
    return -1;
}

int elastic_report(elastic_t *self, int32_t rank, uint64_t step, uint32_t epoch, uint8_t status,
                   int32_t suspect, char *err, size_t errlen)
{
    if (rank < 0 || rank >= self->world) {
        err_set(err, errlen, "rank %" PRId32 " is not a member of generation %" PRIu32
                 " (world %" PRId32 ")", rank, self->gen, self->world);
        return -1;
    }
    /* before the first commit the first report names the run's first step */
    if (!self->step_known && !self->have_committed && self->reports == 0) {
        self->step = step;
        self->step_known = true;
    }
    if (step != self->step) {
        err_set(err, errlen, "step %" PRIu64 " is not the step in flight (%" PRIu64 ")", step,
                 self->step);
        return -1;
    }
    if (self->report[rank] != ELASTIC_NONE) {
        err_set(err, errlen, "rank %" PRId32 " reported step %" PRIu64 " twice", rank, step);
        return -1;
    }
    self->step_epoch = epoch;
    self->report[rank] = status == DDP_STEP_SUMMED ? ELASTIC_SUMMED : ELASTIC_FAILED;
    /* a suspect outside the generation blames nobody */
    self->suspect[rank] = status != DDP_STEP_SUMMED && suspect >= 0 && suspect < self->world &&
                                  suspect != rank
                              ? suspect
                              : -1;
    self->order[rank] = ++self->reports;
    return 0;
}

void elastic_dead(elastic_t *self, int32_t rank)
{
    if (rank >= 0 && rank < self->world)
        self->dead[rank] = true;
}

/* Every rank reported or is suspected by a failed report: the reports say
 * all that can be said. suspected[] gets who is suspected. */
static bool covered(const elastic_t *self, bool *suspected)
{
    memset(suspected, 0, (size_t)self->world * sizeof *suspected);
    for (int32_t r = 0; r < self->world; r++)
        if (self->report[r] == ELASTIC_FAILED && self->suspect[r] >= 0)
            suspected[self->suspect[r]] = true;
    for (int32_t r = 0; r < self->world; r++)
        if (self->report[r] == ELASTIC_NONE && !suspected[r])
            return false;
    return true;
}

/* Everyone reported: the suspect of the earliest failed report that names one. */
static int32_t first_suspect(const elastic_t *self)
{
    int32_t best = -1;
    uint32_t best_order = UINT32_MAX;
    for (int32_t r = 0; r < self->world; r++)
        if (self->report[r] == ELASTIC_FAILED && self->suspect[r] >= 0 &&
            self->order[r] < best_order) {
            best_order = self->order[r];
            best = self->suspect[r];
        }
    return best;
}

elastic_verdict_t elastic_judge(const elastic_t *self, bool *lost)
{
    int32_t world = self->world, summed = 0, ndead = 0;
    memset(lost, 0, (size_t)world * sizeof *lost);
    for (int32_t r = 0; r < world; r++) {
        summed += self->report[r] == ELASTIC_SUMMED;
        ndead += self->dead[r];
    }
    /* every member holds the sum (each sent its RESULTs before its STEP):
     * commit first, even if one of them died since */
    if (summed == world)
        return ELASTIC_COMMIT;
    if (ndead) {
        memcpy(lost, self->dead, (size_t)world * sizeof *lost);
        return ELASTIC_CHANGE;
    }
    if (!covered(self, lost))
        return ELASTIC_WAIT;
    bool any = false;
    for (int32_t r = 0; r < world; r++) {
        lost[r] = lost[r] && self->report[r] == ELASTIC_NONE; /* suspected, silent */
        any |= lost[r];
    }
    if (any)
        return ELASTIC_CHANGE;
    int32_t s = first_suspect(self);
    if (s < 0)
        return ELASTIC_STUCK;
    lost[s] = true;
    return ELASTIC_CHANGE;
}

void elastic_commit(elastic_t *self)
{
    self->committed = self->step;
    self->have_committed = true;
    self->step = self->committed + 1;
    self->step_known = true;
    clear_reports(self);
}

int32_t elastic_change(elastic_t *self, const bool *lost, int32_t *map)
{
    int32_t w = 0;
    for (int32_t r = 0; r < self->world; r++) {
        map[r] = lost[r] ? -1 : w;
        if (!lost[r])
            self->member[w++] = self->member[r];
    }
    /* the arrays keep their size: W' <= W */
    self->world = w;
    self->gen++;
    memset(self->dead, 0, (size_t)w * sizeof *self->dead);
    clear_reports(self);
    return w;
}

int32_t elastic_grow(elastic_t *self, int32_t id)
{
    if (self->world >= DDP_MAX_WORLD)
        return -1;
    elastic_t bigger = *self;
    if (alloc_ranks(&bigger, self->world + 1) < 0) {
        free_ranks(&bigger);
        return -1;
    }
    memcpy(bigger.member, self->member, (size_t)self->world * sizeof *self->member);
    free_ranks(self);
    *self = bigger;
    self->member[self->world] = id;
    self->world++;
    self->gen++;
    clear_reports(self);   /* dead[] is zeroed by calloc: nobody is dead yet */
    return self->world - 1;
}

uint64_t elastic_next_step(const elastic_t *self)
{
    return self->have_committed ? self->committed + 1 : self->step;
}

bool elastic_is_committed(const elastic_t *self, uint64_t step)
{
    return self->have_committed && step <= self->committed;
}

/* ---- pending ---- */

struct pending {
    pending_item_t *v;
    size_t n, cap;
};

pending_t *pending_new(void) { return calloc(1, sizeof(pending_t)); }

void pending_item_free(pending_item_t *item)
{
    ddp_msg_t m = {.type = DDP_RESULT};
    m.u.result = item->res;
    ddp_msg_clear(&m);
    free(item->labels);
    memset(item, 0, sizeof *item);
}

void pending_destroy(pending_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    pending_t *self = *self_p;
    for (size_t i = 0; i < self->n; i++)
        pending_item_free(&self->v[i]);
    free(self->v);
    free(self);
    *self_p = NULL;
}

int pending_add(pending_t *self, int32_t id, ddp_result_t *res, int32_t **labels)
{
    if (self->n >= PENDING_MAX)
        return -1;
    if (self->n == self->cap) {
        size_t cap = self->cap ? self->cap * 2 : 16;
        pending_item_t *p = realloc(self->v, cap * sizeof *p);
        if (!p)
            return -1;
        self->v = p;
        self->cap = cap;
    }
    self->v[self->n++] = (pending_item_t){.step = res->step, .id = id, .res = *res,
                                          .labels = *labels};
    res->ids = NULL;
    res->labels = NULL;
    res->topk = NULL;
    res->loss = NULL;
    res->probs = NULL;
    res->failed = NULL;   /* --wire jpeg: the rows gpud could not decode, counted at COMMIT */
    res->why = NULL;
    res->nwhy = 0;
    *labels = NULL;
    return 0;
}

bool pending_pop(pending_t *self, uint64_t upto, pending_item_t *out)
{
    for (size_t i = 0; i < self->n; i++) {
        if (self->v[i].step <= upto) {
            *out = self->v[i];
            memmove(&self->v[i], &self->v[i + 1], (self->n - i - 1) * sizeof *out);
            self->n--;
            return true;
        }
    }
    return false;
}

size_t pending_drop_after(pending_t *self, bool have_c, uint64_t c)
{
    size_t kept = 0, n = self->n;
    for (size_t i = 0; i < n; i++) {
        if (!have_c || self->v[i].step > c)
            pending_item_free(&self->v[i]);
        else
            self->v[kept++] = self->v[i]; /* in arrival order */
    }
    self->n = kept;
    return n - kept;
}

size_t pending_count(const pending_t *self) { return self->n; }
