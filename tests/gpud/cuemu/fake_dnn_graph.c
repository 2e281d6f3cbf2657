/* fake_dnn_graph — cuDNN's graph (backend) API as the cuda backend uses it
 * (gpud/cuda/cuda_fused.c), computed on the CPU by gpud's reference
 * kernels, so that the graph path's host code runs on the kernel emulator
 * instead of falling back to the legacy calls unseen.
 *
 * Descriptors keep their attributes as set; finalize checks what a graph
 * needs (a tensor's type, dims, strides and id; an operation's operands; a
 * convolution's shapes against its tensors, as cuDNN refuses a bad one).
 * Graphs: convolution forward, backward data and backward filter, and
 * pointwise ADD (a 1 x k x 1 x 1 operand broadcast) and RELU_FWD, virtual
 * tensors as fp32, each non-virtual output rounded once to its type. The
 * heuristics offer three configurations (engines 0, 1, 2: the same
 * arithmetic), the first with the NONDETERMINISTIC note (a caller must
 * filter it), the others with none, the third with the behaviour note
 * RUNTIME_COMPILATION (DDPIPE_CUDNN_RTC=0 passes it over; a plans file may
 * name either, and cuda_tune's timing chooses between them: the
 * emulator's events time nothing, so the first); plans need no workspace.
 * A plan of engine 2 has a JSON representation (the descriptors it
 * reaches, as text) and a plan finalized from one is rebuilt from it, as
 * cuDNN serializes its runtime-compiled plans; other engines' plans have
 * none (NOT_SUPPORTED). What this cannot show: cuDNN's own engines, their
 * sums' order, which graphs real cuDNN refuses (it found no engine for the
 * fp32 NCHW conv + bias + sum + relu on an H200), speed.
 * CUEMU_DNN_GRAPH=0 makes every descriptor NOT_SUPPORTED (the fallback). */
#include <cudnn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_dnn_layout.h"
#include "gpud/cpu/ref_ops.h"

int cuemu_capturing(void);
void cuemu_record(void (*fn)(void *), const void *arg, size_t bytes);
void cuemu_trace(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

enum { MAX_ATTR = 24, ATTR_BYTES = 128, MAX_IO = 8, FAKE_ENGINES = 3 };

/* deprecated in cuDNN 9.19's header, still what a plan's handle is set by */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static const cudnnBackendAttributeName_t ATTR_PLAN_HANDLE_FAKE = CUDNN_ATTR_EXECUTION_PLAN_HANDLE;
#pragma GCC diagnostic pop

typedef struct {
    cudnnBackendAttributeName_t name;
    cudnnBackendAttributeType_t type;
    int64_t n;
    unsigned char v[ATTR_BYTES];
} attr_t;

typedef struct fdesc {
    cudnnBackendDescriptorType_t type;
    int final;
    attr_t a[MAX_ATTR];
    int na;
    struct fdesc *graph;   /* an engine config's (from the heuristics) */
    int engine;            /* an engine config's / engine's index: 0 nondeterministic */
    char *json;            /* a plan's JSON representation as set (read at finalize) */
    size_t json_n;
    struct fdesc **owned;  /* what a plan made from its JSON (freed with it) */
    int nowned;
} fdesc_t;

static int enabled(void)
{
    const char *v = getenv("CUEMU_DNN_GRAPH");
    return !(v && strcmp(v, "0") == 0);
}

static size_t type_size(cudnnBackendAttributeType_t t)
{
    switch (t) {
    case CUDNN_TYPE_INT64:
    case CUDNN_TYPE_DOUBLE:
    case CUDNN_TYPE_VOID_PTR:
    case CUDNN_TYPE_BACKEND_DESCRIPTOR:
    case CUDNN_TYPE_HANDLE:
        return 8;
    case CUDNN_TYPE_BOOLEAN:
        return sizeof(bool);
    case CUDNN_TYPE_CHAR:
        return 1;
    default:   /* float and the enums */
        return 4;
    }
}

static const attr_t *find(const fdesc_t *d, cudnnBackendAttributeName_t n)
{
    for (int i = 0; d && i < d->na; i++)
        if (d->a[i].name == n)
            return &d->a[i];
    return NULL;
}

static int64_t i64(const fdesc_t *d, cudnnBackendAttributeName_t n, int i)
{
    const attr_t *a = find(d, n);
    int64_t v = 0;
    if (a && a->type == CUDNN_TYPE_INT64 && i < a->n)
        memcpy(&v, a->v + 8 * i, 8);
    return v;
}

static int enum_of(const fdesc_t *d, cudnnBackendAttributeName_t n)
{
    const attr_t *a = find(d, n);
    int v = -1;
    if (a)
        memcpy(&v, a->v, sizeof v);
    return v;
}

static fdesc_t *desc_of(const fdesc_t *d, cudnnBackendAttributeName_t n, int i)
{
    const attr_t *a = find(d, n);
    fdesc_t *v = NULL;
    if (a && a->type == CUDNN_TYPE_BACKEND_DESCRIPTOR && i < a->n)
        memcpy(&v, a->v + 8 * i, 8);
    return v;
}

/* ------------------------------------------------ plans as JSON (text) */

/* A plan's "JSON": every descriptor it reaches (through descriptor
 * attributes and an engine config's graph), numbered from 0 (the plan),
 * one line each, "d TYPE FINAL ENGINE GRAPH NA", then one line an
 * attribute: "p NAME N I..." (descriptors by number), "h NAME" (the
 * handle: the loading plan's), or "a NAME TYPE N HEX". Only the fake's
 * runtime-compiled engine (2) serializes, as cuDNN's runtime-fusion
 * engines alone do. */
enum { MAX_JSON_DESC = 64 };

static int json_index(fdesc_t **all, int *n, fdesc_t *d)
{
    for (int i = 0; i < *n; i++)
        if (all[i] == d)
            return i;
    if (*n == MAX_JSON_DESC)
        return -1;
    all[*n] = d;
    return (*n)++;
}

static char *json_text(fdesc_t *plan, size_t *len)
{
    fdesc_t *all[MAX_JSON_DESC];
    int n = 0;
    json_index(all, &n, plan);
    for (int i = 0; i < n; i++) {   /* n grows as descriptors are found */
        if (all[i]->graph && json_index(all, &n, all[i]->graph) < 0)
            return NULL;
        for (int k = 0; k < all[i]->na; k++)
            for (int64_t j = 0; all[i]->a[k].type == CUDNN_TYPE_BACKEND_DESCRIPTOR &&
                                j < all[i]->a[k].n; j++) {
                fdesc_t *d = desc_of(all[i], all[i]->a[k].name, (int)j);
                if (d && json_index(all, &n, d) < 0)
                    return NULL;
            }
    }
    size_t cap = 4096, at = 0;
    char *s = malloc(cap);
#define PUT(...)                                                                  \
    do {                                                                          \
        int w_ = snprintf(s ? s + at : NULL, s ? cap - at : 0, __VA_ARGS__);      \
        if (s && (size_t)w_ >= cap - at) {                                        \
            char *g_ = realloc(s, cap = 2 * cap + (size_t)w_);                    \
            if (!g_) {                                                            \
                free(s);                                                          \
                s = NULL;                                                         \
            } else {                                                              \
                s = g_;                                                           \
                w_ = snprintf(s + at, cap - at, __VA_ARGS__);                     \
            }                                                                     \
        }                                                                         \
        at += s ? (size_t)w_ : 0;                                                 \
    } while (0)
    PUT("fakeplan %d\n", n);
    for (int i = 0; i < n && s; i++) {
        const fdesc_t *d = all[i];
        PUT("d %d %d %d %d %d\n", (int)d->type, d->final, d->engine,
            d->graph ? json_index(all, &n, d->graph) : -1, d->na);
        for (int k = 0; k < d->na && s; k++) {
            const attr_t *a = &d->a[k];
            if (a->type == CUDNN_TYPE_BACKEND_DESCRIPTOR) {
                PUT("p %d %lld", (int)a->name, (long long)a->n);
                for (int64_t j = 0; j < a->n && s; j++) {
                    fdesc_t *p = desc_of(d, a->name, (int)j);
                    PUT(" %d", p ? json_index(all, &n, p) : -1);
                }
                PUT("\n");
            } else if (a->type == CUDNN_TYPE_HANDLE) {
                PUT("h %d\n", (int)a->name);
            } else {
                PUT("a %d %d %lld ", (int)a->name, (int)a->type, (long long)a->n);
                size_t bytes = type_size(a->type) * (size_t)a->n;
                for (size_t j = 0; j < bytes && s; j++)
                    PUT("%02x", a->v[j]);
                PUT("\n");
            }
        }
    }
#undef PUT
    if (s)
        *len = at + 1;   /* with its NUL, as cuDNN counts its characters */
    return s;
}

static cudnnStatus_t fake_json_get(fdesc_t *plan, int64_t r, int64_t *c, void *v)
{
    const fdesc_t *cfg = desc_of(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, 0);
    if (!cfg || cfg->engine != 2)
        return CUDNN_STATUS_NOT_SUPPORTED;   /* a precompiled engine */
    size_t len = 0;
    char *s = json_text(plan, &len);
    if (!s)
        return CUDNN_STATUS_ALLOC_FAILED;
    *c = (int64_t)len;
    if (r > 0 && v)
        memcpy(v, s, (size_t)r < len ? (size_t)r : len);
    free(s);
    return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t fake_json_set(fdesc_t *f, const void *v, size_t n)
{
    char *s = malloc(n + 1);
    if (!s)
        return CUDNN_STATUS_ALLOC_FAILED;
    memcpy(s, v, n);
    s[n] = '\0';
    free(f->json);
    f->json = s;
    f->json_n = n;
    return CUDNN_STATUS_SUCCESS;
}

/* f's descriptors rebuilt from its JSON: f takes the plan's attributes,
 * the rest are f's own; the handle attributes get f's handle. 0, or -1
 * (malformed: nothing kept). */
static int fake_json_load(fdesc_t *f)
{
    const attr_t *h = find(f, ATTR_PLAN_HANDLE_FAKE);
    const char *at = f->json;
    int n = 0, used = 0;
    if (!h || sscanf(at, "fakeplan %d %n", &n, &used) != 1 || n < 1 || n > MAX_JSON_DESC)
        return -1;
    at += used;
    fdesc_t **all = calloc((size_t)n, sizeof *all);
    int ok = all != NULL;
    int graph[MAX_JSON_DESC];
    for (int i = 0; ok && i < n; i++)
        ok = (all[i] = calloc(1, sizeof **all)) != NULL;
    for (int i = 0; ok && i < n; i++) {
        fdesc_t *d = all[i];
        int type = 0, na = 0;
        ok = sscanf(at, "d %d %d %d %d %d %n", &type, &d->final, &d->engine, &graph[i], &na,
                    &used) == 5 && na >= 0 && na <= MAX_ATTR && graph[i] < n;
        at += ok ? used : 0;
        d->type = (cudnnBackendDescriptorType_t)type;
        d->na = na;
        for (int k = 0; ok && k < na; k++) {
            attr_t *a = &d->a[k];
            int name = 0, ty = 0;
            long long cnt = 0;
            if (sscanf(at, "p %d %lld %n", &name, &cnt, &used) == 2) {
                at += used;
                ok = cnt >= 0 && (size_t)cnt * 8 <= ATTR_BYTES;
                a->type = CUDNN_TYPE_BACKEND_DESCRIPTOR;
                for (long long j = 0; ok && j < cnt; j++) {
                    int idx = -1;
                    ok = sscanf(at, "%d %n", &idx, &used) == 1 && idx >= -1 && idx < n;
                    at += ok ? used : 0;
                    fdesc_t *p = ok && idx >= 0 ? all[idx] : NULL;
                    memcpy(a->v + 8 * j, &p, 8);
                }
            } else if (sscanf(at, "h %d %n", &name, &used) == 1) {
                at += used;
                a->type = CUDNN_TYPE_HANDLE;
                memcpy(a->v, h->v, 8);
                cnt = 1;
            } else if (sscanf(at, "a %d %d %lld %n", &name, &ty, &cnt, &used) == 3) {
                at += used;
                a->type = (cudnnBackendAttributeType_t)ty;
                size_t bytes = type_size(a->type) * (size_t)cnt;
                ok = cnt >= 0 && bytes <= ATTR_BYTES;
                for (size_t j = 0; ok && j < bytes; j++) {
                    unsigned x = 0;
                    ok = sscanf(at, "%2x", &x) == 1;
                    a->v[j] = (unsigned char)x;
                    at += 2;
                }
                while (ok && (*at == '\n' || *at == ' '))
                    at++;
            } else
                ok = 0;
            a->name = (cudnnBackendAttributeName_t)name;
            a->n = cnt;
        }
    }
    for (int i = 0; ok && i < n; i++)
        all[i]->graph = graph[i] >= 0 ? all[graph[i]] : NULL;
    ok = ok && all[0]->type == CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR &&
         (f->owned = calloc((size_t)n, sizeof *f->owned)) != NULL;
    if (!ok) {
        for (int i = 0; all && i < n; i++)
            free(all[i]);
        free(all);
        return -1;
    }
    memcpy(f->a, all[0]->a, sizeof f->a);   /* the plan's attributes, its handle f's */
    f->na = all[0]->na;
    free(all[0]);
    for (int i = 1; i < n; i++)
        f->owned[f->nowned++] = all[i];
    free(all);
    return 0;
}

cudnnStatus_t cudnnBackendCreateDescriptor(cudnnBackendDescriptorType_t t,
                                           cudnnBackendDescriptor_t *d)
{
    *d = NULL;
    if (!enabled())
        return CUDNN_STATUS_NOT_SUPPORTED;
    fdesc_t *f = calloc(1, sizeof *f);
    if (!f)
        return CUDNN_STATUS_ALLOC_FAILED;
    f->type = t;
    *d = f;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendDestroyDescriptor(cudnnBackendDescriptor_t d)
{
    fdesc_t *f = d;
    for (int i = 0; f && i < f->nowned; i++)
        free(f->owned[i]);
    if (f) {
        free(f->owned);
        free(f->json);
    }
    free(f);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendSetAttribute(cudnnBackendDescriptor_t d,
                                       cudnnBackendAttributeName_t n,
                                       cudnnBackendAttributeType_t t, int64_t c, const void *v)
{
    fdesc_t *f = d;
    size_t bytes = type_size(t) * (size_t)c;
    if (f && !f->final && f->type == CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR &&
        n == CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION && t == CUDNN_TYPE_CHAR && c > 0 && v)
        return fake_json_set(f, v, (size_t)c);
    if (!f || c < 0 || !v || bytes > ATTR_BYTES)
        return CUDNN_STATUS_BAD_PARAM;
    if (f->final)
        return CUDNN_STATUS_NOT_INITIALIZED;   /* cuDNN: finalized descriptors are frozen */
    attr_t *a = (attr_t *)find(f, n);
    if (!a) {
        if (f->na == MAX_ATTR)
            return CUDNN_STATUS_NOT_SUPPORTED;
        a = &f->a[f->na++];
    }
    a->name = n;
    a->type = t;
    a->n = c;
    memcpy(a->v, v, bytes);
    return CUDNN_STATUS_SUCCESS;
}

/* ------------------------------------------------------------- finalize */

static int tensor_ok(const fdesc_t *t)
{
    return t && t->type == CUDNN_BACKEND_TENSOR_DESCRIPTOR && t->final;
}

static void dims4(const fdesc_t *t, int d[4])
{
    for (int i = 0; i < 4; i++)
        d[i] = (int)i64(t, CUDNN_ATTR_TENSOR_DIMENSIONS, i);
}

/* the conv op's X/DX, W/DW, Y/DY and its convolution descriptor */
typedef struct {
    int kind;   /* 0 forward, 1 backward data, 2 backward filter */
    fdesc_t *x, *w, *y, *conv;
    float alpha, beta;
} conv_op_t;

/* The attributes of each kind, spelled out here apart from cuda_fused.c's
 * table on purpose: one shared table would make a swapped attribute agree
 * with itself. */
static int conv_parts(const fdesc_t *op, conv_op_t *c)
{
    static const struct {
        cudnnBackendDescriptorType_t type;
        cudnnBackendAttributeName_t x, w, y, conv, alpha, beta;
    } K[3] = {
        {CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
         CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
         CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y,
         CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
         CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
         CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA},
        {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA},
        {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA},
    };
    for (int k = 0; k < 3; k++) {
        if (op->type != K[k].type)
            continue;
        const attr_t *al = find(op, K[k].alpha), *be = find(op, K[k].beta);
        *c = (conv_op_t){k, desc_of(op, K[k].x, 0), desc_of(op, K[k].w, 0),
                         desc_of(op, K[k].y, 0), desc_of(op, K[k].conv, 0), 0, 0};
        if (!al || !be || al->type != CUDNN_TYPE_FLOAT || be->type != CUDNN_TYPE_FLOAT)
            return 0;
        memcpy(&c->alpha, al->v, 4);
        memcpy(&c->beta, be->v, 4);
        return 1;
    }
    return 0;
}

/* cuDNN's checks of a convolution: operands there, 2 spatial dims, the
 * shapes consistent, alpha 1 / beta 0 (all the backend uses) */
static int conv_ok(const fdesc_t *op)
{
    conv_op_t c;
    if (!conv_parts(op, &c) || !tensor_ok(c.x) || !tensor_ok(c.w) || !tensor_ok(c.y) ||
        !c.conv || !c.conv->final || c.alpha != 1.0f || c.beta != 0.0f)
        return 0;
    int x[4], w[4], y[4];
    dims4(c.x, x), dims4(c.w, w), dims4(c.y, y);
    int64_t sh = i64(c.conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, 0),
            sw = i64(c.conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, 1),
            ph = i64(c.conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, 0),
            pw = i64(c.conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, 1);
    if (i64(c.conv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, 0) != 2 || sh < 1 || sw < 1)
        return 0;
    return x[0] == y[0] && x[1] == w[1] && y[1] == w[0] &&
           y[2] == (x[2] + 2 * ph - w[2]) / sh + 1 && y[3] == (x[3] + 2 * pw - w[3]) / sw + 1;
}

static int pointwise_ok(const fdesc_t *op)
{
    const fdesc_t *pw = desc_of(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, 0);
    const fdesc_t *x = desc_of(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, 0);
    const fdesc_t *b = desc_of(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, 0);
    const fdesc_t *y = desc_of(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, 0);
    int mode = enum_of(pw, CUDNN_ATTR_POINTWISE_MODE);
    if (!pw || !pw->final || !tensor_ok(x) || !tensor_ok(y))
        return 0;
    if (mode == CUDNN_POINTWISE_RELU_FWD)
        return !b;
    return mode == CUDNN_POINTWISE_ADD && tensor_ok(b);
}

cudnnStatus_t cudnnBackendFinalize(cudnnBackendDescriptor_t d)
{
    fdesc_t *f = d;
    int ok = 1;
    switch (f ? (int)f->type : -1) {
    case CUDNN_BACKEND_TENSOR_DESCRIPTOR:
        ok = find(f, CUDNN_ATTR_TENSOR_DATA_TYPE) && find(f, CUDNN_ATTR_TENSOR_UNIQUE_ID) &&
             find(f, CUDNN_ATTR_TENSOR_DIMENSIONS) && find(f, CUDNN_ATTR_TENSOR_DIMENSIONS)->n == 4 &&
             find(f, CUDNN_ATTR_TENSOR_STRIDES) && find(f, CUDNN_ATTR_TENSOR_STRIDES)->n == 4;
        break;
    case CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR:
    case CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR:
    case CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR:
        ok = conv_ok(f);
        break;
    case CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR:
        ok = pointwise_ok(f);
        break;
    case CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR: {
        const attr_t *ops = find(f, CUDNN_ATTR_OPERATIONGRAPH_OPS);
        ok = ops && ops->n >= 1;
        for (int i = 0; ok && i < ops->n; i++)
            ok = desc_of(f, CUDNN_ATTR_OPERATIONGRAPH_OPS, i) &&
                 desc_of(f, CUDNN_ATTR_OPERATIONGRAPH_OPS, i)->final;
        break;
    }
    case CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR:
        ok = desc_of(f, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, 0) != NULL;
        break;
    case CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR: {
        if (f->json && fake_json_load(f) != 0)
            return CUDNN_STATUS_BAD_PARAM;
        const fdesc_t *cfg = desc_of(f, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, 0);
        ok = cfg && cfg->graph;
        break;
    }
    case CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR:
        ok = find(f, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS) &&
             find(f, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS) &&
             find(f, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS)->n ==
                 find(f, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS)->n &&
             find(f, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS)->n <= MAX_IO;
        break;
    default:   /* the convolution and pointwise descriptors: nothing to check */
        ok = f != NULL;
    }
    if (!ok)
        return CUDNN_STATUS_BAD_PARAM;
    f->final = 1;
    return CUDNN_STATUS_SUCCESS;
}

/* ------------------------------------------------------------- queries */

cudnnStatus_t cudnnBackendGetAttribute(cudnnBackendDescriptor_t const d,
                                       cudnnBackendAttributeName_t n,
                                       cudnnBackendAttributeType_t t, int64_t r, int64_t *c,
                                       void *v)
{
    fdesc_t *f = d;
    if (!f || !f->final || !c)
        return CUDNN_STATUS_BAD_PARAM;
    if (f->type == CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR && n == CUDNN_ATTR_ENGINEHEUR_RESULTS &&
        t == CUDNN_TYPE_BACKEND_DESCRIPTOR) {
        fdesc_t **cfg = v;
        *c = r == 0 ? FAKE_ENGINES : r < FAKE_ENGINES ? r : FAKE_ENGINES;
        for (int64_t i = 0; i < *c && r > 0; i++) {
            if (!cfg[i] || cfg[i]->type != CUDNN_BACKEND_ENGINECFG_DESCRIPTOR)
                return CUDNN_STATUS_BAD_PARAM;
            cfg[i]->graph = desc_of(f, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, 0);
            cfg[i]->engine = (int)i;
            cfg[i]->final = 1;
        }
        return CUDNN_STATUS_SUCCESS;
    }
    if (f->type == CUDNN_BACKEND_ENGINECFG_DESCRIPTOR && n == CUDNN_ATTR_ENGINECFG_ENGINE &&
        t == CUDNN_TYPE_BACKEND_DESCRIPTOR && r >= 1) {
        fdesc_t *e = *(fdesc_t **)v;
        if (!e || e->type != CUDNN_BACKEND_ENGINE_DESCRIPTOR)
            return CUDNN_STATUS_BAD_PARAM;
        e->engine = f->engine;
        e->final = 1;
        *c = 1;
        return CUDNN_STATUS_SUCCESS;
    }
    if (f->type == CUDNN_BACKEND_ENGINE_DESCRIPTOR && n == CUDNN_ATTR_ENGINE_NUMERICAL_NOTE &&
        t == CUDNN_TYPE_NUMERICAL_NOTE) {
        *c = 0;
        if (f->engine == 0 && r >= 1) {
            *(cudnnBackendNumericalNote_t *)v = CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC;
            *c = 1;
        }
        return CUDNN_STATUS_SUCCESS;
    }
    if (f->type == CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR &&
        n == CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION && t == CUDNN_TYPE_CHAR)
        return fake_json_get(f, r, c, v);
    if (f->type == CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR &&
        n == CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG && t == CUDNN_TYPE_BACKEND_DESCRIPTOR &&
        r >= 1) {   /* into the caller's engine config descriptor, as cuDNN fills it */
        fdesc_t *out = *(fdesc_t **)v;
        const fdesc_t *cfg = desc_of(f, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, 0);
        if (!out || out->type != CUDNN_BACKEND_ENGINECFG_DESCRIPTOR || !cfg)
            return CUDNN_STATUS_BAD_PARAM;
        out->graph = cfg->graph;
        out->engine = cfg->engine;
        out->final = 1;
        *c = 1;
        return CUDNN_STATUS_SUCCESS;
    }
    if (f->type == CUDNN_BACKEND_ENGINE_DESCRIPTOR && n == CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE &&
        t == CUDNN_TYPE_BEHAVIOR_NOTE) {
        *c = 0;
        if (f->engine == 2 && r >= 1) {   /* as if it compiled its kernel at finalize */
            *(cudnnBackendBehaviorNote_t *)v = CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION;
            *c = 1;
        }
        return CUDNN_STATUS_SUCCESS;
    }
    if (f->type == CUDNN_BACKEND_ENGINE_DESCRIPTOR && n == CUDNN_ATTR_ENGINE_GLOBAL_INDEX &&
        t == CUDNN_TYPE_INT64 && r >= 1) {
        *(int64_t *)v = f->engine;
        *c = 1;
        return CUDNN_STATUS_SUCCESS;
    }
    if (f->type == CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR &&
        n == CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE && t == CUDNN_TYPE_INT64 && r >= 1) {
        *(int64_t *)v = 0;
        *c = 1;
        return CUDNN_STATUS_SUCCESS;
    }
    return CUDNN_STATUS_NOT_SUPPORTED;
}

/* -------------------------------------------------------------- running */

/* One execution, kept whole so a capture can replay it: the plan and the
 * variant pack's ids and pointers (the pack may be rebuilt before that). */
typedef struct {
    const fdesc_t *plan;
    int n;
    int64_t uid[MAX_IO];
    void *ptr[MAX_IO];
} exec_t;

/* The graph's values as NCHW floats, one per tensor id seen. */
typedef struct {
    int64_t uid[4 * MAX_IO];
    float *val[4 * MAX_IO];
    int n;
} values_t;

static float **slot(values_t *vs, int64_t uid)
{
    for (int i = 0; i < vs->n; i++)
        if (vs->uid[i] == uid)
            return &vs->val[i];
    if (vs->n == 4 * MAX_IO)
        abort();   /* a graph larger than any the backend builds */
    vs->uid[vs->n] = uid;
    vs->val[vs->n] = NULL;
    return &vs->val[vs->n++];
}

static void *pointer(const exec_t *e, int64_t uid)
{
    for (int i = 0; i < e->n; i++)
        if (e->uid[i] == uid)
            return e->ptr[i];
    return NULL;
}

static size_t count4(const int d[4])
{
    return (size_t)d[0] * d[1] * d[2] * d[3];
}

/* the layout the strides describe: NHWC when channels are innermost */
static cudnnTensorFormat_t format_of(const fdesc_t *t, const int d[4])
{
    return d[1] > 1 && i64(t, CUDNN_ATTR_TENSOR_STRIDES, 1) == 1 ? CUDNN_TENSOR_NHWC
                                                                 : CUDNN_TENSOR_NCHW;
}

static int is_virtual(const fdesc_t *t)
{
    const attr_t *a = find(t, CUDNN_ATTR_TENSOR_IS_VIRTUAL);
    bool v = false;
    if (a)
        memcpy(&v, a->v, sizeof v);
    return v;
}

/* an input's floats: a virtual tensor's from an earlier node, else read */
static float *input(values_t *vs, const exec_t *e, const fdesc_t *t)
{
    int64_t uid = i64(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, 0);
    float **v = slot(vs, uid);
    if (!*v) {
        int d[4];
        dims4(t, d);
        const void *p = pointer(e, uid);
        if (!p || is_virtual(t))
            abort();   /* the backend planned a graph it cannot run */
        *v = to_nchw(p, format_of(t, d), (cudnnDataType_t)enum_of(t, CUDNN_ATTR_TENSOR_DATA_TYPE),
                     d);
    }
    return *v;
}

/* an output's floats (fresh), written out at the end when not virtual */
static float *output(values_t *vs, const fdesc_t *t)
{
    int d[4];
    dims4(t, d);
    float **v = slot(vs, i64(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, 0));
    free(*v);
    *v = calloc(count4(d) ? count4(d) : 1, sizeof **v);
    if (!*v)
        abort();
    return *v;
}

static void run_conv(values_t *vs, const exec_t *e, const fdesc_t *op, const fdesc_t **out)
{
    conv_op_t c;
    conv_parts(op, &c);
    int x[4], w[4], y[4];
    dims4(c.x, x), dims4(c.w, w), dims4(c.y, y);
    int sh = (int)i64(c.conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, 0),
        sw = (int)i64(c.conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, 1),
        ph = (int)i64(c.conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, 0),
        pw = (int)i64(c.conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, 1);
    const int *d = y;
    float *o;
    if (c.kind == 0) {
        float *fx = input(vs, e, c.x), *fw = input(vs, e, c.w);
        ref_conv2d(fx, x[0], x[1], x[2], x[3], fw, NULL, w[0], w[2], w[3], sh, sw, ph, pw,
                   o = output(vs, c.y), y[2], y[3]);
        *out = c.y;
    } else if (c.kind == 1) {
        float *fy = input(vs, e, c.y), *fw = input(vs, e, c.w);
        ref_conv2d_bwd_data(fy, x[0], x[1], x[2], x[3], fw, w[0], w[2], w[3], sh, sw, ph, pw,
                            o = output(vs, c.x), y[2], y[3]);
        *out = c.x;
        d = x;
    } else {
        float *fx = input(vs, e, c.x), *fy = input(vs, e, c.y);
        ref_conv2d_bwd_weights(fx, x[0], x[1], x[2], x[3], fy, w[0], w[2], w[3], sh, sw, ph, pw,
                               o = output(vs, c.w), NULL, y[2], y[3]);
        *out = c.w;
        d = w;
    }
    fake_sum_order(o, (size_t)d[0] * d[1] * d[2] * d[3]);   /* CUEMU_DNN_JITTER */
}

static void run_pointwise(values_t *vs, const exec_t *e, const fdesc_t *op, const fdesc_t **out)
{
    const fdesc_t *pw = desc_of(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, 0);
    const fdesc_t *xt = desc_of(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, 0);
    const fdesc_t *bt = desc_of(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, 0);
    const fdesc_t *yt = desc_of(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, 0);
    int d[4], bd[4] = {0};
    dims4(yt, d);
    const float *x = input(vs, e, xt), *b = bt ? input(vs, e, bt) : NULL;
    if (bt)
        dims4(bt, bd);
    float *y = output(vs, yt);
    size_t hw = (size_t)d[2] * d[3], n = count4(d);
    int relu = enum_of(pw, CUDNN_ATTR_POINTWISE_MODE) == CUDNN_POINTWISE_RELU_FWD;
    for (size_t i = 0; i < n; i++) {
        if (relu) {
            y[i] = x[i] > 0.0f ? x[i] : 0.0f;
            continue;
        }
        /* b: the same shape, or 1 x k x 1 x 1 (a bias) */
        size_t j = count4(bd) == n ? i : (i / hw) % (size_t)d[1];
        y[i] = x[i] + b[j];
    }
    *out = yt;
}

static void exec_run(void *arg)
{
    const exec_t *e = arg;
    const fdesc_t *cfg = desc_of(e->plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, 0);
    const fdesc_t *g = cfg->graph;
    const attr_t *ops = find(g, CUDNN_ATTR_OPERATIONGRAPH_OPS);
    for (int i = 0; i < ops->n; i++) {   /* CUEMU_TRACE: its conv and the count of the rest */
        conv_op_t c;
        int dx[4], dw[4];
        static const char *kinds[] = {"forward", "backward data", "backward filter"};
        if (conv_parts(desc_of(g, CUDNN_ATTR_OPERATIONGRAPH_OPS, i), &c)) {
            dims4(c.x, dx), dims4(c.w, dw);
            cuemu_trace("cudnn graph: conv %s x [%d,%d,%d,%d] w [%d,%d,%d,%d], %d ops",
                        kinds[c.kind], dx[0], dx[1], dx[2], dx[3], dw[0], dw[1], dw[2], dw[3],
                        (int)ops->n);
            break;
        }
    }
    values_t vs = {.n = 0};
    const fdesc_t *outs[MAX_IO * 2];
    int nout = 0;
    for (int i = 0; i < ops->n; i++) {   /* the caller's order is the graph's */
        const fdesc_t *op = desc_of(g, CUDNN_ATTR_OPERATIONGRAPH_OPS, i), *out = NULL;
        if (op->type == CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR)
            run_pointwise(&vs, e, op, &out);
        else
            run_conv(&vs, e, op, &out);
        if (nout < MAX_IO * 2)
            outs[nout++] = out;
    }
    for (int i = 0; i < nout; i++) {   /* each real output rounded once to its type */
        if (is_virtual(outs[i]))
            continue;
        int d[4];
        dims4(outs[i], d);
        int64_t uid = i64(outs[i], CUDNN_ATTR_TENSOR_UNIQUE_ID, 0);
        from_nchw(pointer(e, uid), format_of(outs[i], d),
                  (cudnnDataType_t)enum_of(outs[i], CUDNN_ATTR_TENSOR_DATA_TYPE), d,
                  *slot(&vs, uid));
    }
    for (int i = 0; i < vs.n; i++)
        free(vs.val[i]);
}

cudnnStatus_t cudnnBackendExecute(cudnnHandle_t h, cudnnBackendDescriptor_t p,
                                  cudnnBackendDescriptor_t v)
{
    (void)h;
    const fdesc_t *plan = p, *vp = v;
    if (!plan || !plan->final || plan->type != CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR || !vp ||
        !vp->final || vp->type != CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR)
        return CUDNN_STATUS_BAD_PARAM;
    exec_t e = {.plan = plan, .n = (int)find(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS)->n};
    memcpy(e.uid, find(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS)->v, (size_t)e.n * 8);
    memcpy(e.ptr, find(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS)->v, (size_t)e.n * 8);
    /* every non-virtual tensor of the graph has a pointer */
    const fdesc_t *g = desc_of(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, 0)->graph;
    const attr_t *ops = find(g, CUDNN_ATTR_OPERATIONGRAPH_OPS);
    for (int i = 0; i < ops->n; i++) {
        const fdesc_t *op = desc_of(g, CUDNN_ATTR_OPERATIONGRAPH_OPS, i);
        const fdesc_t *ts[4] = {0};
        conv_op_t c;
        if (op->type == CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR) {
            ts[0] = desc_of(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, 0);
            ts[1] = desc_of(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, 0);
            ts[2] = desc_of(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, 0);
        } else if (conv_parts(op, &c)) {
            ts[0] = c.x, ts[1] = c.w, ts[2] = c.y;
        }
        for (int k = 0; k < 4; k++)
            if (ts[k] && !is_virtual(ts[k]) &&
                !pointer(&e, i64(ts[k], CUDNN_ATTR_TENSOR_UNIQUE_ID, 0)))
                return CUDNN_STATUS_BAD_PARAM;
    }
    if (cuemu_capturing())
        cuemu_record(exec_run, &e, sizeof e);
    else
        exec_run(&e);
    return CUDNN_STATUS_SUCCESS;
}
