/* cuda_graph — bk_graph_ops_t on CUDA graphs: the inference forward the
 * engine records (gpud/tape_capture.c) is captured from the backend's one
 * stream (cudaStreamBeginCapture, thread-local mode: another thread's
 * unrelated CUDA calls neither break nor join it), instantiated, and
 * launched with cudaGraphLaunch on the same stream, so it stays ordered
 * after the input's upload (bk_write, or bk_write_u8's wait on its copy
 * stream, both queued before) and before bk_read's download.
 *
 * What a capture may not contain makes it fail, never hang: a host copy,
 * a stream synchronisation (cu_download, cu_scratch growth), a cudaMalloc
 * in this thread. The call returns an error, the capture is invalidated,
 * cudaStreamEndCapture reports it; capture_end then drops everything,
 * clears the error the kernels noted meanwhile (cu_note's sticky
 * cb->failed; none was pending, capture_begin checks) and the engine runs
 * the ops again unrecorded. The inference kernels (cuda_train.c:
 * conv_fwd + bias/post-op, or one cudnnBackendExecute of the fused graph
 * (cuda_fused.c), bn_fwd eval, relu, pool, add, concat, flatten
 * as a device copy, dropout at p = 0, linear through cuBLAS) queue only
 * device work on the stream; cu_sticky is a host flag, not a
 * synchronisation. An eval forward with CE (labels) or an active dropout is
 * never recorded; a training pass is, reading the labels and dropout keys
 * the engine put in device memory before it (tape_capture.c).
 *
 * The recording bakes in the addresses it was given: the graph's buffers
 * and plans (fixed once compiled), the parameter memory (the arena's views
 * and the folded weights, refolded in place at the same addresses), and
 * the backend's cuDNN workspace, which a later plan of another graph may
 * grow (cu_workspace frees and reallocates it), and the backend's scratch
 * (cu_grow_be): a replay checks that neither moved and answers "stale"
 * otherwise, and the engine records again. A training pass's labels and
 * dropout keys are its graph's own buffers (bk_kernels_t.put). */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/env_switch.h"
#include "common/log.h"
#include "gpud/cuda/cuda_graph.h"
#include "gpud/cuda/cuda_priv.h"

struct bk_capture {
    cudaGraphExec_t exec;
    void *ws;               /* the workspace the recorded convolutions use */
    size_t ws_size;
    unsigned long grow_gen; /* cu_grow_be's count when recorded (scratch, topk) */
};

static atomic_ulong n_captured, n_replayed, n_failed;

cuda_graph_counts_t cuda_graph_counts(void)
{
    return (cuda_graph_counts_t){atomic_load(&n_captured), atomic_load(&n_replayed),
                                 atomic_load(&n_failed)};
}

static void say(char *why, size_t len, const char *what, cudaError_t e)
{
    snprintf(why, len, "%s: %s (%s)", what, cudaGetErrorName(e), cudaGetErrorString(e));
}

static int cg_begin(backend_t *be, char *why, size_t len)
{
    cuda_backend_t *cb = cu_be(be);
    if (!env_switch_on("DDPIPE_CUDA_GRAPHS")) {
        snprintf(why, len, "DDPIPE_CUDA_GRAPHS=0");
        return 1;
    }
    if (cb->failed) {   /* its error belongs to the ops, which report it */
        snprintf(why, len, "the backend has a pending error");
        return -1;
    }
    enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    cudaError_t e = cudaStreamIsCapturing(cb->stream, &st);
    if (e == cudaSuccess && st != cudaStreamCaptureStatusNone) {
        snprintf(why, len, "the backend's stream is already being captured");
        return -1;
    }
    if (e == cudaSuccess)
        e = cudaStreamBeginCapture(cb->stream, cudaStreamCaptureModeThreadLocal);
    if (e != cudaSuccess) {
        cudaGetLastError();   /* not the next kernel's error */
        say(why, len, "cudaStreamBeginCapture", e);
        atomic_fetch_add(&n_failed, 1);
        return -1;
    }
    return 0;
}

static bk_capture_t *cg_end(backend_t *be, int ok, char *why, size_t len)
{
    cuda_backend_t *cb = cu_be(be);
    cudaGraph_t graph = NULL;
    cudaError_t e = cudaStreamEndCapture(cb->stream, &graph);
    bk_capture_t *c = NULL;
    if (!ok)
        snprintf(why, len, "an op failed while recording");
    else if (e != cudaSuccess)
        say(why, len, "cudaStreamEndCapture", e);
    else if (cb->failed)
        snprintf(why, len, "%s", cb->err);
    else if (!graph)
        snprintf(why, len, "cudaStreamEndCapture returned no graph");
    else if (!(c = calloc(1, sizeof *c)))
        snprintf(why, len, "out of memory");
    else if ((e = cudaGraphInstantiateWithFlags(&c->exec, graph, 0)) != cudaSuccess) {
        say(why, len, "cudaGraphInstantiate", e);
        free(c);
        c = NULL;
    }
    if (graph) {   /* the instance holds what it needs */
        cudaError_t d = cudaGraphDestroy(graph);
        if (d != cudaSuccess)
            log_warn("cuda: cudaGraphDestroy failed: %s", cudaGetErrorString(d));
    }
    if (c) {
        c->ws = cb->ws;
        c->ws_size = cb->ws_size;
        c->grow_gen = cb->grow_gen;
        atomic_fetch_add(&n_captured, 1);
        return c;
    }
    /* the refused call's error, and the kernels' note of it: the ops run
     * again unrecorded (a sticky device error stays and surfaces there) */
    cudaGetLastError();
    cb->failed = 0;
    cb->err[0] = '\0';
    atomic_fetch_add(&n_failed, 1);
    return NULL;
}

static int cg_replay(backend_t *be, bk_capture_t *c, char *why, size_t len)
{
    cuda_backend_t *cb = cu_be(be);
    if (c->ws != cb->ws || c->ws_size > cb->ws_size) {
        snprintf(why, len, "the cuDNN workspace was reallocated");
        return 1;
    }
    if (c->grow_gen != cb->grow_gen) {
        snprintf(why, len, "the backend's scratch was reallocated");
        return 1;
    }
    if (cb->failed) {
        snprintf(why, len, "the backend has a pending error");
        return -1;
    }
    cudaError_t e = cudaGraphLaunch(c->exec, cb->stream);
    if (e != cudaSuccess) {
        cudaGetLastError();
        say(why, len, "cudaGraphLaunch", e);
        atomic_fetch_add(&n_failed, 1);
        return -1;
    }
    atomic_fetch_add(&n_replayed, 1);
    return 0;
}

/* A launch still in flight completes: the instance is freed after it. */
static void cg_release(backend_t *be, bk_capture_t *c)
{
    (void)be;
    if (!c)
        return;
    cudaError_t e = cudaGraphExecDestroy(c->exec);
    if (e != cudaSuccess)
        log_warn("cuda: cudaGraphExecDestroy failed: %s", cudaGetErrorString(e));
    free(c);
}

const bk_graph_ops_t CUDA_GRAPH_OPS = {
    .capture_begin = cg_begin,
    .capture_end = cg_end,
    .replay = cg_replay,
    .release = cg_release,
};
