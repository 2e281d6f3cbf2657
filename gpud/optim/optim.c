/* optim — SGD, Adam, AdamW, NovoGrad over flat float arrays (see optim.h).
 *
 * Each update mirrors the Python reference line by line: the same order of
 * float operations, with every Python scalar rounded to float where ATen
 * rounds it, so results agree with PyTorch to a few ulps (ATen's vector
 * kernels may fuse a multiply-add; we do not). */
#include "gpud/optim/optim.h"
#include "common/errbuf.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Per-parameter state, allocated on the first step as PyTorch does. */
typedef struct {
    char *name;
    float *w;
    const float *g;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    int64_t numel;
    bool decay;
    int64_t step;
    float *momentum_buffer;   /* SGD */
    float *exp_avg;           /* Adam/AdamW/NovoGrad: numel */
    float *exp_avg_sq;        /* Adam/AdamW: numel; NovoGrad: 1 */
    float *max_exp_avg_sq;    /* amsgrad: as exp_avg_sq */
} oparam_t;

struct optim {
    optim_cfg_t cfg;
    double last_lr;   /* of the latest step: saved for the PyTorch export */
    oparam_t *p;
    int n, cap;
};

/* State names and which kinds keep them. */
enum { ST_MOMENTUM, ST_EXP_AVG, ST_EXP_AVG_SQ, ST_MAX_EXP_AVG_SQ, ST_STEP, ST_COUNT };
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
    return o;
}

static void param_free_state(oparam_t *p)
{
    free(p->momentum_buffer);
    free(p->exp_avg);
    free(p->exp_avg_sq);
    free(p->max_exp_avg_sq);
    p->momentum_buffer = p->exp_avg = p->exp_avg_sq = p->max_exp_avg_sq = NULL;
}

void optim_destroy(optim_t **op)
{
    if (!op || !*op)
        return;
    optim_t *o = *op;
    for (int i = 0; i < o->n; i++) {
        param_free_state(&o->p[i]);
        free(o->p[i].name);
    }
    free(o->p);
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
        if (!np) {
            err_set(err, errlen, "optim_add_param(%s): out of memory", name);
            return -1;
        }
        o->p = np;
        o->cap = cap;
    }
    oparam_t *p = &o->p[o->n];
    memset(p, 0, sizeof *p);
    p->name = strdup(name);
    if (!p->name) {
        err_set(err, errlen, "optim_add_param(%s): out of memory", name);
        return -1;
    }
    p->w = w;
    p->g = g;
    p->ndim = ndim;
    for (int d = 0; d < ndim; d++)
        p->shape[d] = shape[d];
    p->numel = numel;
    p->decay = decay;
    return o->n++;
}

void optim_set_ptrs(optim_t *o, int i, float *w, const float *g)
{
    if (i < 0 || i >= o->n || !w)
        return;
    o->p[i].w = w;
    o->p[i].g = g;
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
    return i >= 0 && i < o->n ? o->p[i].step : -1;
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

static float **state_slot(oparam_t *p, int s)
{
    switch (s) {
    case ST_MOMENTUM: return &p->momentum_buffer;
    case ST_EXP_AVG: return &p->exp_avg;
    case ST_EXP_AVG_SQ: return &p->exp_avg_sq;
    case ST_MAX_EXP_AVG_SQ: return &p->max_exp_avg_sq;
    default: return NULL;
    }
}

static int state_index(const char *s)
{
    for (int k = 0; k < ST_COUNT; k++)
        if (strcmp(s, STATE_NAMES[k]) == 0)
            return k;
    return -1;
}

const float *optim_state(const optim_t *o, int i, const char *state, int64_t *numel)
{
    int s = state ? state_index(state) : -1;
    if (i < 0 || i >= o->n || s < 0 || s == ST_STEP)
        return NULL;
    float **slot = state_slot(&o->p[i], s);
    if (numel)
        *numel = *slot ? state_numel(&o->cfg, &o->p[i], s) : 0;
    return *slot;
}

/* ------------------------------------------------------------ updates */

/* torch/optim/sgd.py _single_tensor_sgd. The first step copies d_p into
 * the momentum buffer (no dampening), later steps buf = buf*m + (1-damp)*d_p. */
static int sgd_step(const optim_cfg_t *c, oparam_t *p, double lr)
{
    const float wd = p->decay ? (float)c->weight_decay : 0.0f;
    const float mom = (float)c->momentum, keep = (float)(1.0 - c->dampening);
    const float neg_lr = (float)-lr;
    const bool use_mom = c->momentum != 0, first = use_mom && !p->momentum_buffer;
    if (first && !(p->momentum_buffer = malloc((size_t)p->numel * sizeof(float))))
        return -1;
    float *w = p->w, *buf = p->momentum_buffer;
    const float *g = p->g;
    for (int64_t i = 0; i < p->numel; i++) {
        float d = g[i];
        if (wd != 0)
            d = d + wd * w[i];
        if (use_mom) {
            buf[i] = first ? d : buf[i] * mom + keep * d;
            d = c->nesterov ? d + mom * buf[i] : buf[i];
        }
        w[i] = w[i] + neg_lr * d;
    }
    return 0;
}

static int alloc_zero(float **slot, int64_t n)
{
    if (*slot || n == 0)
        return 0;
    *slot = calloc((size_t)n, sizeof(float));
    return *slot ? 0 : -1;
}

/* torch/optim/adam.py and adamw.py, _single_tensor_adam(w). Adam adds the
 * L2 term to the gradient; AdamW scales the weights by 1 - lr*wd first. */
static int adam_step(const optim_cfg_t *c, oparam_t *p, double lr)
{
    if (alloc_zero(&p->exp_avg, p->numel) < 0 || alloc_zero(&p->exp_avg_sq, p->numel) < 0 ||
        (c->amsgrad && alloc_zero(&p->max_exp_avg_sq, p->numel) < 0))
        return -1;
    const double wdd = p->decay ? c->weight_decay : 0.0;
    const bool adamw = c->kind == OPTIM_ADAMW;
    p->step++;
    /* PyTorch keeps step in a float32 tensor and reads it back as a double. */
    const double step = (double)(float)p->step;
    const double bc1 = 1.0 - pow(c->beta1, step), bc2 = 1.0 - pow(c->beta2, step);
    const float neg_step_size = (float)-(lr / bc1), bc2_sqrt = (float)sqrt(bc2);
    const float b1 = (float)c->beta1, b2 = (float)c->beta2, eps = (float)c->eps;
    const float one_b1 = (float)(1.0 - c->beta1), one_b2 = (float)(1.0 - c->beta2);
    const float wd = (float)wdd, decay_mul = (float)(1.0 - lr * wdd);
    float *w = p->w, *m = p->exp_avg, *v = p->exp_avg_sq, *vmax = p->max_exp_avg_sq;
    const float *g = p->g;
    for (int64_t i = 0; i < p->numel; i++) {
        float d = g[i];
        if (adamw)
            w[i] = w[i] * decay_mul;
        else if (wd != 0)
            d = d + wd * w[i];
        m[i] = m[i] * b1 + one_b1 * d;
        v[i] = v[i] * b2 + one_b2 * d * d;
        float vv = v[i];
        if (vmax) {
            vmax[i] = fmaxf(vmax[i], vv);
            vv = vmax[i];
        }
        const float denom = sqrtf(vv) / bc2_sqrt + eps;
        w[i] = w[i] + neg_step_size * m[i] / denom;
    }
    return 0;
}

/* torch_optimizer/novograd.py (NVIDIA DeepLearningExamples' Novograd):
 * one second moment per tensor, of the squared gradient norm; while it is
 * 0 (the first step) the norm is copied in. */
static int novograd_step(const optim_cfg_t *c, oparam_t *p, double lr)
{
    if (alloc_zero(&p->exp_avg, p->numel) < 0 || alloc_zero(&p->exp_avg_sq, 1) < 0 ||
        (c->amsgrad && alloc_zero(&p->max_exp_avg_sq, 1) < 0))
        return -1;
    p->step++;
    const float *g = p->g;
    double sum = 0;   /* torch.sum(grad**2) in float32; a double sum rounds once */
    for (int64_t i = 0; i < p->numel; i++)
        sum += (double)(g[i] * g[i]);
    const float norm = (float)sum;
    float *v = p->exp_avg_sq;
    if (*v == 0)
        *v = norm;
    else
        *v = *v * (float)c->beta2 + (float)(1.0 - c->beta2) * norm;
    float vv = *v;
    if (p->max_exp_avg_sq) {
        *p->max_exp_avg_sq = fmaxf(*p->max_exp_avg_sq, vv);
        vv = *p->max_exp_avg_sq;
    }
    const float denom = sqrtf(vv) + (float)c->eps;
    const float wd = p->decay ? (float)c->weight_decay : 0.0f;
    const float b1 = (float)c->beta1, avg = (float)(1.0 - c->beta1), neg_lr = (float)-lr;
    float *w = p->w, *m = p->exp_avg;
    for (int64_t i = 0; i < p->numel; i++) {
        float d = g[i] / denom;
        if (wd != 0)
            d = d + wd * w[i];
        if (c->grad_averaging)
            d = d * avg;
        m[i] = m[i] * b1 + d;
        w[i] = w[i] + neg_lr * m[i];
    }
    return 0;
}

void optim_step(optim_t *o, double lr)
{
    o->last_lr = lr;
    for (int i = 0; i < o->n; i++) {
        oparam_t *p = &o->p[i];
        if (!p->g)
            continue;
        int rc;
        switch (o->cfg.kind) {
        case OPTIM_SGD:
            rc = sgd_step(&o->cfg, p, lr);
            if (rc == 0)
                p->step++;
            break;
        case OPTIM_NOVOGRAD:
            rc = novograd_step(&o->cfg, p, lr);
            break;
        default:
            rc = adam_step(&o->cfg, p, lr);
            break;
        }
        if (rc < 0) {
            /* State is a few copies of the model; failing to allocate it
             * leaves training unable to continue correctly. */
            fprintf(stderr, "optim_step: out of memory for the state of %s (%" PRId64
                            " floats); aborting\n", p->name, p->numel);
            abort();
        }
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
    for (int i = 0; i < o->n; i++) {
        oparam_t *p = &o->p[i];
        for (int s = 0; s < ST_COUNT; s++) {
            snprintf(name, sizeof name, "optim.%s.%s", p->name, STATE_NAMES[s]);
            int rc;
            if (s == ST_STEP) {
                rc = st_writer_add(w, name, ST_I64, 0, NULL, &p->step, err, errlen);
            } else {
                const float *data = *state_slot(p, s);
                if (!data)
                    continue;
                /* NovoGrad's second moments are one number per tensor. */
                bool scalar = o->cfg.kind == OPTIM_NOVOGRAD && s != ST_EXP_AVG;
                rc = st_writer_add(w, name, ST_F32, scalar ? 0 : p->ndim, p->shape, data, err,
                                   errlen);
            }
            if (rc < 0)
                return -1;
        }
    }
    return 0;
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

/* Replace parameter i's state with what the file holds (validated). */
static int install_state(optim_t *o, int i, const found_t *f)
{
    oparam_t *p = &o->p[i];
    float *fresh[ST_STEP] = {0};
    for (int s = 0; s < ST_STEP; s++) {
        if (!f[s].t)
            continue;
        int64_t n = state_numel(&o->cfg, p, s);
        fresh[s] = malloc((size_t)n * sizeof(float));
        if (!fresh[s] || st_tensor_to_f32(f[s].t, fresh[s], (size_t)n) < 0) {
            for (int k = 0; k <= s; k++)
                free(fresh[k]);
            return -1;
        }
    }
    param_free_state(p);
    for (int s = 0; s < ST_STEP; s++)
        *state_slot(p, s) = fresh[s];
    st_tensor_to_i64(f[ST_STEP].t, &p->step, 1);
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
    for (int i = 0; i < o->n && rc == 0; i++)
        if ((rc = install_state(o, i, &byp[(size_t)i * ST_COUNT])) < 0)
            err_set(err, errlen, "%s: out of memory loading the state of %s", path, o->p[i].name);
    free(byp);
    return rc;
}
