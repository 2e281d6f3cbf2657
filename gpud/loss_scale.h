/* loss_scale — dynamic loss scaling for --precision fp16 training, with
 * torch.cuda.amp.GradScaler's rules (docs/FP16.md "Loss scaling").
 *
 * fp16 gradients below 2^-24 are 0 and above 65504 are inf, so the loss's
 * gradient is multiplied by the scale S before the backward and the summed
 * gradients by 1/S after it. S is a power of two (the initial one must be),
 * so both multiplications are exact in fp32 and the unscaled gradients are
 * the ones an unscaled fp32 backward of the same fp16 values would give.
 * A step whose summed gradients hold an inf or NaN is skipped (no optimizer
 * step) and S halves; after `interval` finite steps in a row S doubles.
 * The gradients are summed over every rank before the check, so every rank
 * takes the same decision and the ranks stay identical. */
#ifndef DDP_LOSS_SCALE_H
#define DDP_LOSS_SCALE_H

#include <stdbool.h>
#include <stdint.h>

/* GradScaler's defaults: init_scale, growth_interval */
#define LOSS_SCALE_INIT 65536.0
#define LOSS_SCALE_INTERVAL 2000

typedef struct {
    float scale;             /* S: a power of two (GradScaler keeps it in a float32) */
    int64_t interval;        /* growth_interval */
    int64_t tracker;         /* finite steps in a row since S last changed */
    int64_t skipped;         /* steps skipped in the job (summary.json) */
} loss_scale_t;

/* 1 when s is a power of two a float holds exactly (2^-126 .. 2^127). */
bool loss_scale_valid(double s);
/* A scaler at scale init (loss_scale_valid) growing after interval >= 1
 * finite steps. */
loss_scale_t loss_scale_new(double init, int64_t interval);
/* After a committed step: found_inf halves S (the step was skipped),
 * else one more finite step, S doubles after interval of them
 * (GradScaler.update; a doubling that would overflow a float is not
 * taken). */
void loss_scale_update(loss_scale_t *s, bool found_inf);

#endif
