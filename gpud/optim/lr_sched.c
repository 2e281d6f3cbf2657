/* lr_sched — torch.optim.lr_scheduler's LinearLR, StepLR, CosineAnnealingLR
 * and SequentialLR, emulated state for state (see lr_sched.h). */
#include "gpud/optim/lr_sched.h"
#include "common/errbuf.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One torch scheduler: its own counters; the lr it updates is shared. */
typedef struct {
    lr_phase_t cfg;
    int last_epoch;
    int step_count;
} phase_t;

struct lr_sched {
    double base_lr;              /* param_group['initial_lr'] */
    double lr;                   /* param_group['lr'] */
    int n;
    phase_t ph[LR_SCHED_MAX_PHASES];
    int milestones[LR_SCHED_MAX_PHASES];
    int last_epoch;              /* SequentialLR's (or the single scheduler's) */
};


const char *lr_kind_name(lr_kind_t k)
{
    static const char *const names[LR_KIND_COUNT] = {"linear", "step", "cosine"};
    return (unsigned)k < LR_KIND_COUNT ? names[k] : "?";
}

/* Python's a % b for b > 0 (never negative). */
static int pymod(int a, int b)
{
    int r = a % b;
    return r < 0 ? r + b : r;
}

/* PyTorch's defaults for zero fields, then its validity checks. */
static int phase_fill(lr_phase_t *c, int i, char *err, size_t errlen)
{
    switch (c->kind) {
    case LR_LINEAR:
        if (c->start_factor == 0)
            c->start_factor = 1.0 / 3;
        if (c->end_factor == 0)
            c->end_factor = 1.0;
        if (c->total_iters == 0)
            c->total_iters = 5;
        if (!(c->start_factor > 0 && c->start_factor <= 1) ||
            !(c->end_factor >= 0 && c->end_factor <= 1) || c->total_iters < 0) {
            err_set(err, errlen, "lr schedule phase %d (linear): start_factor %g must be in (0,1], "
                    "end_factor %g in [0,1], total_iters %d > 0", i, c->start_factor,
                    c->end_factor, c->total_iters);
            return -1;
        }
        return 0;
    case LR_STEP:
        if (c->gamma == 0)
            c->gamma = 0.1;
        if (c->step_size <= 0 || !isfinite(c->gamma)) {
            err_set(err, errlen, "lr schedule phase %d (step): step_size %d must be > 0", i,
                    c->step_size);
            return -1;
        }
        return 0;
    case LR_COSINE:
        if (c->t_max <= 0 || !isfinite(c->eta_min)) {
            err_set(err, errlen, "lr schedule phase %d (cosine): t_max %d must be > 0", i,
                    c->t_max);
            return -1;
        }
        return 0;
    default:
        err_set(err, errlen, "lr schedule phase %d: unknown kind %d", i, (int)c->kind);
        return -1;
    }
}

/* get_lr(): the chainable form, from the shared lr. Operation order as in
 * lr_scheduler.py so the doubles round the same way. */
static double phase_get_lr(const phase_t *p, double lr, double base)
{
    const lr_phase_t *c = &p->cfg;
    const int e = p->last_epoch;
    switch (c->kind) {
    case LR_LINEAR:
        if (e == 0)
            return lr * c->start_factor;
        if (e > c->total_iters)
            return lr;
        return lr * (1. + (c->end_factor - c->start_factor) /
                              ((double)c->total_iters * c->start_factor +
                               (double)(e - 1) * (c->end_factor - c->start_factor)));
    case LR_STEP:
        if (e == 0 || e % c->step_size != 0)
            return lr;
        return lr * c->gamma;
    default: {   /* LR_COSINE */
        const double T = c->t_max, eta = c->eta_min;
        if (e == 0)
            return lr;
        if (p->step_count == 1 && e > 0)
            return eta + (base - eta) * (1 + cos((double)e * M_PI / T)) / 2;
        if (pymod(e - 1 - c->t_max, 2 * c->t_max) == 0)
            return lr + (base - eta) * (1 - cos(M_PI / T)) / 2;
        return (1 + cos(M_PI * (double)e / T)) / (1 + cos(M_PI * (double)(e - 1) / T)) *
                   (lr - eta) + eta;
    }
    }
}

/* _get_closed_form_lr() at the phase's own epoch e. */
static double phase_closed(const lr_phase_t *c, int e, double base)
{
    switch (c->kind) {
    case LR_LINEAR: {
        int m = e < c->total_iters ? e : c->total_iters;
        return base * (c->start_factor + (c->end_factor - c->start_factor) * (double)m /
                                             (double)c->total_iters);
    }
    case LR_STEP: {
        /* Python's // floors */
        int q = e >= 0 ? e / c->step_size : -((-e + c->step_size - 1) / c->step_size);
        return base * pow(c->gamma, (double)q);
    }
    default:
        return c->eta_min + (base - c->eta_min) * (1 + cos(M_PI * (double)e / c->t_max)) / 2;
    }
}

/* _LRScheduler.step(epoch): epoch < 0 means step() with no argument. */
static void phase_step(lr_sched_t *s, phase_t *p, int epoch)
{
    p->step_count++;
    if (epoch < 0) {
        p->last_epoch++;
        s->lr = phase_get_lr(p, s->lr, s->base_lr);
    } else {
        p->last_epoch = epoch;
        s->lr = phase_closed(&p->cfg, epoch, s->base_lr);
    }
}

static void phase_initial_step(lr_sched_t *s, phase_t *p)
{
    p->step_count = 0;
    phase_step(s, p, -1);
}

/* The constructors' side effects, in PyTorch's order: each scheduler steps
 * once when built; SequentialLR then resets the lr, undoes those steps and
 * re-runs the first scheduler's initial step. */
static void restart(lr_sched_t *s)
{
    s->lr = s->base_lr;
    s->last_epoch = 0;
    for (int i = 0; i < s->n; i++) {
        s->ph[i].last_epoch = -1;
        phase_initial_step(s, &s->ph[i]);
    }
    if (s->n > 1) {
        s->lr = s->base_lr;
        for (int i = 0; i < s->n; i++)
            s->ph[i].last_epoch--;
        phase_initial_step(s, &s->ph[0]);
    }
}

lr_sched_t *lr_sched_new(double base_lr, const lr_phase_t *phases, int n_phases,
                         const int *milestones, char *err, size_t errlen)
{
    if (!isfinite(base_lr) || base_lr < 0 || n_phases < 0 || n_phases > LR_SCHED_MAX_PHASES ||
        (n_phases > 0 && !phases) || (n_phases > 1 && !milestones)) {
        err_set(err, errlen, "lr schedule: need a finite lr >= 0 (got %g) and 0..%d phases with "
                "n-1 milestones", base_lr, LR_SCHED_MAX_PHASES);
        return NULL;
    }
    lr_sched_t *s = calloc(1, sizeof *s);
    if (!s) {
        err_set(err, errlen, "lr schedule: out of memory");
        return NULL;
    }
    s->base_lr = base_lr;
    s->n = n_phases;
    for (int i = 0; i < n_phases; i++) {
        s->ph[i].cfg = phases[i];
        if (phase_fill(&s->ph[i].cfg, i, err, errlen) < 0) {
            free(s);
            return NULL;
        }
    }
    for (int i = 0; i + 1 < n_phases; i++) {
        if (milestones[i] <= (i ? milestones[i - 1] : 0)) {
            err_set(err, errlen, "lr schedule: milestones must be increasing and > 0 "
                    "(milestone %d is %d)", i, milestones[i]);
            free(s);
            return NULL;
        }
        s->milestones[i] = milestones[i];
    }
    restart(s);
    return s;
}

lr_sched_t *lr_sched_warmup(double base_lr, int warmup_epochs, double start_factor,
                            const lr_phase_t *main, char *err, size_t errlen)
{
    if (warmup_epochs < 0) {
        err_set(err, errlen, "lr schedule: negative warm-up (%d epochs)", warmup_epochs);
        return NULL;
    }
    lr_phase_t ph[2] = {{.kind = LR_LINEAR, .start_factor = start_factor, .end_factor = 1.0,
                         .total_iters = warmup_epochs}};
    if (warmup_epochs == 0)
        return lr_sched_new(base_lr, main, main ? 1 : 0, NULL, err, errlen);
    if (!main)
        return lr_sched_new(base_lr, ph, 1, NULL, err, errlen);
    ph[1] = *main;
    return lr_sched_new(base_lr, ph, 2, &warmup_epochs, err, errlen);
}

void lr_sched_destroy(lr_sched_t **sp)
{
    if (!sp || !*sp)
        return;
    free(*sp);
    *sp = NULL;
}

double lr_sched_lr(const lr_sched_t *s) { return s->lr; }
int lr_sched_epoch(const lr_sched_t *s) { return s->last_epoch; }

/* Number of milestones <= e (Python's bisect_right). */
static int phase_of(const lr_sched_t *s, int e)
{
    int idx = 0;
    while (idx + 1 < s->n && s->milestones[idx] <= e)
        idx++;
    return idx;
}

void lr_sched_step(lr_sched_t *s)
{
    s->last_epoch++;
    if (s->n == 0)
        return;
    if (s->n == 1) {
        phase_step(s, &s->ph[0], -1);
        return;
    }
    int idx = phase_of(s, s->last_epoch);
    const int at_milestone = idx > 0 && s->milestones[idx - 1] == s->last_epoch;
    phase_step(s, &s->ph[idx], at_milestone ? 0 : -1);
}

void lr_sched_set_epoch(lr_sched_t *s, int epoch)
{
    restart(s);
    for (int e = 0; e < epoch; e++)
        lr_sched_step(s);
}

double lr_sched_closed_form(const lr_sched_t *s, int epoch)
{
    if (s->n == 0)
        return s->base_lr;
    int idx = phase_of(s, epoch);
    int local = epoch - (idx > 0 ? s->milestones[idx - 1] : 0);
    return phase_closed(&s->ph[idx].cfg, local, s->base_lr);
}
