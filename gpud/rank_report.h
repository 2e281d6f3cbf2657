/* rank_report — what a training rank tells reducerd that ends the job
 * (docs/TRAINING.md "Failure", "Non-finite values"): rank 0's DONE with
 * code 0 (the final checkpoint and weights are written), 4 (a checkpoint
 * or the final weights could not be written) or 5 (the model diverged),
 * and every rank's bounded wait for reducerd's STOP after a non-finite
 * step, so that no rank exits before the job is ended for everyone. */
#ifndef DDP_GPUD_RANK_REPORT_H
#define DDP_GPUD_RANK_REPORT_H

#include "gpud/gpud.h"

#include <stddef.h>

/* Rank 0: DONE(code, reason) to reducerd; a send failure is logged. */
void rank_report_done(gpud_t *self, int code, const char *reason);

/* Rank 0 could not write WHAT (a checkpoint, the final weights) on
 * occasion WHY: logs "rank 0: WHAT (WHY) not written: ERR; the last good
 * checkpoint is ..." and leaves that text in reason. */
void rank_report_write_failed(gpud_t *self, const char *what, const char *why, const char *err,
                              char *reason, size_t cap);

/* Every rank at a non-finite step (the same on every rank): logs it, rank
 * 0 sends DONE(DDP_STOP_NONFINITE), then waits for reducerd's STOP (at most
 * --commit-timeout). The rank is stopped after it, its exit status
 * DDP_STOP_NONFINITE (RANK_STOPPED); checkpoint (train_state_t's
 * checkpoint_on_exit) says whether rank 0 writes the last completed step. */
void rank_report_nonfinite(gpud_t *self, uint64_t step, const char *err, bool checkpoint);

#endif
