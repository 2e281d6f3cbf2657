/* decide — the early-stopping rule of a training job, taken once per epoch
 * by reducerd when the epoch's train and validation tallies are complete.
 *
 * The seed course (NVIDIA DLI "data parallelism", fashion_mnist.py) stops
 * after the epoch whose last `patience` validation accuracies all reach
 * the target:
 *
 *   len(val_accuracy) >= patience and
 *   all(acc >= target_accuracy for acc in val_accuracy[-patience:])
 *
 * which is a streak counter: streak = val_top1 >= target ? streak + 1 : 0,
 * stop when streak >= patience. The streak survives a resume (reducerd
 * --streak K from the checkpoint), so a resumed run stops where an
 * uninterrupted one would. Independently the run stops after the last of
 * --epochs epochs. Target 0 switches the target off; without validation
 * (val_top1 < 0) the streak stays 0 and only --epochs ends the run.
 */
#ifndef DDP_REDUCERD_DECIDE_H
#define DDP_REDUCERD_DECIDE_H

#include <stdint.h>

typedef struct {
    uint32_t epochs;   /* --epochs: the run trains epochs 0..epochs-1 */
    double target;     /* --target-accuracy, a fraction; 0: off */
    uint32_t patience; /* --patience, >= 1 */
} decide_cfg_t;

typedef struct {
    uint8_t decision;  /* ddp_decision_t: 0 continue, 1 stop */
    uint32_t streak;   /* after this epoch */
    char reason[256];  /* one line for logs, EPOCH and the end event */
} decide_t;

/* Decide after `epoch` (0-based) given the streak before it and the
 * epoch's validation top-1 (a fraction; < 0: no validation). */
void decide_epoch(const decide_cfg_t *cfg, uint32_t epoch, uint32_t streak_before,
                  double val_top1, decide_t *out);

#endif
