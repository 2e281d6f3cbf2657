/* step_bytes — the plan of the host<->device bytes of one training step
 * on the cuda backend (issue 29 part 2): today's kernels copy every
 * parameter per op (model_copy_plan: weights up at each forward and again
 * for each input gradient, gradients down, BatchNorm's vectors up and its
 * sums down); with a device-resident arena a step moves only its batch in
 * and its outputs out (model_step_plan: uint8 pixels + the normalisation
 * table, labels, sample ids, loss gradient in; loss and logits out).
 * Arithmetic over the model's training graph (described, not run: no GPU
 * needed, any backend's model gives the same figures).
 *
 *   step_bytes [--arch resnet18] [--batch 256] [--size 224] [--classes 1000]
 *              [--in-channels 0] [--channels a,b,c,d]
 *
 * Prints the figures, then one line "step_bytes arch=... per_op_params=P
 * resident=R ..." that scripts/gpu-check.sh compares with what the cuda
 * backend counted (P: the "parameters/gradients" of gpud's --verbose
 * "step bytes" line). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/flags.h"
#include "gpud/backend.h"
#include "gpud/backend_arena.h"
#include "gpud/model.h"

int main(int argc, char **argv)
{
    const char *arch = "resnet18";
    long batch = 256, size = 224, classes = 1000, in_ch = 0;
    model_opts_t mo = {.train = 1, .init = 1, .threads = 1};
    for (int i = 1; i < argc; i += 2) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int rc = v ? 0 : -1;
        if (rc == 0 && !strcmp(a, "--arch"))
            arch = v;
        else if (rc == 0 && !strcmp(a, "--batch"))
            rc = flags_long("batch", v, 1, 1 << 20, &batch);
        else if (rc == 0 && !strcmp(a, "--size"))
            rc = flags_long("size", v, 1, 1 << 14, &size);
        else if (rc == 0 && !strcmp(a, "--classes"))
            rc = flags_long("classes", v, 1, 1 << 20, &classes);
        else if (rc == 0 && !strcmp(a, "--in-channels"))
            rc = flags_long("in-channels", v, 0, 64, &in_ch);
        else if (rc == 0 && !strcmp(a, "--channels"))
            rc = flags_ints("channels", v, mo.channels, 4, &mo.n_channels);
        else
            rc = -1;
        if (rc < 0) {
            fprintf(stderr, "usage: step_bytes [--arch resnet18] [--batch 256] [--size 224] "
                            "[--classes 1000] [--in-channels 0] [--channels a,b,c,d]\n");
            return 2;
        }
    }
    mo.arch = arch;
    mo.num_classes = (int)classes;
    mo.in_channels = (int)in_ch;
    char err[512];
    /* ref: the cheapest backend to open; the figures do not depend on it */
    model_t *m = model_new(&mo, "ref", NULL, err, sizeof err);
    if (!m) {
        fprintf(stderr, "step_bytes: %s\n", err);
        return 1;
    }
    int c = model_in_channels(m), n = (int)batch, hw = (int)size;
    bk_copy_plan_t cp;
    bk_traffic_t io;
    if (model_copy_plan(m, n, c, hw, hw, &cp, err, sizeof err) < 0) {
        fprintf(stderr, "step_bytes: %s\n", err);
        model_destroy(&m);
        return 1;
    }
    model_step_plan(m, n, c, hw, hw, 1, 1, 1, &io);
    uint64_t per_op = cp.weights_up + cp.grads_down + cp.bn, resident = io.batch_in + io.out;
    printf("%s, batch %d of %dx%dx%d, %d classes: one training step host<->device\n", arch, n, c,
           hw, hw, model_num_classes(m));
    printf("  today's cuda kernels: parameters per op %llu (weights up %llu, gradients down "
           "%llu, BatchNorm %llu) + batch in %llu + out %llu = %llu\n",
           (unsigned long long)per_op, (unsigned long long)cp.weights_up,
           (unsigned long long)cp.grads_down, (unsigned long long)cp.bn,
           (unsigned long long)io.batch_in, (unsigned long long)io.out,
           (unsigned long long)(per_op + resident));
    printf("  device-resident arena: batch in %llu + out %llu = %llu\n",
           (unsigned long long)io.batch_in, (unsigned long long)io.out,
           (unsigned long long)resident);
    printf("step_bytes arch=%s batch=%d size=%d classes=%d per_op_params=%llu weights_up=%llu "
           "grads_down=%llu bn=%llu batch_in=%llu out=%llu resident=%llu\n",
           arch, n, hw, model_num_classes(m), (unsigned long long)per_op,
           (unsigned long long)cp.weights_up, (unsigned long long)cp.grads_down,
           (unsigned long long)cp.bn, (unsigned long long)io.batch_in,
           (unsigned long long)io.out, (unsigned long long)resident);
    model_destroy(&m);
    return 0;
}
