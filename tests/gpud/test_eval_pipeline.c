/* The pipelined eval of gpud/model.h (model_eval_begin_u8, _stage_u8,
 * _end; gpud's eval job runs it, docs/CUDA.md "The input path") gives
 * model_forward_u8's logits bit for bit, on the cpu backend:
 *   - begin A, stage B, end: A's logits; begin B (its first micro-batch
 *     already staged: not written again), end: B's;
 *   - begin A, stage B, then begin C (another batch): C's logits, not B's
 *     first micro-batch (a stale stage is written over);
 *   - stage with nothing in flight, or of another input shape: 0, nothing
 *     staged;
 *   - a begin left open is read by the next call (a forward of D): both
 *     right;
 *   - DDPIPE_EVAL_OVERLAP=0 (each micro-batch in turn) the same.
 * The small WideResNet at micro-batch 8, batches of 19 (three micro-
 * batches, the last short) and 5 (one). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpud/model.h"
#include "tcheck.h"

#define MB 8

static const int CH[4] = {8, 16, 24, 32};   /* wrn_small's */

static model_t *open_wrn(void)
{
    char path[1024], err[512] = "";
    model_opts_t o = {.arch = "wideresnet", .threads = 1, .micro_batch = MB, .n_channels = 4};
    memcpy(o.channels, CH, sizeof o.channels);
    model_t *m = model_new(&o, "cpu", tc_src("tests/golden/wrn_small.safetensors", path,
                                             sizeof path), err, sizeof err);
    REQUIRE(m, "model_new(wideresnet): %s", err);
    return m;
}

static uint8_t *images(int n, uint32_t seed)
{
    uint8_t *px = malloc((size_t)n * 28 * 28);
    REQUIRE(px, "out of memory");
    for (size_t i = 0; i < (size_t)n * 28 * 28; i++) {
        seed = seed * 1664525u + 1013904223u;
        px[i] = (uint8_t)(seed >> 24);
    }
    return px;
}

static float *plain(model_t *m, const uint8_t *px, int n)
{
    char err[512] = "";
    float *l = malloc((size_t)n * model_num_classes(m) * sizeof *l);
    REQUIRE(l && model_forward_u8(m, px, n, 1, 28, 28, NULL, NULL, l, err, sizeof err) == 0,
            "forward: %s", err);
    return l;
}

static int same(const model_t *m, const float *a, const float *b, int n)
{
    return memcmp(a, b, (size_t)n * model_num_classes(m) * sizeof *a) == 0;
}

static void run(int overlap)
{
    if (!overlap)
        setenv("DDPIPE_EVAL_OVERLAP", "0", 1);
    model_t *m = open_wrn();
    enum { NA = 19, NB = 19, NC = 5, ND = 11 };
    uint8_t *a = images(NA, 1), *b = images(NB, 2), *c = images(NC, 3), *d = images(ND, 4);
    float *wa = plain(m, a, NA), *wb = plain(m, b, NB), *wc = plain(m, c, NC);
    float *wd = plain(m, d, ND);
    CHECK(!same(m, wa, wb, NA), "two batches' logits equal: the input does not reach them");
    size_t nc = (size_t)model_num_classes(m);
    float *l1 = malloc(NA * nc * sizeof *l1), *l2 = malloc(NA * nc * sizeof *l2);
    char err[512] = "";
    REQUIRE(l1 && l2, "out of memory");

    /* nothing in flight: nothing staged */
    CHECK(model_eval_stage_u8(m, b, NB, 1, 28, 28, NULL, NULL, err, sizeof err) == 0,
          "staged with nothing in flight");
    /* A, B staged meanwhile, then B */
    CHECK(model_eval_begin_u8(m, a, NA, 1, 28, 28, NULL, NULL, l1, err, sizeof err) == 0,
          "begin A: %s", err);
    CHECK(model_eval_stage_u8(m, b, NB, 1, 28, 28, NULL, NULL, err, sizeof err) == 1,
          "stage B: %s", err);
    CHECK(model_eval_stage_u8(m, b, NB, 1, 30, 30, NULL, NULL, err, sizeof err) == 0,
          "staged another shape into the graph in flight");
    CHECK(model_eval_stage_u8(m, b, NB, 1, 28, 28, NULL, NULL, err, sizeof err) == 1,
          "stage B again: %s", err);
    CHECK(model_eval_end(m, err, sizeof err) == 0 && same(m, l1, wa, NA),
          "overlap %d: A's logits with B staged during its forward differ (%s)", overlap, err);
    CHECK(model_eval_begin_u8(m, b, NB, 1, 28, 28, NULL, NULL, l2, err, sizeof err) == 0 &&
              model_eval_end(m, err, sizeof err) == 0 && same(m, l2, wb, NB),
          "overlap %d: B begun on its staged first micro-batch differs (%s)", overlap, err);
    /* B staged, C begun instead */
    CHECK(model_eval_begin_u8(m, a, NA, 1, 28, 28, NULL, NULL, l1, err, sizeof err) == 0 &&
              model_eval_stage_u8(m, b, NB, 1, 28, 28, NULL, NULL, err, sizeof err) == 1 &&
              model_eval_end(m, err, sizeof err) == 0, "A, B staged: %s", err);
    CHECK(model_eval_begin_u8(m, c, NC, 1, 28, 28, NULL, NULL, l2, err, sizeof err) == 0 &&
              model_eval_end(m, err, sizeof err) == 0 && same(m, l2, wc, NC),
          "overlap %d: C begun after B was staged got B's first micro-batch (%s)", overlap,
          err);
    /* a begin left open, then a plain forward of D */
    float *l3 = malloc(ND * nc * sizeof *l3);
    REQUIRE(l3, "out of memory");
    CHECK(model_eval_begin_u8(m, a, NA, 1, 28, 28, NULL, NULL, l1, err, sizeof err) == 0 &&
              model_eval_stage_u8(m, b, NB, 1, 28, 28, NULL, NULL, err, sizeof err) == 1 &&
              model_forward_u8(m, d, ND, 1, 28, 28, NULL, NULL, l3, err, sizeof err) == 0,
          "A open, then D: %s", err);
    CHECK(same(m, l1, wa, NA) && same(m, l3, wd, ND),
          "overlap %d: a begin left open, then a forward: A %s, D %s", overlap,
          same(m, l1, wa, NA) ? "right" : "wrong", same(m, l3, wd, ND) ? "right" : "wrong");
    CHECK(model_eval_end(m, err, sizeof err) == 0, "an end with nothing open: %s", err);
    printf("pipelined eval (overlap %d): begin/stage/end equal to model_forward_u8\n", overlap);
    free(a), free(b), free(c), free(d);
    free(wa), free(wb), free(wc), free(wd);
    free(l1), free(l2), free(l3);
    model_destroy(&m);
    unsetenv("DDPIPE_EVAL_OVERLAP");
}

int main(void)
{
    run(1);
    run(0);
    return tc_done("test_eval_pipeline");
}
