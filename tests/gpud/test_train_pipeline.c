/* The pipelined training step of gpud/model.h (model_train_begin_u8,
 * _stage_u8, _end; gpud's trainer runs it, docs/CUDA.md "The input path")
 * gives model_train_step_u8's losses, gradients and weights bit for bit, on
 * the cpu backend. Two models from the same weights take the same SGD steps
 * on batches A, B, C, D: one step by step, the other as
 *     begin A, stage B, end, update; begin B (staged), stage C, end, ...
 * and then:
 *   - a stage with nothing in flight, or of another shape or n: 0;
 *   - a begin with the staged batch does not write it again: B's bytes
 *     changed in place after the stage, the step still trains on the
 *     staged B (so the test sees the skip it relies on), and after
 *     model_train_unstage on the changed bytes;
 *   - a stale stage (C begun after B was staged) is written over;
 *   - a stage into a graph rebuilt since (label smoothing changed) is
 *     written again;
 *   - begin, then another begin: the first one's loss read by the second;
 *   - model_traffic: a staged batch counted once, by the step that reads
 *     it, or where it is forgotten (unstaged, stale, another graph).
 * The small WideResNet, batches of 12. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpud/backend_arena.h"
#include "gpud/model.h"
#include "tcheck.h"

enum { N = 12, PX = 28 * 28, G = 24 };

static const int CH[4] = {8, 16, 24, 32};   /* wrn_small's */

static model_t *open_wrn(void)
{
    char path[1024], err[512] = "";
    model_opts_t o = {.arch = "wideresnet", .threads = 1, .train = 1, .n_channels = 4};
    memcpy(o.channels, CH, sizeof o.channels);
    model_t *m = model_new(&o, "cpu", tc_src("tests/golden/wrn_small.safetensors", path,
                                             sizeof path), err, sizeof err);
    REQUIRE(m, "model_new(wideresnet, train): %s", err);
    return m;
}

static void fill(uint8_t *px, int32_t *labels, uint32_t seed)
{
    for (size_t i = 0; i < (size_t)N * PX; i++) {
        seed = seed * 1664525u + 1013904223u;
        px[i] = (uint8_t)(seed >> 24);
    }
    for (int i = 0; i < N; i++)
        labels[i] = (int32_t)((seed >> 8) + (uint32_t)i * 7u) % 10;
}

static model_step_t step_of(uint64_t k, float smoothing)
{
    return (model_step_t){.global_batch = G, .label_smoothing = smoothing, .seed = 7,
                          .step = k};
}

/* SGD, lr 0.05, on every trainable parameter. */
static void update(model_t *m)
{
    for (int i = 0; i < model_param_count(m); i++) {
        model_param_t p;
        REQUIRE(model_param_at(m, i, &p) == 0, "param %d", i);
        for (size_t j = 0; p.grad && j < p.numel; j++)
            p.value[j] -= 0.05f * p.grad[j];
    }
}

/* Whether the two models' values and gradients are the same bits. */
static int same_params(const model_t *a, const model_t *b)
{
    for (int i = 0; i < model_param_count(a); i++) {
        model_param_t p, q;
        REQUIRE(model_param_at(a, i, &p) == 0 && model_param_at(b, i, &q) == 0, "param %d", i);
        if (memcmp(p.value, q.value, p.numel * sizeof *p.value) != 0 ||
            (p.grad && memcmp(p.grad, q.grad, p.numel * sizeof *p.grad) != 0))
            return 0;
    }
    return 1;
}

static void plain_step(model_t *m, const uint8_t *px, const int32_t *labels, uint64_t k,
                       float smoothing, float *loss)
{
    char err[512] = "";
    model_step_t s = step_of(k, smoothing);
    REQUIRE(model_train_step_u8(m, px, N, 1, 28, 28, NULL, NULL, labels, &s, loss, NULL, err,
                                sizeof err) == 0, "step %llu: %s", (unsigned long long)k, err);
    update(m);
}

/* begin (px), stage (next, when set), end, update. The stage's answer. */
static int piped_step(model_t *m, const uint8_t *px, const int32_t *labels, uint64_t k,
                      float smoothing, const uint8_t *next, float *loss)
{
    char err[512] = "";
    model_step_t s = step_of(k, smoothing);
    REQUIRE(model_train_begin_u8(m, px, N, 1, 28, 28, NULL, NULL, labels, &s, loss, NULL, err,
                                 sizeof err) == 0, "begin %llu: %s", (unsigned long long)k, err);
    int st = next ? model_train_stage_u8(m, next, N, 1, 28, 28, NULL, NULL, err, sizeof err) : 0;
    REQUIRE(st >= 0, "stage after %llu: %s", (unsigned long long)k, err);
    REQUIRE(model_train_end(m, err, sizeof err) == 0, "end %llu: %s", (unsigned long long)k,
            err);
    update(m);
    return st;
}

/* Both models a step on batch 0 while b stages batch `staged`, then a step
 * on batch `run` at label smoothing eps (a's in turn, b's begun): whether
 * their losses and parameters agree after it. */
static int staged_then(model_t *a, model_t *b, uint64_t *k, uint8_t *const px[],
                       const int32_t lab[][N], int staged, int run, float eps)
{
    float la[N], lb[N];
    int st = piped_step(b, px[0], lab[0], *k, 0.0f, px[staged], lb);
    plain_step(a, px[0], lab[0], (*k)++, 0.0f, la);
    REQUIRE(st == 1, "batch %d not staged", staged);
    plain_step(a, px[run], lab[run], *k, eps, la);
    piped_step(b, px[run], lab[run], (*k)++, eps, NULL, lb);
    return memcmp(la, lb, sizeof la) == 0 && same_params(a, b);
}

int main(void)
{
    model_t *a = open_wrn(), *b = open_wrn();
    uint8_t *px[5];
    int32_t lab[5][N];
    for (int i = 0; i < 5; i++) {
        REQUIRE(px[i] = malloc((size_t)N * PX), "out of memory");
        fill(px[i], lab[i], 11u * (uint32_t)i + 1u);
    }
    float la[N], lb[N];
    char err[512] = "";

    /* nothing in flight: nothing staged */
    CHECK(model_train_stage_u8(b, px[1], N, 1, 28, 28, NULL, NULL, err, sizeof err) == 0,
          "staged with no step in flight");

    /* A, B, C, D: step by step against pipelined */
    uint64_t k = 0;
    for (int i = 0; i < 4; i++, k++) {
        plain_step(a, px[i], lab[i], k, 0.0f, la);
        int st = piped_step(b, px[i], lab[i], k, 0.0f, i < 3 ? px[i + 1] : NULL, lb);
        CHECK(i == 3 || st == 1, "step %d: the next batch was not staged", i);
        CHECK(memcmp(la, lb, sizeof la) == 0 && same_params(a, b),
              "step %d: pipelined step differs from model_train_step_u8 (loss %.9g vs %.9g)", i,
              (double)la[0], (double)lb[0]);
    }

    uint64_t in_a = model_traffic(a)->batch_in, in_b = model_traffic(b)->batch_in;
    CHECK(in_a == in_b, "batch bytes: %llu pipelined, %llu in turn (each staged batch counted "
          "once, by the step that reads it)", (unsigned long long)in_b,
          (unsigned long long)in_a);

    /* another shape or n: not staged */
    model_step_t s = step_of(k, 0.0f);
    CHECK(model_train_begin_u8(b, px[0], N, 1, 28, 28, NULL, NULL, lab[0], &s, lb, NULL, err,
                               sizeof err) == 0, "begin: %s", err);
    CHECK(model_train_stage_u8(b, px[1], N - 1, 1, 28, 28, NULL, NULL, err, sizeof err) == 0,
          "staged a batch of another size into the step in flight");
    CHECK(model_train_stage_u8(b, px[1], N, 1, 30, 30, NULL, NULL, err, sizeof err) == 0,
          "staged a batch of another shape into the step in flight");
    CHECK(model_train_end(b, err, sizeof err) == 0, "end: %s", err);
    plain_step(a, px[0], lab[0], k++, 0.0f, la);
    update(b);
    CHECK(memcmp(la, lb, sizeof la) == 0 && same_params(a, b), "the unstaged step differs");

    /* the staged bytes are what trains: B staged, then changed in place */
    uint8_t *keep = malloc((size_t)N * PX);
    REQUIRE(keep, "out of memory");
    memcpy(keep, px[1], (size_t)N * PX);
    CHECK(piped_step(b, px[0], lab[0], k, 0.0f, px[1], lb) == 1, "B not staged");
    plain_step(a, px[0], lab[0], k++, 0.0f, la);
    for (size_t j = 0; j < (size_t)N * PX; j++)
        px[1][j] = (uint8_t)(px[1][j] ^ 0x5a);
    plain_step(a, keep, lab[1], k, 0.0f, la);
    piped_step(b, px[1], lab[1], k++, 0.0f, NULL, lb);
    CHECK(memcmp(la, lb, sizeof la) == 0 && same_params(a, b),
          "a begin on the staged batch wrote it again (it trained on the bytes changed "
          "after the stage) or trained on something else");
    /* ... and after model_train_unstage, on the changed bytes */
    CHECK(piped_step(b, px[0], lab[0], k, 0.0f, keep, lb) == 1, "staging failed");
    plain_step(a, px[0], lab[0], k++, 0.0f, la);
    model_train_unstage(b);
    memcpy(keep, px[1], (size_t)N * PX);   /* the staged pointer, other bytes */
    plain_step(a, px[1], lab[1], k, 0.0f, la);
    piped_step(b, keep, lab[1], k++, 0.0f, NULL, lb);
    CHECK(memcmp(la, lb, sizeof la) == 0 && same_params(a, b),
          "after model_train_unstage the begin still took the staged bytes");

    /* a stale stage: B staged, C begun */
    CHECK(staged_then(a, b, &k, px, lab, 1, 2, 0.0f), "C begun after B was staged trained on B");
    /* staged into a graph rebuilt since (label smoothing): written again */
    CHECK(staged_then(a, b, &k, px, lab, 3, 3, 0.1f),
          "D staged into the old graph, begun on a new one (label smoothing): differs");

    /* three batches crossed and were not read: after unstage, stale, rebuilt */
    uint64_t extra = model_traffic(b)->batch_in - model_traffic(a)->batch_in;
    CHECK(extra == 3u * N * PX * sizeof(float) || extra == 3u * (N * PX + 256 * sizeof(float)),
          "batch bytes: %llu more pipelined than in turn, want 3 batches' (forgotten stages "
          "count where they are forgotten)", (unsigned long long)extra);

    /* a begin left open: the next begin reads it first */
    float lc[N];
    model_step_t s1 = step_of(k, 0.0f), s2 = step_of(k + 1, 0.0f);
    CHECK(model_train_begin_u8(b, px[2], N, 1, 28, 28, NULL, NULL, lab[2], &s1, lb, NULL, err,
                               sizeof err) == 0 &&
              model_train_begin_u8(b, px[4], N, 1, 28, 28, NULL, NULL, lab[4], &s2, lc, NULL,
                                   err, sizeof err) == 0 &&
              model_train_end(b, err, sizeof err) == 0, "two begins: %s", err);
    model_step_t t1 = step_of(k, 0.0f);
    CHECK(model_train_step_u8(a, px[2], N, 1, 28, 28, NULL, NULL, lab[2], &t1, la, NULL, err,
                              sizeof err) == 0 && memcmp(la, lb, sizeof la) == 0,
          "a begin left open: its loss was not read by the next begin (%s)", err);
    CHECK(model_train_end(b, err, sizeof err) == 0, "an end with nothing open: %s", err);

    printf("pipelined training: begin/stage/end equal to model_train_step_u8 over %llu steps\n",
           (unsigned long long)k);
    for (int i = 0; i < 5; i++)
        free(px[i]);
    free(keep);
    model_destroy(&a);
    model_destroy(&b);
    return tc_done("test_train_pipeline");
}
