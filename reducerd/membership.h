/* membership — reducerd's part of elastic training (docs/ELASTIC.md): the
 * generation and its members in ring order, a COMMIT once every member
 * summed the step in flight (its RESULTs are tallied then, not before), and
 * a lost rank costing that step, not the job: the survivors are renumbered
 * and told (MEMBERS, with each one's token for its new rank), the
 * uncommitted RESULTs are dropped, and a removed rank is fenced. Fewer than
 * --min-workers ranks left fails the job as before (a resumable checkpoint).
 * The decisions themselves are elastic.h's (no sockets there); joiners are
 * admission.h's, below this file; MEMBERS is generation.h's. */
#ifndef DDP_REDUCERD_MEMBERSHIP_H
#define DDP_REDUCERD_MEMBERSHIP_H

#include "reducerd/reducer.h"

/* The gang formed (every rank was welcomed): generation 0 of the W ranks. */
void membership_start(reducer_t *self);
/* A reporterd subscribed: when the gang formed before any had (a reporterd
 * that started late: the events were published to nobody) and generation 0
 * is still in force, its members' `joined` worker events and the `formed`
 * membership event are published again, once, so that membership.csv and
 * the launcher (which tells a lost rank from a failed start by them) have
 * them. */
void membership_replay(reducer_t *self);
/* A STEP on the ROUTER. */
void membership_on_step(reducer_t *self, zframe_t *route, const ddp_step_t *step);
/* p (a member) was declared dead by the watchdog: it is lost. */
void membership_rank_dead(reducer_t *self, peer_t *p);
/* A message of kind from a removed rank p (on route): the first is
 * answered with STOP(1, "fenced: ..."); none counts. */
void membership_fence(reducer_t *self, zframe_t *route, peer_t *p, const char *kind);
/* Commits and changes until nothing is left to decide (an admission under
 * way holds the commit of the step in flight). */
void membership_decide(reducer_t *self);

#endif
