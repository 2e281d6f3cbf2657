/* members — a training rank's side of elastic training (docs/ELASTIC.md):
 * the end of a step (STEP to reducerd, then its answer: COMMIT, MEMBERS or
 * STOP), a ring that failed (STEP with the silent predecessor), and the
 * re-form a new membership generation asks for (BatchNorm buffers of the
 * abandoned step restored, the ring re-pointed, the new rank and world,
 * CREDIT of the new generation to loaderd). A role over gpud_t and its
 * train_state_t, below train.c and train_step.c.
 *
 * Waits are bounded: reducerd's answer to a step by --commit-timeout
 * (default 2 x --ring-timeout: reducerd answers as soon as every member
 * reported, or once heartbeats declared a rank dead, --worker-timeout after
 * it fell silent; the CLI passes --ring-timeout + --worker-timeout). A wait
 * that runs out fails the rank as a ring failure always did.
 */
#ifndef DDP_GPUD_MEMBERS_H
#define DDP_GPUD_MEMBERS_H

#include "gpud/gpud.h"

typedef enum {
    MEMBERS_WAIT = 0,      /* nothing decisive came */
    MEMBERS_COMMIT,        /* COMMIT of the step waited for */
    MEMBERS_CHANGED,       /* a newer MEMBERS is pending (self->train->members) */
    MEMBERS_STOPPED        /* STOP from reducerd, or a signal */
} members_event_t;

/* The ring's cancel callback (ctx: the gpud_t): a signal, or a STOP or a
 * MEMBERS read from the reducer socket meanwhile, ends a collective at once
 * ("interrupted", "stopped", "membership changed"). */
const char *members_ring_cancel(void *ctx);

/* One message from reducerd (decoded; the caller clears it): EPOCH kept
 * for train_epoch.c (self->train->pending_epoch), STOP applied, a newer
 * MEMBERS kept; COMMIT of (gen, step) is MEMBERS_COMMIT, any other is
 * stale and ignored. */
members_event_t members_on_message(gpud_t *self, ddp_msg_t *m, uint64_t step);

/* STEP(gen, epoch, step, status, suspect) to reducerd. 0, or -1 (logged). */
int members_send_step(gpud_t *self, uint32_t epoch, uint64_t step, ddp_step_status_t status,
                      int32_t suspect);
/* Waits up to --commit-timeout for reducerd's answer about `step`
 * (UINT64_MAX: no COMMIT is awaited, only MEMBERS or STOP). MEMBERS_WAIT
 * means the time ran out. */
members_event_t members_wait(gpud_t *self, uint64_t step);

/* A collective (what: "gradients", "sync-bn", "BatchNorm buffers") failed
 * with err during step `step` of `epoch` (between steps: the next one):
 * a membership change re-forms the ring, a silent predecessor is reported
 * (STEP status 1) and the answer awaited. 1: re-formed as a new generation,
 * what ran is dropped; -1: fatal (logged; rank 0 checkpoints on exit unless
 * fenced). */
int members_ring_failed(gpud_t *self, const char *what, uint32_t epoch, uint64_t step,
                        const char *err);

/* The epoch e whose END(TRAIN) BatchNorm broadcast (rank 0's buffers to
 * all) opens a generation that starts at `step`, or -1. Every member does
 * it then exactly once, in the same place. That is so when step is e+1's
 * first: ranks may be anywhere between END(e) and that step (one broadcast
 * failed, one done and EPOCH(e) waited for, one in the step's gradient
 * sum), and each does it once more — at once (pending.bn_redo) when it
 * handled END(e), when END(e) comes when it has not, by the retry when its
 * own broadcast failed. Later in e+1 it is done everywhere: a step of e+1
 * committed on every member. A joiner entering at e+1's first step has the
 * state of after END(e): it broadcasts once at once (its END(e), if one
 * still comes, is then a duplicate). */
int64_t members_bn_epoch(const train_state_t *ts, uint64_t step);
/* Applies the pending MEMBERS: the open step's BatchNorm buffers restored
 * (RANK_STEP_OPEN or RANK_AWAITING_COMMIT -> RANK_IDLE), the ring
 * re-formed, rank and world (SyncBatchNorm sums over the new ring),
 * pending.bn_redo when members_bn_epoch says so, and CREDIT(window, rank, gen) once the rank started
 * (rank_state_started: its first CREDIT went out). 0, or -1 (logged; a
 * MEMBERS without a place for it: RANK_FENCED): the rank cannot go on. */
int members_apply(gpud_t *self);
/* The sums of the rank's current generation (self->gen, rank, world): over
 * NCCL when nccl (rank 0 sends the generation's NCCLID to reducerd), else
 * over the ring; the previous generation's communicator is aborted. 0, or
 * -1 (logged). */
int members_collective(gpud_t *self, bool nccl);
/* Takes M's place in the job: generation, rank, world, ring neighbour and
 * token (also handed to the heartbeat thread). No ring or step changes. */
void members_take(gpud_t *self, const ddp_members_t *m);

#endif
