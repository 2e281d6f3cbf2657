/* gpud's trainer (trainer.h) on one rank: a checkpoint written after
 * two steps and loaded into a fresh trainer gives back the model, the
 * optimizer state and the metadata the CLI reads (ckpt.epoch, step, seed,
 * streak, global_batch, steps_per_epoch), and the next step is then
 * bit-identical to the uninterrupted one; checkpoints from before the new
 * keys load with 0; the saved weights load with model_new for eval and give
 * the trained model's logits; trainer_restore undoes a step's BN buffer
 * updates; an empty global step changes nothing; lr(e) is a pure function. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/safetensors.h"
#include "gpud/trainer.h"
#include "tcheck.h"

#define N 4
#define HW 28

static model_t *open_model(uint64_t seed, int train)
{
    model_opts_t o = {.arch = "wideresnet", .train = train, .init = 1, .init_seed = seed,
                      .threads = 1, .channels = {4, 8, 8, 12}, .n_channels = 4};
    char err[512];
    model_t *m = model_new(&o, "cpu", NULL, err, sizeof err);
    REQUIRE(m, "model_new: %s", err);
    return m;
}

static trainer_t *open_trainer(model_t *m)
{
    trainer_cfg_t cfg = {.optim = optim_cfg_default(OPTIM_SGD), .lr = 0.1, .seed = 5,
                         .warmup_epochs = 2, .warmup_start_factor = 0.25, .has_main = 1,
                         .main = {.kind = LR_STEP, .step_size = 2, .gamma = 0.5}};
    cfg.optim.momentum = 0.9;
    cfg.optim.weight_decay = 5e-4;
    char err[512];
    trainer_t *t = trainer_new(m, &cfg, err, sizeof err);
    REQUIRE(t, "trainer_new: %s", err);
    return t;
}

static uint8_t s_px[N * HW * HW];
static int32_t s_labels[N] = {1, 7, 3, 9};
static uint64_t s_ids[N] = {11, 12, 13, 14};

static void one_step(trainer_t *t, allreduce_t *ar, uint64_t step, int epoch)
{
    trainer_batch_t b = {.pixels = s_px, .n = N, .c = 1, .h = HW, .w = HW, .labels = s_labels,
                         .ids = s_ids, .global_count = N, .step = step};
    char err[512];
    float loss[N], logits[N * 10];
    REQUIRE(trainer_forward_backward(t, &b, loss, logits, err, sizeof err) == 0, "step: %s", err);
    for (int i = 0; i < N; i++)
        CHECK(isfinite(loss[i]) && loss[i] > 0, "loss[%d] = %g", i, (double)loss[i]);
    REQUIRE(trainer_reduce(t, ar, 1000, err, sizeof err) == 0, "reduce: %s", err);
    trainer_apply(t, epoch, N);
}

static int same_params(const model_t *a, const model_t *b, const char *what)
{
    for (int i = 0; i < model_param_count(a); i++) {
        model_param_t p, q;
        model_param_at(a, i, &p);
        if (model_param_find(b, p.name, &q) < 0 || memcmp(p.value, q.value, p.numel * 4) != 0) {
            CHECK(0, "%s: %s differs", what, p.name);
            return 0;
        }
    }
    return 1;
}

static void test_checkpoint_roundtrip(const char *dir)
{
    char path[256], err[512];
    snprintf(path, sizeof path, "%s/ckpt.safetensors", dir);
    allreduce_t *ar = allreduce_new(0, 1, NULL, NULL, err, sizeof err);
    REQUIRE(ar, "allreduce world 1: %s", err);
    model_t *m = open_model(1, 1);
    trainer_t *t = open_trainer(m);
    one_step(t, ar, 0, 0);
    one_step(t, ar, 1, 0);
    ckpt_info_t info = {.epoch = 1, .step = 2, .streak = 3, .global_batch = N,
                        .steps_per_epoch = 2};
    REQUIRE(trainer_save(t, path, &info, err, sizeof err) == 0, "save: %s", err);

    safetensors_t *st = safetensors_open(path, err, sizeof err);
    REQUIRE(st, "%s", err);
    const char *keys[][2] = {{"ckpt.epoch", "1"}, {"ckpt.step", "2"}, {"ckpt.seed", "5"},
                             {"ckpt.streak", "3"}, {"ckpt.global_batch", "4"},
                             {"ckpt.steps_per_epoch", "2"}, {"arch", "wideresnet"}};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const char *v = safetensors_meta(st, keys[i][0]);
        CHECK(v && strcmp(v, keys[i][1]) == 0, "metadata %s = %s, want %s", keys[i][0],
              v ? v : "(none)", keys[i][1]);
    }
    CHECK(safetensors_get(st, "block1.layer1.cbr.1.num_batches_tracked") ||
              model_i64_count(m) == 0, "num_batches_tracked not saved");
    CHECK(safetensors_get(st, "optim.fc.weight.momentum_buffer"), "momentum buffer not saved");
    safetensors_destroy(&st);

    model_t *m2 = open_model(99, 1);   /* other init: the load must replace everything */
    trainer_t *t2 = open_trainer(m2);
    ckpt_info_t got;
    REQUIRE(trainer_load(t2, path, &got, err, sizeof err) == 0, "load: %s", err);
    CHECK(got.epoch == 1 && got.step == 2 && got.seed == 5 && got.streak == 3 &&
              got.global_batch == N && got.steps_per_epoch == 2,
          "info back: epoch %lld step %lld seed %llu streak %lld G %lld spe %lld",
          (long long)got.epoch, (long long)got.step, (unsigned long long)got.seed,
          (long long)got.streak, (long long)got.global_batch, (long long)got.steps_per_epoch);
    ckpt_info_clear(&got);
    same_params(m, m2, "after load");
    for (int i = 0; i < model_i64_count(m); i++) {
        model_i64_t a, b;
        model_i64_at(m, i, &a);
        model_i64_at(m2, i, &b);
        CHECK(*a.value == *b.value && *a.value == 2, "%s: %lld vs %lld, want 2", a.name,
              (long long)*a.value, (long long)*b.value);
    }
    one_step(t, ar, 2, 1);   /* the resumed run's next step = the uninterrupted one */
    one_step(t2, ar, 2, 1);
    same_params(m, m2, "step after resume");

    /* wrong architecture width: refused, nothing changed */
    model_opts_t o = {.arch = "wideresnet", .train = 1, .init = 1, .threads = 1,
                      .channels = {4, 8, 8, 16}, .n_channels = 4};
    model_t *m3 = model_new(&o, "cpu", NULL, err, sizeof err);
    trainer_t *t3 = m3 ? open_trainer(m3) : NULL;
    CHECK(t3 && trainer_load(t3, path, &got, err, sizeof err) < 0 && strstr(err, "block5"),
          "a checkpoint of another width loaded (err '%s')", err);
    trainer_destroy(&t3);
    model_destroy(&m3);

    /* the final weights: a plain weights file for eval */
    snprintf(path, sizeof path, "%s/final.safetensors", dir);
    REQUIRE(trainer_save_weights(t, path, err, sizeof err) == 0, "save weights: %s", err);
    model_opts_t eo = {.arch = "wideresnet", .threads = 1, .channels = {4, 8, 8, 12},
                       .n_channels = 4};
    model_t *ev = model_new(&eo, "cpu", path, err, sizeof err);
    REQUIRE(ev, "eval model from the saved weights: %s", err);
    REQUIRE(model_sync_eval(m, err, sizeof err) == 0, "sync eval: %s", err);
    float a[N * 10], b[N * 10];
    REQUIRE(model_forward_u8(m, s_px, N, 1, HW, HW, NULL, NULL, a, err, sizeof err) == 0, "%s", err);
    REQUIRE(model_forward_u8(ev, s_px, N, 1, HW, HW, NULL, NULL, b, err, sizeof err) == 0, "%s", err);
    CHECK(memcmp(a, b, sizeof a) == 0, "saved weights give other logits than the trained model");
    model_destroy(&ev);

    trainer_destroy(&t2);
    model_destroy(&m2);
    trainer_destroy(&t);
    model_destroy(&m);
    allreduce_destroy(&ar);
}

/* A checkpoint written before ckpt.streak & co existed loads with 0. */
static void test_old_checkpoint(const char *dir)
{
    char path[256], err[512];
    snprintf(path, sizeof path, "%s/old.safetensors", dir);
    st_writer_t *w = st_writer_new();
    const char *meta[][2] = {{"format", CKPT_FORMAT}, {"ckpt.version", "1"},
                             {"ckpt.epoch", "4"}, {"ckpt.step", "40"}, {"ckpt.seed", "7"}};
    for (size_t i = 0; i < 5; i++)
        REQUIRE(st_writer_meta(w, meta[i][0], meta[i][1], err, sizeof err) == 0, "%s", err);
    /* one tensor: safetensors_open trips UBSan on a file with none (qsort of NULL) */
    float x = 1.5f, y = 0;
    int64_t shape[1] = {1};
    REQUIRE(st_writer_add(w, "x", ST_F32, 1, shape, &x, err, sizeof err) == 0, "%s", err);
    REQUIRE(st_writer_save(w, path, err, sizeof err) == 0, "%s", err);
    st_writer_destroy(&w);
    ckpt_info_t info;
    ckpt_tensor_t model[1] = {{.name = "x", .dtype = ST_F32, .ndim = 1, .shape = {1}, .data = &y}};
    REQUIRE(ckpt_load(path, model, 1, NULL, &info, err, sizeof err) == 0, "old: %s", err);
    CHECK(y == 1.5f, "tensor x = %g, want 1.5", (double)y);
    CHECK(info.epoch == 4 && info.step == 40 && info.streak == 0 && info.global_batch == 0 &&
              info.steps_per_epoch == 0, "old checkpoint: epoch %lld step %lld streak %lld",
          (long long)info.epoch, (long long)info.step, (long long)info.streak);
    ckpt_info_clear(&info);
}

static void test_restore_and_empty(void)
{
    char err[512];
    allreduce_t *ar = allreduce_new(0, 1, NULL, NULL, err, sizeof err);
    model_t *m = open_model(3, 1);
    trainer_t *t = open_trainer(m);
    model_param_t rm;
    REQUIRE(model_param_find(m, "input_block.cbr.1.running_mean", &rm) == 0, "running_mean");
    float before[4];
    memcpy(before, rm.value, sizeof before);
    trainer_batch_t b = {.pixels = s_px, .n = N, .c = 1, .h = HW, .w = HW, .labels = s_labels,
                         .ids = s_ids, .global_count = N, .step = 0};
    REQUIRE(trainer_forward_backward(t, &b, NULL, NULL, err, sizeof err) == 0, "%s", err);
    CHECK(memcmp(before, rm.value, sizeof before) != 0, "the step did not move running_mean");
    trainer_restore(t);
    CHECK(memcmp(before, rm.value, sizeof before) == 0, "trainer_restore left running_mean moved");

    /* an empty global step: zero gradients, no optimizer step */
    model_t *ref = open_model(3, 1);
    trainer_batch_t e = {.n = 0, .c = 1, .h = HW, .w = HW, .global_count = 0, .step = 0};
    REQUIRE(trainer_forward_backward(t, &e, NULL, NULL, err, sizeof err) == 0, "n=0: %s", err);
    REQUIRE(trainer_reduce(t, ar, 1000, err, sizeof err) == 0, "%s", err);
    trainer_apply(t, 0, 0);
    trainer_restore(t);   /* n = 0 may count num_batches_tracked: compare floats only */
    same_params(ref, m, "after an empty step");

    /* lr(e): warm-up from 0.25 * 0.1 over 2 epochs, then StepLR(2, 0.5) */
    double l0 = trainer_lr(t, 0), l5 = trainer_lr(t, 5);
    CHECK(fabs(l0 - 0.025) < 1e-12, "lr(0) = %g, want 0.025", l0);
    CHECK(fabs(l5 - 0.05) < 1e-12, "lr(5) = %g, want 0.1 * 0.5^((5-2)/2) = 0.05", l5);
    CHECK(trainer_lr(t, 0) == l0 && trainer_lr(t, 5) == l5, "lr(e) depends on the call order");
    CHECK(fabs(trainer_lr(t, 2) - 0.1) < 1e-12, "lr(2) = %g, want 0.1", trainer_lr(t, 2));
    model_destroy(&ref);
    trainer_destroy(&t);
    model_destroy(&m);
    allreduce_destroy(&ar);
}

int main(void)
{
    for (size_t i = 0; i < sizeof s_px; i++)
        s_px[i] = (uint8_t)((i * 131) ^ (i >> 3));
    char dir[128], cmd[300];
    snprintf(dir, sizeof dir, "/tmp/ddpipe-trd-%d", (int)getpid());
    snprintf(cmd, sizeof cmd, "mkdir -p %s", dir);
    REQUIRE(system(cmd) == 0, "mkdir");
    test_checkpoint_roundtrip(dir);
    test_old_checkpoint(dir);
    test_restore_and_empty();
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return tc_done("test_train_daemon");
}
