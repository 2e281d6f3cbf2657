#include "common/jobid.h"

#include "common/token.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool jobid_valid(const char *id)
{
    size_t n = strlen(id);
    if (n == 0 || n >= JOBID_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = id[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '_' || c == ':' || c == '-';
        if (!ok)
            return false;
    }
    return true;
}

int jobid_from_env(char *out, size_t cap, char *err, size_t errlen)
{
    const char *env = getenv(JOBID_ENV);
    out[0] = '\0';
    if (!env || !env[0])
        return 0;
    if (!jobid_valid(env) || strlen(env) >= cap) {
        snprintf(err, errlen, "%s='%.80s' is not a job id: give 1..%d characters of "
                 "A-Z a-z 0-9 . _ : - (or unset it: ddpipe draws one per job)", JOBID_ENV, env,
                 JOBID_MAX - 1);
        return -1;
    }
    snprintf(out, cap, "%s", env);
    return 0;
}

int jobid_random(char *out, size_t cap)
{
    uint8_t raw[16];
    if (cap < 2 * sizeof raw + 1 || token_random(raw, sizeof raw) < 0)
        return -1;
    for (size_t i = 0; i < sizeof raw; i++)
        snprintf(out + 2 * i, 3, "%02x", raw[i]);
    return 0;
}
