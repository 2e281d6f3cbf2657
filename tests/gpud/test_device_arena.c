/* A device-resident arena, proved without a device: the "ref-device"
 * backend (gpud/cpu/ref_device.c) runs the ref kernels over arenas whose
 * addresses the host cannot dereference (a stray host read or write
 * faults; a kernel handed the wrong kind of memory aborts). Training and
 * evaluating on it must give the "ref" backend's bytes, which shows that
 * the tape, the inference plan's fold, the trainer (buckets, optimizer,
 * non-finite scans, BN buffer save/restore) and checkpoints reach device
 * parameters only through the arena's ops — what the cuda backend needs.
 *
 * On the seed WideResNet (dropout) with SGD (momentum, nesterov, weight
 * decay) and Adam (amsgrad), and on resnet18 at 16x16 with SGD, with one BatchNorm frozen (eval-mode BN in a training graph)
 * and one conv frozen (no gradient):
 *   - 3 steps: the same losses and logits each step;
 *   - a step copies no parameter (params bytes 0) and its BatchNorm vector
 *     bytes (bn) are bk_graph_copy_plan's bn_tape: 0 where training
 *     BatchNorm runs on the device (the backend's bn_train_*, the same
 *     bytes as the host path: bn_math.h), more where a SyncBatchNorm hook
 *     (a one-rank identity here) sends it down the host path, which runs
 *     with host vectors over the device arena; ref counts 0 of both;
 *   - the checkpoint after them (parameters, buffers, optimizer state) has
 *     the same bytes; loaded into a fresh ref-device trainer it continues
 *     one more step exactly as ref does;
 *   - eval logits after training (the inference plan folds BN through
 *     device stages) equal ref's;
 *   - trainer_restore puts the BN buffers back;
 *   - a NaN written into a parameter is found and named as on ref;
 * and the same in bf16 (--precision bf16: the weights' bf16 copies and the
 * weight gradients rounded in parameter memory by round_half_param). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpud/backend.h"
#include "gpud/backend_arena.h"
#include "gpud/trainer.h"
#include "tcheck.h"

#define N 3
#define CLASSES 10
#define STEPS 3

typedef struct {
    const char *arch;
    int c, hw;
    const char *freeze, *freeze_bn;
} arch_t;

static const arch_t ARCHS[] = {
    {"wideresnet", 1, 28, "block1.layer1.cbr.0.", "block2.layer1.cbr.1"},
    {"resnet18", 3, 16, "layer1.0.conv1.", "layer2.0.bn1"},
};

typedef struct {
    model_t *m;
    trainer_t *t;
    allreduce_t *ar;
} run_t;

/* SyncBatchNorm over one rank: the sums as they are. */
static int one_rank(void *ctx, double *data, size_t n, char *err, size_t errlen)
{
    (void)ctx, (void)data, (void)n, (void)err, (void)errlen;
    return 0;
}

static int g_sync;   /* open_run sets the hook above */
static int g_bf16;   /* open_run's precision */

static run_t open_run(const char *backend, const arch_t *a, const optim_cfg_t *oc)
{
    model_opts_t o = {.arch = a->arch, .train = 1, .init = 1, .init_seed = 3, .threads = 1,
                      .num_classes = CLASSES, .bf16 = g_bf16};
    if (!strcmp(a->arch, "wideresnet")) {
        int ch[4] = {4, 8, 8, 12};
        memcpy(o.channels, ch, sizeof ch);
        o.n_channels = 4;
    }
    char err[512];
    run_t r = {0};
    r.m = model_new(&o, backend, NULL, err, sizeof err);
    REQUIRE(r.m, "model_new(%s, %s): %s", a->arch, backend, err);
    REQUIRE(!g_sync || model_set_sync_bn(r.m, one_rank, NULL) == 0, "model_set_sync_bn");
    trainer_cfg_t cfg = {.optim = *oc, .lr = 0.05, .seed = 5, .n_freeze = 1, .n_freeze_bn = 1};
    cfg.freeze[0] = a->freeze;
    cfg.freeze_bn[0] = a->freeze_bn;
    r.t = trainer_new(r.m, &cfg, err, sizeof err);
    REQUIRE(r.t, "trainer_new(%s, %s): %s", a->arch, backend, err);
    r.ar = allreduce_new(0, 1, NULL, NULL, err, sizeof err);
    REQUIRE(r.ar, "allreduce world 1: %s", err);
    return r;
}

static void close_run(run_t *r)
{
    allreduce_destroy(&r->ar);
    trainer_destroy(&r->t);
    model_destroy(&r->m);
}

static uint8_t *pixels(const arch_t *a, int step)
{
    size_t n = (size_t)N * a->c * a->hw * a->hw;
    uint8_t *px = malloc(n);
    REQUIRE(px, "alloc");
    for (size_t i = 0; i < n; i++)
        px[i] = (uint8_t)(i * 37u + 11u + (unsigned)step * 101u);
    return px;
}

/* One trainer step; loss and logits out. */
static void step(run_t *r, const arch_t *a, int s, float *loss, float *logits)
{
    char err[512];
    int32_t labels[N] = {1, 7, 3};
    uint64_t ids[N] = {10, 11, 12};
    uint8_t *px = pixels(a, s);
    trainer_batch_t b = {.pixels = px, .n = N, .c = a->c, .h = a->hw, .w = a->hw,
                         .labels = labels, .ids = ids, .global_count = N,
                         .step = (uint64_t)s};
    REQUIRE(trainer_forward_backward(r->t, &b, loss, logits, err, sizeof err) == 0,
            "%s step %d: %s", a->arch, s, err);
    REQUIRE(trainer_reduce(r->t, r->ar, 1000, err, sizeof err) == 0, "reduce: %s", err);
    REQUIRE(trainer_check_grads(r->t, err, sizeof err) == 0, "%s", err);
    trainer_apply(r->t, 0, N);
    REQUIRE(trainer_check_params(r->t, err, sizeof err) == 0, "%s", err);
    free(px);
}

static uint8_t *image_of(run_t *r, size_t *len)
{
    char err[512];
    uint8_t *img = NULL;
    ckpt_info_t info = {.epoch = 0, .step = STEPS};
    REQUIRE(trainer_save_to(r->t, NULL, &img, len, &info, err, sizeof err) == 0, "save: %s",
            err);
    return img;
}

/* The plan's BatchNorm vector bytes of one training step of this model. */
static uint64_t bn_plan(run_t *r, const arch_t *a)
{
    char err[512];
    bk_copy_plan_t p;
    REQUIRE(model_copy_plan(r->m, N, a->c, a->hw, a->hw, &p, err, sizeof err) == 0, "%s", err);
    return p.bn_tape;
}

static void test_one(const arch_t *a, const optim_cfg_t *oc, const char *oname, int sync)
{
    char err[512];
    g_sync = sync;
    run_t h = open_run("ref", a, oc), d = open_run("ref-device", a, oc);
    CHECK(model_params_arena(d.m)->ops->mem == BK_MEM_DEVICE, "ref-device: host arena");
    float lh[N], ld[N], gh[N * CLASSES], gd[N * CLASSES];
    uint64_t plan = bn_plan(d.m ? &d : &h, a);
    CHECK(sync ? plan > 0 : plan == 0, "%s: %llu BatchNorm bytes planned %s SyncBatchNorm",
          a->arch, (unsigned long long)plan, sync ? "with" : "without");
    for (int s = 0; s < STEPS; s++) {
        bk_traffic_t before = *model_traffic(d.m), hb = *model_traffic(h.m);
        step(&h, a, s, lh, gh);
        step(&d, a, s, ld, gd);
        CHECK(!memcmp(lh, ld, sizeof lh) && !memcmp(gh, gd, sizeof gh),
              "%s %s step %d: ref-device's loss/logits differ from ref's", a->arch, oname, s);
        const bk_traffic_t *now = model_traffic(d.m), *hn = model_traffic(h.m);
        CHECK(now->params == before.params, "%s step %d: %llu parameter bytes copied", a->arch,
              s, (unsigned long long)(now->params - before.params));
        CHECK(now->bn - before.bn == plan, "%s step %d: %llu BatchNorm bytes, plan %llu",
              a->arch, s, (unsigned long long)(now->bn - before.bn),
              (unsigned long long)plan);
        CHECK(hn->params == hb.params && hn->bn == hb.bn, "ref counted device copies");
    }
    size_t nh, nd;
    uint8_t *ih = image_of(&h, &nh), *id = image_of(&d, &nd);
    CHECK(nh == nd && !memcmp(ih, id, nh), "%s %s: checkpoints differ after %d steps",
          a->arch, oname, STEPS);

    /* ref's checkpoint into a fresh ref-device trainer: the next step alike */
    run_t d2 = open_run("ref-device", a, oc);
    ckpt_info_t info;
    REQUIRE(trainer_load_from(d2.t, "ref image", ih, nh, &info, err, sizeof err) == 0,
            "load: %s", err);
    step(&h, a, STEPS, lh, gh);
    step(&d2, a, STEPS, ld, gd);
    CHECK(!memcmp(lh, ld, sizeof lh) && !memcmp(gh, gd, sizeof gh),
          "%s %s: the step after a load differs", a->arch, oname);
    free(ih);
    free(id);
    ih = image_of(&h, &nh);
    id = image_of(&d2, &nd);
    CHECK(nh == nd && !memcmp(ih, id, nh), "%s %s: checkpoints differ after the load and a step",
          a->arch, oname);

    /* eval: the inference plan folds the BatchNorms through device stages */
    uint8_t *px = pixels(a, 9);
    REQUIRE(model_forward_u8(h.m, px, N, a->c, a->hw, a->hw, NULL, NULL, gh, err,
                             sizeof err) == 0, "eval ref: %s", err);
    REQUIRE(model_forward_u8(d2.m, px, N, a->c, a->hw, a->hw, NULL, NULL, gd, err,
                             sizeof err) == 0, "eval ref-device: %s", err);
    CHECK(!memcmp(gh, gd, sizeof gh), "%s %s: eval logits differ", a->arch, oname);

    /* trainer_restore: the BN buffers as before the step */
    const bk_arena_t *pa = model_params_arena(d2.m);
    size_t off = model_buffers_offset(d2.m), nb = pa->floats - off;
    float *b0 = malloc(nb * sizeof *b0), *b1 = malloc(nb * sizeof *b1);
    REQUIRE(b0 && b1 && bk_arena_read(pa, off, nb, b0) == 0, "read buffers");
    int32_t labels[N] = {2, 2, 5};
    uint64_t ids[N] = {1, 2, 3};
    trainer_batch_t b = {.pixels = px, .n = N, .c = a->c, .h = a->hw, .w = a->hw,
                         .labels = labels, .ids = ids, .global_count = N, .step = 50};
    REQUIRE(trainer_forward_backward(d2.t, &b, NULL, NULL, err, sizeof err) == 0, "%s", err);
    REQUIRE(bk_arena_read(pa, off, nb, b1) == 0, "read buffers");
    CHECK(memcmp(b0, b1, nb * sizeof *b0) != 0, "the step left the BN buffers unchanged");
    trainer_restore(d2.t);
    REQUIRE(bk_arena_read(pa, off, nb, b1) == 0, "read buffers");
    CHECK(!memcmp(b0, b1, nb * sizeof *b0), "%s: trainer_restore did not restore", a->arch);

    /* a NaN in the device arena, named as on the host */
    model_param_t ph, pd;
    REQUIRE(model_param_at(h.m, 1, &ph) == 0 && model_param_at(d2.m, 1, &pd) == 0, "param 1");
    float nan = NAN;
    REQUIRE(bk_arena_write(model_params_arena(h.m), ph.offset + 2, 1, &nan) == 0 &&
                bk_arena_write(pa, pd.offset + 2, 1, &nan) == 0, "write NaN");
    char eh[512] = "", ed[512] = "";
    CHECK(trainer_check_params(h.t, eh, sizeof eh) < 0 &&
              trainer_check_params(d2.t, ed, sizeof ed) < 0 && !strcmp(eh, ed) &&
              strstr(ed, pd.name) && strstr(ed, "element 2 "),
          "NaN: ref says '%s', ref-device '%s'", eh, ed);
    free(b0);
    free(b1);
    free(px);
    free(ih);
    free(id);
    close_run(&d2);
    close_run(&d);
    close_run(&h);
}

int main(void)
{
    optim_cfg_t sgd = optim_cfg_default(OPTIM_SGD), adam = optim_cfg_default(OPTIM_ADAM);
    sgd.momentum = 0.9;
    sgd.nesterov = 1;
    sgd.weight_decay = 1e-4;
    adam.amsgrad = 1;
    test_one(&ARCHS[0], &sgd, "sgd", 0);
    test_one(&ARCHS[0], &adam, "adam", 1);
    test_one(&ARCHS[1], &sgd, "sgd", 0);
    test_one(&ARCHS[1], &sgd, "sgd", 1);
    g_bf16 = 1;
    test_one(&ARCHS[0], &sgd, "sgd bf16", 0);
    test_one(&ARCHS[1], &adam, "adam bf16", 1);
    return tc_done("test_device_arena");
}
