/* env_switch — see env_switch.h. */
#include "common/env_switch.h"

#include <stdlib.h>
#include <string.h>

int env_switch_on(const char *name)
{
    const char *v = getenv(name);
    return !(v && strcmp(v, "0") == 0);
}
