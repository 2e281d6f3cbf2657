/* cuda_dnn_graph — one convolution's cuDNN 9 operation graph through the
 * backend API (cudnn_graph.h, plain C), and the pieces every user of it
 * needs: its engines' numerical notes, heuristics, execution plans and
 * variant packs. cuda_fused.c builds its plans from these, cuda_tune.c
 * times them; nothing here keeps state or calls back into either.
 *
 *   X, W ──conv──> v0 ──+bias──> v1 ──relu──> v2 ──+R──> Y
 *
 * conv is the forward, backward-data or backward-filter operation
 * (cross-correlation, as PyTorch); each later node (forward only) a
 * POINTWISE operation: ADD of the 1 x k x 1 x 1 bias B (broadcast),
 * RELU_FWD, ADD of the residual R, in the given post-op order.
 * Intermediates are virtual fp32 tensors (no memory, no rounding between
 * the nodes); X, W, R, Y are fp32 NCHW or 16-bit NHWC (the strides say
 * which), B fp32. A gradient's DX sits in X's place, DW in W's, DY in Y's. */
#ifndef DDP_CUDA_DNN_GRAPH_H
#define DDP_CUDA_DNN_GRAPH_H

#include <cudnn.h>
#include <stddef.h>
#include <stdint.h>

#define CU_FUSED_MAX_POST 4

/* What the graph computes: the fused forward (with its bias and post-ops),
 * or one of a training convolution's two gradients (no bias, no post-ops:
 * a plain convolution's backward data dx = conv_T(dy, w), backward filter
 * dw = conv_W(x, dy)). cuDNN 9 deprecates the legacy calls these replace. */
enum { CU_CONV_FWD = 0, CU_CONV_BWD_DATA, CU_CONV_BWD_FILTER };

/* One convolution's shapes (all ints: compared and printed whole). */
typedef struct {
    int kind;               /* CU_CONV_*; 0: the forward */
    int in[4];              /* x: n, c, h, w (logical; bf16_nhwc: stored NHWC) */
    int out[4];             /* y, and the residual: n, k, oh, ow */
    int kh, kw, sh, sw, ph, pw;
    int bf16_nhwc;          /* x, w, y, residual 16-bit NHWC; else fp32 NCHW */
    int fp16;               /* with bf16_nhwc: the 16-bit values are fp16, not bf16 */
    int tensor_core;        /* engines with the TENSOR_CORE note allowed (fp32: TF32) */
    int bias;               /* a bias node: out[1] floats, broadcast 1 x k x 1 x 1 (a
                             * NULL b at run time adds zeros: exact) */
    int n_post;
    int post[CU_FUSED_MAX_POST];   /* BK_PO_RELU / BK_PO_SUM, applied in order */
} cu_fused_shape_t;

/* The io tensors' unique ids in a variant pack. */
enum { CU_DG_X = 1, CU_DG_W, CU_DG_B, CU_DG_R, CU_DG_Y };
#define CU_DG_NIO 5
#define CU_DG_ALIGN 16      /* bytes every io tensor's address is planned with */
#define CU_DG_MAX_DESC 48   /* a graph: 5 io + 5 virtual tensors, conv 2, 2 x 5 pointwise, 1 */

/* The descriptors made so far and the first failure: each step below does
 * nothing once one failed, so a build reads as a straight list and checks
 * every status. Zero it, set st to CUDNN_STATUS_SUCCESS, then build. */
typedef struct {
    cudnnBackendDescriptor_t d[CU_DG_MAX_DESC];
    int n;
    cudnnStatus_t st;
    const char *what;       /* the step that failed */
} cu_dg_t;

void cu_dg_fail(cu_dg_t *b, cudnnStatus_t st, const char *what);
cudnnBackendDescriptor_t cu_dg_make(cu_dg_t *b, cudnnBackendDescriptorType_t t,
                                    const char *what);
void cu_dg_set(cu_dg_t *b, cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t a,
               cudnnBackendAttributeType_t t, int64_t n, const void *v, const char *what);
void cu_dg_finalize(cu_dg_t *b, cudnnBackendDescriptor_t d, const char *what);
/* every descriptor b made, last first */
void cu_dg_destroy(cu_dg_t *b);

/* 1 when s has a residual (a SUM post-op). */
int cu_dg_has_res(const cu_fused_shape_t *s);
/* The operation graph of s on handle h into b (the returned descriptor is
 * the last one b holds; NULL with b->st set on failure); uid[] gets the io
 * tensors' ids in the order X, W, Y, then B and R when present, *nio their
 * count. */
cudnnBackendDescriptor_t cu_dg_graph(cu_dg_t *b, cudnnHandle_t h, const cu_fused_shape_t *s,
                                     int64_t uid[CU_DG_NIO], int *nio);
/* "bf16 NHWC conv 3x3/1 64->64 on [256,64,56,56], post-ops: relu" */
void cu_dg_describe(char *buf, size_t len, const cu_fused_shape_t *s);

/* An engine configuration's engine: cuDNN's global index, its numerical
 * notes (bit 1 << note) and its behaviour notes (bit 1 << note; 0 where
 * cuDNN does not say). */
typedef struct {
    int64_t engine;
    unsigned notes;
    unsigned behavior;
} cu_dg_engine_t;
/* 1 when the engine compiles its kernel when its plan is finalized (NVRTC:
 * the runtime-fusion engines; a start-up cost per process and shape). */
#define CU_DG_RTC(e) (((e).behavior >> CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION) & 1u)
cudnnStatus_t cu_dg_engine_of(cudnnBackendDescriptor_t cfg, cu_dg_engine_t *e);
/* 1 when ddpipe may run an engine of these notes for s: never
 * NONDETERMINISTIC (every worker must give a sample the same bits),
 * DOWN_CONVERT_INPUTS or REDUCED_PRECISION_REDUCTION (sums stay fp32), nor
 * TENSOR_CORE on fp32 data without tf32. */
int cu_dg_admissible(const cu_fused_shape_t *s, int tf32, unsigned notes);

/* mode's heuristics for og, made in b: up to max engine configurations
 * created into cfg[] (the caller destroys each), their count; -1 with b->st
 * set on failure. */
int cu_dg_heuristics(cu_dg_t *b, cudnnBackendDescriptor_t og, cudnnBackendHeurMode_t mode,
                     cudnnBackendDescriptor_t *cfg, int max);
/* An execution plan of cfg on h whose workspace fits ws_cap: *plan (the
 * caller destroys it) and *ws; else the status, *what naming the step. */
cudnnStatus_t cu_dg_plan(cudnnHandle_t h, cudnnBackendDescriptor_t cfg, size_t ws_cap,
                         cudnnBackendDescriptor_t *plan, size_t *ws, const char **what);
/* plan's JSON representation: what cuDNN serializes of a plan whose
 * engine compiled its kernel at finalize (the runtime-fusion engines; a
 * precompiled engine's plan has none: NOT_SUPPORTED). *json (malloc'd, the
 * caller frees it) and *n its bytes; else the status. */
cudnnStatus_t cu_dg_plan_json(cudnnBackendDescriptor_t plan, char **json, size_t *n);
/* An execution plan rebuilt on h from a JSON representation, without
 * compiling: *plan (the caller destroys it), *ws (within ws_cap) and *e,
 * its engine; else the status, *what naming the step. */
cudnnStatus_t cu_dg_plan_load(cudnnHandle_t h, const char *json, size_t n, size_t ws_cap,
                              cudnnBackendDescriptor_t *plan, size_t *ws, cu_dg_engine_t *e,
                              const char **what);
/* A variant pack of ptr[] for uid[] (nio of them) and the workspace ws:
 * *vp (the caller destroys it); else the status, *what naming the step. */
cudnnStatus_t cu_dg_pack(const int64_t *uid, int nio, void *const *ptr, void *ws,
                         cudnnBackendDescriptor_t *vp, const char **what);

#endif
