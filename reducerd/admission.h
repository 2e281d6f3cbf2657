/* admission — gpuds joining a running training job (docs/ELASTIC.md
 * "Joining"). A role over reducer_t.
 *
 * Below membership.c, which asks it at each commit (admission_begin,
 * admission_holds) and on a change (admission_cancel, _pause, _pump); a
 * joiner's generation is announced through generation.h.
 *
 * A gpud that JOINs after the gang formed is checked (the same job-wide
 * settings as the gang's, room below --max-workers), welcomed as a joiner
 * (WELCOME joining=1, rank -1) and queued. At the next commit inside an
 * epoch's train phase, rank 0's COMMIT asks for its state (snapshot=1);
 * rank 0 applies the step and sends STATE (a checkpoint image), reducerd
 * passes it on, the joiner loads it and answers STATE without an image;
 * then a new generation with the joiner as the last rank re-forms the ring
 * at the next step (MEMBERS), as a lost rank's does. No step commits
 * meanwhile (the members' STEPs wait), and the admission is bounded by
 * --worker-timeout: a joiner that is not in by then is sent away (STOP 1)
 * and the held step commits. A rank lost meanwhile cancels the admission;
 * the joiner stays queued for the next commit.
 */
#ifndef DDP_REDUCERD_ADMISSION_H
#define DDP_REDUCERD_ADMISSION_H

#include "reducerd/reducer.h"

/* Any training gpud's JOIN: false when its settings differ from the job's
 * (the first training gpud's): then it was refused with the flags that
 * differ. */
bool admission_config_ok(reducer_t *self, zframe_t *route, const ddp_join_t *join);
/* A JOIN from a new gpud after the gang formed: refused, or welcomed as a
 * joiner and queued. A joiner asking again gets its WELCOME again. */
void admission_on_join(reducer_t *self, zframe_t *route, const ddp_join_t *join);
/* From commit(), before the COMMITs go out: whether rank 0's asks for a
 * snapshot (an admission starts at step + 1 of epoch). */
bool admission_begin(reducer_t *self, uint64_t step, uint32_t epoch);
/* An admission is under way: the step in flight must not commit. */
bool admission_holds(const reducer_t *self);
/* Nobody trains until joiners bring the world to until_world (too few
 * ranks, or the --pause-at-step hook), for --rejoin-timeout at most; the
 * pause is said in reason (the MEMBERS that announces it carries it). */
void admission_pause(reducer_t *self, int32_t until_world, uint64_t step, uint32_t epoch,
                     char *reason, size_t cap);
/* While paused: the next queued joiner's admission, rank 0 asked for the
 * committed state at once (STATE without an image). */
void admission_pump(reducer_t *self);
/* A rank was lost: the admission starts again at a later commit. */
void admission_cancel(reducer_t *self, const char *why);
void admission_on_state(reducer_t *self, zframe_t *route, ddp_state_t *st);
/* The deadline; joiners that went silent leave the queue. True when the
 * step an admission held may commit now: the caller decides it
 * (membership_decide), as admission.c sits below membership.c. */
bool admission_tick(reducer_t *self, int64_t now_ms);

#endif
