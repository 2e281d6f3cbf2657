/* step_bytes — the plan of the host<->device bytes of one training step
 * on the cuda backend with device-resident arenas (issue 30): the
 * parameters, gradients and optimizer state stay in device memory, so a
 * step moves its batch in (uint8 pixels + the normalisation table, labels,
 * sample ids, loss gradient), its outputs out (loss and the top-k ids,
 * ranked on the device: model_step_plan) and, only with --sync-bn (SyncBatchNorm over W > 1
 * ranks, whose sums the host all-reduces), training BatchNorm's
 * per-channel vectors (model_copy_plan: what the kernels copy, bn_kernels,
 * and what the tape copies, bn_tape); without it BatchNorm stays on the
 * device (bn 0). Arithmetic over the model's training graph (described,
 * not run: no GPU needed), planned for the ref-device backend, which
 * decides where BatchNorm runs as cuda does.
 *
 *   step_bytes [--arch resnet18] [--batch 256] [--size 224] [--classes 1000]
 *              [--in-channels 0] [--channels a,b,c,d] [--sync-bn]
 *
 * Prints the figures, then one line "step_bytes arch=... params=0 bn=B
 * batch_in=I out=O ..." that scripts/gpu-check.sh compares with what the
 * cuda backend counted (gpud --verbose's "step bytes" line: its
 * parameters/gradients must be 0 and its bn B). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/flags.h"
#include "gpud/backend.h"
#include "gpud/backend_arena.h"
#include "gpud/model.h"
#include "proto/messages.h"

static int no_sum(void *ctx, double *data, size_t n, char *err, size_t errlen)
{
    (void)ctx, (void)data, (void)n, (void)err, (void)errlen;
    return 0;   /* planned, never run */
}

int main(int argc, char **argv)
{
    const char *arch = "resnet18";
    long batch = 256, size = 224, classes = 1000, in_ch = 0;
    model_opts_t mo = {.train = 1, .init = 1, .threads = 1};
    int sync_bn = 0;
    for (int i = 1; i < argc; i += 2) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--sync-bn")) {
            sync_bn = 1;
            i--;
            continue;
        }
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
                            "[--classes 1000] [--in-channels 0] [--channels a,b,c,d] [--sync-bn]\n");
            return 2;
        }
    }
    mo.arch = arch;
    mo.num_classes = (int)classes;
    mo.in_channels = (int)in_ch;
    char err[512];
    /* ref-device: device arenas and BatchNorm on the device, as cuda */
    model_t *m = model_new(&mo, "ref-device", NULL, err, sizeof err);
    if (!m || (sync_bn && model_set_sync_bn(m, no_sum, NULL) < 0)) {
        fprintf(stderr, "step_bytes: %s\n", m ? "SyncBatchNorm refused" : err);
        model_destroy(&m);
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
    /* gpud's step: the loss and the top-k its RESULT carries */
    int nc = model_num_classes(m);
    model_step_plan(m, n, c, hw, hw, 1, 1, 0, nc < DDP_MAX_K ? nc : DDP_MAX_K, &io);
    uint64_t bn = cp.bn_kernels + cp.bn_tape, total = io.batch_in + io.out + bn;
    printf("%s, batch %d of %dx%dx%d, %d classes%s: one training step host<->device\n", arch,
           n, c, hw, hw, model_num_classes(m), sync_bn ? ", SyncBatchNorm" : "");
    printf("  device-resident arenas: batch in %llu + out %llu + BatchNorm %llu (kernels %llu, "
           "tape %llu) = %llu; parameters/gradients 0\n",
           (unsigned long long)io.batch_in, (unsigned long long)io.out, (unsigned long long)bn,
           (unsigned long long)cp.bn_kernels, (unsigned long long)cp.bn_tape,
           (unsigned long long)total);
    /* the reference point of bench/RESULTS.md: issue 29's plan of the
     * kernels that copied every parameter per op, this same configuration */
    if (!strcmp(arch, "resnet18") && n == 256 && hw == 224 && model_num_classes(m) == 1000 &&
        c == 3 && mo.n_channels == 0)
        printf("  old plan (issue 29, parameters copied per op): 180030272 = %.1fx this\n",
               total ? 180030272.0 / (double)total : 0.0);
    printf("step_bytes arch=%s batch=%d size=%d classes=%d params=0 bn=%llu batch_in=%llu "
           "out=%llu bn_kernels=%llu bn_tape=%llu total=%llu\n",
           arch, n, hw, model_num_classes(m), (unsigned long long)bn,
           (unsigned long long)io.batch_in, (unsigned long long)io.out,
           (unsigned long long)cp.bn_kernels, (unsigned long long)cp.bn_tape,
           (unsigned long long)total);
    model_destroy(&m);
    return 0;
}
