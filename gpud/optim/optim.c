/* optim — SGD, Adam, AdamW, NovoGrad over flat float arrays (see optim.h):
 * the parameters, their state in one arena, checkpoints. The update
 * itself is the arena's optimizer slot (optim_host.c on the host,
 * cuda_optim.c on a device). */
#include "gpud/optim/optim.h"
#include "common/errbuf.h"
#include "gpud/backend_arena.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* State names and which kinds keep them. */
enum { ST_MOMENTUM, ST_EXP_AVG, ST_EXP_AVG_SQ, ST_MAX_EXP_AVG_SQ, ST_STEP, ST_COUNT };

/* A parameter: its name and shape, where its state lies in the state arena
 * and which state exists (PyTorch creates it on the first step; a
 * checkpoint lists only what exists). The views and the step are its
 * kernel record o->k[i]. */
typedef struct {
    char *name;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    int64_t numel;
    bool decay;
    size_t off[ST_STEP];      /* in the state arena */
    bool exists[ST_STEP];
} oparam_t;

struct optim {
    optim_cfg_t cfg;
    double last_lr;   /* of the latest step: saved for the PyTorch export */
    oparam_t *p;
    bk_oparam_t *k;   /* n: the optimizer slot's records (views, step) */
    int n, cap;
    const bk_arena_ops_t *ops;
    bk_traffic_t *traffic;
    bk_arena_t state; /* every parameter's state; laid out for the first `laid` */
    int laid;
};
static const char *const STATE_NAMES[ST_COUNT] = {
    "momentum_buffer", "exp_avg", "exp_avg_sq", "max_exp_avg_sq", "step"};

/* ------------------------------------------------------------- config */

optim_cfg_t optim_cfg_default(optim_kind_t kind)
{
    optim_cfg_t c = {.kind = kind};
    switch (kind) {
    case OPTIM_ADAMW:
        c.weight_decay = 1e-2;
        /* fall through */
    case OPTIM_ADAM:
        c.beta1 = 0.9;
        c.beta2 = 0.999;
        c.eps = 1e-8;
        break;
    case OPTIM_NOVOGRAD:
        c.beta1 = 0.95;
        c.beta2 = 0.0;
        c.eps = 1e-8;
        break;
    default:
        break;
    }
    return c;
}

static bool is_adaptive(optim_kind_t k)
{
    return k == OPTIM_ADAM || k == OPTIM_ADAMW || k == OPTIM_NOVOGRAD;
}

/* The checks PyTorch's constructors make, with the same meaning. */
static int cfg_check(const optim_cfg_t *c, char *err, size_t errlen)
{
    if ((unsigned)c->kind >= OPTIM_KIND_COUNT) {
        err_set(err, errlen, "optimizer: unknown kind %d", (int)c->kind);
        return -1;
    }
    const char *kn = optim_kind_name(c->kind);
    if (!(c->weight_decay >= 0)) {
        err_set(err, errlen, "%s: invalid weight_decay %g (must be >= 0)", kn, c->weight_decay);
        return -1;
    }
    if (c->kind == OPTIM_SGD) {
        if (!(c->momentum >= 0)) {
            err_set(err, errlen, "sgd: invalid momentum %g (must be >= 0)", c->momentum);
            return -1;
        }
        if (!isfinite(c->dampening)) {
            err_set(err, errlen, "sgd: invalid dampening %g", c->dampening);
            return -1;
        }
        if (c->nesterov && (c->momentum <= 0 || c->dampening != 0)) {
            err_set(err, errlen, "sgd: nesterov momentum requires a momentum and zero dampening "
                                 "(momentum %g, dampening %g)", c->momentum, c->dampening);
            return -1;
        }
        return 0;
    }
    if (!(c->eps >= 0)) {
        err_set(err, errlen, "%s: invalid eps %g (must be >= 0)", kn, c->eps);
        return -1;
    }
    if (!(c->beta1 >= 0 && c->beta1 < 1) || !(c->beta2 >= 0 && c->beta2 < 1)) {
        err_set(err, errlen, "%s: invalid betas (%g, %g): each must be in [0, 1)", kn, c->beta1,
                c->beta2);
        return -1;
    }
    return 0;
}

optim_t *optim_new(const optim_cfg_t *cfg, char *err, size_t errlen)
{
    if (!cfg) {
        err_set(err, errlen, "optim_new: no config");
        return NULL;
    }
    if (cfg_check(cfg, err, errlen) < 0)
        return NULL;
    optim_t *o = calloc(1, sizeof *o);
    if (!o) {
        err_set(err, errlen, "optim_new: out of memory");
        return NULL;
    }
    o->cfg = *cfg;
    o->ops = &bk_arena_host;
    return o;
}

int optim_set_arena(optim_t *o, const bk_arena_ops_t *ops, bk_traffic_t *traffic, char *err,
                    size_t errlen)
{
    if (o->state.base) {
        err_set(err, errlen, "optim_set_arena: the state arena exists already (set it before "
                "the first step or load)");
        return -1;
    }
    o->ops = ops ? ops : &bk_arena_host;
    o->traffic = traffic;
    return 0;
}

void optim_destroy(optim_t **op)
{
    if (!op || !*op)
        return;
    optim_t *o = *op;
    for (int i = 0; i < o->n; i++)
        free(o->p[i].name);
    bk_arena_free(&o->state);
    free(o->p);
    free(o->k);
    free(o);
    *op = NULL;
}

/* ---------------------------------------------------------- parameters */

int optim_find(const optim_t *o, const char *name)
{
    for (int i = 0; i < o->n; i++)
        if (strcmp(o->p[i].name, name) == 0)
            return i;
    return -1;
}

int optim_add_param(optim_t *o, const char *name, float *w, const float *g, int ndim,
                    const int64_t *shape, bool decay, char *err, size_t errlen)
{
    if (!name || !*name || !w || ndim < 0 || ndim > ST_MAX_DIMS || (ndim > 0 && !shape)) {
        err_set(err, errlen, "optim_add_param(%s): needs a name, weights and 0..%d dims",
                name ? name : "(null)", ST_MAX_DIMS);
        return -1;
    }
    if (optim_find(o, name) >= 0) {
        err_set(err, errlen, "optim_add_param: parameter %s added twice", name);
        return -1;
    }
    int64_t numel = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0 || (shape[d] > 0 && numel > INT64_MAX / shape[d])) {
            err_set(err, errlen, "optim_add_param(%s): bad dimension %d: %" PRId64, name, d,
                    shape[d]);
            return -1;
        }
        numel *= shape[d];
    }
    if (o->n == o->cap) {
        int cap = o->cap ? 2 * o->cap : 16;
        oparam_t *np = realloc(o->p, (size_t)cap * sizeof *np);
        if (np)
            o->p = np;
        bk_oparam_t *nk = np ? realloc(o->k, (size_t)cap * sizeof *nk) : NULL;
        if (!nk) {
            err_set(err, errlen, "optim_add_param(%s): out of memory", name);
            return -1;
        }
        o->k = nk;
        o->cap = cap;
    }
    oparam_t *p = &o->p[o->n];
    memset(p, 0, sizeof *p);
    p->name = strdup(name);
    if (!p->name) {
        err_set(err, errlen, "optim_add_param(%s): out of memory", name);
        return -1;
    }
    p->ndim = ndim;
    for (int d = 0; d < ndim; d++)
        p->shape[d] = shape[d];
    p->numel = numel;
    p->decay = decay;
    o->k[o->n] = (bk_oparam_t){.w = w, .g = g, .numel = numel, .decay = decay};
    return o->n++;
}

void optim_set_ptrs(optim_t *o, int i, float *w, const float *g)
{
    if (i < 0 || i >= o->n || !w)
        return;
    o->k[i].w = w;
    o->k[i].g = g;
}

const optim_cfg_t *optim_cfg(const optim_t *o) { return &o->cfg; }
int optim_param_count(const optim_t *o) { return o->n; }

const char *optim_param_name(const optim_t *o, int i)
{
    return i >= 0 && i < o->n ? o->p[i].name : NULL;
}

int64_t optim_param_numel(const optim_t *o, int i)
{
    return i >= 0 && i < o->n ? o->p[i].numel : -1;
}

int64_t optim_param_steps(const optim_t *o, int i)
{
    return i >= 0 && i < o->n ? o->k[i].step : -1;
}

/* Number of floats state s holds for parameter p under this config
 * (0: the config keeps no such state). */
static int64_t state_numel(const optim_cfg_t *c, const oparam_t *p, int s)
{
    switch (s) {
    case ST_MOMENTUM:
        return c->kind == OPTIM_SGD && c->momentum != 0 ? p->numel : 0;
    case ST_EXP_AVG:
        return is_adaptive(c->kind) ? p->numel : 0;
    case ST_EXP_AVG_SQ:
        return c->kind == OPTIM_NOVOGRAD ? 1 : is_adaptive(c->kind) ? p->numel : 0;
    case ST_MAX_EXP_AVG_SQ:
        return !c->amsgrad || !is_adaptive(c->kind) ? 0 : c->kind == OPTIM_NOVOGRAD ? 1 : p->numel;
    default:
        return 0;
    }
}

static int state_index(const char *s)
{
    for (int k = 0; k < ST_COUNT; k++)
        if (strcmp(s, STATE_NAMES[k]) == 0)
            return k;
    return -1;
}

/* ------------------------------------------------------- state arena */

/* Lay the state arena out for every parameter (the first time, or after
 * parameters were added: the state of the first o->laid ones moves).
 * 0, or -1 when out of memory. */
static int state_lay(optim_t *o)
{
    if (o->laid == o->n && o->state.base)
        return 0;
    size_t total = 0, *off = calloc((size_t)(o->n ? o->n : 1) * ST_STEP, sizeof *off);
    if (!off)
        return -1;
    for (int i = 0; i < o->n; i++)
        for (int s = 0; s < ST_STEP; s++) {
            off[(size_t)i * ST_STEP + (size_t)s] = total;
            total += (size_t)state_numel(&o->cfg, &o->p[i], s);
        }
    bk_arena_t fresh;
    int rc = bk_arena_alloc(&fresh, o->ops, total, o->traffic);
    float *stage = NULL;
    for (int i = 0; rc == 0 && i < o->laid; i++)   /* the state so far moves over */
        for (int s = 0; rc == 0 && s < ST_STEP; s++) {
            size_t n = (size_t)state_numel(&o->cfg, &o->p[i], s);
            float *t = n ? realloc(stage, n * sizeof *stage) : stage;
            if (!t)
                rc = -1;
            stage = t;
            if (rc == 0 && n)
                rc = bk_arena_read(&o->state, o->p[i].off[s], n, stage) < 0 ||
                     bk_arena_write(&fresh, off[(size_t)i * ST_STEP + (size_t)s], n, stage) < 0
                         ? -1 : 0;
        }
    free(stage);
    if (rc < 0) {
        bk_arena_free(&fresh);
        free(off);
        return -1;
    }
    bk_arena_free(&o->state);
    o->state = fresh;
    o->laid = o->n;
    for (int i = 0; i < o->n; i++) {
        oparam_t *p = &o->p[i];
        memcpy(p->off, &off[(size_t)i * ST_STEP], sizeof p->off);
        bk_oparam_t *k = &o->k[i];
        k->buf = o->state.base + p->off[is_adaptive(o->cfg.kind) ? ST_EXP_AVG : ST_MOMENTUM];
        k->sq = o->state.base + p->off[ST_EXP_AVG_SQ];
        k->sq_max = o->cfg.amsgrad ? o->state.base + p->off[ST_MAX_EXP_AVG_SQ] : NULL;
    }
    free(off);
    return 0;
}

const float *optim_state(const optim_t *o, int i, const char *state, int64_t *numel)
{
    int s = state ? state_index(state) : -1;
    if (i < 0 || i >= o->n || s < 0 || s == ST_STEP)
        return NULL;
    const float *v = o->p[i].exists[s] && i < o->laid
                         ? bk_arena_host_view(&o->state, o->p[i].off[s]) : NULL;
    if (numel)
        *numel = v ? state_numel(&o->cfg, &o->p[i], s) : 0;
    return v;
}

/* ------------------------------------------------------------ updates */

void optim_step(optim_t *o, double lr)
{
    o->last_lr = lr;
    char err[256] = "out of memory";
    int rc = state_lay(o);
    for (int i = 0; rc == 0 && i < o->n; i++)   /* PyTorch's state appears on a step */
        for (int s = 0; s < ST_STEP && o->k[i].g; s++)
            o->p[i].exists[s] |= state_numel(&o->cfg, &o->p[i], s) > 0;
    if (rc == 0)
        rc = o->ops->optim_step(o->ops->ctx, &o->cfg, lr, o->k, o->n, err, sizeof err);
    if (rc < 0) {
        /* State is a few copies of the model; failing to allocate it (or a
         * device failing) leaves training unable to continue correctly. */
        fprintf(stderr, "optim_step: the %s optimizer state: %s; aborting\n", o->ops->name,
                err);
        abort();
    }
}

/* --------------------------------------------------------- checkpoints */

static int meta_num(st_writer_t *w, const char *key, double v, char *err, size_t errlen)
{
    char buf[40];
    snprintf(buf, sizeof buf, "%.17g", v);
    return st_writer_meta(w, key, buf, err, errlen);
}

/* Comma-separated names of the parameters (all, or those without decay), in
 * registration order: the index order of a PyTorch optimizer state_dict. */
static int meta_names(const optim_t *o, st_writer_t *w, const char *key, bool only_no_decay,
                      char *err, size_t errlen)
{
    size_t len = 1;
    for (int i = 0; i < o->n; i++)
        len += strlen(o->p[i].name) + 1;
    char *buf = malloc(len), *at = buf;
    if (!buf) {
        err_set(err, errlen, "optimizer metadata: out of memory");
        return -1;
    }
    *at = '\0';
    for (int i = 0; i < o->n; i++)
        if (!only_no_decay || !o->p[i].decay)
            at += sprintf(at, "%s%s", at == buf ? "" : ",", o->p[i].name);
    int rc = st_writer_meta(w, key, buf, err, errlen);
    free(buf);
    return rc;
}

static int save_meta(const optim_t *o, st_writer_t *w, char *err, size_t errlen)
{
    const optim_cfg_t *c = &o->cfg;
    if (st_writer_meta(w, "optim.kind", optim_kind_name(c->kind), err, errlen) < 0 ||
        meta_num(w, "optim.weight_decay", c->weight_decay, err, errlen) < 0 ||
        meta_num(w, "optim.lr", o->last_lr, err, errlen) < 0 ||
        meta_names(o, w, "optim.params", false, err, errlen) < 0 ||
        meta_names(o, w, "optim.no_decay", true, err, errlen) < 0)
        return -1;
    if (c->kind == OPTIM_SGD)
        return meta_num(w, "optim.momentum", c->momentum, err, errlen) < 0 ||
                       meta_num(w, "optim.dampening", c->dampening, err, errlen) < 0 ||
                       meta_num(w, "optim.nesterov", c->nesterov, err, errlen) < 0
                   ? -1 : 0;
    return meta_num(w, "optim.beta1", c->beta1, err, errlen) < 0 ||
                   meta_num(w, "optim.beta2", c->beta2, err, errlen) < 0 ||
                   meta_num(w, "optim.eps", c->eps, err, errlen) < 0 ||
                   meta_num(w, "optim.amsgrad", c->amsgrad, err, errlen) < 0 ||
                   meta_num(w, "optim.grad_averaging", c->grad_averaging, err, errlen) < 0
               ? -1 : 0;
}

int optim_save_state(const optim_t *o, st_writer_t *w, char *err, size_t errlen)
{
    if (save_meta(o, w, err, errlen) < 0)
        return -1;
    char name[512];
    float *stage = NULL;   /* a device arena's state, read out */
    int rc = 0;
    for (int i = 0; i < o->n && rc == 0; i++) {
        const oparam_t *p = &o->p[i];
        for (int s = 0; s < ST_COUNT && rc == 0; s++) {
            snprintf(name, sizeof name, "optim.%s.%s", p->name, STATE_NAMES[s]);
            if (s == ST_STEP) {
                rc = st_writer_add(w, name, ST_I64, 0, NULL, &o->k[i].step, err, errlen);
                continue;
            }
            if (!p->exists[s] || i >= o->laid)
                continue;
            size_t n = (size_t)state_numel(&o->cfg, p, s);
            const float *data = bk_arena_host_view(&o->state, p->off[s]);
            if (!data) {
                float *t = realloc(stage, (n ? n : 1) * sizeof *t);
                if (t)
                    stage = t;
                if (!t || bk_arena_read(&o->state, p->off[s], n, stage) < 0) {
                    err_set(err, errlen, "%s: cannot read it from the %s arena", name,
                            o->ops->name);
                    rc = -1;
                    break;
                }
                data = stage;
            }
            /* NovoGrad's second moments are one number per tensor. */
            bool scalar = o->cfg.kind == OPTIM_NOVOGRAD && s != ST_EXP_AVG;
            rc = st_writer_add(w, name, ST_F32, scalar ? 0 : p->ndim, p->shape, data, err,
                               errlen);
        }
    }
    free(stage);
    return rc < 0 ? -1 : 0;
}

/* One "optim.*" tensor of the file, matched to its parameter and state. */
typedef struct {
    const st_tensor_t *t;
    int param, state;
} found_t;

/* Split "optim.<param>.<state>" and check it against this optimizer. */
static int match_tensor(const optim_t *o, const st_tensor_t *t, found_t *f, char *err,
                        size_t errlen)
{
    const char *rest = t->name + strlen("optim.");
    const char *dot = strrchr(rest, '.');
    int s = dot ? state_index(dot + 1) : -1;
    if (s < 0) {
        err_set(err, errlen, "optimizer state %s: unknown state name (expected optim.<param>."
                             "{momentum_buffer,exp_avg,exp_avg_sq,max_exp_avg_sq,step})", t->name);
        return -1;
    }
    char pname[512];
    size_t plen = (size_t)(dot - rest);
    if (plen == 0 || plen >= sizeof pname) {
        err_set(err, errlen, "optimizer state %s: bad parameter name", t->name);
        return -1;
    }
    memcpy(pname, rest, plen);
    pname[plen] = '\0';
    int i = optim_find(o, pname);
    if (i < 0) {
        err_set(err, errlen, "optimizer state %s: no parameter %s in this model", t->name, pname);
        return -1;
    }
    const oparam_t *p = &o->p[i];
    char want[96], got[96];
    st_shape_str(t->shape, t->ndim, got, sizeof got);
    if (s == ST_STEP) {
        if (t->dtype != ST_I64 || t->ndim != 0) {
            err_set(err, errlen, "optimizer state %s: expected an I64 scalar, got %s %s", t->name,
                    st_dtype_name(t->dtype), got);
            return -1;
        }
    } else {
        int64_t n = state_numel(&o->cfg, p, s);
        if (n == 0) {
            err_set(err, errlen, "optimizer state %s: %s with this configuration keeps no %s "
                                 "(checkpoint from another optimizer setting?)", t->name,
                    optim_kind_name(o->cfg.kind), STATE_NAMES[s]);
            return -1;
        }
        bool scalar = o->cfg.kind == OPTIM_NOVOGRAD && s != ST_EXP_AVG;
        int ndim = scalar ? 0 : p->ndim;
        st_shape_str(p->shape, ndim, want, sizeof want);
        bool same = t->ndim == ndim;
        for (int d = 0; same && d < ndim; d++)
            same = t->shape[d] == p->shape[d];
        if (t->dtype != ST_F32 || !same) {
            err_set(err, errlen, "optimizer state %s: expected F32 %s, got %s %s", t->name, want,
                    st_dtype_name(t->dtype), got);
            return -1;
        }
    }
    f->t = t;
    f->param = i;
    f->state = s;
    return 0;
}

/* Every parameter has a step >= 0 and, once stepped, all its state. */
static int check_complete(const optim_t *o, const found_t *byp, char *err, size_t errlen)
{
    for (int i = 0; i < o->n; i++) {
        const found_t *f = &byp[(size_t)i * ST_COUNT];
        if (!f[ST_STEP].t) {
            err_set(err, errlen, "optimizer state optim.%s.step: missing (the checkpoint has no "
                                 "optimizer state for parameter %s)", o->p[i].name, o->p[i].name);
            return -1;
        }
        int64_t step;
        if (st_tensor_to_i64(f[ST_STEP].t, &step, 1) < 0 || step < 0) {
            err_set(err, errlen, "optimizer state optim.%s.step: invalid step", o->p[i].name);
            return -1;
        }
        for (int s = 0; s < ST_STEP && step > 0; s++)
            if (state_numel(&o->cfg, &o->p[i], s) > 0 && !f[s].t) {
                err_set(err, errlen, "optimizer state optim.%s.%s: missing (parameter stepped "
                                     "%" PRId64 " times)", o->p[i].name, STATE_NAMES[s], step);
                return -1;
            }
    }
    return 0;
}

/* Replace parameter i's state with what the file holds (validated): what
 * the file lacks is zero and does not exist, as a fresh PyTorch state. */
static int install_state(optim_t *o, int i, const found_t *f, float *stage)
{
    oparam_t *p = &o->p[i];
    for (int s = 0; s < ST_STEP; s++) {
        size_t n = (size_t)state_numel(&o->cfg, p, s);
        p->exists[s] = f[s].t != NULL;
        if (n && (f[s].t ? st_tensor_to_f32(f[s].t, stage, n) < 0 ||
                               bk_arena_write(&o->state, p->off[s], n, stage) < 0
                         : bk_arena_zero(&o->state, p->off[s], n) < 0))
            return -1;
    }
    st_tensor_to_i64(f[ST_STEP].t, &o->k[i].step, 1);
    o->k[i].have_buf = p->exists[ST_MOMENTUM];
    return 0;
}

int optim_load_state(optim_t *o, const safetensors_t *st, char *err, size_t errlen)
{
    const char *path = safetensors_path(st) ? safetensors_path(st) : "checkpoint";
    const char *kind = safetensors_meta(st, "optim.kind");
    if (!kind) {
        err_set(err, errlen, "%s: no optimizer state (no optim.kind in the metadata)", path);
        return -1;
    }
    if (strcmp(kind, optim_kind_name(o->cfg.kind)) != 0) {
        err_set(err, errlen, "%s: optimizer state is for %s, this optimizer is %s", path, kind,
                optim_kind_name(o->cfg.kind));
        return -1;
    }
    found_t *byp = calloc((size_t)(o->n ? o->n : 1) * ST_COUNT, sizeof *byp);
    if (!byp) {
        err_set(err, errlen, "%s: out of memory", path);
        return -1;
    }
    int rc = 0;
    for (size_t k = 0; k < safetensors_count(st) && rc == 0; k++) {
        const st_tensor_t *t = safetensors_at(st, k);
        if (strncmp(t->name, "optim.", 6) != 0)
            continue;
        found_t f;
        char sub[400];
        rc = match_tensor(o, t, &f, sub, sizeof sub);
        if (rc == 0)
            byp[(size_t)f.param * ST_COUNT + (size_t)f.state] = f;
        else
            err_set(err, errlen, "%s: %s", path, sub);
    }
    char sub[400];
    if (rc == 0 && (rc = check_complete(o, byp, sub, sizeof sub)) < 0)
        err_set(err, errlen, "%s: %s", path, sub);
    int64_t most = 1;
    for (int i = 0; i < o->n; i++)
        most = o->p[i].numel > most ? o->p[i].numel : most;
    float *stage = rc == 0 ? malloc((size_t)most * sizeof *stage) : NULL;
    if (rc == 0 && (!stage || state_lay(o) < 0)) {
        err_set(err, errlen, "%s: out of memory for the optimizer state", path);
        rc = -1;
    }
    for (int i = 0; i < o->n && rc == 0; i++)
        if ((rc = install_state(o, i, &byp[(size_t)i * ST_COUNT], stage)) < 0)
            err_set(err, errlen, "%s: cannot write the state of %s to the %s arena", path,
                    o->p[i].name, o->ops->name);
    free(stage);
    free(byp);
    return rc;
}
