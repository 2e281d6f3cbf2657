/* lr_sched — learning-rate schedules as torch.optim.lr_scheduler (1.13).
 *
 *   lr_phase_t cos = {.kind = LR_COSINE, .t_max = 45};
 *   lr_sched_t *s = lr_sched_warmup(0.1, 5, 0.01, &cos, err, sizeof err);
 *   for (epoch = 0; epoch < 50; epoch++) {
 *       double lr = lr_sched_lr(s);          // scheduler.get_last_lr()[0]
 *       ... train one epoch with optim_step(o, lr) ...
 *       lr_sched_step(s);                    // scheduler.step(), once per epoch
 *   }
 *   lr_sched_destroy(&s);
 *
 * lr_sched_lr follows PyTorch's chainable (recursive) updates, emulated
 * state for state — each phase's last_epoch and _step_count, the shared
 * group lr, SequentialLR's initial-step undo and its step(0) (closed form)
 * at a milestone — in double with the same operation order, so the values
 * are PyTorch's (bit for bit on the same libm). lr_sched_closed_form gives
 * the exact closed form instead; the two differ by the recursion's
 * rounding (relative 1e-15 or so over 50 epochs).
 *
 * A chain of n phases with n-1 increasing milestones is SequentialLR(phases,
 * milestones); one phase is that scheduler alone; zero phases is a constant
 * learning rate. One learning rate (one base lr) per schedule.
 */
#ifndef DDP_LR_SCHED_H
#define DDP_LR_SCHED_H

#include <stddef.h>

typedef enum { LR_LINEAR, LR_STEP, LR_COSINE, LR_KIND_COUNT } lr_kind_t;

typedef struct {
    lr_kind_t kind;
    /* LinearLR: factor goes from start_factor to end_factor over total_iters
     * epochs. PyTorch's defaults are 1/3, 1, 5; here 0 means that default.
     * start_factor must be > 0 (PyTorch divides by it). */
    double start_factor, end_factor;
    int total_iters;
    /* StepLR: times gamma every step_size epochs (gamma 0: PyTorch's 0.1). */
    int step_size;
    double gamma;
    /* CosineAnnealingLR: half a cosine from the base lr to eta_min in t_max
     * epochs (and back up after, as PyTorch). */
    int t_max;
    double eta_min;
} lr_phase_t;

#define LR_SCHED_MAX_PHASES 8

typedef struct lr_sched lr_sched_t;

/* NULL with the reason in err for an invalid phase or milestone list. */
lr_sched_t *lr_sched_new(double base_lr, const lr_phase_t *phases, int n_phases,
                         const int *milestones, char *err, size_t errlen);
/* Warm-up then main: SequentialLR([LinearLR(start_factor, 1, warmup_epochs),
 * main], [warmup_epochs]). main NULL: warm-up then constant (LinearLR alone);
 * warmup_epochs 0: main alone. */
lr_sched_t *lr_sched_warmup(double base_lr, int warmup_epochs, double start_factor,
                            const lr_phase_t *main, char *err, size_t errlen);
void lr_sched_destroy(lr_sched_t **s);

/* The learning rate for the current epoch (get_last_lr). */
double lr_sched_lr(const lr_sched_t *s);
/* scheduler.step(): move to the next epoch. */
void lr_sched_step(lr_sched_t *s);
/* Epochs stepped so far (SequentialLR.last_epoch). */
int lr_sched_epoch(const lr_sched_t *s);
/* Restart and step `epoch` times (resume from a checkpoint's epoch count). */
void lr_sched_set_epoch(lr_sched_t *s, int epoch);
/* Closed-form learning rate at an epoch (no recursion). */
double lr_sched_closed_form(const lr_sched_t *s, int epoch);

const char *lr_kind_name(lr_kind_t k);   /* "linear" | "step" | "cosine" */

#endif
