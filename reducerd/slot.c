#include "reducerd/slot.h"

#include <stdlib.h>
#include <string.h>

#include "common/log.h"

struct slot {
    ddp_plan_t plan;        /* owns class_names and paths */
    tally_t *tally;
    uint64_t expected;      /* n - skip */
    double t_start, t_done; /* t_done 0 while counting */
    double t_first;         /* the first RESULT that counted a sample; 0 before */
    uint64_t n_first;       /* the samples it counted */
    double lr;              /* the epoch's lr (RESULT lr; 0 absent) */
    double loss_scale;      /* fp16: the loss scale of the RESULT of the last step */
    uint64_t skipped_steps; /* fp16: the largest RESULT skipped_steps (a running count) */
    uint64_t last_step;
    bool have_step;
    char **fail_reason;     /* n, sparse: "path\treason" per failed id */
    uint64_t failed;
    uint32_t world;
    uint64_t *rank_n;       /* world: samples computed by rank r */
    double *rank_compute_s; /* world: its compute seconds */
    double *rank_ips;       /* world: scratch for slot_fill_metric */
};

static void s_free_plan(ddp_plan_t *plan)
{
    ddp_msg_t m = {.type = DDP_PLAN};
    m.u.plan = *plan;
    ddp_msg_clear(&m);
    memset(plan, 0, sizeof *plan);
}

slot_t *slot_new(ddp_plan_t *plan, bool keep_predictions, uint32_t world, double now_s)
{
    /* top-k as gpud sends it: k = min(classes, DDP_MAX_K) */
    uint32_t k = plan->num_classes < DDP_MAX_K ? plan->num_classes : DDP_MAX_K;
    if (plan->skip > plan->n) {
        log_error("plan of epoch %u skips %llu of %llu samples: a resumed loaderd must skip at "
                  "most the epoch", plan->epoch, (unsigned long long)plan->skip,
                  (unsigned long long)plan->n);
        return NULL;
    }
    slot_t *self = calloc(1, sizeof *self);
    if (!self)
        goto oom;
    self->tally = tally_new(plan->epoch, plan->phase, plan->n, plan->num_classes, k, keep_predictions);
    self->fail_reason = calloc(plan->n ? plan->n : 1, sizeof(char *));
    self->world = world;
    self->rank_n = calloc(world ? world : 1, sizeof(uint64_t));
    self->rank_compute_s = calloc(world ? world : 1, sizeof(double));
    self->rank_ips = calloc(world ? world : 1, sizeof(double));
    if (!self->tally || !self->fail_reason || !self->rank_n || !self->rank_compute_s ||
        !self->rank_ips)
        goto oom;
    self->expected = plan->n - plan->skip;
    self->t_start = now_s;
    self->plan = *plan; /* take ownership of the arrays */
    memset(plan, 0, sizeof *plan);
    return self;
oom:
    log_error("out of memory for a plan of %llu samples", (unsigned long long)plan->n);
    if (self)
        self->plan.n = 0; /* no fail_reason entries to free */
    slot_destroy(&self);
    return NULL;
}

void slot_destroy(slot_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    slot_t *self = *self_p;
    if (self->fail_reason)
        for (uint64_t i = 0; i < self->plan.n; i++)
            free(self->fail_reason[i]);
    free(self->fail_reason);
    s_free_plan(&self->plan);
    tally_destroy(&self->tally);
    free(self->rank_n);
    free(self->rank_compute_s);
    free(self->rank_ips);
    free(self);
    *self_p = NULL;
}

const ddp_plan_t *slot_plan(const slot_t *self) { return &self->plan; }
const tally_t *slot_tally(const slot_t *self) { return self->tally; }

int slot_enable_probs(slot_t *self, const char *mode)
{
    uint32_t nc = self->plan.num_classes, k = nc < DDP_MAX_K ? nc : DDP_MAX_K;
    return tally_enable_probs(self->tally, strcmp(mode, "all") == 0 ? nc : k);
}
uint64_t slot_expected(const slot_t *self) { return self->expected; }
uint64_t slot_accounted(const slot_t *self) { return tally_accounted(self->tally); }
bool slot_complete(const slot_t *self) { return tally_accounted(self->tally) >= self->expected; }
uint64_t slot_failed(const slot_t *self) { return self->failed; }

void slot_restart_clock(slot_t *self, double now_s)
{
    if (self->t_done == 0) {
        self->t_start = now_s;
        self->t_first = 0;   /* a result before the restart is not this clock's first */
        self->n_first = 0;
    }
}

/* Stop the clock the moment the last expected sample is counted. */
static void s_mark_done(slot_t *self, double now_s)
{
    if (self->t_done == 0 && slot_complete(self))
        self->t_done = now_s > self->t_start ? now_s : self->t_start;
}

void slot_add_result(slot_t *self, const ddp_result_t *res, double now_s, uint64_t *invalid,
                     uint64_t *dup)
{
    *invalid = *dup = 0;
    for (uint32_t i = 0; i < res->n; i++) {
        const uint16_t *q = res->probs ? res->probs + (size_t)i * res->nprob : NULL;
        int rc = tally_add_result_probs(self->tally, res->ids[i], res->labels[i],
                                        res->topk + (size_t)i * res->k, res->k, res->loss[i], q,
                                        res->nprob);
        *invalid += rc < 0;
        *dup += rc == 1;
    }
    uint64_t counted = res->n - *invalid - *dup;
    if (self->t_first == 0 && counted > 0 && self->t_done == 0) {
        self->t_first = now_s > self->t_start ? now_s : self->t_start;
        self->n_first = counted;
    }
    if (res->rank >= 0 && (uint32_t)res->rank < self->world) {
        self->rank_n[res->rank] += res->n;
        if (res->compute_s > 0)
            self->rank_compute_s[res->rank] += res->compute_s;
    }
    if (res->lr > 0)
        self->lr = res->lr;
    if (res->phase == DDP_PHASE_TRAIN && (!self->have_step || res->step >= self->last_step)) {
        if (res->loss_scale > 0)
            self->loss_scale = res->loss_scale;
        self->last_step = res->step;
        self->have_step = true;
    }
    if (res->skipped_steps > self->skipped_steps)
        self->skipped_steps = res->skipped_steps;
    s_mark_done(self, now_s);
}

int slot_add_failed(slot_t *self, const ddp_failed_t *f, double now_s)
{
    int rc = tally_add_failed_label(self->tally, f->id, f->label);
    if (rc == 0) {
        self->failed++;
        size_t len = strlen(f->path) + strlen(f->reason) + 2;
        self->fail_reason[f->id] = malloc(len);
        if (self->fail_reason[f->id])
            snprintf(self->fail_reason[f->id], len, "%s\t%s", f->path, f->reason);
        s_mark_done(self, now_s);
    }
    return rc;
}

const char *slot_fail_reason(const slot_t *self, uint64_t id)
{
    return id < self->plan.n ? self->fail_reason[id] : NULL;
}

bool slot_last_step(const slot_t *self, uint64_t *step)
{
    *step = self->last_step;
    return self->have_step;
}

void slot_fill_metric(const slot_t *self, double now_s, bool per_rank, ev_metric_t *out)
{
    tally_fill_metric(self->tally, out);
    out->class_names = self->plan.class_names;
    out->present = self->plan.present;   /* borrowed, as the names */
    out->npresent = self->plan.npresent;
    out->lr = self->lr;
    out->loss_scale = self->loss_scale;
    out->skipped_steps = self->loss_scale > 0 ? self->skipped_steps : 0;
    double end = self->t_done > 0 ? self->t_done : now_s;
    out->wall_s = end > self->t_start ? end - self->t_start : 0;
    out->images_per_sec = out->wall_s > 0 ? out->samples / out->wall_s : 0;
    /* the start-up apart: the first result's time, and the rate after it */
    out->first_result_s = self->t_first > self->t_start ? self->t_first - self->t_start : 0;
    out->steady_images_per_sec =
        self->t_first > 0 && end > self->t_first && out->samples > self->n_first
            ? (double)(out->samples - self->n_first) / (end - self->t_first)
            : 0;
    if (!per_rank)
        return;
    for (uint32_t r = 0; r < self->world; r++)
        self->rank_ips[r] =
            self->rank_compute_s[r] > 0 ? self->rank_n[r] / self->rank_compute_s[r] : 0;
    out->nranks = self->world;
    out->rank_images_per_sec = self->rank_ips;
}
