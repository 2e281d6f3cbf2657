/* cuda_device: which GPU a gpud takes (docs/CUDA.md "Devices"): the explicit
 * DDPIPE_CUDA_DEVICE, else the local rank modulo the visible devices, else
 * 0; bad values are errors naming the variable; gpud's local rank comes
 * from LOCAL_RANK, SLURM_LOCALID or its --rank, and an explicit one stays. */
#include <stdlib.h>
#include <string.h>

#include "gpud/cuda_device.h"
#include "tcheck.h"

static int pick(const char *dev, const char *local, int count, const char *want_err)
{
    char err[256] = "";
    int d = cuda_device_pick(dev, local, count, err, sizeof err);
    if (want_err)
        CHECK(d == -1 && strstr(err, want_err), "pick(%s, %s, %d): %d '%s', want '%s'",
              dev ? dev : "-", local ? local : "-", count, d, err, want_err);
    return d;
}

int main(void)
{
    CHECK(pick(NULL, NULL, 1, NULL) == 0, "default");
    CHECK(pick(NULL, NULL, 8, NULL) == 0, "default of 8");
    CHECK(pick("", "", 8, NULL) == 0, "empty values");
    CHECK(pick(NULL, "0", 8, NULL) == 0 && pick(NULL, "3", 8, NULL) == 3, "local rank");
    CHECK(pick(NULL, "11", 8, NULL) == 3 && pick(NULL, "5", 1, NULL) == 0, "modulo count");
    CHECK(pick("2", "5", 8, NULL) == 2, "explicit wins");
    CHECK(pick("0", NULL, 1, NULL) == 0, "explicit 0");
    pick("8", NULL, 8, "DDPIPE_CUDA_DEVICE=8: a device ordinal below 8");
    pick("x", NULL, 8, "DDPIPE_CUDA_DEVICE=x");
    pick("-1", NULL, 8, "DDPIPE_CUDA_DEVICE=-1");
    pick(NULL, "two", 8, "DDPIPE_LOCAL_RANK=two: a non-negative integer");
    pick(NULL, "3", 0, "no CUDA device");

    unsetenv("DDPIPE_LOCAL_RANK");
    unsetenv("LOCAL_RANK");
    unsetenv("SLURM_LOCALID");
    cuda_device_set_local_rank(-1);
    CHECK(!getenv("DDPIPE_LOCAL_RANK"), "no rank: nothing set");
    cuda_device_set_local_rank(5);
    CHECK(getenv("DDPIPE_LOCAL_RANK") && strcmp(getenv("DDPIPE_LOCAL_RANK"), "5") == 0,
          "--rank 5");
    cuda_device_set_local_rank(6);   /* set already: stays */
    CHECK(strcmp(getenv("DDPIPE_LOCAL_RANK"), "5") == 0, "kept");
    unsetenv("DDPIPE_LOCAL_RANK");
    setenv("SLURM_LOCALID", "2", 1);
    cuda_device_set_local_rank(9);
    CHECK(strcmp(getenv("DDPIPE_LOCAL_RANK"), "2") == 0, "SLURM_LOCALID over --rank");
    unsetenv("DDPIPE_LOCAL_RANK");
    setenv("LOCAL_RANK", "1", 1);
    cuda_device_set_local_rank(9);
    CHECK(strcmp(getenv("DDPIPE_LOCAL_RANK"), "1") == 0, "LOCAL_RANK first");
    return tc_done("test_cuda_device");
}
