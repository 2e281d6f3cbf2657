/* rank_state — the table of a worker's life (see rank_state.h). */
#include "gpud/rank_state.h"

#include "common/log.h"

#include <stdint.h>

#define BIT(s) (1u << (s))
#define ENDS (BIT(RANK_FENCED) | BIT(RANK_STOPPED)) /* a STOP, a fence, a failure */

/* legal[from]: the states `from` may move to. One row per state: the
 * whole life cycle is read here. */
static const uint32_t legal[RANK_N_STATES] = {
    [RANK_CONNECTING] = BIT(RANK_WELCOMED) | BIT(RANK_JOINING) | BIT(RANK_STOPPED),
    [RANK_WELCOMED] = BIT(RANK_IDLE) | ENDS,
    [RANK_JOINING] = BIT(RANK_JOINED) | BIT(RANK_STOPPED),
    [RANK_JOINED] = BIT(RANK_IDLE) | ENDS,
    [RANK_IDLE] = BIT(RANK_STEP_OPEN) | BIT(RANK_STOP_DEFERRED) | ENDS,
    [RANK_STEP_OPEN] = BIT(RANK_AWAITING_COMMIT) | BIT(RANK_IDLE) | ENDS,
    [RANK_AWAITING_COMMIT] = BIT(RANK_IDLE) | ENDS,
    [RANK_STOP_DEFERRED] = ENDS,
    [RANK_FENCED] = 0,
    [RANK_STOPPED] = BIT(RANK_FENCED),   /* a fence after a stop: still write nothing */
};

static const char *const names[RANK_N_STATES] = {
    [RANK_CONNECTING] = "connecting",
    [RANK_WELCOMED] = "welcomed",
    [RANK_JOINING] = "joining",
    [RANK_JOINED] = "joined",
    [RANK_IDLE] = "idle",
    [RANK_STEP_OPEN] = "step_open",
    [RANK_AWAITING_COMMIT] = "awaiting_commit",
    [RANK_STOP_DEFERRED] = "stop_deferred",
    [RANK_FENCED] = "fenced",
    [RANK_STOPPED] = "stopped",
};

static bool in_range(rank_life_t s)
{
    return (unsigned)s < RANK_N_STATES;
}

void rank_state_init(rank_state_t *self)
{
    *self = (rank_state_t){.now = RANK_CONNECTING, .ended_in = RANK_CONNECTING};
}

const char *rank_state_name(rank_life_t s)
{
    return in_range(s) ? names[s] : "?";
}

bool rank_state_legal(rank_life_t from, rank_life_t to)
{
    return in_range(from) && in_range(to) && (legal[from] & BIT(to));
}

int rank_state_to(rank_state_t *self, rank_life_t next, const char *why)
{
    if (!rank_state_legal(self->now, next)) {
        log_error("rank state: %s -> %s refused (%s): not a move of gpud's life cycle "
                  "(gpud/rank_state.c); a bug, please report it with this log",
                  rank_state_name(self->now), rank_state_name(next), why);
        return -1;
    }
    log_debug("rank state: %s -> %s (%s)", rank_state_name(self->now), rank_state_name(next),
              why);
    if (!rank_state_ended(self) && (next == RANK_FENCED || next == RANK_STOPPED))
        self->ended_in = self->now;
    self->now = next;
    return 0;
}

void rank_state_end(rank_state_t *self, rank_life_t end, const char *why)
{
    if (self->now == end || self->now == RANK_FENCED)
        return;
    /* a fence the table does not list from here ends the life anyway */
    if (rank_state_to(self, end, why) < 0 && end != RANK_STOPPED)
        rank_state_to(self, RANK_STOPPED, why);
}

bool rank_state_ended(const rank_state_t *self)
{
    return self->now == RANK_FENCED || self->now == RANK_STOPPED;
}

/* The state that counts for what the life did: the one it ended from. */
static rank_life_t lived(const rank_state_t *self)
{
    return rank_state_ended(self) ? self->ended_in : self->now;
}

bool rank_state_open_step(const rank_state_t *self)
{
    rank_life_t s = lived(self);
    return s == RANK_STEP_OPEN || s == RANK_AWAITING_COMMIT;
}

bool rank_state_started(const rank_state_t *self)
{
    rank_life_t s = lived(self);
    return s == RANK_IDLE || s == RANK_STEP_OPEN || s == RANK_AWAITING_COMMIT ||
           s == RANK_STOP_DEFERRED;
}
