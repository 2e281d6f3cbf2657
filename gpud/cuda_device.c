/* cuda_device — see cuda_device.h. */
#include "gpud/cuda_device.h"

#include <stdio.h>
#include <stdlib.h>

#include "common/errbuf.h"

/* A non-negative decimal, or -1. */
static long parse_index(const char *s)
{
    char *end;
    long v = s && *s ? strtol(s, &end, 10) : -1;
    return s && *s && !*end && v >= 0 && v <= 65535 ? v : -1;
}

int cuda_device_pick(const char *device_env, const char *local_env, int count, char *err,
                     size_t errlen)
{
    if (count <= 0) {
        err_set(err, errlen, "no CUDA device is visible");
        return -1;
    }
    if (device_env && *device_env) {
        long d = parse_index(device_env);
        if (d < 0 || d >= count) {
            err_set(err, errlen, "DDPIPE_CUDA_DEVICE=%s: a device ordinal below %d (the devices "
                    "visible here: CUDA_VISIBLE_DEVICES)", device_env, count);
            return -1;
        }
        return (int)d;
    }
    if (local_env && *local_env) {
        long r = parse_index(local_env);
        if (r < 0) {
            err_set(err, errlen, "DDPIPE_LOCAL_RANK=%s: a non-negative integer", local_env);
            return -1;
        }
        return (int)(r % count);
    }
    return 0;
}

void cuda_device_set_local_rank(long rank)
{
    const char *v = getenv("DDPIPE_LOCAL_RANK");
    if (v && *v)
        return;
    char buf[24];
    if (!(v = getenv("LOCAL_RANK")) || !*v)
        v = getenv("SLURM_LOCALID");
    if ((!v || !*v) && rank >= 0) {
        snprintf(buf, sizeof buf, "%ld", rank);
        v = buf;
    }
    if (v && *v)
        setenv("DDPIPE_LOCAL_RANK", v, 1);
}
