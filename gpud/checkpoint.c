/* checkpoint — save and load training state as safetensors (see checkpoint.h). */
#include "gpud/checkpoint.h"
#include "gpud/loss_scale.h"
#include "common/errbuf.h"
#include "gpud/finite.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RNG_NAME "ckpt.rng_state"
#define SAMPLER_NAME "ckpt.sampler_state"


/* ---------------------------------------------------------------- save */

static int meta_u64(st_writer_t *w, const char *key, uint64_t v, char *err, size_t errlen)
{
    char buf[24];
    snprintf(buf, sizeof buf, "%" PRIu64, v);
    return st_writer_meta(w, key, buf, err, errlen);
}

static int save_info(st_writer_t *w, const ckpt_info_t *info, char *err, size_t errlen)
{
    char ver[8];
    snprintf(ver, sizeof ver, "%d", CKPT_VERSION);
    if (st_writer_meta(w, "format", CKPT_FORMAT, err, errlen) < 0 ||
        st_writer_meta(w, "ckpt.version", ver, err, errlen) < 0)
        return -1;
    if (!info)
        return 0;
    if (info->epoch < 0 || info->step < 0 || info->streak < 0 || info->global_batch < 0 ||
        info->steps_per_epoch < 0 || info->chunk < 0) {
        err_set(err, errlen, "checkpoint: negative epoch (%" PRId64 "), step (%" PRId64 "), "
                "streak (%" PRId64 "), global batch (%" PRId64 ") or steps per epoch (%" PRId64 ")",
                info->epoch, info->step, info->streak, info->global_batch, info->steps_per_epoch);
        return -1;
    }
    if (meta_u64(w, "ckpt.epoch", (uint64_t)info->epoch, err, errlen) < 0 ||
        meta_u64(w, "ckpt.step", (uint64_t)info->step, err, errlen) < 0 ||
        meta_u64(w, "ckpt.seed", info->seed, err, errlen) < 0 ||
        meta_u64(w, "ckpt.streak", (uint64_t)info->streak, err, errlen) < 0 ||
        meta_u64(w, "ckpt.global_batch", (uint64_t)info->global_batch, err, errlen) < 0 ||
        meta_u64(w, "ckpt.steps_per_epoch", (uint64_t)info->steps_per_epoch, err, errlen) < 0 ||
        meta_u64(w, "ckpt.chunk", (uint64_t)info->chunk, err, errlen) < 0)
        return -1;
    if (info->loss_scale > 0) {
        char scale[40];
        snprintf(scale, sizeof scale, "%.17g", info->loss_scale);   /* exact for 2^k */
        if (info->loss_scale_tracker < 0 || info->skipped_steps < 0 ||
            !loss_scale_valid(info->loss_scale)) {
            err_set(err, errlen, "checkpoint: loss scale %s (a power of two), tracker %" PRId64
                    " or skipped steps %" PRId64 " out of range", scale,
                    info->loss_scale_tracker, info->skipped_steps);
            return -1;
        }
        if (st_writer_meta(w, "ckpt.loss_scale", scale, err, errlen) < 0 ||
            meta_u64(w, "ckpt.loss_scale_tracker", (uint64_t)info->loss_scale_tracker, err,
                     errlen) < 0 ||
            meta_u64(w, "ckpt.skipped_steps", (uint64_t)info->skipped_steps, err, errlen) < 0)
            return -1;
    }
    if (info->arch[0] && st_writer_meta(w, "arch", info->arch, err, errlen) < 0)
        return -1;
    int64_t len;
    if (info->rng_len) {
        len = (int64_t)info->rng_len;
        if (st_writer_add(w, RNG_NAME, ST_U8, 1, &len, info->rng, err, errlen) < 0)
            return -1;
    }
    if (info->sampler_len) {
        len = (int64_t)info->sampler_len;
        if (st_writer_add(w, SAMPLER_NAME, ST_U8, 1, &len, info->sampler, err, errlen) < 0)
            return -1;
    }
    return 0;
}

static int check_model_entry(const ckpt_tensor_t *t, char *err, size_t errlen)
{
    if (!t->name || !t->data || (t->dtype != ST_F32 && t->dtype != ST_I64) || t->ndim < 0 ||
        t->ndim > ST_MAX_DIMS) {
        err_set(err, errlen, "checkpoint: model tensor %s: needs a name, data, dtype F32 or I64 "
                "and 0..%d dims", t->name ? t->name : "(null)", ST_MAX_DIMS);
        return -1;
    }
    if (strncmp(t->name, "optim.", 6) == 0 || strncmp(t->name, "ckpt.", 5) == 0) {
        err_set(err, errlen, "checkpoint: model tensor %s: the prefixes optim. and ckpt. are "
                "reserved for training state", t->name);
        return -1;
    }
    return 0;
}

/* The checkpoint's tensors and metadata in a writer; NULL with why in sub. */
static st_writer_t *build(const ckpt_tensor_t *model, size_t n_model, const optim_t *optim,
                          const ckpt_info_t *info, char *sub, size_t cap)
{
    st_writer_t *w = st_writer_new();
    if (!w) {
        err_set(sub, cap, "out of memory");
        return NULL;
    }
    int rc = 0;
    for (size_t i = 0; i < n_model && rc == 0; i++) {
        const ckpt_tensor_t *t = &model[i];
        rc = check_model_entry(t, sub, cap);
        if (rc == 0)
            rc = st_writer_add(w, t->name, t->dtype, t->ndim, t->shape, t->data, sub, cap);
    }
    if (rc == 0 && optim)
        rc = optim_save_state(optim, w, sub, cap);
    if (rc == 0)
        rc = save_info(w, info, sub, cap);
    if (rc < 0)
        st_writer_destroy(&w);
    return w;
}

int ckpt_save(const char *path, const ckpt_tensor_t *model, size_t n_model, const optim_t *optim,
              const ckpt_info_t *info, char *err, size_t errlen)
{
    char sub[400] = "";
    st_writer_t *w = build(model, n_model, optim, info, sub, sizeof sub);
    int rc = w ? st_writer_save(w, path, sub, sizeof sub) : -1;
    if (rc < 0)
        err_set(err, errlen, "%s: cannot save checkpoint: %s", path, sub);
    st_writer_destroy(&w);
    return rc;
}

int ckpt_save_image(uint8_t **image, size_t *len, const ckpt_tensor_t *model, size_t n_model,
                    const optim_t *optim, const ckpt_info_t *info, char *err, size_t errlen)
{
    char sub[400] = "";
    st_writer_t *w = build(model, n_model, optim, info, sub, sizeof sub);
    int rc = w ? st_writer_image(w, image, len, sub, sizeof sub) : -1;
    if (rc < 0)
        err_set(err, errlen, "cannot build the training state: %s", sub);
    st_writer_destroy(&w);
    return rc;
}

/* ---------------------------------------------------------------- load */

static const ckpt_tensor_t *find_model(const ckpt_tensor_t *model, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(model[i].name, name) == 0)
            return &model[i];
    return NULL;
}

/* Every model tensor present with its dtype and shape; nothing unknown. */
static int validate_model(const safetensors_t *st, const ckpt_tensor_t *model, size_t n,
                          char *err, size_t errlen)
{
    const char *path = safetensors_path(st);
    for (size_t i = 0; i < n; i++) {
        const ckpt_tensor_t *m = &model[i];
        if (check_model_entry(m, err, errlen) < 0)
            return -1;
        const st_tensor_t *t = safetensors_get(st, m->name);
        char want[128], got[128];
        st_shape_str(m->shape, m->ndim, want, sizeof want);
        if (!t) {
            err_set(err, errlen, "%s: tensor %s %s is missing from the checkpoint", path, m->name,
                    want);
            return -1;
        }
        st_shape_str(t->shape, t->ndim, got, sizeof got);
        bool same = t->ndim == m->ndim;
        for (int d = 0; same && d < m->ndim; d++)
            same = t->shape[d] == m->shape[d];
        if (!same || t->dtype != m->dtype) {
            err_set(err, errlen, "%s: tensor %s: checkpoint has %s %s, the model needs %s %s", path,
                    m->name, st_dtype_name(t->dtype), got, st_dtype_name(m->dtype), want);
            return -1;
        }
    }
    for (size_t k = 0; k < safetensors_count(st); k++) {
        const char *name = safetensors_at(st, k)->name;
        if (strncmp(name, "optim.", 6) == 0 || strcmp(name, RNG_NAME) == 0 ||
            strcmp(name, SAMPLER_NAME) == 0)
            continue;
        if (!find_model(model, n, name)) {
            err_set(err, errlen, "%s: tensor %s in the checkpoint is not part of this model "
                    "(another architecture or width?)", path, name);
            return -1;
        }
    }
    return 0;
}

/* Every float of the file finite: model tensors and optimizer state (a NaN
 * momentum would poison the weights at the next step). A joiner's STATE
 * comes through here too. */
static int check_finite(const safetensors_t *st, char *err, size_t errlen)
{
    for (size_t k = 0; k < safetensors_count(st); k++) {
        const st_tensor_t *t = safetensors_at(st, k);
        char bad[256];
        if (t->dtype == ST_F32 && finite_check(t->name, t->data, (size_t)t->numel, bad,
                                               sizeof bad) < 0) {
            err_set(err, errlen, "%s: %s: a checkpoint must hold finite values (a damaged file, "
                    "or a run that diverged)",
                    safetensors_path(st), bad);
            return -1;
        }
    }
    return 0;
}

static int meta_i64(const safetensors_t *st, const char *key, int64_t *out, char *err,
                    size_t errlen)
{
    const char *s = safetensors_meta(st, key);
    if (!s) {
        err_set(err, errlen, "%s: metadata %s is missing", safetensors_path(st), key);
        return -1;
    }
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-' || v > INT64_MAX) {
        err_set(err, errlen, "%s: metadata %s is not a non-negative integer: \"%s\"",
                safetensors_path(st), key, s);
        return -1;
    }
    *out = (int64_t)v;
    return 0;
}

/* A copy of an opaque ckpt.* byte tensor (NULL, 0 when absent). */
static int read_blob(const safetensors_t *st, const char *name, uint8_t **out, size_t *len,
                     char *err, size_t errlen)
{
    *out = NULL;
    *len = 0;
    const st_tensor_t *t = safetensors_get(st, name);
    if (!t)
        return 0;
    if (t->dtype != ST_U8 || t->ndim != 1) {
        err_set(err, errlen, "%s: tensor %s: expected U8 with one dimension, got %s with %d",
                safetensors_path(st), name, st_dtype_name(t->dtype), t->ndim);
        return -1;
    }
    if (t->nbytes == 0)
        return 0;
    *out = malloc(t->nbytes);
    if (!*out) {
        err_set(err, errlen, "%s: out of memory reading %s", safetensors_path(st), name);
        return -1;
    }
    memcpy(*out, t->data, t->nbytes);
    *len = t->nbytes;
    return 0;
}

static int read_info(const safetensors_t *st, ckpt_info_t *info, char *err, size_t errlen)
{
    memset(info, 0, sizeof *info);
    if (meta_i64(st, "ckpt.epoch", &info->epoch, err, errlen) < 0 ||
        meta_i64(st, "ckpt.step", &info->step, err, errlen) < 0)
        return -1;
    /* optional: older checkpoints lack them (0), a present one must parse */
    static const char *const opt_keys[6] = {"ckpt.streak", "ckpt.global_batch",
                                            "ckpt.steps_per_epoch", "ckpt.chunk",
                                            "ckpt.loss_scale_tracker", "ckpt.skipped_steps"};
    int64_t *opt_vals[6] = {&info->streak, &info->global_batch, &info->steps_per_epoch,
                            &info->chunk, &info->loss_scale_tracker, &info->skipped_steps};
    for (int i = 0; i < 6; i++)
        if (safetensors_meta(st, opt_keys[i]) && meta_i64(st, opt_keys[i], opt_vals[i], err,
                                                          errlen) < 0)
            return -1;
    const char *ls = safetensors_meta(st, "ckpt.loss_scale");
    if (ls) {
        char *lend;
        errno = 0;
        info->loss_scale = strtod(ls, &lend);
        if (errno || lend == ls || *lend || !loss_scale_valid(info->loss_scale)) {
            err_set(err, errlen, "%s: metadata ckpt.loss_scale '%s' is not a power of two",
                    safetensors_path(st), ls);
            return -1;
        }
    }
    /* the seed is a u64: parse it as such */
    const char *s = safetensors_meta(st, "ckpt.seed");
    char *end;
    errno = 0;
    unsigned long long v = s ? strtoull(s, &end, 10) : 0;
    if (!s || errno || end == s || *end || s[0] == '-') {
        err_set(err, errlen, "%s: metadata ckpt.seed is missing or not an unsigned integer",
                safetensors_path(st));
        return -1;
    }
    info->seed = (uint64_t)v;
    const char *arch = safetensors_meta(st, "arch");
    if (arch)
        snprintf(info->arch, sizeof info->arch, "%s", arch);
    if (read_blob(st, RNG_NAME, &info->rng, &info->rng_len, err, errlen) < 0 ||
        read_blob(st, SAMPLER_NAME, &info->sampler, &info->sampler_len, err, errlen) < 0) {
        ckpt_info_clear(info);
        return -1;
    }
    return 0;
}

void ckpt_info_clear(ckpt_info_t *info)
{
    if (!info)
        return;
    free(info->rng);
    free(info->sampler);
    memset(info, 0, sizeof *info);
}

static int check_format(const safetensors_t *st, char *err, size_t errlen)
{
    const char *fmt = safetensors_meta(st, "format");
    const char *ver = safetensors_meta(st, "ckpt.version");
    if (!fmt || strcmp(fmt, CKPT_FORMAT) != 0) {
        err_set(err, errlen, "%s: not a ddpipe checkpoint (metadata format is \"%s\", expected "
                "\"%s\"; plain weights load with --weights)", safetensors_path(st),
                fmt ? fmt : "(none)", CKPT_FORMAT);
        return -1;
    }
    if (!ver || atoi(ver) != CKPT_VERSION) {
        err_set(err, errlen, "%s: checkpoint version %s, this build reads version %d",
                safetensors_path(st), ver ? ver : "(none)", CKPT_VERSION);
        return -1;
    }
    return 0;
}

/* Copy the validated model tensors out of the file. */
static void copy_model(const safetensors_t *st, const ckpt_tensor_t *model, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const st_tensor_t *t = safetensors_get(st, model[i].name);
        memcpy(model[i].data, t->data, t->nbytes);   /* same dtype: a byte copy */
    }
}

/* Everything checked, then everything copied: all or nothing. */
static int load_from(safetensors_t *st, const ckpt_tensor_t *model, size_t n_model, optim_t *optim,
                     ckpt_info_t *info, char *err, size_t errlen)
{
    ckpt_info_t got = {0};
    int rc = check_format(st, err, errlen);
    if (rc == 0)
        rc = validate_model(st, model, n_model, err, errlen);
    if (rc == 0)
        rc = check_finite(st, err, errlen);
    if (rc == 0)
        rc = read_info(st, &got, err, errlen);
    /* optim_load_state validates everything before it changes anything,
     * and after it nothing can fail: the load is all or nothing. */
    if (rc == 0 && optim)
        rc = optim_load_state(optim, st, err, errlen);
    if (rc == 0) {
        copy_model(st, model, n_model);
        if (info)
            *info = got;   /* overwritten, not freed: it may hold the caller's buffers */
        else
            ckpt_info_clear(&got);
    } else {
        ckpt_info_clear(&got);
    }
    return rc;
}

int ckpt_load(const char *path, const ckpt_tensor_t *model, size_t n_model, optim_t *optim,
              ckpt_info_t *info, char *err, size_t errlen)
{
    safetensors_t *st = safetensors_open(path, err, errlen);
    if (!st)
        return -1;
    int rc = load_from(st, model, n_model, optim, info, err, errlen);
    safetensors_destroy(&st);
    return rc;
}

int ckpt_load_image(const void *image, size_t len, const char *what, const ckpt_tensor_t *model,
                    size_t n_model, optim_t *optim, ckpt_info_t *info, char *err, size_t errlen)
{
    safetensors_t *st = safetensors_open_buffer(image, len, what, err, errlen);
    if (!st)
        return -1;
    int rc = load_from(st, model, n_model, optim, info, err, errlen);
    safetensors_destroy(&st);
    return rc;
}
