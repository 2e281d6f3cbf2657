/* cuda_dnn_graph — see cuda_dnn_graph.h. Every cuDNN status is checked and
 * the first failure kept with the step's name (cu_dg_t). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpud/backend_impl.h"
#include "gpud/cuda/cuda_dnn_graph.h"

void cu_dg_fail(cu_dg_t *b, cudnnStatus_t st, const char *what)
{
    if (b->st == CUDNN_STATUS_SUCCESS && st != CUDNN_STATUS_SUCCESS) {
        b->st = st;
        b->what = what;
    }
}

cudnnBackendDescriptor_t cu_dg_make(cu_dg_t *b, cudnnBackendDescriptorType_t t,
                                    const char *what)
{
    cudnnBackendDescriptor_t d = NULL;
    if (b->st != CUDNN_STATUS_SUCCESS)
        return NULL;
    if (b->n == CU_DG_MAX_DESC) {
        cu_dg_fail(b, CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED, "too many descriptors");
        return NULL;
    }
    cu_dg_fail(b, cudnnBackendCreateDescriptor(t, &d), what);
    if (b->st == CUDNN_STATUS_SUCCESS)
        b->d[b->n++] = d;
    return d;
}

void cu_dg_set(cu_dg_t *b, cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t a,
               cudnnBackendAttributeType_t t, int64_t n, const void *v, const char *what)
{
    if (b->st == CUDNN_STATUS_SUCCESS)
        cu_dg_fail(b, cudnnBackendSetAttribute(d, a, t, n, v), what);
}

static void set_desc(cu_dg_t *b, cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t a,
                     cudnnBackendDescriptor_t v, const char *what)
{
    cu_dg_set(b, d, a, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &v, what);
}

void cu_dg_finalize(cu_dg_t *b, cudnnBackendDescriptor_t d, const char *what)
{
    if (b->st == CUDNN_STATUS_SUCCESS)
        cu_dg_fail(b, cudnnBackendFinalize(d), what);
}

void cu_dg_destroy(cu_dg_t *b)
{
    for (int i = b->n - 1; i >= 0; i--)
        cudnnBackendDestroyDescriptor(b->d[i]);   /* teardown: nothing to do on failure */
    b->n = 0;
}

/* The handle attributes are marked deprecated in cuDNN 9.19 in favour of a
 * device-property descriptor; every cuDNN 9 still honours them, and the
 * handle is what ties the graph to the backend's device and stream. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static const cudnnBackendAttributeName_t ATTR_GRAPH_HANDLE = CUDNN_ATTR_OPERATIONGRAPH_HANDLE;
static const cudnnBackendAttributeName_t ATTR_PLAN_HANDLE = CUDNN_ATTR_EXECUTION_PLAN_HANDLE;
#pragma GCC diagnostic pop

/* ------------------------------------------------------------- the graph */

/* A 4-d tensor, dims n, c, h, w; nhwc: channels-last strides. */
static cudnnBackendDescriptor_t tensor(cu_dg_t *b, int64_t uid, cudnnDataType_t dt,
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
    int64_t align = CU_DG_ALIGN;
    cudnnBackendDescriptor_t t = cu_dg_make(b, CUDNN_BACKEND_TENSOR_DESCRIPTOR,
                                            "tensor descriptor");
    cu_dg_set(b, t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt, "tensor data type");
    cu_dg_set(b, t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, d, "tensor dimensions");
    cu_dg_set(b, t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, s, "tensor strides");
    cu_dg_set(b, t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, "tensor unique id");
    cu_dg_set(b, t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align,
              "tensor alignment");
    cu_dg_set(b, t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &virt,
              "tensor virtual flag");
    cu_dg_finalize(b, t, "tensor finalize");
    return t;
}

static cudnnBackendDescriptor_t conv_op(cu_dg_t *b, const cu_fused_shape_t *s,
                                        cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t w,
                                        cudnnBackendDescriptor_t y)
{
    cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;   /* PyTorch's conv */
    int64_t dims = 2, dil[2] = {1, 1}, stride[2] = {s->sh, s->sw}, pad[2] = {s->ph, s->pw};
    float alpha = 1.0f, beta = 0.0f;
    cudnnBackendDescriptor_t c = cu_dg_make(b, CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR,
                                            "convolution descriptor");
    cu_dg_set(b, c, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp,
              "convolution compute type");
    cu_dg_set(b, c, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode,
              "convolution mode");
    cu_dg_set(b, c, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &dims,
              "convolution spatial dims");
    cu_dg_set(b, c, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dil,
              "convolution dilations");
    cu_dg_set(b, c, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, stride,
              "convolution strides");
    cu_dg_set(b, c, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pad,
              "convolution pre-paddings");
    cu_dg_set(b, c, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, pad,
              "convolution post-paddings");
    cu_dg_finalize(b, c, "convolution descriptor finalize");
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
    cudnnBackendDescriptor_t op = cu_dg_make(b, K[k].type, "convolution operation");
    set_desc(b, op, K[k].x, x, "convolution X");
    set_desc(b, op, K[k].w, w, "convolution W");
    set_desc(b, op, K[k].y, y, "convolution Y");
    set_desc(b, op, K[k].conv, c, "convolution descriptor attribute");
    cu_dg_set(b, op, K[k].alpha, CUDNN_TYPE_FLOAT, 1, &alpha, "convolution alpha");
    cu_dg_set(b, op, K[k].beta, CUDNN_TYPE_FLOAT, 1, &beta, "convolution beta");
    cu_dg_finalize(b, op, "convolution operation finalize");
    return op;
}

/* y = mode(x[, b]) in fp32 */
static cudnnBackendDescriptor_t pw_op(cu_dg_t *b, cudnnPointwiseMode_t mode,
                                      cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t bt,
                                      cudnnBackendDescriptor_t y)
{
    cudnnDataType_t prec = CUDNN_DATA_FLOAT;
    cudnnBackendDescriptor_t pw = cu_dg_make(b, CUDNN_BACKEND_POINTWISE_DESCRIPTOR,
                                             "pointwise descriptor");
    cu_dg_set(b, pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode,
              "pointwise mode");
    cu_dg_set(b, pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec,
              "pointwise precision");
    cu_dg_finalize(b, pw, "pointwise descriptor finalize");
    cudnnBackendDescriptor_t op = cu_dg_make(b, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR,
                                             "pointwise operation");
    set_desc(b, op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw, "pointwise descriptor "
             "attribute");
    set_desc(b, op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x, "pointwise X");
    if (bt)
        set_desc(b, op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, bt, "pointwise B");
    set_desc(b, op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y, "pointwise Y");
    cu_dg_finalize(b, op, "pointwise operation finalize");
    return op;
}

int cu_dg_has_res(const cu_fused_shape_t *s)
{
    int res = 0;
    for (int i = 0; i < s->n_post && i < CU_FUSED_MAX_POST; i++)
        res |= s->post[i] == BK_PO_SUM;
    return res;
}

enum { UID_V0 = 100 };   /* the virtual tensors' ids */

cudnnBackendDescriptor_t cu_dg_graph(cu_dg_t *b, cudnnHandle_t h, const cu_fused_shape_t *s,
                                     int64_t uid[CU_DG_NIO], int *nio)
{
    cudnnDataType_t io = !s->bf16_nhwc ? CUDNN_DATA_FLOAT
                         : s->fp16     ? CUDNN_DATA_HALF
                                       : CUDNN_DATA_BFLOAT16;
    int nhwc = s->bf16_nhwc;
    int wdims[4] = {s->out[1], s->in[1], s->kh, s->kw};
    int bdims[4] = {1, s->out[1], 1, 1};
    cudnnBackendDescriptor_t ops[2 + CU_FUSED_MAX_POST];
    if (s->n_post < 0 || s->n_post > CU_FUSED_MAX_POST) {
        cu_dg_fail(b, CUDNN_STATUS_BAD_PARAM, "post-op count");
        return NULL;
    }
    /* a gradient is the convolution node alone (its callers refuse more) */
    int nops = 0, nodes = 1 + (s->bias != 0) + s->n_post;
    cudnnBackendDescriptor_t x = tensor(b, CU_DG_X, io, s->in, nhwc, false);
    cudnnBackendDescriptor_t w = tensor(b, CU_DG_W, io, wdims, nhwc, false);
    cudnnBackendDescriptor_t y = tensor(b, CU_DG_Y, io, s->out, nhwc, false);
    cudnnBackendDescriptor_t bias = s->bias ? tensor(b, CU_DG_B, CUDNN_DATA_FLOAT, bdims, 0,
                                                     false)
                                            : NULL;
    cudnnBackendDescriptor_t r = cu_dg_has_res(s) ? tensor(b, CU_DG_R, io, s->out, nhwc, false)
                                                  : NULL;
    *nio = 0;
    uid[(*nio)++] = CU_DG_X;
    uid[(*nio)++] = CU_DG_W;
    uid[(*nio)++] = CU_DG_Y;
    if (bias)
        uid[(*nio)++] = CU_DG_B;
    if (r)
        uid[(*nio)++] = CU_DG_R;
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
    cudnnBackendDescriptor_t og = cu_dg_make(b, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR,
                                             "operation graph");
    cu_dg_set(b, og, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, nops, ops,
              "operation graph ops");
    cu_dg_set(b, og, ATTR_GRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h, "operation graph handle");
    cu_dg_finalize(b, og, "operation graph finalize");
    return b->st == CUDNN_STATUS_SUCCESS ? og : NULL;
}

void cu_dg_describe(char *buf, size_t len, const cu_fused_shape_t *s)
{
    static const char *kind[3] = {"conv", "conv backward data", "conv backward filter"};
    char post[64] = "";
    size_t at = 0;
    for (int i = 0; i < s->n_post && i < CU_FUSED_MAX_POST && at < sizeof post; i++)
        at += (size_t)snprintf(post + at, sizeof post - at, " %s",
                               s->post[i] == BK_PO_RELU ? "relu" : "sum");
    snprintf(buf, len, "%s %s %dx%d/%d %d->%d on [%d,%d,%d,%d]%s, post-ops:%s",
             !s->bf16_nhwc ? "fp32 NCHW" : s->fp16 ? "fp16 NHWC" : "bf16 NHWC",
             kind[s->kind >= 0 && s->kind <= 2 ? s->kind : 0], s->kh, s->kw, s->sh, s->in[1],
             s->out[1], s->in[0], s->in[1], s->in[2], s->in[3], s->bias ? " + bias" : "",
             at ? post : " none");
}

/* ---------------------------------------------------------------- engines */

cudnnStatus_t cu_dg_engine_of(cudnnBackendDescriptor_t cfg, cu_dg_engine_t *out)
{
    cudnnBackendDescriptor_t e = NULL;
    cudnnStatus_t st = cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &e);
    if (st != CUDNN_STATUS_SUCCESS)
        return st;
    cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
    int64_t n = 0, ne = 0, idx = -1;
    st = cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                  1, &ne, &e);
    if (st == CUDNN_STATUS_SUCCESS)
        st = cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE,
                                      CUDNN_TYPE_NUMERICAL_NOTE, CUDNN_NUMERICAL_NOTE_TYPE_COUNT,
                                      &n, notes);
    if (st == CUDNN_STATUS_SUCCESS &&
        cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &ne,
                                 &idx) != CUDNN_STATUS_SUCCESS)
        idx = -1;   /* the index is for logs and the plans file: unknown is -1 */
    cudnnBackendBehaviorNote_t bn[CUDNN_BEHAVIOR_NOTE_TYPE_COUNT];
    int64_t nb = 0;
    if (st != CUDNN_STATUS_SUCCESS ||
        cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE,
                                 CUDNN_BEHAVIOR_NOTE_TYPE_COUNT, &nb, bn) != CUDNN_STATUS_SUCCESS)
        nb = 0;   /* for logs and DDPIPE_CUDNN_RTC: unknown is none */
    cudnnBackendDestroyDescriptor(e);
    if (st != CUDNN_STATUS_SUCCESS)
        return st;
    out->engine = idx;
    out->notes = 0;
    out->behavior = 0;
    for (int64_t i = 0; i < nb && i < CUDNN_BEHAVIOR_NOTE_TYPE_COUNT; i++)
        if ((int)bn[i] >= 0 && (int)bn[i] < 32)
            out->behavior |= 1u << bn[i];
    for (int64_t i = 0; i < n && i < CUDNN_NUMERICAL_NOTE_TYPE_COUNT; i++)
        if ((int)notes[i] >= 0 && (int)notes[i] < 32)
            out->notes |= 1u << notes[i];
    return CUDNN_STATUS_SUCCESS;
}

int cu_dg_admissible(const cu_fused_shape_t *s, int tf32, unsigned notes)
{
    unsigned never = 1u << CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC |
                     1u << CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS |
                     1u << CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION;
    if (!s->bf16_nhwc && !tf32)
        never |= 1u << CUDNN_NUMERICAL_NOTE_TENSOR_CORE;
    return (notes & never) == 0;
}

int cu_dg_heuristics(cu_dg_t *b, cudnnBackendDescriptor_t og, cudnnBackendHeurMode_t mode,
                     cudnnBackendDescriptor_t *cfg, int max)
{
    cudnnBackendDescriptor_t heur = cu_dg_make(b, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR,
                                               "heuristics");
    set_desc(b, heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, og, "heuristics graph");
    cu_dg_set(b, heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode,
              "heuristics mode");
    cu_dg_finalize(b, heur, "heuristics finalize");
    int64_t count = 0, got = 0;
    if (b->st == CUDNN_STATUS_SUCCESS)
        cu_dg_fail(b, cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                               CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, NULL),
                   "heuristics result count");
    if (count > max)
        count = max;
    int n = 0;
    for (int64_t i = 0; i < count && b->st == CUDNN_STATUS_SUCCESS; i++) {
        cu_dg_fail(b, cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfg[n]),
                   "engine config descriptor");
        if (b->st == CUDNN_STATUS_SUCCESS)
            n++;
    }
    if (b->st == CUDNN_STATUS_SUCCESS && count > 0)
        cu_dg_fail(b, cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                               CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got, cfg),
                   "heuristics results");
    if (b->st != CUDNN_STATUS_SUCCESS) {
        for (int i = 0; i < n; i++)
            cudnnBackendDestroyDescriptor(cfg[i]);
        return -1;
    }
    for (int i = (int)got; i < n; i++)   /* made but not filled */
        cudnnBackendDestroyDescriptor(cfg[i]);
    return got < n ? (int)got : n;
}

/* The workspace finalized plan d needs, into *need; a failure (or a need
 * over ws_cap) noted in p. */
static void plan_workspace(cu_dg_t *p, cudnnBackendDescriptor_t d, size_t ws_cap, int64_t *need)
{
    int64_t n = 0;
    if (p->st == CUDNN_STATUS_SUCCESS)
        cu_dg_fail(p, cudnnBackendGetAttribute(d, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                               CUDNN_TYPE_INT64, 1, &n, need),
                   "execution plan workspace size");
    if (p->st == CUDNN_STATUS_SUCCESS && (*need < 0 || (uint64_t)*need > ws_cap))
        cu_dg_fail(p, CUDNN_STATUS_NOT_SUPPORTED, "execution plan workspace over the cap");
}

cudnnStatus_t cu_dg_plan(cudnnHandle_t h, cudnnBackendDescriptor_t cfg, size_t ws_cap,
                         cudnnBackendDescriptor_t *plan, size_t *ws, const char **what)
{
    cu_dg_t p = {.st = CUDNN_STATUS_SUCCESS};
    cudnnBackendDescriptor_t d = cu_dg_make(&p, CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR,
                                            "execution plan");
    cu_dg_set(&p, d, ATTR_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h, "execution plan handle");
    set_desc(&p, d, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, cfg, "execution plan engine config");
    cu_dg_finalize(&p, d, "execution plan finalize");
    int64_t need = 0;
    plan_workspace(&p, d, ws_cap, &need);
    if (p.st != CUDNN_STATUS_SUCCESS) {
        cu_dg_destroy(&p);
        *what = p.what;
        return p.st;
    }
    *plan = d;
    *ws = (size_t)need;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cu_dg_plan_json(cudnnBackendDescriptor_t plan, char **json, size_t *n)
{
    int64_t len = 0;
    cudnnStatus_t st = cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION,
                                                CUDNN_TYPE_CHAR, 0, &len, NULL);
    if (st != CUDNN_STATUS_SUCCESS)
        return st;
    if (len <= 0)
        return CUDNN_STATUS_NOT_SUPPORTED;
    char *s = malloc((size_t)len);
    if (!s)
        return CUDNN_STATUS_ALLOC_FAILED;
    int64_t got = 0;
    st = cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION,
                                  CUDNN_TYPE_CHAR, len, &got, s);
    if (st != CUDNN_STATUS_SUCCESS || got != len) {
        free(s);
        return st != CUDNN_STATUS_SUCCESS ? st : CUDNN_STATUS_INTERNAL_ERROR;
    }
    *json = s;
    *n = (size_t)len;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cu_dg_plan_load(cudnnHandle_t h, const char *json, size_t n, size_t ws_cap,
                              cudnnBackendDescriptor_t *plan, size_t *ws, cu_dg_engine_t *e,
                              const char **what)
{
    cu_dg_t p = {.st = CUDNN_STATUS_SUCCESS};
    cudnnBackendDescriptor_t d = cu_dg_make(&p, CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR,
                                            "execution plan");
    cu_dg_set(&p, d, CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION, CUDNN_TYPE_CHAR, (int64_t)n,
              json, "execution plan JSON");
    cu_dg_set(&p, d, ATTR_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h, "execution plan handle");
    cu_dg_finalize(&p, d, "execution plan from JSON finalize");
    int64_t need = 0, cnt = 0;
    plan_workspace(&p, d, ws_cap, &need);
    /* its engine, through the configuration the plan reports */
    cudnnBackendDescriptor_t cfg = cu_dg_make(&p, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR,
                                              "engine config descriptor");
    if (p.st == CUDNN_STATUS_SUCCESS)
        cu_dg_fail(&p, cudnnBackendGetAttribute(d, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                                                CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cnt, &cfg),
                   "execution plan engine config");
    if (p.st == CUDNN_STATUS_SUCCESS)
        cu_dg_fail(&p, cu_dg_engine_of(cfg, e), "loaded plan's engine");
    if (p.st != CUDNN_STATUS_SUCCESS) {
        cu_dg_destroy(&p);
        *what = p.what;
        return p.st;
    }
    cudnnBackendDestroyDescriptor(cfg);   /* p.d[1]: the plan (p.d[0]) stays */
    *plan = d;
    *ws = (size_t)need;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cu_dg_pack(const int64_t *uid, int nio, void *const *ptr, void *ws,
                         cudnnBackendDescriptor_t *vp, const char **what)
{
    cu_dg_t b = {.st = CUDNN_STATUS_SUCCESS};
    cudnnBackendDescriptor_t d = cu_dg_make(&b, CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR,
                                            "variant pack");
    cu_dg_set(&b, d, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, nio, uid,
              "variant pack ids");
    cu_dg_set(&b, d, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, nio, ptr,
              "variant pack pointers");
    cu_dg_set(&b, d, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws,
              "variant pack workspace");
    cu_dg_finalize(&b, d, "variant pack finalize");
    if (b.st != CUDNN_STATUS_SUCCESS) {
        cu_dg_destroy(&b);
        *what = b.what;
        return b.st;
    }
    *vp = d;
    return CUDNN_STATUS_SUCCESS;
}
