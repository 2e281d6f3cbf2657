/* ratelog: the same (scope, peer, kind) logs once per window, at most
 * RATELOG_BURST lines per second in all, and the next line reports how
 * many were held back; each caller's table counts on its own. */
#include "common/clock.h"
#include "proto/ratelog.h"
#include "tests/proto/check.h"

int main(void)
{
    uint64_t held = 99;
    static int scope_a, scope_b; /* their addresses name two sockets */
    static ratelog_t rl;         /* the caller's table, all zero */
    CHECK(ratelog_allow(&rl, &scope_a, "peer1", "RESULT", &held) && held == 0);
    for (int i = 0; i < 1000; i++)   /* a flood of the same reject: one line */
        CHECK(!ratelog_allow(&rl, &scope_a, "peer1", "RESULT", &held));
    /* another peer, kind or socket is another line, carrying the count */
    CHECK(ratelog_allow(&rl, &scope_a, "peer2", "RESULT", &held) && held == 1000);
    CHECK(ratelog_allow(&rl, &scope_a, "peer1", "FAILED", &held) && held == 0);
    CHECK(ratelog_allow(&rl, &scope_b, "peer1", "RESULT", &held));
    /* the table is its caller's: another loop's table has its own window
     * (a key just logged, so that no other key can have evicted it) */
    static ratelog_t other;
    CHECK(ratelog_allow(&rl, &scope_b, "peer4", "RESULT", &held));
    CHECK(!ratelog_allow(&rl, &scope_b, "peer4", "RESULT", &held));
    CHECK(ratelog_allow(&other, &scope_b, "peer4", "RESULT", &held) && held == 0);
    /* many distinct reasons: capped per second */
    int allowed = 0;
    char kind[32];
    int64_t t0 = clock_mono_ms();
    for (int i = 0; i < 200; i++) {
        snprintf(kind, sizeof kind, "reason %d", i);
        allowed += ratelog_allow(&rl, &scope_a, "peer3", kind, &held);
    }
    int64_t seconds = (clock_mono_ms() - t0) / 1000 + 2;   /* windows the loop touched, at most */
    CHECK(allowed >= 1 && allowed <= RATELOG_BURST * seconds);
    CHECK(allowed < 200);
    return check_exit("test_ratelog");
}
