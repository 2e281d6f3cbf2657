/* The model's arenas (gpud/backend_arena.h, issue 29) on "cpu" and "ref":
 * every value and gradient is a view into one params / one grads arena, in
 * model_param_at order (trainable values, then the BatchNorm buffers from
 * model_buffers_offset, each on a 64-byte line; the gradients in optimizer order, so
 * the trainer's buckets are ranges of it); model_freeze lays the grads
 * arena out again without the frozen ones; the optimizer's state is one
 * arena. The plan of a training step: the bytes a trainer step (forward,
 * backward, all-reduce, optimizer) moves between host and backend are
 * exactly the batch in and the loss/logits out, computed here from the
 * shapes, and no parameter or gradient copy at all (params 0); the
 * model_step_plan of the model says the same. An optimizer on a counted
 * non-host arena (host memory posing as device memory) steps without a
 * copy, and its checkpoint reads the state through the arena, bytes
 * counted, giving the same safetensors bytes as on the host arena. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpud/backend_arena.h"
#include "gpud/trainer.h"
#include "tcheck.h"

#define N 3
#define HW 28
#define CLASSES 10

static model_t *open_model(const char *backend)
{
    model_opts_t o = {.arch = "wideresnet", .train = 1, .init = 1, .init_seed = 3,
                      .threads = 1, .channels = {4, 8, 8, 12}, .n_channels = 4};
    char err[512];
    model_t *m = model_new(&o, backend, NULL, err, sizeof err);
    REQUIRE(m, "model_new(%s): %s", backend, err);
    return m;
}

/* Values and gradients tile their arenas in model_param_at order. */
static void check_layout(model_t *m, const char *what)
{
    const bk_arena_t *pa = model_params_arena(m), *ga = model_grads_arena(m);
    REQUIRE(pa && ga && pa->base && ga->base, "%s: no arenas", what);
    CHECK(pa->ops->mem == BK_MEM_HOST && ga->ops->mem == BK_MEM_HOST, "%s: not host memory",
          what);
    size_t next_w = 0, next_b = model_buffers_offset(m), next_g = 0;
    for (int i = 0; i < model_param_count(m); i++) {
        model_param_t p;
        REQUIRE(model_param_at(m, i, &p) == 0, "param %d", i);
        int buffer = strstr(p.name, ".running_") != NULL;
        size_t *next = buffer ? &next_b : &next_w;
        *next = (*next + 15) / 16 * 16;
        CHECK(p.offset == *next && p.value == pa->base + p.offset &&
                  (uintptr_t)p.value % 64 == 0, "%s: %s at %zu, want %zu", what, p.name,
              p.offset, *next);
        *next += p.numel;
        if (p.grad) {
            CHECK(p.grad_offset == next_g && p.grad == ga->base + p.grad_offset,
                  "%s: gradient of %s at %zu, want %zu", what, p.name, p.grad_offset, next_g);
            next_g += p.numel;
        }
    }
    CHECK((next_w + 15) / 16 * 16 == model_buffers_offset(m) && next_b == pa->floats,
          "%s: params arena %zu floats, buffers at %zu; tiled %zu + %zu", what, pa->floats,
          model_buffers_offset(m), next_w, next_b);
    CHECK(next_g == ga->floats, "%s: grads arena %zu floats, gradients %zu", what, ga->floats,
          next_g);
}

static void test_backend(const char *backend, int u8)
{
    char err[512];
    model_t *m = open_model(backend);
    check_layout(m, backend);
    /* a freeze lays the gradients out again: only the unfrozen ones */
    size_t all = model_grads_arena(m)->floats;
    REQUIRE(model_freeze(m, "block1.", 1) > 0, "freeze block1");
    check_layout(m, backend);
    CHECK(model_grads_arena(m)->floats < all, "frozen block1 still has gradient room");
    model_param_t c1;
    REQUIRE(model_param_find(m, "block1.layer1.cbr.0.weight", &c1) == 0, "block1's conv");
    CHECK(c1.grad == NULL, "frozen block1 conv has a gradient");
    REQUIRE(model_freeze(m, "block1.", 0) > 0, "unfreeze block1");
    check_layout(m, backend);
    CHECK(model_grads_arena(m)->floats == all, "unfrozen: %zu floats, want %zu",
          model_grads_arena(m)->floats, all);

    trainer_cfg_t cfg = {.optim = optim_cfg_default(OPTIM_ADAM), .lr = 0.01, .seed = 5};
    trainer_t *t = trainer_new(m, &cfg, err, sizeof err);
    REQUIRE(t, "trainer_new: %s", err);
    allreduce_t *ar = allreduce_new(0, 1, NULL, NULL, err, sizeof err);
    REQUIRE(ar, "allreduce world 1: %s", err);

    static uint8_t px[N * HW * HW];
    int32_t labels[N] = {1, 7, 3};
    uint64_t ids[N] = {10, 11, 12};
    for (size_t i = 0; i < sizeof px; i++)
        px[i] = (uint8_t)(i * 37u + 11u);
    float loss[N], logits[N * CLASSES];
    for (int step = 0; step < 2; step++) {   /* the first step makes the graph and the state */
        bk_traffic_t before = *model_traffic(m);
        trainer_batch_t b = {.pixels = px, .n = N, .c = 1, .h = HW, .w = HW, .labels = labels,
                             .ids = ids, .global_count = N, .step = (uint64_t)step};
        REQUIRE(trainer_forward_backward(t, &b, loss, logits, err, sizeof err) == 0, "%s", err);
        REQUIRE(trainer_reduce(t, ar, 1000, err, sizeof err) == 0, "reduce: %s", err);
        trainer_apply(t, 0, N);
        const bk_traffic_t *now = model_traffic(m);
        /* from the shapes: pixels (bytes + the 1 x 256 float table, or
         * floats), labels int32, ids int64, the loss gradient float; loss
         * and logits back */
        uint64_t px_bytes = u8 ? N * HW * HW + 256 * 4 : N * HW * HW * 4;
        uint64_t in = px_bytes + N * (4 + 8 + 4), out = N * 4 + N * CLASSES * 4;
        CHECK(now->batch_in - before.batch_in == in, "%s step %d: batch in %llu bytes, want %llu",
              backend, step, (unsigned long long)(now->batch_in - before.batch_in),
              (unsigned long long)in);
        CHECK(now->out - before.out == out, "%s step %d: out %llu bytes, want %llu", backend,
              step, (unsigned long long)(now->out - before.out), (unsigned long long)out);
        CHECK(now->params == before.params, "%s step %d: %llu bytes of parameter copies",
              backend, step, (unsigned long long)(now->params - before.params));
        bk_traffic_t plan;
        model_step_plan(m, N, 1, HW, HW, u8, 1, 1, 0, &plan);
        CHECK(plan.batch_in == in && plan.out == out && plan.params == 0,
              "%s: model_step_plan %llu/%llu/%llu, want %llu/%llu/0", backend,
              (unsigned long long)plan.batch_in, (unsigned long long)plan.out,
              (unsigned long long)plan.params, (unsigned long long)in,
              (unsigned long long)out);
    }
    /* the top-k a RESULT carries, ranked by the backend (bk_read_topk): the
     * ids the host ranks from the same step's logits, and only n * k of
     * them out (no logits); the same batch twice, nothing applied between */
    enum { K = 4 };
    int32_t tk_want[N * K], tk_got[N * K];
    trainer_batch_t tb = {.pixels = px, .n = N, .c = 1, .h = HW, .w = HW, .labels = labels,
                          .ids = ids, .global_count = N, .step = 9, .topk = tk_got, .k = K};
    REQUIRE(trainer_forward_backward(t, &tb, loss, logits, err, sizeof err) == 0, "%s", err);
    model_topk_ce(logits, N, CLASSES, NULL, K, tk_want, NULL);
    CHECK(memcmp(tk_got, tk_want, sizeof tk_got) == 0, "%s: top-%d with the logits read differs from "
          "the host's ranking", backend, K);
    memset(tk_got, 0xff, sizeof tk_got);
    bk_traffic_t before = *model_traffic(m), plan;
    REQUIRE(trainer_forward_backward(t, &tb, loss, NULL, err, sizeof err) == 0, "%s", err);
    CHECK(memcmp(tk_got, tk_want, sizeof tk_got) == 0, "%s: top-%d ranked by the backend differs from "
          "the host's ranking", backend, K);
    uint64_t out = model_traffic(m)->out - before.out;
    model_step_plan(m, N, 1, HW, HW, u8, 1, 0, K, &plan);
    CHECK(out == N * 4 + N * K * 4 && plan.out == out, "%s: a step with top-%d: out %llu bytes, "
          "plan %llu, tk_want %d (loss + ids)", backend, K, (unsigned long long)out,
          (unsigned long long)plan.out, N * 4 + N * K * 4);
    /* the optimizer's moments: one arena, each parameter's state in it */
    const optim_t *o = trainer_optim(t);
    const float *lo = NULL, *hi = NULL;
    for (int i = 0; i < optim_param_count(o); i++)
        for (int s = 0; s < 2; s++) {
            int64_t n = 0;
            const float *v = optim_state(o, i, s ? "exp_avg_sq" : "exp_avg", &n);
            REQUIRE(v && n == optim_param_numel(o, i), "%s: state %d of %s", backend, s,
                    optim_param_name(o, i));
            lo = !lo || v < lo ? v : lo;
            hi = !hi || v + n > hi ? v + n : hi;
        }
    size_t span = (size_t)(hi - lo), want = 2 * model_grads_arena(m)->floats;
    CHECK(span == want, "%s: the Adam moments span %zu floats, want one arena of %zu", backend,
          span, want);
    allreduce_destroy(&ar);
    trainer_destroy(&t);
    model_destroy(&m);
}

/* The optimizer state's image (optim_save_state) after two Adam steps. */
static uint8_t *optim_image(const bk_arena_ops_t *ops, bk_traffic_t *traffic, size_t *len)
{
    char err[512];
    static const int64_t shape[2][2] = {{3, 5}, {7, 1}};
    float w[2][35], g[2][35];
    for (int i = 0; i < 35; i++)
        for (int p = 0; p < 2; p++) {
            w[p][i] = (float)(i + 1) * (p ? -0.25f : 0.5f);
            g[p][i] = (float)(i % 7) * 0.125f - 0.3f * (float)p;
        }
    optim_cfg_t cfg = optim_cfg_default(OPTIM_ADAM);
    cfg.amsgrad = true;
    optim_t *o = optim_new(&cfg, err, sizeof err);
    REQUIRE(o && optim_set_arena(o, ops, traffic, err, sizeof err) == 0, "%s", err);
    for (int p = 0; p < 2; p++)
        REQUIRE(optim_add_param(o, p ? "b" : "a", w[p], g[p], 2, shape[p], p == 0, err,
                                sizeof err) == p, "%s", err);
    optim_step(o, 0.1);
    optim_step(o, 0.1);
    CHECK(!traffic || traffic->params == 0, "%s: an optimizer step copied %llu bytes",
          ops->name, (unsigned long long)traffic->params);
    st_writer_t *wr = st_writer_new();
    uint8_t *img = NULL;
    REQUIRE(wr && optim_save_state(o, wr, err, sizeof err) == 0 &&
            st_writer_image(wr, &img, len, err, sizeof err) == 0, "%s", err);
    /* 15 + 7 floats of exp_avg, exp_avg_sq, max_exp_avg_sq */
    CHECK(!traffic || traffic->params == 3 * 22 * sizeof(float),
          "%s: the checkpoint read %llu bytes of state, want %zu", ops->name,
          (unsigned long long)traffic->params, 3 * 22 * sizeof(float));
    st_writer_destroy(&wr);
    optim_destroy(&o);
    return img;
}

static void test_counted_arena(void)
{
    bk_arena_ops_t dev = bk_arena_host;
    dev.name = "counted";
    dev.mem = BK_MEM_DEVICE;
    bk_traffic_t traffic = {0};
    size_t na, nb;
    uint8_t *a = optim_image(&bk_arena_host, NULL, &na), *b = optim_image(&dev, &traffic, &nb);
    CHECK(na == nb && memcmp(a, b, na) == 0, "the state's bytes differ between arenas");
    free(a);
    free(b);
}

int main(void)
{
    test_counted_arena();
    test_backend("cpu", 1);   /* oneDNN takes the uint8 pixels (bk_write_u8) */
    test_backend("ref", 0);   /* plain C: normalised floats (bk_write) */
    return tc_done("test_arena");
}
