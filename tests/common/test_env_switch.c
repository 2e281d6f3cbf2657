/* test_env_switch — the environment's on/off switches (common/env_switch.c):
 * on when unset and for any value but "0", off for "0" alone. */
#include <stdlib.h>

#include "common/env_switch.h"
#include "tests/gpud/tcheck.h"

int main(void)
{
    const char *name = "DDPIPE_TEST_SWITCH";
    unsetenv(name);
    CHECK(env_switch_on(name) == 1, "unset: on");
    static const struct {
        const char *v;
        int on;
    } cases[] = {{"0", 0}, {"1", 1}, {"", 1}, {"00", 1}, {"0 ", 1}, {"off", 1}, {"false", 1}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        setenv(name, cases[i].v, 1);
        CHECK(env_switch_on(name) == cases[i].on, "%s=\"%s\": want %s", name, cases[i].v,
              cases[i].on ? "on" : "off");
    }
    unsetenv(name);
    return tc_done("test_env_switch");
}
