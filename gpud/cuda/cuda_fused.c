/* cuda_fused — the fused eval convolution as one cuDNN 9 operation graph
 * (backend API, cudnn_graph.h; cuda_fused.h says what and why).
 *
 *   X, W ──conv──> v0 ──+bias──> v1 ──relu──> v2 ──+R──> Y
 *
 * conv is CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR (cross-
 * correlation, as PyTorch), each later node a POINTWISE operation: ADD of
 * the 1 x k x 1 x 1 bias B (broadcast), RELU_FWD, ADD of the residual R, in
 * the plan's post-op order (torchvision's BasicBlock {SUM, RELU}, the seed
 * WideResNet {RELU, SUM}). Intermediates v* are virtual fp32 tensors (no
 * memory, no rounding between the nodes); X, W, R, Y are fp32 NCHW or bf16
 * NHWC (the strides say which), B fp32.
 *
 * Engine choice, once per plan: CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR in mode
 * A, then FALLBACK; an engine is skipped when its numerical notes include
 * NONDETERMINISTIC (every worker must give a sample the same logits),
 * DOWN_CONVERT_INPUTS or REDUCED_PRECISION_REDUCTION (sums stay fp32), or
 * TENSOR_CORE in fp32 without DDPIPE_CUDA_PRECISION=tf32 (the legacy path's
 * FMA-only rule); the first configuration that finalizes into an execution
 * plan whose workspace fits the cap wins. Heuristics are a function of the
 * graph, the device and cuDNN, so every gpud of a job picks the same one.
 *
 * Every descriptor a plan was built from lives as long as the plan (the
 * API does not say that a finalized plan owns copies). Every cuDNN status
 * is checked; a failure before a plan exists is logged once and leaves the
 * caller's legacy path; a failure of cudnnBackendExecute is logged once and
 * turns the plan to legacy for good (the caller runs its legacy path for
 * that call too). The execution queues device work on the handle's stream
 * only (cudnnSetStream), so a CUDA graph capture (cuda_graph.c) can record
 * it; an engine that cannot be captured fails the capture, which then runs
 * op by op. */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "gpud/cuda/cuda_fused.h"
#include "gpud/cuda/cuda_priv.h"

/* The tensors' unique ids in the variant pack; virtual ones from V0. */
enum { UID_X = 1, UID_W, UID_B, UID_R, UID_Y, UID_V0 = 100 };
#define N_IO 5
#define ALIGN 16            /* bytes every non-virtual tensor's address is planned with */
#define MAX_DESC 48         /* the graph: 5 io + 5 virtual tensors, conv 2, 2 x 5 pointwise, 1 */
#define MAX_CFG 32          /* heuristic results looked at, per mode */

static atomic_ulong n_fused, n_legacy, n_off, n_run_failed, n_shared;

cu_fused_counts_t cu_fused_counts(void)
{
    return (cu_fused_counts_t){atomic_load(&n_fused), atomic_load(&n_legacy),
                               atomic_load(&n_off), atomic_load(&n_run_failed),
                               atomic_load(&n_shared)};
}

/* list with room for one more pointer (doubled), or NULL (list kept) */
static struct cu_fplan **grow_list(struct cu_fplan **list, size_t *cap)
{
    size_t n = *cap ? 2 * *cap : 16;
    struct cu_fplan **p = realloc(list, n * sizeof *p);
    if (p)
        *cap = n;
    return p;
}

/* The descriptors made so far and the first failure: each step below does
 * nothing once one failed, so a build reads as a straight list and checks
 * every status. */
typedef struct {
    cudnnBackendDescriptor_t d[MAX_DESC];
    int n;
    cudnnStatus_t st;
    const char *what;       /* the step that failed */
} build_t;

/* One shape's plan: the graph, its heuristics, the engine configuration
 * and the execution plan, built once per backend and shape and shared by
 * every layer of that shape (cuDNN's plans take their buffers from each
 * execution's variant pack). In cuda_backend_t.fplans while refs > 0. */
struct cu_fplan {
    cu_fused_shape_t key;   /* the shape, unused post[] zeroed */
    int refs;
    build_t graph;          /* the tensors, operations and the operation graph */
    cudnnBackendDescriptor_t heur, cfg, plan;
    int64_t uid[N_IO];
    size_t ws_need;         /* the plan's workspace bytes */
    int nio;
    int res;                /* a residual (R) in the graph */
    size_t out_bytes;       /* y's bytes (the tmp -> y copy) */
    char layer[160];        /* the shapes, for logs */
};
typedef struct cu_fplan fplan_t;

/* One layer's use of a shared plan. */
struct cu_fused {
    fplan_t *c;
    cuda_backend_t *cb;     /* whose fplans holds c */
    cudnnBackendDescriptor_t vp;   /* the variant pack of ptr[], ws (rebuilt when they change) */
    void *ptr[N_IO];
    void *ws;
    float *zero_bias;       /* k zeros: the bias when the caller passes none */
    int dead;               /* execution failed once: legacy for good */
};

static void fail(build_t *b, cudnnStatus_t st, const char *what)
{
    if (b->st == CUDNN_STATUS_SUCCESS && st != CUDNN_STATUS_SUCCESS) {
        b->st = st;
        b->what = what;
    }
}

static cudnnBackendDescriptor_t make(build_t *b, cudnnBackendDescriptorType_t t, const char *what)
{
    cudnnBackendDescriptor_t d = NULL;
    if (b->st != CUDNN_STATUS_SUCCESS)
        return NULL;
    if (b->n == MAX_DESC) {
        fail(b, CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED, "too many descriptors");
        return NULL;
    }
    fail(b, cudnnBackendCreateDescriptor(t, &d), what);
    if (b->st == CUDNN_STATUS_SUCCESS)
        b->d[b->n++] = d;
    return d;
}

static void set(build_t *b, cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t a,
                cudnnBackendAttributeType_t t, int64_t n, const void *v, const char *what)
{
    if (b->st == CUDNN_STATUS_SUCCESS)
        fail(b, cudnnBackendSetAttribute(d, a, t, n, v), what);
}

static void set_desc(build_t *b, cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t a,
                     cudnnBackendDescriptor_t v, const char *what)
{
    set(b, d, a, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &v, what);
}

static void finalize(build_t *b, cudnnBackendDescriptor_t d, const char *what)
{
    if (b->st == CUDNN_STATUS_SUCCESS)
        fail(b, cudnnBackendFinalize(d), what);
}

static void destroy_all(build_t *b)
{
    for (int i = b->n - 1; i >= 0; i--)
        cudnnBackendDestroyDescriptor(b->d[i]);   /* teardown: nothing to do on failure */
    b->n = 0;
}

/* The handle attributes are marked deprecated in cuDNN 9.19 in favour of a
 * device-property descriptor; every cuDNN 9 still honours them, and the
 * handle is what ties the graph to this backend's device and stream. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static const cudnnBackendAttributeName_t ATTR_GRAPH_HANDLE = CUDNN_ATTR_OPERATIONGRAPH_HANDLE;
static const cudnnBackendAttributeName_t ATTR_PLAN_HANDLE = CUDNN_ATTR_EXECUTION_PLAN_HANDLE;
#pragma GCC diagnostic pop

/* ------------------------------------------------------------- the graph */

/* A 4-d tensor, dims n, c, h, w; nhwc: channels-last strides. */
static cudnnBackendDescriptor_t tensor(build_t *b, int64_t uid, cudnnDataType_t dt,
                                       const int dims[4], int nhwc, bool virt)
{
    int64_t d[4] = {dims[0], dims[1], dims[2], dims[3]};
    int64_t s[4];
    if (nhwc) {
        s[0] = d[1] * d[2] * d[3];
        s[1] = 1;
        s[2] = d[3] * d[1];
        s[3] = d[1];
    } else {
        s[0] = d[1] * d[2] * d[3];
        s[1] = d[2] * d[3];
        s[2] = d[3];
        s[3] = 1;
    }
    int64_t align = ALIGN;
    cudnnBackendDescriptor_t t = make(b, CUDNN_BACKEND_TENSOR_DESCRIPTOR, "tensor descriptor");
    set(b, t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt, "tensor data type");
    set(b, t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, d, "tensor dimensions");
    set(b, t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, s, "tensor strides");
    set(b, t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, "tensor unique id");
    set(b, t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align, "tensor alignment");
    set(b, t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &virt, "tensor virtual flag");
    finalize(b, t, "tensor finalize");
    return t;
}

static cudnnBackendDescriptor_t conv_op(build_t *b, const cu_fused_shape_t *s,
                                        cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t w,
                                        cudnnBackendDescriptor_t y)
{
    cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;   /* PyTorch's conv */
    int64_t dims = 2, dil[2] = {1, 1}, stride[2] = {s->sh, s->sw}, pad[2] = {s->ph, s->pw};
    float alpha = 1.0f, beta = 0.0f;
    cudnnBackendDescriptor_t c = make(b, CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR,
                                      "convolution descriptor");
    set(b, c, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp,
        "convolution compute type");
    set(b, c, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode,
        "convolution mode");
    set(b, c, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &dims,
        "convolution spatial dims");
    set(b, c, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dil, "convolution dilations");
    set(b, c, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, stride,
        "convolution strides");
    set(b, c, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pad,
        "convolution pre-paddings");
    set(b, c, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, pad,
        "convolution post-paddings");
    finalize(b, c, "convolution descriptor finalize");
    /* the operation and its attributes by kind: X/DX, W/DW, Y/DY, the
     * convolution, alpha, beta (y = alpha op + beta y: beta 0 overwrites) */
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
    int k = s->kind >= CU_CONV_FWD && s->kind <= CU_CONV_BWD_FILTER ? s->kind : CU_CONV_FWD;
    cudnnBackendDescriptor_t op = make(b, K[k].type, "convolution operation");
    set_desc(b, op, K[k].x, x, "convolution X");
    set_desc(b, op, K[k].w, w, "convolution W");
    set_desc(b, op, K[k].y, y, "convolution Y");
    set_desc(b, op, K[k].conv, c, "convolution descriptor attribute");
    set(b, op, K[k].alpha, CUDNN_TYPE_FLOAT, 1, &alpha, "convolution alpha");
    set(b, op, K[k].beta, CUDNN_TYPE_FLOAT, 1, &beta, "convolution beta");
    finalize(b, op, "convolution operation finalize");
    return op;
}

/* y = mode(x[, b]) in fp32 */
static cudnnBackendDescriptor_t pw_op(build_t *b, cudnnPointwiseMode_t mode,
                                      cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t bt,
                                      cudnnBackendDescriptor_t y)
{
    cudnnDataType_t prec = CUDNN_DATA_FLOAT;
    cudnnBackendDescriptor_t pw = make(b, CUDNN_BACKEND_POINTWISE_DESCRIPTOR,
                                       "pointwise descriptor");
    set(b, pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode, "pointwise mode");
    set(b, pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec,
        "pointwise precision");
    finalize(b, pw, "pointwise descriptor finalize");
    cudnnBackendDescriptor_t op = make(b, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR,
                                       "pointwise operation");
    set_desc(b, op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw, "pointwise descriptor "
             "attribute");
    set_desc(b, op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x, "pointwise X");
    if (bt)
        set_desc(b, op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, bt, "pointwise B");
    set_desc(b, op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y, "pointwise Y");
    finalize(b, op, "pointwise operation finalize");
    return op;
}

/* The operation graph of s into f->graph; the last descriptor made is it. */
static cudnnBackendDescriptor_t build_graph(cuda_backend_t *cb, fplan_t *f,
                                            const cu_fused_shape_t *s)
{
    build_t *b = &f->graph;
    cudnnDataType_t io = !s->bf16_nhwc ? CUDNN_DATA_FLOAT
                         : s->fp16     ? CUDNN_DATA_HALF
                                       : CUDNN_DATA_BFLOAT16;
    int nhwc = s->bf16_nhwc;
    int wdims[4] = {s->out[1], s->in[1], s->kh, s->kw};
    int bdims[4] = {1, s->out[1], 1, 1};
    cudnnBackendDescriptor_t ops[2 + CU_FUSED_MAX_POST];
    /* a gradient is the convolution node alone (cu_fused_new refuses more) */
    int nops = 0, nodes = 1 + (s->bias != 0) + s->n_post;
    cudnnBackendDescriptor_t x = tensor(b, UID_X, io, s->in, nhwc, false);
    cudnnBackendDescriptor_t w = tensor(b, UID_W, io, wdims, nhwc, false);
    cudnnBackendDescriptor_t y = tensor(b, UID_Y, io, s->out, nhwc, false);
    cudnnBackendDescriptor_t bias = s->bias ? tensor(b, UID_B, CUDNN_DATA_FLOAT, bdims, 0, false)
                                            : NULL;
    cudnnBackendDescriptor_t r = f->res ? tensor(b, UID_R, io, s->out, nhwc, false) : NULL;
    f->nio = 0;
    f->uid[f->nio++] = UID_X;
    f->uid[f->nio++] = UID_W;
    f->uid[f->nio++] = UID_Y;
    if (bias)
        f->uid[f->nio++] = UID_B;
    if (r)
        f->uid[f->nio++] = UID_R;
    /* each node's output: virtual fp32, the last one Y */
    cudnnBackendDescriptor_t cur = nodes == 1 ? y
                                              : tensor(b, UID_V0, CUDNN_DATA_FLOAT, s->out, nhwc,
                                                       true);
    ops[nops++] = conv_op(b, s, x, w, cur);
    for (int i = (s->bias ? -1 : 0); i < s->n_post; i++) {
        int last = nops + 1 == nodes;
        cudnnBackendDescriptor_t next =
            last ? y : tensor(b, UID_V0 + nops, CUDNN_DATA_FLOAT, s->out, nhwc, true);
        if (i < 0)
            ops[nops++] = pw_op(b, CUDNN_POINTWISE_ADD, cur, bias, next);
        else if (s->post[i] == BK_PO_RELU)
            ops[nops++] = pw_op(b, CUDNN_POINTWISE_RELU_FWD, cur, NULL, next);
        else
            ops[nops++] = pw_op(b, CUDNN_POINTWISE_ADD, cur, r, next);
        cur = next;
    }
    cudnnBackendDescriptor_t og = make(b, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR,
                                       "operation graph");
    set(b, og, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, nops, ops,
        "operation graph ops");
    set(b, og, ATTR_GRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &cb->dnn, "operation graph handle");
    finalize(b, og, "operation graph finalize");
    return og;
}

/* ---------------------------------------------------------------- engines */

/* 1 when the engine of cfg may run here (the numerical notes above); a
 * failed query counts as not admissible, noted in why. */
static int engine_ok(const cu_fused_shape_t *s, int tf32, cudnnBackendDescriptor_t cfg,
                     build_t *why)
{
    cudnnBackendDescriptor_t e = NULL;
    cudnnStatus_t cs = cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &e);
    if (cs != CUDNN_STATUS_SUCCESS) {
        fail(why, cs, "engine descriptor");
        return 0;
    }
    cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
    int64_t n = 0, ne = 0;
    cudnnStatus_t st = cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE,
                                                CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &ne, &e);
    if (st == CUDNN_STATUS_SUCCESS)
        st = cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE,
                                      CUDNN_TYPE_NUMERICAL_NOTE, CUDNN_NUMERICAL_NOTE_TYPE_COUNT,
                                      &n, notes);
    cudnnBackendDestroyDescriptor(e);
    if (st != CUDNN_STATUS_SUCCESS) {   /* notes unknown: not provably deterministic */
        fail(why, st, "engine numerical notes");
        return 0;
    }
    for (int64_t i = 0; i < n && i < CUDNN_NUMERICAL_NOTE_TYPE_COUNT; i++)
        if (notes[i] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC ||
            notes[i] == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS ||
            notes[i] == CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION ||
            (notes[i] == CUDNN_NUMERICAL_NOTE_TENSOR_CORE && !s->bf16_nhwc && !tf32))
            return 0;
    return 1;
}

/* The first admissible configuration of mode's heuristics that finalizes
 * into a plan within the workspace cap: f->heur, f->cfg, f->plan set, 0;
 * else -1 with the last failure in *why. */
static int pick(cuda_backend_t *cb, fplan_t *f, const cu_fused_shape_t *s,
                cudnnBackendDescriptor_t og, cudnnBackendHeurMode_t mode, build_t *why,
                int *seen, int *filtered)
{
    build_t h = {.st = CUDNN_STATUS_SUCCESS};
    cudnnBackendDescriptor_t heur = make(&h, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, "heuristics");
    set_desc(&h, heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, og, "heuristics graph");
    set(&h, heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode, "heuristics mode");
    finalize(&h, heur, "heuristics finalize");
    int64_t count = 0;
    if (h.st == CUDNN_STATUS_SUCCESS)
        fail(&h, cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                          CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, NULL),
             "heuristics result count");
    if (count > MAX_CFG)
        count = MAX_CFG;
    cudnnBackendDescriptor_t cfg[MAX_CFG] = {0};
    int ncfg = 0;
    for (int64_t i = 0; i < count && h.st == CUDNN_STATUS_SUCCESS; i++)
        fail(&h, cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfg[ncfg++]),
             "engine config descriptor");
    int64_t got = 0;
    if (h.st == CUDNN_STATUS_SUCCESS && count > 0)
        fail(&h, cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                          CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got, cfg),
             "heuristics results");
    int won = -1;
    for (int64_t i = 0; i < got && i < count && h.st == CUDNN_STATUS_SUCCESS && won < 0; i++) {
        (*seen)++;
        if (!engine_ok(s, cb->tf32, cfg[i], why)) {
            (*filtered)++;
            continue;
        }
        build_t p = {.st = CUDNN_STATUS_SUCCESS};
        cudnnBackendDescriptor_t plan = make(&p, CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR,
                                             "execution plan");
        set(&p, plan, ATTR_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &cb->dnn, "execution plan handle");
        set_desc(&p, plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, cfg[i],
                 "execution plan engine config");
        finalize(&p, plan, "execution plan finalize");
        int64_t ws = 0, nws = 0;
        if (p.st == CUDNN_STATUS_SUCCESS)
            fail(&p, cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                              CUDNN_TYPE_INT64, 1, &nws, &ws),
                 "execution plan workspace size");
        if (p.st == CUDNN_STATUS_SUCCESS && (ws < 0 || (uint64_t)ws > cb->ws_cap))
            fail(&p, CUDNN_STATUS_NOT_SUPPORTED, "execution plan workspace over the cap");
        if (p.st != CUDNN_STATUS_SUCCESS) {
            fail(why, p.st, p.what);   /* the first failure, for the log */
            destroy_all(&p);
            continue;
        }
        f->plan = plan;   /* owned by f from here */
        f->ws_need = (size_t)ws;
        won = (int)i;
    }
    if (h.st != CUDNN_STATUS_SUCCESS)
        fail(why, h.st, h.what);
    for (int i = 0; i < ncfg; i++)
        if (i != won && cfg[i])
            cudnnBackendDestroyDescriptor(cfg[i]);
    if (won < 0) {
        destroy_all(&h);
        return -1;
    }
    f->heur = heur;   /* h holds only heur */
    f->cfg = cfg[won];
    return 0;
}

/* ------------------------------------------------------------ the plan */

static void fplan_free(fplan_t *c)
{
    if (!c)
        return;
    cudnnBackendDescriptor_t own[3] = {c->plan, c->cfg, c->heur};
    for (int i = 0; i < 3; i++)
        if (own[i])
            cudnnBackendDestroyDescriptor(own[i]);
    destroy_all(&c->graph);
    free(c);
}

/* c's last user gone: out of cb's plans, freed */
static void fplan_release(cuda_backend_t *cb, fplan_t *c)
{
    if (--c->refs > 0)
        return;
    for (size_t i = 0; i < cb->nfplans; i++)
        if (cb->fplans[i] == c) {
            cb->fplans[i] = cb->fplans[--cb->nfplans];
            break;
        }
    fplan_free(c);
}

void cu_fused_free(cu_fused_t *f)
{
    if (!f)
        return;
    if (f->vp)
        cudnnBackendDestroyDescriptor(f->vp);
    cudaFree(f->zero_bias);   /* synchronises with queued work; NULL is a no-op */
    if (f->c)
        fplan_release(f->cb, f->c);
    free(f);
}

static void describe(char *buf, size_t len, const cu_fused_shape_t *s)
{
    static const char *kind[3] = {"conv", "conv backward data", "conv backward filter"};
    char post[64] = "";
    size_t at = 0;
    for (int i = 0; i < s->n_post && at < sizeof post; i++)
        at += (size_t)snprintf(post + at, sizeof post - at, " %s",
                               s->post[i] == BK_PO_RELU ? "relu" : "sum");
    snprintf(buf, len, "%s %s %dx%d/%d %d->%d on [%d,%d,%d,%d]%s, post-ops:%s",
             !s->bf16_nhwc ? "fp32 NCHW" : s->fp16 ? "fp16 NHWC" : "bf16 NHWC",
             kind[s->kind >= 0 && s->kind <= 2 ? s->kind : 0], s->kh, s->kw, s->sh, s->in[1],
             s->out[1],
             s->in[0], s->in[1], s->in[2], s->in[3], s->bias ? " + bias" : "",
             at ? post : " none");
}

/* The engine f runs (cuDNN's global index), logged with DDPIPE_CUDA_PROFILE
 * set as the legacy path logs its algorithms (where the time goes), else
 * at debug level. */
static void log_choice(const fplan_t *f, size_t ws)
{
    int64_t idx = -1, n = 0;
    cudnnBackendDescriptor_t e = NULL;
    if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &e) ==
            CUDNN_STATUS_SUCCESS &&
        cudnnBackendGetAttribute(f->cfg, CUDNN_ATTR_ENGINECFG_ENGINE,
                                 CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &e) ==
            CUDNN_STATUS_SUCCESS)
        if (cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n,
                                     &idx) != CUDNN_STATUS_SUCCESS)
            idx = -1;   /* unknown: logged as -1 */
    if (e)
        cudnnBackendDestroyDescriptor(e);
    if (cu_profile_env(NULL))
        log_info("cuda conv graph %s: engine %lld, workspace %zu KB", f->layer, (long long)idx,
                 ws >> 10);
    else
        log_debug("cuda: cuDNN graph for %s: fused (engine %lld, workspace %zu bytes)", f->layer,
                  (long long)idx, ws);
}

/* A new plan for shape s, in cb->fplans with no reference yet; NULL
 * (logged, counted legacy) where cuDNN builds none or memory runs out. */
static fplan_t *fplan_build(cuda_backend_t *cb, const cu_fused_shape_t *s)
{
    fplan_t *f = calloc(1, sizeof *f);
    if (!f || (cb->nfplans == cb->capfplans &&
               !(cb->fplans = grow_list(cb->fplans, &cb->capfplans)))) {
        free(f);
        atomic_fetch_add(&n_legacy, 1);
        log_warn("cuda: cuDNN graph for a conv: out of memory; the legacy path runs it");
        return NULL;
    }
    f->key = *s;
    f->graph.st = CUDNN_STATUS_SUCCESS;
    for (int i = 0; i < s->n_post; i++)
        f->res |= s->post[i] == BK_PO_SUM;
    f->out_bytes = (size_t)s->out[0] * s->out[1] * s->out[2] * s->out[3] *
                   (s->bf16_nhwc ? 2 : sizeof(float));
    describe(f->layer, sizeof f->layer, s);
    cudnnBackendDescriptor_t og = build_graph(cb, f, s);
    build_t why = {.st = CUDNN_STATUS_SUCCESS};
    int seen = 0, filtered = 0, ok = -1;
    if (f->graph.st != CUDNN_STATUS_SUCCESS)
        fail(&why, f->graph.st, f->graph.what);
    else if ((ok = pick(cb, f, s, og, CUDNN_HEUR_MODE_A, &why, &seen, &filtered)) < 0)
        ok = pick(cb, f, s, og, CUDNN_HEUR_MODE_FALLBACK, &why, &seen, &filtered);
    if (ok < 0) {
        char last[256] = "";
        cudnnGetLastErrorString(last, sizeof last);
        if (why.st == CUDNN_STATUS_SUCCESS)
            log_warn("cuda: cuDNN graph for %s: no deterministic engine (%d configurations, %d "
                     "filtered by their numerical notes); the legacy path runs it", f->layer,
                     seen, filtered);
        else
            log_warn("cuda: cuDNN graph for %s: %s: %s%s%s (%d configurations, %d filtered); "
                     "the legacy path runs it", f->layer, why.what, cudnnGetErrorString(why.st),
                     last[0] ? ": " : "", last, seen, filtered);
        fplan_free(f);
        atomic_fetch_add(&n_legacy, 1);
        return NULL;
    }
    cb->fplans[cb->nfplans++] = f;
    log_choice(f, f->ws_need);
    return f;
}

static int wanted(void)
{
    const char *e = getenv("DDPIPE_CUDNN_GRAPH");
    return !(e && strcmp(e, "0") == 0);
}

static cu_fused_t *fused_new(bk_ctx_t *g, const cu_fused_shape_t *s)
{
    cuda_backend_t *cb = cu_be(g->be);
    if (s->n_post < 0 || s->n_post > CU_FUSED_MAX_POST || s->kind < CU_CONV_FWD ||
        s->kind > CU_CONV_BWD_FILTER || (s->kind != CU_CONV_FWD && (s->bias || s->n_post)))
        return NULL;   /* the caller's path handles (or refuses) it */
    cu_fused_shape_t key = *s;   /* all ints: compared whole */
    for (int i = key.n_post; i < CU_FUSED_MAX_POST; i++)
        key.post[i] = 0;
    fplan_t *c = NULL;
    for (size_t i = 0; i < cb->nfplans && !c; i++)
        if (memcmp(&cb->fplans[i]->key, &key, sizeof key) == 0)
            c = cb->fplans[i];
    if (c) {
        cb->nplan_shared++;
        atomic_fetch_add(&n_shared, 1);
    }
    else if (!(c = fplan_build(cb, &key)))
        return NULL;   /* logged: the legacy path runs it */
    c->refs++;
    cu_fused_t *f = calloc(1, sizeof *f);
    if (!f) {
        fplan_release(cb, c);
        atomic_fetch_add(&n_legacy, 1);
        log_warn("cuda: cuDNN graph for %s: out of memory; the legacy path runs it", c->layer);
        return NULL;
    }
    f->c = c;
    f->cb = cb;
    if (cu_workspace(g, c->ws_need) < 0 ||   /* g failed: an allocation, not cuDNN */
        (s->bias && !(f->zero_bias = cu_alloc(g, (size_t)s->out[1] * sizeof(float))))) {
        cu_fused_free(f);
        return NULL;
    }
    atomic_fetch_add(&n_fused, 1);
    return f;
}

cu_fused_t *cu_fused_new(bk_ctx_t *g, const cu_fused_shape_t *s)
{
    cuda_backend_t *cb = cu_be(g->be);
    if (!wanted()) {
        atomic_fetch_add(&n_off, 1);
        return NULL;
    }
    double t0 = clock_mono_s();
    cu_fused_t *f = fused_new(g, s);
    cb->plan_s[0] += clock_mono_s() - t0;
    cb->nplan[0]++;
    return f;
}

/* ---------------------------------------------------------------- running */

/* The variant pack for ptr[] and the workspace, rebuilt when one changed
 * (the graph's buffers are fixed once compiled, the workspace moves when a
 * later plan grows it). */
static cudnnStatus_t variant_pack(cu_fused_t *f, void *const ptr[N_IO], void *ws,
                                  const char **what)
{
    if (f->vp && memcmp(ptr, f->ptr, sizeof f->ptr) == 0 && ws == f->ws)
        return CUDNN_STATUS_SUCCESS;
    if (f->vp)
        cudnnBackendDestroyDescriptor(f->vp);
    f->vp = NULL;
    build_t b = {.st = CUDNN_STATUS_SUCCESS};
    cudnnBackendDescriptor_t vp = make(&b, CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, "variant pack");
    set(&b, vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, f->c->nio, f->c->uid,
        "variant pack ids");
    set(&b, vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, f->c->nio, ptr,
        "variant pack pointers");
    set(&b, vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws,
        "variant pack workspace");
    finalize(&b, vp, "variant pack finalize");
    if (b.st != CUDNN_STATUS_SUCCESS) {
        destroy_all(&b);
        *what = b.what;
        return b.st;
    }
    f->vp = vp;
    memcpy(f->ptr, ptr, sizeof f->ptr);
    f->ws = ws;
    return CUDNN_STATUS_SUCCESS;
}

/* Turn f to legacy for good, saying why once. */
static int give_up(cu_fused_t *f, const char *what, cudnnStatus_t st)
{
    char last[256] = "";
    if (st != CUDNN_STATUS_SUCCESS)
        cudnnGetLastErrorString(last, sizeof last);
    log_warn("cuda: cuDNN graph for %s: %s%s%s%s%s; the legacy path runs it from now on",
             f->c->layer, what, st != CUDNN_STATUS_SUCCESS ? ": " : "",
             st != CUDNN_STATUS_SUCCESS ? cudnnGetErrorString(st) : "", last[0] ? ": " : "",
             last);
    f->dead = 1;
    atomic_fetch_add(&n_run_failed, 1);
    return 1;
}

/* Execute f on ptr[] (f->uid's order), each checked for the planned
 * alignment: 0, or 1 (f given up; the caller runs its legacy path). */
static int execute(cuda_backend_t *cb, cu_fused_t *f, void *const ptr[N_IO])
{
    for (int i = 0; i < f->c->nio; i++)
        if (!ptr[i] || (uintptr_t)ptr[i] % ALIGN != 0)
            return give_up(f, "a buffer is not 16-byte aligned (or missing)",
                           CUDNN_STATUS_SUCCESS);
    const char *what = "cudnnBackendExecute";
    cudnnStatus_t st = variant_pack(f, ptr, cb->ws, &what);
    if (st == CUDNN_STATUS_SUCCESS)
        st = cudnnBackendExecute(cb->dnn, f->c->plan, f->vp);
    return st == CUDNN_STATUS_SUCCESS ? 0 : give_up(f, what, st);
}

/* X, W, Y are uids 1-3 for every kind: a gradient's DX sits in X's place,
 * DW in W's, DY in Y's (build_graph) */
int cu_fused_run_bwd_data(bk_ctx_t *g, cu_fused_t *f, const void *dy, const void *w, void *dx)
{
    if (f->dead)
        return 1;
    void *ptr[N_IO] = {dx, (void *)w, (void *)dy, NULL, NULL};
    return execute(cu_be(g->be), f, ptr);
}

int cu_fused_run_bwd_filter(bk_ctx_t *g, cu_fused_t *f, const void *x, const void *dy, void *dw)
{
    if (f->dead)
        return 1;
    void *ptr[N_IO] = {(void *)x, dw, (void *)dy, NULL, NULL};
    return execute(cu_be(g->be), f, ptr);
}

int cu_fused_run(bk_ctx_t *g, cu_fused_t *f, const void *x, const void *w, const float *b,
                 const void *res, void *tmp, void *y)
{
    cuda_backend_t *cb = cu_be(g->be);
    if (f->dead)
        return 1;
    const fplan_t *c = f->c;
    if ((res != NULL) != c->res || (c->res && !tmp))
        return give_up(f, "a residual given to a conv planned without one (or none to one "
                          "planned with one)", CUDNN_STATUS_SUCCESS);
    void *out = c->res ? tmp : y;
    /* in the order of f->uid: X, W, Y, then B and R when present */
    void *ptr[N_IO] = {(void *)x, (void *)w, out, NULL, NULL};
    int k = 3;
    if (b && !(c->nio > k && c->uid[k] == UID_B))
        return give_up(f, "a bias given to a conv planned without one", CUDNN_STATUS_SUCCESS);
    if (c->nio > k && c->uid[k] == UID_B)
        ptr[k++] = b ? (void *)b : f->zero_bias;
    if (c->nio > k && c->uid[k] == UID_R)
        ptr[k++] = (void *)res;
    int rc = execute(cb, f, ptr);
    if (rc != 0 || !c->res)
        return rc;
    return cu_check(g, cudaMemcpyAsync(y, tmp, c->out_bytes, cudaMemcpyDeviceToDevice,
                                       cb->stream), "fused conv output copy");
}
