/* train_save — rank 0's state written out: the checkpoint (end of an
 * epoch, the final one, the last completed step of a stopped run) and the
 * STATE a joiner waits for (docs/ELASTIC.md "Joining"), both with the
 * counters of train_state_t. A role over gpud_t, below train.c,
 * train_step.c and train_epoch.c. */
#ifndef DDP_GPUD_TRAIN_SAVE_H
#define DDP_GPUD_TRAIN_SAVE_H

#include "gpud/gpud.h"

#include <stddef.h>

/* Rank 0 with --checkpoint: the checkpoint of the state now (others: 0).
 * -1 when it could not be written (a full disk), reason saying which
 * file, why and the last good checkpoint (rank_report.h): the caller
 * decides whether that stops the job. */
int train_save_checkpoint(gpud_t *self, const char *why, char *reason, size_t cap);
/* Rank 0, once no step is open after the COMMIT (or STATE) that asked:
 * the state of the last committed step as STATE to reducerd; clears
 * pending.snapshot. A failure is logged: reducerd's admission deadline
 * sends the joiner away. */
void train_save_state(gpud_t *self);

#endif
