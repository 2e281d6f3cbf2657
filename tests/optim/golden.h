/* golden — shared helpers of the optim tests: open the PyTorch goldens
 * (tests/golden/optim/optim.safetensors, made by tests/golden/gen_optim.py)
 * and turn their numeric configs into gpud/optim objects. */
#ifndef DDP_TEST_OPTIM_GOLDEN_H
#define DDP_TEST_OPTIM_GOLDEN_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/safetensors.h"
#include "gpud/optim/lr_sched.h"
#include "tests/gpud/tcheck.h"

static inline safetensors_t *golden_open(void)
{
    char path[1024], err[512];
    safetensors_t *st = safetensors_open(tc_src("tests/golden/optim/optim.safetensors", path,
                                                sizeof path), err, sizeof err);
    REQUIRE(st != NULL, "%s (regenerate with /usr/bin/python3 tests/golden/gen_optim.py)", err);
    return st;
}

/* A tensor of the golden file as doubles (malloc'd); NULL if absent. */
static inline double *golden_f64(const safetensors_t *st, const char *name, int64_t *numel)
{
    const st_tensor_t *t = safetensors_get(st, name);
    if (!t)
        return NULL;
    float *f = malloc((size_t)t->numel * sizeof *f);
    double *d = malloc((size_t)t->numel * sizeof *d);
    REQUIRE(f && d, "out of memory");
    if (t->dtype == ST_F64) {
        memcpy(d, t->data, t->nbytes);
    } else {
        REQUIRE(st_tensor_to_f32(t, f, (size_t)t->numel) == 0, "%s: not floating", name);
        for (int64_t i = 0; i < t->numel; i++)
            d[i] = f[i];
    }
    free(f);
    if (numel)
        *numel = t->numel;
    return d;
}

/* Split a comma-separated metadata list into at most max names (in buf). */
static inline int golden_list(const safetensors_t *st, const char *key, char *buf, size_t len,
                              char **names, int max)
{
    const char *s = safetensors_meta(st, key);
    REQUIRE(s != NULL, "golden file has no metadata %s", key);
    snprintf(buf, len, "%s", s);
    int n = 0;
    for (char *tok = strtok(buf, ","); tok && n < max; tok = strtok(NULL, ","))
        names[n++] = tok;
    return n;
}

/* The schedule sched/<name> (rows kind, start, end, total, step_size, gamma,
 * T_max, eta_min) from base_lr. */
static inline lr_sched_t *golden_sched(const safetensors_t *st, const char *name, double base_lr)
{
    char key[256], err[256];
    int64_t n, nm;
    snprintf(key, sizeof key, "sched/%s/cfg", name);
    double *cfg = golden_f64(st, key, &n);
    snprintf(key, sizeof key, "sched/%s/milestones", name);
    double *ms = golden_f64(st, key, &nm);
    REQUIRE(cfg && ms && n % 8 == 0 && nm == n / 8, "schedule %s: bad config tensors", name);
    lr_phase_t ph[LR_SCHED_MAX_PHASES];
    int mil[LR_SCHED_MAX_PHASES];
    int np = (int)(n / 8);
    REQUIRE(np <= LR_SCHED_MAX_PHASES, "schedule %s: %d phases", name, np);
    for (int i = 0; i < np; i++) {
        const double *r = &cfg[i * 8];
        ph[i] = (lr_phase_t){.kind = (lr_kind_t)r[0], .start_factor = r[1], .end_factor = r[2],
                             .total_iters = (int)r[3], .step_size = (int)r[4], .gamma = r[5],
                             .t_max = (int)r[6], .eta_min = r[7]};
        mil[i] = (int)ms[i];
    }
    lr_sched_t *s = lr_sched_new(base_lr, ph, np, mil, err, sizeof err);
    REQUIRE(s != NULL, "schedule %s: %s", name, err);
    free(cfg);
    free(ms);
    return s;
}

#endif
