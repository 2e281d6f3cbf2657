/* rank_state — where a worker is in its life, as one enum, and every
 * legal move between states in one table (rank_state.c). gpud_t holds one;
 * the roles move it with rank_state_to, which logs each move at --verbose
 * and refuses (logs, leaves the state) one the table does not list.
 *
 *   CONNECTING -WELCOME-> WELCOMED ------------------+ train_start,
 *     `-WELCOME(joining)-> JOINING -MEMBERS-> JOINED -+-> IDLE  eval_start
 *   IDLE -forward-> STEP_OPEN -STEP sent-> AWAITING_COMMIT -COMMIT applied-> IDLE
 *   STEP_OPEN, AWAITING_COMMIT -a new generation drops the step-> IDLE
 *   IDLE -STOP(0) before the last END(TRAIN)-> STOP_DEFERRED
 *   all but CONNECTING, JOINING -STOP "fenced", MEMBERS without a place-> FENCED
 *   all -STOP, a failure, a signal, no place in time-> STOPPED
 *
 * FENCED and STOPPED end the life: no move leaves them but STOPPED ->
 * FENCED (a fence after a stop: the rank still writes nothing). The state
 * a life ended from is kept: a stop with a step open (rank_state_open_step)
 * leaves that step's BatchNorm buffers in the trainer, restored before the
 * exit checkpoint.
 *
 * Work owed across states (a MEMBERS to apply, an EPOCH before its END,
 * rank 0's state for a joiner, the BatchNorm broadcast to redo) is not a
 * state: any of it may arrive in any living state and several at once, so
 * as states they would multiply the table. Those are train_state_t's
 * pending bits (train_state.h). */
#ifndef DDP_GPUD_RANK_STATE_H
#define DDP_GPUD_RANK_STATE_H

#include <stdbool.h>

typedef enum {
    RANK_CONNECTING = 0,   /* JOIN sent, no WELCOME yet */
    RANK_WELCOMED,         /* in the job from its start; the role not started */
    RANK_JOINING,          /* WELCOME said the job runs: waiting for its state and a place */
    RANK_JOINED,           /* entered a running job (MEMBERS); the role not started:
                              no initial-weights broadcast, the live ranks' state held */
    RANK_IDLE,             /* a member between steps (eval: taking batches) */
    RANK_STEP_OPEN,        /* forward/backward ran: buffers changed, no update applied */
    RANK_AWAITING_COMMIT,  /* STEP sent: reducerd's COMMIT, MEMBERS or STOP awaited */
    RANK_STOP_DEFERRED,    /* STOP(0) waits for the last END(TRAIN) (gpud_stop) */
    RANK_FENCED,           /* reducerd went on without this rank: it writes nothing */
    RANK_STOPPED,          /* the job (or this worker) ended */
    RANK_N_STATES
} rank_life_t;

typedef struct {
    rank_life_t now;
    rank_life_t ended_in;  /* FENCED/STOPPED: the state it ended from */
} rank_state_t;

/* A fresh worker: CONNECTING. */
void rank_state_init(rank_state_t *self);
/* "idle", "step_open", ...; "?" for a value out of range. */
const char *rank_state_name(rank_life_t s);
/* Whether the table lists from -> to. */
bool rank_state_legal(rank_life_t from, rank_life_t to);
/* Moves to NEXT: 0, logged at --verbose with WHY. An illegal move is
 * refused: -1, logged as an error, the state unchanged. */
int rank_state_to(rank_state_t *self, rank_life_t next, const char *why);
/* Ends the life in END (FENCED or STOPPED) unless it ended already (a
 * second STOP, a failure after a fence: the first end stands; only a
 * fence after a stop moves on, STOPPED -> FENCED: the rank writes
 * nothing). A fence the table refuses from here ends in STOPPED. */
void rank_state_end(rank_state_t *self, rank_life_t end, const char *why);

/* FENCED or STOPPED. */
bool rank_state_ended(const rank_state_t *self);
/* A step whose update is not applied is open now, or was when the life ended. */
bool rank_state_open_step(const rank_state_t *self);
/* The role started (IDLE reached; its first CREDIT(window) goes out
 * then), now or before the life ended: a re-form credits again. */
bool rank_state_started(const rank_state_t *self);

#endif
