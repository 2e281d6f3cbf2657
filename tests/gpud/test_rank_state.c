/* gpud/rank_state: the worker's life cycle. Every (from, to) pair of the
 * table against the moves listed here independently (a move added to or
 * dropped from rank_state.c fails it); a training rank's life through a
 * step, a commit, a dropped step, a deferred stop; illegal moves refused
 * with the state unchanged; the ends (FENCED, STOPPED) terminal but for
 * STOPPED -> FENCED, rank_state_end idempotent, the state a life ended
 * from kept for rank_state_open_step and rank_state_started. */
#include "gpud/rank_state.h"
#include "common/log.h"
#include "tests/proto/check.h"

#include <stdbool.h>
#include <string.h>

#define C RANK_CONNECTING
#define W RANK_WELCOMED
#define J RANK_JOINING
#define JD RANK_JOINED
#define I RANK_IDLE
#define O RANK_STEP_OPEN
#define A RANK_AWAITING_COMMIT
#define D RANK_STOP_DEFERRED
#define F RANK_FENCED
#define S RANK_STOPPED

/* The moves docs and code rely on (rank_state.h's drawing). */
static const rank_life_t moves[][2] = {
    {C, W}, {C, J}, {C, S},
    {W, I}, {W, F}, {W, S},
    {J, JD}, {J, S},
    {JD, I}, {JD, F}, {JD, S},
    {I, O}, {I, D}, {I, F}, {I, S},
    {O, A}, {O, I}, {O, F}, {O, S},
    {A, I}, {A, F}, {A, S},
    {D, F}, {D, S},
    {S, F},
};

static bool listed(rank_life_t from, rank_life_t to)
{
    for (size_t i = 0; i < sizeof moves / sizeof moves[0]; i++)
        if (moves[i][0] == from && moves[i][1] == to)
            return true;
    return false;
}

static void test_table(void)
{
    int n_legal = 0;
    for (int f = 0; f < RANK_N_STATES; f++)
        for (int t = 0; t < RANK_N_STATES; t++) {
            bool want = listed((rank_life_t)f, (rank_life_t)t);
            n_legal += want;
            CHECK_MSG(rank_state_legal((rank_life_t)f, (rank_life_t)t) == want, "%s -> %s %s",
                      rank_state_name((rank_life_t)f), rank_state_name((rank_life_t)t),
                      want ? "refused" : "allowed");
            /* rank_state_to agrees with the table and leaves a refused state as it was */
            rank_state_t s = {.now = (rank_life_t)f, .ended_in = RANK_IDLE};
            int rc = rank_state_to(&s, (rank_life_t)t, "test");
            CHECK_MSG(rc == (want ? 0 : -1) && s.now == (want ? (rank_life_t)t : (rank_life_t)f),
                      "%s -> %s: rc %d, now %s", rank_state_name((rank_life_t)f),
                      rank_state_name((rank_life_t)t), rc, rank_state_name(s.now));
        }
    CHECK(n_legal == (int)(sizeof moves / sizeof moves[0]));
    CHECK(!rank_state_legal(RANK_N_STATES, I) && !rank_state_legal(I, RANK_N_STATES));
    CHECK(!rank_state_legal((rank_life_t)-1, I));
    CHECK_STR(rank_state_name(A), "awaiting_commit");
    CHECK_STR(rank_state_name(D), "stop_deferred");
    CHECK_STR(rank_state_name(RANK_N_STATES), "?");
    for (int s = 0; s < RANK_N_STATES; s++)   /* every state named, no two alike */
        for (int t = 0; t < s; t++)
            CHECK(strcmp(rank_state_name((rank_life_t)s), rank_state_name((rank_life_t)t)) != 0);
}

/* WELCOME, a committed step, a step a new generation drops, a stop with
 * a step open: the buffers of that step are what the exit restores. */
static void test_training_life(void)
{
    rank_state_t s;
    rank_state_init(&s);
    CHECK(s.now == C && !rank_state_ended(&s) && !rank_state_started(&s));
    CHECK(rank_state_to(&s, W, "WELCOME") == 0);
    CHECK(!rank_state_started(&s));
    CHECK(rank_state_to(&s, O, "forward before start") == -1 && s.now == W);
    CHECK(rank_state_to(&s, I, "training") == 0 && rank_state_started(&s));
    CHECK(!rank_state_open_step(&s));
    CHECK(rank_state_to(&s, A, "STEP before forward") == -1 && s.now == I);
    CHECK(rank_state_to(&s, O, "forward") == 0 && rank_state_open_step(&s));
    CHECK(rank_state_to(&s, D, "a STOP deferred mid-step") == -1 && s.now == O);
    CHECK(rank_state_to(&s, A, "STEP sent") == 0 && rank_state_open_step(&s));
    CHECK(rank_state_to(&s, O, "forward twice") == -1 && s.now == A);
    CHECK(rank_state_to(&s, I, "COMMIT applied") == 0 && !rank_state_open_step(&s));
    CHECK(rank_state_to(&s, O, "forward") == 0);
    CHECK(rank_state_to(&s, I, "a new generation drops the step") == 0);
    CHECK(rank_state_to(&s, O, "forward") == 0);
    CHECK(rank_state_to(&s, A, "STEP sent") == 0);
    rank_state_end(&s, S, "commit timeout");
    CHECK(s.now == S && rank_state_ended(&s) && s.ended_in == A);
    CHECK(rank_state_open_step(&s) && rank_state_started(&s));
    CHECK(rank_state_to(&s, I, "back to life") == -1 && s.now == S);
    rank_state_end(&s, S, "a second STOP");   /* quiet: the first end stands */
    CHECK(s.now == S && s.ended_in == A);
    rank_state_end(&s, F, "fenced after the stop");
    CHECK(s.now == F && s.ended_in == A && rank_state_open_step(&s));
    rank_state_end(&s, S, "a failure after the fence");
    CHECK(s.now == F);
    CHECK(rank_state_to(&s, S, "out of the fence") == -1 && s.now == F);
}

/* A joiner; the deferred STOP(0) of a job's end; an eval worker. */
static void test_other_lives(void)
{
    rank_state_t s;
    rank_state_init(&s);
    CHECK(rank_state_to(&s, J, "WELCOME(joining)") == 0);
    CHECK(rank_state_to(&s, I, "joined without a place") == -1 && s.now == J);
    rank_state_end(&s, F, "a fence while joining");   /* not listed: ends STOPPED */
    CHECK(s.now == S && s.ended_in == J && !rank_state_started(&s) && !rank_state_open_step(&s));

    rank_state_init(&s);
    CHECK(rank_state_to(&s, J, "WELCOME(joining)") == 0 && rank_state_to(&s, JD, "MEMBERS") == 0);
    CHECK(rank_state_to(&s, I, "training") == 0);
    CHECK(rank_state_to(&s, D, "STOP(0) before the last END") == 0);
    CHECK(rank_state_to(&s, O, "a step while the stop waits") == -1 && s.now == D);
    CHECK(rank_state_to(&s, I, "undeferred") == -1);
    CHECK(rank_state_started(&s) && !rank_state_open_step(&s));
    rank_state_end(&s, S, "END handled");
    CHECK(s.now == S && s.ended_in == D && !rank_state_open_step(&s));

    rank_state_init(&s);
    rank_state_end(&s, S, "STOP before WELCOME");
    CHECK(s.now == S && s.ended_in == C && !rank_state_started(&s));
}

int main(void)
{
    log_init("test_rank_state", -1, 0);
    test_table();
    test_training_life();
    test_other_lives();
    return check_exit("test_rank_state");
}
