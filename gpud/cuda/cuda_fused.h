/* cuda_fused — an inference graph's fused convolution (conv + bias + the
 * post-ops in the plan's order: ReLU, + residual) as ONE cuDNN 9 operation
 * graph through the backend API (cudnn_graph.h), docs/CUDA.md "cuDNN graph
 * API for the fused eval conv". A plan is built once per shape at plan
 * time: heuristics (mode A, then FALLBACK), deterministic engines only (the
 * NONDETERMINISTIC numerical note filtered out, so a sample's logits do not
 * depend on which worker computed it), the first configuration that
 * finalizes within the workspace cap wins. Where cuDNN builds no plan,
 * cu_fused_new logs one line and returns NULL: the caller keeps its legacy
 * path (cudnnConvolutionForward + the epilogue kernel), which it always
 * builds too. DDPIPE_CUDNN_GRAPH=0 (read at plan time) turns this off.
 * Callers: cuda_train.c (fp32 NCHW: the fused eval conv, and a training
 * convolution's forward and both gradients), cuda_infer.c (bf16 NHWC) and,
 * for a 16-bit training convolution's forward and both gradients,
 * cuda_train16.c; nothing here calls back into them. The graph itself is
 * cuda_dnn_graph.c's; a plans file or timing (cuda_tune.h) may choose the
 * engine instead of heuristics' first deterministic one. */
#ifndef DDP_CUDA_FUSED_H
#define DDP_CUDA_FUSED_H

#include "gpud/backend_impl.h"
#include "gpud/cuda/cuda_dnn_graph.h"   /* cu_fused_shape_t, CU_CONV_* */

typedef struct cu_fused cu_fused_t;

/* The execution plan for s, its workspace ensured (cu_workspace): the
 * backend's plan of the same shape where one exists (built once, shared by
 * every layer of that shape), else a new one. NULL
 * when the legacy path is to run: DDPIPE_CUDNN_GRAPH=0, or cuDNN built no
 * plan (logged once, naming the layer, the step and cuDNN's status), with
 * g untouched; or g failed (the workspace could not be allocated). */
cu_fused_t *cu_fused_new(bk_ctx_t *g, const cu_fused_shape_t *s);

/* y = the fused graph of x, w, b (NULL: zeros) and res (with a SUM
 * post-op; it is y's own buffer: the graph then writes tmp, an out-shaped
 * buffer, and tmp is copied into y, so cuDNN never reads and writes one
 * buffer). Returns 0 done; 1 when the caller must run its legacy path for
 * this call: a pointer not aligned as planned, or cudnnBackendExecute
 * failed (logged once; the plan stays legacy for good after that); -1 when
 * g failed (the copy into y). */
int cu_fused_run(bk_ctx_t *g, cu_fused_t *f, const void *x, const void *w, const float *b,
                 const void *res, void *tmp, void *y);

/* The gradients of a CU_CONV_BWD_DATA / CU_CONV_BWD_FILTER plan: dx from
 * dy and w; dw from x and dy (dw overwritten, not accumulated). Returns as
 * cu_fused_run. */
int cu_fused_run_bwd_data(bk_ctx_t *g, cu_fused_t *f, const void *dy, const void *w, void *dx);
int cu_fused_run_bwd_filter(bk_ctx_t *g, cu_fused_t *f, const void *x, const void *dy, void *dw);

void cu_fused_free(cu_fused_t *f);

/* What the fused convolutions did in this process, over every cuda backend
 * (for tests and logs). */
typedef struct {
    unsigned long fused;        /* plans built on the graph API */
    unsigned long legacy;       /* plans left on the legacy path: cuDNN built none */
    unsigned long off;          /* plans asked for with DDPIPE_CUDNN_GRAPH=0 */
    unsigned long run_failed;   /* plans switched to legacy at run time */
    unsigned long shared;       /* of fused: a plan of the same shape reused, not built */
    unsigned long from_file;    /* plans built on the plans file's engine (cuda_tune.h) */
    unsigned long timed;        /* plans built on the fastest engine timed (DDPIPE_CUDNN_TUNE) */
    unsigned long file_refused; /* plans file entries refused (another engine at the rank...) */
    unsigned long loaded;       /* of from_file: loaded from its serialized plan, not compiled */
} cu_fused_counts_t;

cu_fused_counts_t cu_fused_counts(void);

#endif
