/* cuda_optim — see cuda_optim.h. The scalars are derived on the host exactly
 * as optim_host.c derives them; the kernels (cuda_optim_kernels.cu) do the
 * per-element work with explicitly rounded float operations. */
#include "gpud/cuda/cuda_optim.h"
#include "common/errbuf.h"
#include "common/log.h"

#include <cuda_runtime.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpud/cuda/cuda_optim_kernels.h"

static int ok(cudaError_t e, const char *what, char *err, size_t errlen)
{
    if (e == cudaSuccess)
        return 0;
    err_set(err, errlen, "cuda optimizer: %s failed: %s (%s)%s", what, cudaGetErrorName(e),
            cudaGetErrorString(e),
            e == cudaErrorMemoryAllocation ? "; the GPU is out of memory: lower the batch or "
                                             "stop other processes on it (nvidia-smi)" : "");
    return -1;
}

/* ------------------------------------------------------------ scalars */

static ck_sgd_t sgd_scalars(const optim_cfg_t *c, bool decay, bool have_buf, double lr)
{
    return (ck_sgd_t){.wd = decay ? (float)c->weight_decay : 0.0f,
                      .mom = (float)c->momentum,
                      .keep = (float)(1.0 - c->dampening),
                      .neg_lr = (float)-lr,
                      .use_mom = c->momentum != 0,
                      .first = c->momentum != 0 && !have_buf,
                      .nesterov = c->nesterov};
}

/* step: the parameter's step count after this step */
static ck_adam_t adam_scalars(const optim_cfg_t *c, bool decay, int64_t step, double lr)
{
    const double wdd = decay ? c->weight_decay : 0.0;
    const double fstep = (double)(float)step;   /* PyTorch's float32 step */
    const double bc1 = 1.0 - pow(c->beta1, fstep), bc2 = 1.0 - pow(c->beta2, fstep);
    return (ck_adam_t){.b1 = (float)c->beta1,
                       .b2 = (float)c->beta2,
                       .one_b1 = (float)(1.0 - c->beta1),
                       .one_b2 = (float)(1.0 - c->beta2),
                       .wd = (float)wdd,
                       .decay_mul = (float)(1.0 - lr * wdd),
                       .neg_step_size = (float)-(lr / bc1),
                       .bc2_sqrt = (float)sqrt(bc2),
                       .eps = (float)c->eps,
                       .adamw = c->kind == OPTIM_ADAMW};
}

/* What a step does to a parameter's host state (optim_host.c's). */
static void advance(const optim_cfg_t *c, bk_oparam_t *p)
{
    if (c->kind == OPTIM_SGD)
        p->have_buf |= c->momentum != 0;
    p->step++;
}

/* ----------------------------------------------------- one parameter */

static int novograd(const optim_cfg_t *c, bk_oparam_t *p, double lr, double *scratch,
                    cudaStream_t s, char *err, size_t errlen)
{
    if (!scratch) {
        err_set(err, errlen, "cuda optimizer: NovoGrad needs a device scratch");
        return -1;
    }
    ck_novograd_t k = {.wd = p->decay ? (float)c->weight_decay : 0.0f,
                       .b1 = (float)c->beta1,
                       .avg = (float)(1.0 - c->beta1),
                       .neg_lr = (float)-lr,
                       .grad_averaging = c->grad_averaging};
    return ok(ck_sumsq(s, p->g, (size_t)p->numel, scratch), "NovoGrad norm kernel", err,
              errlen) < 0 ||
           ok(ck_novograd_moment(s, scratch, p->sq, c->amsgrad ? p->sq_max : NULL,
                                 (float)c->beta2, (float)(1.0 - c->beta2), (float)c->eps),
              "NovoGrad moment kernel", err, errlen) < 0 ||
           ok(ck_novograd(s, p->w, p->g, p->buf, (size_t)p->numel, scratch, k),
              "NovoGrad kernel", err, errlen) < 0
               ? -1 : 0;
}

int cuda_optim_step(const optim_cfg_t *c, bk_oparam_t *p, double lr, double *scratch,
                    void *stream, char *err, size_t errlen)
{
    cudaStream_t s = (cudaStream_t)stream;
    int rc;
    switch (c->kind) {
    case OPTIM_SGD:
        rc = ok(ck_sgd(s, p->w, p->g, p->buf, (size_t)p->numel,
                       sgd_scalars(c, p->decay, p->have_buf, lr)), "SGD kernel", err, errlen);
        break;
    case OPTIM_NOVOGRAD:
        rc = novograd(c, p, lr, scratch, s, err, errlen);
        break;
    case OPTIM_ADAM:
    case OPTIM_ADAMW:
        rc = ok(ck_adam(s, p->w, p->g, p->buf, p->sq, c->amsgrad ? p->sq_max : NULL,
                        (size_t)p->numel, adam_scalars(c, p->decay, p->step + 1, lr)),
                "Adam kernel", err, errlen);
        break;
    default:
        err_set(err, errlen, "cuda optimizer: unknown kind %d", (int)c->kind);
        return -1;
    }
    if (rc == 0)
        advance(c, p);
    return rc;
}

/* ----------------------------------------------- every parameter at once */

typedef struct {
    bool decay, have_buf;
    int64_t step;
} group_key_t;

struct cuda_optim {
    double *scratch;          /* device, 2 doubles: NovoGrad */
    ck_chunk_t *host;         /* the table being built */
    ck_chunk_t *last;         /* the table on the device (its host copy) */
    int nlast;
    ck_chunk_t *dev;          /* device, dev_cap entries */
    int cap, dev_cap;
    cuda_optim_counts_t counts;
};

cuda_optim_t *cuda_optim_new(char *err, size_t errlen)
{
    cuda_optim_t *self = calloc(1, sizeof *self);
    if (!self) {
        err_set(err, errlen, "cuda optimizer: out of memory");
        return NULL;
    }
    if (ok(cudaMalloc((void **)&self->scratch, 2 * sizeof(double)), "cudaMalloc (scratch)",
           err, errlen) < 0) {
        free(self);
        return NULL;
    }
    return self;
}

void cuda_optim_destroy(cuda_optim_t **self)
{
    if (!self || !*self)
        return;
    cudaFree((*self)->scratch);
    cudaFree((*self)->dev);
    free((*self)->host);
    free((*self)->last);
    free(*self);
    *self = NULL;
}

cuda_optim_counts_t cuda_optim_counts(const cuda_optim_t *self)
{
    return self->counts;
}

/* The group of key among the keys so far (added when new: groups are
 * numbered in order of first appearance, so the numbering stays the same
 * from one step to the next while every parameter advances alike); -1 when
 * there would be more than CK_GROUPS. */
static int group_of(group_key_t *keys, int *nkeys, group_key_t key)
{
    for (int i = 0; i < *nkeys; i++)
        if (keys[i].decay == key.decay && keys[i].have_buf == key.have_buf &&
            keys[i].step == key.step)
            return i;
    if (*nkeys == CK_GROUPS)
        return -1;
    keys[*nkeys] = key;
    return (*nkeys)++;
}

static group_key_t key_of(const optim_cfg_t *c, const bk_oparam_t *p)
{
    if (c->kind == OPTIM_SGD)
        return (group_key_t){.decay = p->decay, .have_buf = p->have_buf};
    return (group_key_t){.decay = p->decay, .step = p->step};
}

static int grow_host(cuda_optim_t *self, int need, char *err, size_t errlen)
{
    if (need <= self->cap)
        return 0;
    int cap = need + need / 2;
    ck_chunk_t *h = realloc(self->host, (size_t)cap * sizeof *h);
    if (h)
        self->host = h;
    ck_chunk_t *l = h ? realloc(self->last, (size_t)cap * sizeof *l) : NULL;
    if (l)
        self->last = l;
    if (!h || !l) {
        err_set(err, errlen, "cuda optimizer: out of memory for %d chunks", need);
        return -1;
    }
    self->cap = cap;
    return 0;
}

/* The chunk table of the n parameters into self->host; *nchunks, keys and
 * *nkeys set. 1: more than CK_GROUPS groups (no table); -1 with err. */
static int build_table(cuda_optim_t *self, const optim_cfg_t *c, const bk_oparam_t *p, int n,
                       int *nchunks, group_key_t *keys, int *nkeys, char *err, size_t errlen)
{
    const bool ams = c->kind != OPTIM_SGD && c->amsgrad;
    int k = 0;
    *nkeys = 0;
    for (int i = 0; i < n; i++) {
        if (!p[i].g || p[i].numel <= 0)
            continue;
        int grp = group_of(keys, nkeys, key_of(c, &p[i]));
        if (grp < 0)
            return 1;
        if (grow_host(self, k + (int)((p[i].numel + CK_CHUNK - 1) / CK_CHUNK), err, errlen) < 0)
            return -1;
        for (int64_t at = 0; at < p[i].numel; at += CK_CHUNK) {
            int64_t len = p[i].numel - at < CK_CHUNK ? p[i].numel - at : CK_CHUNK;
            ck_chunk_t *e = &self->host[k++];
            memset(e, 0, sizeof *e);   /* the table is compared bytewise */
            e->w = p[i].w + at;
            e->g = p[i].g + at;
            e->buf = p[i].buf ? p[i].buf + at : NULL;
            if (c->kind != OPTIM_SGD) {
                e->sq = p[i].sq + at;
                e->sq_max = ams ? p[i].sq_max + at : NULL;
            }
            e->n = (uint32_t)len;
            e->grp = (uint32_t)grp;
        }
    }
    *nchunks = k;
    return 0;
}

/* The device copy of self->host[0, n), when it differs from the last one.
 * A launch queued on stream may still read the old table: the copy is
 * queued behind it; a bigger table waits for it before freeing. */
static int upload(cuda_optim_t *self, int n, cudaStream_t s, char *err, size_t errlen)
{
    size_t bytes = (size_t)n * sizeof(ck_chunk_t);
    if (n == self->nlast && memcmp(self->host, self->last, bytes) == 0)
        return 0;
    if (n > self->dev_cap) {
        if (ok(cudaStreamSynchronize(s), "waiting for the last optimizer step", err, errlen) < 0)
            return -1;
        cudaFree(self->dev);
        self->dev = NULL;
        self->dev_cap = 0;
        if (ok(cudaMalloc((void **)&self->dev, bytes), "cudaMalloc (optimizer chunk table)",
               err, errlen) < 0)
            return -1;
        self->dev_cap = n;
    }
    /* pageable source: staged before the call returns, so host may change */
    if (ok(cudaMemcpyAsync(self->dev, self->host, bytes, cudaMemcpyHostToDevice, s),
           "copying the optimizer chunk table", err, errlen) < 0)
        return -1;
    memcpy(self->last, self->host, bytes);
    self->nlast = n;
    self->counts.table_uploads++;
    log_debug("cuda optimizer: chunk table of %d chunks uploaded (%lu so far): one "
              "multi-tensor launch a step", n, self->counts.table_uploads);
    return 0;
}

static int per_param(cuda_optim_t *self, const optim_cfg_t *c, double lr, bk_oparam_t *p,
                     int n, cudaStream_t s, char *err, size_t errlen)
{
    for (int i = 0; i < n; i++) {
        if (!p[i].g)
            continue;
        if (cuda_optim_step(c, &p[i], lr, self->scratch, s, err, errlen) < 0)
            return -1;
        self->counts.param_launches++;
    }
    return 0;
}

int cuda_optim_run(cuda_optim_t *self, const optim_cfg_t *c, double lr, bk_oparam_t *p, int n,
                   void *stream, char *err, size_t errlen)
{
    cudaStream_t s = (cudaStream_t)stream;
    if (c->kind == OPTIM_NOVOGRAD)
        return per_param(self, c, lr, p, n, s, err, errlen);
    group_key_t keys[CK_GROUPS];
    int nchunks = 0, nkeys = 0;
    int rc = build_table(self, c, p, n, &nchunks, keys, &nkeys, err, errlen);
    if (rc < 0)
        return -1;
    if (rc == 1)
        return per_param(self, c, lr, p, n, s, err, errlen);
    if (nchunks == 0)
        return 0;
    if (upload(self, nchunks, s, err, errlen) < 0)
        return -1;
    cudaError_t e;
    if (c->kind == OPTIM_SGD) {
        ck_sgd_groups_t g;
        memset(&g, 0, sizeof g);
        for (int k = 0; k < nkeys; k++)
            g.g[k] = sgd_scalars(c, keys[k].decay, keys[k].have_buf, lr);
        e = ck_sgd_multi(s, self->dev, nchunks, g);
    } else {
        ck_adam_groups_t g;
        memset(&g, 0, sizeof g);
        for (int k = 0; k < nkeys; k++)
            g.g[k] = adam_scalars(c, keys[k].decay, keys[k].step + 1, lr);
        e = ck_adam_multi(s, self->dev, nchunks, g);
    }
    if (ok(e, c->kind == OPTIM_SGD ? "SGD multi-tensor kernel" : "Adam multi-tensor kernel",
           err, errlen) < 0)
        return -1;
    for (int i = 0; i < n; i++)
        if (p[i].g)
            advance(c, &p[i]);
    self->counts.multi_launches++;
    return 0;
}
