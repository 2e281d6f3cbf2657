/* joining — a rank that joins a running training job (docs/ELASTIC.md
 * "Joining"): after WELCOME(joining), it waits for reducerd to pass on a
 * live rank's state (STATE with a checkpoint image), loads it, answers
 * STATE without an image, and waits for the MEMBERS that gives it its
 * rank, ring neighbour and token. Every wait together is bounded by
 * --join-timeout; a STOP (refused, sent away) ends it. A role over gpud_t,
 * before train_start. */
#ifndef DDP_GPUD_JOINING_H
#define DDP_GPUD_JOINING_H

#include "gpud/gpud.h"

/* Nothing unless the state is RANK_JOINING. 0: in the job (RANK_JOINED),
 * or stopped (RANK_STOPPED); -1 (logged, RANK_STOPPED): the state could
 * not be loaded, or no place came in time. */
int joining_enter(gpud_t *self);

#endif
