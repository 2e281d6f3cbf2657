/* test_optim — gpud/optim's SGD, Adam, AdamW and NovoGrad against PyTorch
 * 1.13: every golden case (tests/golden/gen_optim.py) runs 3 steps from the
 * same weights and gradients (and, where the case has one, the learning
 * rates of its schedule); the weights after each step and the optimizer
 * state after the last must match PyTorch's within
 *     |ours - torch| / max(1, |torch|) <= 1e-5    (relative, absolute below 1).
 * Also: config validation and parameter bookkeeping. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpud/checkpoint.h"
#include "gpud/optim/optim.h"
#include "tests/optim/golden.h"

#define TOL 1e-5
#define N_PARAMS 5
static const char *const PARAMS[N_PARAMS] = {"conv.weight", "bn.weight", "bn.bias", "fc.weight",
                                             "fc.bias"};

static double worst_err;   /* over all cases, reported */

typedef struct {
    float *w[N_PARAMS];
    float *g[N_PARAMS];
    int64_t n[N_PARAMS];
    bool no_grad[N_PARAMS];   /* this step: p.grad is None */
} model_t;

static double cmp(const char *what, const float *got, const double *want, int64_t n)
{
    double worst = 0;
    int64_t at = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - want[i]) / fmax(1.0, fabs(want[i]));
        if (!(e <= worst) || isnan(e)) {
            worst = isnan(e) ? INFINITY : e;
            at = i;
        }
    }
    CHECK(worst <= TOL, "%s: error %.3g at [%lld]: got %.9g, PyTorch %.9g", what, worst,
          (long long)at, got[at], want[at]);
    if (worst > worst_err)
        worst_err = worst;
    return worst;
}

static optim_cfg_t cfg_from(const double *c)
{
    optim_cfg_t o = {.kind = (optim_kind_t)c[0], .weight_decay = c[2], .momentum = c[3],
                     .dampening = c[4], .nesterov = c[5] != 0, .beta1 = c[6], .beta2 = c[7],
                     .eps = c[8], .amsgrad = c[9] != 0, .grad_averaging = c[10] != 0};
    return o;
}

static void load_weights(const safetensors_t *st, const char *key_fmt, const char *cs, int k,
                         model_t *m, int set_grad)
{
    char key[256];
    for (int p = 0; p < N_PARAMS; p++) {
        if (set_grad)
            snprintf(key, sizeof key, key_fmt, cs, k, PARAMS[p]);
        else
            snprintf(key, sizeof key, key_fmt, cs, PARAMS[p]);
        int64_t n;
        double *d = golden_f64(st, key, &n);
        if (set_grad)
            m->no_grad[p] = d == NULL;
        if (set_grad && !d)
            continue;
        REQUIRE(d != NULL, "golden tensor %s missing", key);
        float *dst = set_grad ? m->g[p] : m->w[p];
        if (!set_grad) {
            m->n[p] = n;
            m->w[p] = dst = malloc((size_t)n * sizeof(float));
            m->g[p] = malloc((size_t)n * sizeof(float));
            REQUIRE(dst && m->g[p], "out of memory");
        }
        for (int64_t i = 0; i < n; i++)
            dst[i] = (float)d[i];
        free(d);
    }
}

/* Optimizer state after the last step, by PyTorch's state names. */
static int check_state(const safetensors_t *st, const char *cs, const optim_t *o)
{
    int checked = 0;
    char prefix[128], what[256];
    for (int p = 0; p < N_PARAMS; p++) {
        snprintf(prefix, sizeof prefix, "%s/state/%s/", cs, PARAMS[p]);
        for (size_t k = 0; k < safetensors_count(st); k++) {
            const st_tensor_t *t = safetensors_at(st, k);
            if (strncmp(t->name, prefix, strlen(prefix)) != 0)
                continue;
            const char *sname = t->name + strlen(prefix);
            double *want = golden_f64(st, t->name, NULL);
            snprintf(what, sizeof what, "%s state %s of %s", cs, sname, PARAMS[p]);
            if (strcmp(sname, "step") == 0) {
                CHECK(optim_param_steps(o, p) == (int64_t)want[0], "%s: %lld vs %g", what,
                      (long long)optim_param_steps(o, p), want[0]);
            } else {
                int64_t n = 0;
                const float *got = optim_state(o, p, sname, &n);
                CHECK(got && n == t->numel, "%s: missing or %lld floats (PyTorch %lld)", what,
                      (long long)n, (long long)t->numel);
                if (got && n == t->numel)
                    cmp(what, got, want, n);
            }
            free(want);
            checked++;
        }
    }
    return checked;
}

static void run_case(const safetensors_t *st, const char *cs, const char *const *scheds)
{
    char key[256], err[256], what[256];
    snprintf(key, sizeof key, "%s/cfg", cs);
    int64_t nc;
    double *c = golden_f64(st, key, &nc);
    REQUIRE(c && nc == 13, "%s: no config", key);
    optim_cfg_t cfg = cfg_from(c);
    const double lr = c[1];
    const int no_decay = c[11] != 0, sched_idx = (int)c[12];
    optim_t *o = optim_new(&cfg, err, sizeof err);
    REQUIRE(o, "%s: %s", cs, err);
    model_t m;
    memset(&m, 0, sizeof m);
    load_weights(st, "%s/init/%s", cs, 0, &m, 0);
    ckpt_tensor_t ct[N_PARAMS];
    for (int p = 0; p < N_PARAMS; p++) {
        snprintf(key, sizeof key, "%s/init/%s", cs, PARAMS[p]);
        const st_tensor_t *t = safetensors_get(st, key);
        ct[p] = (ckpt_tensor_t){.name = PARAMS[p], .dtype = ST_F32, .ndim = t->ndim, .data = m.w[p]};
        memcpy(ct[p].shape, t->shape, sizeof t->shape);
        bool decay = !(no_decay && (strncmp(PARAMS[p], "bn.", 3) == 0 ||
                                    strstr(PARAMS[p], "bias") != NULL));
        CHECK(optim_add_param(o, PARAMS[p], m.w[p], m.g[p], t->ndim, t->shape, decay, err,
                              sizeof err) == p, "%s: %s", cs, err);
    }
    lr_sched_t *s = sched_idx >= 0 ? golden_sched(st, scheds[sched_idx], lr) : NULL;
    double worst = 0;
    for (int k = 1; k <= 3; k++) {
        load_weights(st, "%s/grad/%d/%s", cs, k, &m, 1);
        for (int p = 0; p < N_PARAMS; p++)
            optim_set_ptrs(o, p, m.w[p], m.no_grad[p] ? NULL : m.g[p]);
        optim_step(o, s ? lr_sched_lr(s) : lr);
        if (s)
            lr_sched_step(s);
        for (int p = 0; p < N_PARAMS; p++) {
            snprintf(key, sizeof key, "%s/after/%d/%s", cs, k, PARAMS[p]);
            int64_t n;
            double *want = golden_f64(st, key, &n);
            REQUIRE(want && n == optim_param_numel(o, p), "%s missing", key);
            snprintf(what, sizeof what, "%s step %d %s", cs, k, PARAMS[p]);
            worst = fmax(worst, cmp(what, m.w[p], want, n));
            free(want);
        }
    }
    int states = check_state(st, cs, o);
    if (cfg.kind == OPTIM_SGD && cfg.momentum == 0) {
        /* plain SGD keeps nothing (PyTorch: momentum_buffer None) */
        for (int p = 0; p < N_PARAMS; p++)
            CHECK(!optim_state(o, p, "momentum_buffer", NULL), "%s: momentum buffer kept", cs);
    } else {
        CHECK(states >= N_PARAMS, "%s: only %d state tensors compared", cs, states);
    }
    printf("  %-18s %s: max error %.2e over 3 steps, %d state tensors\n", cs,
           optim_kind_name(cfg.kind), worst, states);
    /* for tests/optim/test_export.py: the state as a checkpoint, to compare with PyTorch's */
    const char *keep = getenv("DDPIPE_OPTIM_CKPT_DIR");
    if (keep) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s.safetensors", keep, cs);
        ckpt_info_t info = {.epoch = 3, .step = 3};
        CHECK(ckpt_save(path, ct, N_PARAMS, o, &info, err, sizeof err) == 0, "%s", err);
    }
    lr_sched_destroy(&s);
    optim_destroy(&o);
    for (int p = 0; p < N_PARAMS; p++) {
        free(m.w[p]);
        free(m.g[p]);
    }
    free(c);
}

static void test_goldens(void)
{
    safetensors_t *st = golden_open();
    char cbuf[1024], sbuf[1024];
    char *cases[64], *scheds[64];
    int nc = golden_list(st, "cases", cbuf, sizeof cbuf, cases, 64);
    golden_list(st, "scheds", sbuf, sizeof sbuf, scheds, 64);
    CHECK(nc >= 10, "only %d optimizer cases in the golden file", nc);
    int kinds[OPTIM_KIND_COUNT] = {0};
    for (int i = 0; i < nc; i++) {
        run_case(st, cases[i], (const char *const *)scheds);
        optim_kind_t k;
        char name[64];
        snprintf(name, sizeof name, "%s", cases[i]);
        char *us = strchr(name, '_');
        if (us)
            *us = '\0';
        if (optim_kind_parse(name, &k) == 0)
            kinds[k]++;
    }
    for (int k = 0; k < OPTIM_KIND_COUNT; k++)
        CHECK(kinds[k] > 0, "no golden case for %s", optim_kind_name((optim_kind_t)k));
    printf("optimizer goldens: %d cases, worst error %.2e (tolerance %.0e)\n", nc, worst_err, TOL);
    safetensors_destroy(&st);
}

static void test_config_errors(void)
{
    char err[256];
    optim_cfg_t c = optim_cfg_default(OPTIM_SGD);
    c.nesterov = true;
    CHECK(optim_new(&c, err, sizeof err) == NULL && strstr(err, "nesterov"), "%s", err);
    c.momentum = 0.9;
    c.dampening = 0.1;
    CHECK(optim_new(&c, err, sizeof err) == NULL && strstr(err, "dampening"), "%s", err);
    c = optim_cfg_default(OPTIM_ADAM);
    c.beta2 = 1.0;
    CHECK(optim_new(&c, err, sizeof err) == NULL && strstr(err, "betas"), "%s", err);
    c = optim_cfg_default(OPTIM_ADAMW);
    CHECK(c.weight_decay == 1e-2 && c.beta1 == 0.9 && c.beta2 == 0.999 && c.eps == 1e-8,
          "AdamW defaults");
    c.weight_decay = -1;
    CHECK(optim_new(&c, err, sizeof err) == NULL && strstr(err, "weight_decay"), "%s", err);
    c = optim_cfg_default(OPTIM_NOVOGRAD);
    CHECK(c.beta1 == 0.95 && c.beta2 == 0.0, "NovoGrad defaults (torch_optimizer)");

    optim_t *o = optim_new(&c, err, sizeof err);
    REQUIRE(o, "%s", err);
    float w[6] = {0}, g[6] = {0};
    int64_t shape[2] = {2, 3};
    CHECK(optim_add_param(o, "a", w, g, 2, shape, true, err, sizeof err) == 0, "%s", err);
    CHECK(optim_add_param(o, "a", w, g, 2, shape, true, err, sizeof err) < 0 &&
              strstr(err, "twice"), "duplicate name accepted: %s", err);
    CHECK(optim_add_param(o, "b", NULL, g, 2, shape, true, err, sizeof err) < 0, "NULL weights");
    CHECK(optim_add_param(o, "s", w, g, 0, NULL, true, err, sizeof err) == 1, "scalar: %s", err);
    CHECK(optim_param_numel(o, 0) == 6 && optim_param_numel(o, 1) == 1, "numel");
    CHECK(optim_find(o, "s") == 1 && optim_find(o, "x") == -1, "find");
    /* a parameter without a gradient is skipped: no state, no step */
    optim_set_ptrs(o, 1, w, NULL);
    optim_step(o, 0.1);
    CHECK(optim_param_steps(o, 0) == 1 && optim_param_steps(o, 1) == 0, "steps %lld %lld",
          (long long)optim_param_steps(o, 0), (long long)optim_param_steps(o, 1));
    CHECK(optim_state(o, 1, "exp_avg", NULL) == NULL, "state for a skipped parameter");
    optim_kind_t k;
    CHECK(optim_kind_parse("adamw", &k) == 0 && k == OPTIM_ADAMW, "parse adamw");
    CHECK(optim_kind_parse("lamb", &k) < 0, "parse lamb");
    optim_destroy(&o);
    CHECK(o == NULL, "destroy nulls the pointer");
}

int main(void)
{
    test_goldens();
    test_config_errors();
    return tc_done("test_optim");
}
