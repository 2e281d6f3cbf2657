/* gpud_cuda_open: backend_new("cuda") either starts on a device (a GPU
 * machine: the name and a tiny graph round trip) or, with no device, fails
 * cleanly with a message that says what to do — never crashes or hangs.
 * Runs on every machine (CPU CI covers the error path). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpud/backend.h"
#include "gpud/cuda/cuda_backend.h"
#include "../tcheck.h"

static void no_device(void)
{
    char err[512] = "";
    backend_t *be = backend_new("cuda", 1, err, sizeof err);
    CHECK(be == NULL, "backend_new(cuda) succeeded without a device");
    CHECK(strstr(err, "no CUDA device") && strstr(err, "nvidia-smi"),
          "message should say there is no device and what to check: '%s'", err);
    printf("no device: backend_new(\"cuda\") -> \"%s\"\n", err);
    backend_destroy(&be);
}

static void with_device(void)
{
    char err[512] = "";
    backend_t *be = backend_new("cuda", 1, err, sizeof err);
    REQUIRE(be, "backend_new(cuda): %s", err);
    CHECK(strcmp(backend_name(be), "cuda") == 0, "name %s", backend_name(be));
    CHECK(cuda_backend_device_name(be)[0], "device name");
    printf("device: %s\n", cuda_backend_device_name(be));
    bk_graph_t *g = bk_graph_new(be);
    bk_graph_set_forward_only(g);
    bk_graph_set_training(g, 0);
    bk_tensor_t *x = bk_input(g, 1, 2, 1, 3, 0);
    bk_tensor_t *y = bk_relu(g, x);
    float in[6] = {-1, 2, -3, 4, 0, 5}, out[6] = {0};
    CHECK(bk_write(g, x, in) == 0 && bk_forward(g) == 0 && bk_read(g, y, out) == 0, "run: %s",
          bk_graph_error(g) ? bk_graph_error(g) : "");
    for (int i = 0; i < 6; i++)
        CHECK(out[i] == (in[i] > 0 ? in[i] : 0.0f), "relu[%d] = %g", i, (double)out[i]);
    bk_graph_destroy(&g);
    backend_destroy(&be);
}

int main(void)
{
    /* an unknown precision is refused before any device work */
    char err[512] = "";
    setenv("DDPIPE_CUDA_PRECISION", "fp8", 1);
    backend_t *be = backend_new("cuda", 1, err, sizeof err);
    CHECK(!be && strstr(err, "DDPIPE_CUDA_PRECISION"), "fp8 refused: '%s'", err);
    backend_destroy(&be);
    unsetenv("DDPIPE_CUDA_PRECISION");
    if (cuda_device_count() == 0)
        no_device();
    else
        with_device();
    return tc_done("test_cuda_open");
}
