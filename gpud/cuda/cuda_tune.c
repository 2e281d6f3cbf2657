/* cuda_tune — see cuda_tune.h. The plans file, one shape a line:
 *
 *   # ddpipe cuDNN plans
 *   device NVIDIA H200
 *   cudnn 91400
 *   plan KIND N C H W N K OH OW KH KW SH SW PH PW NHWC FP16 TC BIAS NPOST P0..P3
 *        rank R engine E ms M [json HEX]   (one line in the file)
 *
 * the 24 integers of a plan are cu_fused_shape_t's fields in order; HEX is
 * the plan cuDNN serialized (its JSON representation's bytes, two hex
 * digits each), for runtime-compiled engines. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/atomic_file.h"
#include "common/log.h"
#include "gpud/cuda/cuda_tune.h"

#define KEY_INTS 24

typedef struct {
    int key[KEY_INTS];
    int rank;
    int64_t engine;
    double ms;              /* the chosen engine's time (as timed; 0 unknown) */
    double first_ms, any_ms;   /* timed here: heuristics' first admissible, fastest of all */
    int timed;              /* by this process (else read from the file) */
    unsigned uses;          /* layers that ran this shape's plan */
    char *json;             /* the plan serialized (cu_dg_plan_json), or NULL */
    size_t json_n;
} plan_t;

struct cu_tune {
    char *path;             /* DDPIPE_CUDNN_PLANS, or NULL */
    int timing;             /* DDPIPE_CUDNN_TUNE=1 */
    char device[256];
    long cudnn;
    plan_t *plans;
    size_t n, cap;
    int added;              /* plans timed since the file was read */
};

static void key_of(const cu_fused_shape_t *s, int k[KEY_INTS])
{
    int at = 0;
    k[at++] = s->kind;
    for (int i = 0; i < 4; i++)
        k[at++] = s->in[i];
    for (int i = 0; i < 4; i++)
        k[at++] = s->out[i];
    k[at++] = s->kh;
    k[at++] = s->kw;
    k[at++] = s->sh;
    k[at++] = s->sw;
    k[at++] = s->ph;
    k[at++] = s->pw;
    k[at++] = s->bf16_nhwc;
    k[at++] = s->fp16;
    k[at++] = s->tensor_core;
    k[at++] = s->bias;
    k[at++] = s->n_post;
    for (int i = 0; i < CU_FUSED_MAX_POST; i++)
        k[at++] = i < s->n_post ? s->post[i] : 0;
}

static plan_t *find(const cu_tune_t *t, const cu_fused_shape_t *s)
{
    int k[KEY_INTS];
    key_of(s, k);
    for (size_t i = 0; i < t->n; i++)
        if (memcmp(t->plans[i].key, k, sizeof k) == 0)
            return &t->plans[i];
    return NULL;
}

static plan_t *add(cu_tune_t *t)
{
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 32;
        plan_t *p = realloc(t->plans, cap * sizeof *p);
        if (!p)
            return NULL;
        t->plans = p;
        t->cap = cap;
    }
    plan_t *p = &t->plans[t->n++];
    memset(p, 0, sizeof *p);
    return p;
}

int cu_tune_max(void)
{
    const char *e = getenv("DDPIPE_CUDNN_TUNE_MAX");
    char *end = NULL;
    long v = e && *e ? strtol(e, &end, 10) : 8;
    return (end && *end) || v < 1 ? 8 : v > 32 ? 32 : (int)v;
}

double cu_tune_seconds(void)
{
    const char *e = getenv("DDPIPE_CUDNN_TUNE_SECONDS");
    char *end = NULL;
    double v = e && *e ? strtod(e, &end) : 5.0;
    return (end && *end) || !(v > 0.0) ? 5.0 : v;
}

/* n bytes from 2n hex digits at s (p->json); 0, or -1 */
static int unhex(const char *s, size_t digits, plan_t *p)
{
    if (digits == 0 || digits % 2)
        return -1;
    size_t n = digits / 2;
    unsigned char *b = malloc(n);
    if (!b)
        return -1;
    for (size_t i = 0; i < n; i++) {
        int v = 0;
        for (int k = 0; k < 2; k++) {
            char c = s[2 * i + k];
            int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
            if (d < 0) {
                free(b);
                return -1;
            }
            v = v * 16 + d;
        }
        b[i] = (unsigned char)v;
    }
    p->json = (char *)b;
    p->json_n = n;
    return 0;
}

/* "plan <24 ints> rank R engine E ms M [json HEX]" into p: 0, or -1 */
static int parse_plan(const char *line, plan_t *p)
{
    const char *at = line + 4;
    for (int i = 0; i < KEY_INTS; i++) {
        char *end = NULL;
        errno = 0;
        long v = strtol(at, &end, 10);
        if (end == at || errno || v < -1 || v > 1L << 30)
            return -1;
        p->key[i] = (int)v;
        at = end;
    }
    long long engine = 0;
    int used = 0;
    if (sscanf(at, " rank %d engine %lld ms %lf %n", &p->rank, &engine, &p->ms, &used) != 3 ||
        p->rank < 0 || p->rank >= 32)
        return -1;
    p->engine = engine;
    at += used;
    if (*at == '\0')
        return 0;
    if (strncmp(at, "json ", 5) != 0)
        return -1;
    return unhex(at + 5, strlen(at + 5), p);
}

static void plans_free(cu_tune_t *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->plans[i].json);
    t->n = 0;
}

/* FILE's plans into t: 0 (a missing file is an empty one), -1 refused
 * (logged: nothing of it kept) */
static int load(cu_tune_t *t)
{
    FILE *f = fopen(t->path, "r");
    if (!f) {
        if (errno == ENOENT)
            return 0;
        log_warn("cuda: cuDNN plans file %s: %s; cuDNN's heuristics choose the engines", t->path,
                 strerror(errno));
        return -1;
    }
    char *line = NULL, device[256] = "";
    size_t cap = 0;
    long cudnn = -1;
    int lineno = 0, bad = 0;
    ssize_t got;
    while (!bad && (got = getline(&line, &cap, f)) >= 0) {   /* a serialized plan is long */
        lineno++;
        size_t len = (size_t)got;
        if (len && line[len - 1] == '\n')
            line[--len] = '\0';
        if (line[0] == '#' || line[0] == '\0')
            continue;
        if (strncmp(line, "device ", 7) == 0) {
            size_t n = strlen(line + 7);
            bad = n >= sizeof device;   /* longer than any device name cuda reports */
            if (!bad)
                memcpy(device, line + 7, n + 1);
        }
        else if (strncmp(line, "cudnn ", 6) == 0)
            bad = sscanf(line + 6, "%ld", &cudnn) != 1;
        else if (strncmp(line, "plan ", 5) == 0) {
            plan_t *p = add(t);
            bad = !p || parse_plan(line, p) < 0;
        } else
            bad = 1;
    }
    int rerr = ferror(f);
    free(line);
    fclose(f);
    const char *why = bad ? "malformed" : rerr ? "read error" : NULL;
    char other[400] = "";
    if (!why && (strcmp(device, t->device) != 0 || cudnn != t->cudnn)) {
        snprintf(other, sizeof other, "timed on \"%s\" with cuDNN %ld, this is \"%s\" with cuDNN "
                 "%ld", device, cudnn, t->device, t->cudnn);
        why = other;
    }
    if (why) {
        char at[32] = "";
        if (bad)
            snprintf(at, sizeof at, " at line %d", lineno);
        log_warn("cuda: cuDNN plans file %s refused (%s%s): cuDNN's heuristics choose the "
                 "engines; time them again on this machine with DDPIPE_CUDNN_TUNE=1", t->path,
                 why, at);
        plans_free(t);
        return -1;
    }
    log_info("cuda: cuDNN plans file %s: %zu convolution shapes' engines", t->path, t->n);
    return 0;
}

cu_tune_t *cu_tune_new(const char *device, long cudnn_version)
{
    const char *path = getenv("DDPIPE_CUDNN_PLANS"), *tune = getenv("DDPIPE_CUDNN_TUNE");
    int timing = tune && strcmp(tune, "1") == 0;
    if ((!path || !*path) && !timing)
        return NULL;
    cu_tune_t *t = calloc(1, sizeof *t);
    if (!t || (path && *path && !(t->path = strdup(path)))) {
        free(t);
        log_warn("cuda: cuDNN plans: out of memory; cuDNN's heuristics choose the engines");
        return NULL;
    }
    t->timing = timing;
    snprintf(t->device, sizeof t->device, "%s", device);
    t->cudnn = cudnn_version;
    if (t->path && load(t) < 0 && !t->timing) {
        cu_tune_free(t);
        return NULL;
    }
    if (timing)
        log_warn("cuda: DDPIPE_CUDNN_TUNE=1: convolution engines chosen by this process's "
                 "timings (up to %d a shape)%s%s; run a job's gpuds with the plans file it "
                 "writes, so that every worker runs the same engines", cu_tune_max(),
                 t->path ? ", written to " : ", not kept (no DDPIPE_CUDNN_PLANS)",
                 t->path ? t->path : "");
    return t;
}

int cu_tune_timing(const cu_tune_t *t)
{
    return t && t->timing;
}

int cu_tune_lookup(const cu_tune_t *t, const cu_fused_shape_t *s, int64_t *engine,
                   const char **json, size_t *json_n)
{
    const plan_t *p = t ? find(t, s) : NULL;
    if (!p)
        return -1;
    *engine = p->engine;
    *json = p->json;
    *json_n = p->json_n;
    return p->rank;
}

/* p's serialized plan: a copy of json (NULL: none) */
static void set_json(plan_t *p, const char *json, size_t n)
{
    free(p->json);
    p->json = NULL;
    p->json_n = 0;
    if (json && n && (p->json = malloc(n)) != NULL) {
        memcpy(p->json, json, n);
        p->json_n = n;
    }
}

void cu_tune_add_json(cu_tune_t *t, const cu_fused_shape_t *s, const char *json, size_t json_n)
{
    plan_t *p = t ? find(t, s) : NULL;
    if (!p || p->json || !json)
        return;
    set_json(p, json, json_n);
    t->added += p->json != NULL;
}

void cu_tune_record(cu_tune_t *t, const cu_fused_shape_t *s, int rank, int64_t engine, double ms,
                    double first_ms, double any_ms, const char *json, size_t json_n)
{
    if (!t)
        return;
    plan_t *p = find(t, s);
    if (!p && (p = add(t)) != NULL)
        key_of(s, p->key);
    if (!p) {
        log_warn("cuda: cuDNN plans: out of memory; this shape's timing is not kept");
        return;
    }
    p->rank = rank;
    p->engine = engine;
    p->ms = ms;
    p->first_ms = first_ms;
    p->any_ms = any_ms;
    p->timed = 1;
    set_json(p, json, json_n);
    t->added++;
}

void cu_tune_use(cu_tune_t *t, const cu_fused_shape_t *s)
{
    plan_t *p = t ? find(t, s) : NULL;
    if (p)
        p->uses++;
}

static void save(cu_tune_t *t)
{
    char err[512];
    atomic_file_t *f = atomic_file_new(t->path, err, sizeof err);
    if (!f) {
        log_warn("cuda: cuDNN plans not written: %s", err);
        return;
    }
    FILE *o = atomic_file_stream(f);
    fprintf(o, "# ddpipe cuDNN plans (docs/CUDA.md \"Tuned engines\"): a shape's 24 numbers, "
               "heuristics' rank and engine of the timed choice\ndevice %s\ncudnn %ld\n",
            t->device, t->cudnn);
    for (size_t i = 0; i < t->n; i++) {
        const plan_t *p = &t->plans[i];
        fputs("plan", o);
        for (int k = 0; k < KEY_INTS; k++)
            fprintf(o, " %d", p->key[k]);
        fprintf(o, " rank %d engine %lld ms %.4f", p->rank, (long long)p->engine, p->ms);
        if (p->json) {
            fputs(" json ", o);
            for (size_t k = 0; k < p->json_n; k++)
                fprintf(o, "%02x", (unsigned char)p->json[k]);
        }
        fputc('\n', o);
    }
    if (atomic_file_commit(&f, err, sizeof err) != 0)
        log_warn("cuda: cuDNN plans not written: %s", err);
    else
        log_info("cuda: cuDNN plans of %zu shapes written to %s (%d timed now)", t->n, t->path,
                 t->added);
}

void cu_tune_free(cu_tune_t *t)
{
    if (!t)
        return;
    double tuned = 0, first = 0, any = 0;
    unsigned shapes = 0, layers = 0;
    for (size_t i = 0; i < t->n; i++) {
        const plan_t *p = &t->plans[i];
        if (!p->timed)
            continue;
        shapes++;
        layers += p->uses;
        tuned += p->uses * p->ms;
        first += p->uses * p->first_ms;
        any += p->uses * p->any_ms;
    }
    /* where the time of a pass's convolutions goes by engine choice: the
     * measure of what tuning gains and what determinism costs */
    if (shapes)
        log_info("cuda conv tune: %u shapes timed, %u layers: %.3f ms a pass on the tuned "
                 "engines, %.3f ms on heuristics' first deterministic ones, %.3f ms on the "
                 "fastest of all (nondeterministic allowed)", shapes, layers, tuned, first, any);
    if (t->path && t->added)
        save(t);
    plans_free(t);
    free(t->plans);
    free(t->path);
    free(t);
}
