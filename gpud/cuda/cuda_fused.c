/* cuda_fused — a convolution (the fused eval conv, or a training
 * convolution's forward or gradient) as one cuDNN 9 operation graph
 * (cuda_dnn_graph.c builds it; cuda_fused.h says what and why).
 *
 * Engine choice, once per plan: CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR in mode
 * A, then FALLBACK; an engine is skipped unless cu_dg_admissible (never
 * NONDETERMINISTIC: every worker must give a sample the same logits; sums
 * in fp32; TF32 only with DDPIPE_CUDA_PRECISION=tf32); the first
 * configuration that finalizes into an execution plan whose workspace fits
 * the cap wins. Heuristics are a function of the graph, the device and
 * cuDNN, so every gpud of a job picks the same one. With a plans file
 * (cuda_tune.h: DDPIPE_CUDNN_PLANS) the file's configuration of mode A's
 * list is taken instead where it is admissible; with DDPIPE_CUDNN_TUNE=1
 * the first configurations of that list are timed and the fastest
 * admissible one taken (and written to the file).
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
#include "common/env_switch.h"
#include "common/log.h"
#include "gpud/cuda/cuda_fused.h"
#include "gpud/cuda/cuda_priv.h"
#include "gpud/cuda/cuda_tune.h"

#define N_IO CU_DG_NIO
#define MAX_CFG 32          /* heuristic results looked at, per mode */
#define TUNE_REPS 3         /* timed executions of each configuration (after one warm-up) */

static atomic_ulong n_fused, n_legacy, n_off, n_run_failed, n_shared, n_from_file, n_timed,
    n_file_refused, n_loaded;

cu_fused_counts_t cu_fused_counts(void)
{
    return (cu_fused_counts_t){atomic_load(&n_fused),        atomic_load(&n_legacy),
                               atomic_load(&n_off),          atomic_load(&n_run_failed),
                               atomic_load(&n_shared),       atomic_load(&n_from_file),
                               atomic_load(&n_timed),        atomic_load(&n_file_refused),
                               atomic_load(&n_loaded)};
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

/* One shape's plan: the graph, its heuristics, the engine configuration
 * and the execution plan, built once per backend and shape and shared by
 * every layer of that shape (cuDNN's plans take their buffers from each
 * execution's variant pack). In cuda_backend_t.fplans while refs > 0. */
struct cu_fplan {
    cu_fused_shape_t key;   /* the shape, unused post[] zeroed */
    int refs;
    cu_dg_t graph;           /* the tensors, operations and the operation graph */
    cudnnBackendDescriptor_t heur, cfg, plan;
    int64_t uid[N_IO];
    size_t ws_need;         /* the plan's workspace bytes */
    int rtc;                /* its engine compiled its kernel at finalize (NVRTC) */
    int loaded;             /* rebuilt from the plans file's serialized plan: not compiled */
    double final_s;         /* seconds that finalize (or the load) took */
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

/* ---------------------------------------------------------------- engines */

/* 0 with DDPIPE_CUDNN_RTC=0: engines that compile their kernel at plan
 * time (NVRTC, a start-up cost per process and shape) are passed over */
static int rtc_ok(void)
{
    return env_switch_on("DDPIPE_CUDNN_RTC");
}

/* 1 when ddpipe may run engine e for s (cu_dg_admissible, and
 * DDPIPE_CUDNN_RTC) */
static int usable(const cuda_backend_t *cb, const cu_fused_shape_t *s, cu_dg_engine_t e)
{
    return cu_dg_admissible(s, cb->tf32, e.notes) && (!CU_DG_RTC(e) || rtc_ok());
}

/* cu_dg_plan of cfg within the backend's workspace cap, *secs its time
 * (finalize: a runtime-compiled engine's compilation) */
static cudnnStatus_t plan_of(cuda_backend_t *cb, cudnnBackendDescriptor_t cfg,
                             cudnnBackendDescriptor_t *plan, size_t *ws, double *secs,
                             const char **what)
{
    double t0 = clock_mono_s();
    cudnnStatus_t st = cu_dg_plan(cb->dnn, cfg, cb->ws_cap, plan, ws, what);
    *secs = clock_mono_s() - t0;
    return st;
}

/* An execution plan of cfg if its engine is usable for s: 0 with *plan,
 * *ws, *secs (finalize's time) and *e, the engine; 1 not usable; -1 failed
 * (the first failure noted in why). */
static int try_cfg(cuda_backend_t *cb, const cu_fused_shape_t *s, cudnnBackendDescriptor_t cfg,
                   cu_dg_t *why, cudnnBackendDescriptor_t *plan, size_t *ws, cu_dg_engine_t *e,
                   double *secs)
{
    cudnnStatus_t st = cu_dg_engine_of(cfg, e);
    if (st != CUDNN_STATUS_SUCCESS) {   /* notes unknown: not provably deterministic */
        cu_dg_fail(why, st, "engine numerical notes");
        return 1;
    }
    if (!usable(cb, s, *e))
        return 1;
    const char *what = NULL;
    st = plan_of(cb, cfg, plan, ws, secs, &what);
    if (st != CUDNN_STATUS_SUCCESS) {
        cu_dg_fail(why, st, what);   /* the first failure, for the log */
        return -1;
    }
    return 0;
}

/* The plan the file serialized for s, rebuilt without compiling, if it is
 * still the engine the file names and usable: 0 (*plan, *ws); -1 (refused,
 * logged: the caller builds it from its configuration). */
static int load_json(cuda_backend_t *cb, fplan_t *f, const cu_fused_shape_t *s, int64_t want,
                     const char *json, size_t json_n, cudnnBackendDescriptor_t *plan, size_t *ws)
{
    cu_dg_engine_t e = {.engine = -1};
    const char *what = NULL;
    double t0 = clock_mono_s();
    cudnnStatus_t st = cu_dg_plan_load(cb->dnn, json, json_n, cb->ws_cap, plan, ws, &e, &what);
    if (st == CUDNN_STATUS_SUCCESS && e.engine == want && usable(cb, s, e)) {
        f->rtc = CU_DG_RTC(e);
        f->loaded = 1;
        f->final_s = clock_mono_s() - t0;
        atomic_fetch_add(&n_loaded, 1);
        return 0;
    }
    if (st == CUDNN_STATUS_SUCCESS)
        cudnnBackendDestroyDescriptor(*plan);
    log_warn("cuda: cuDNN plans file's serialized plan for %s not loaded (%s%s%s): building it "
             "from its configuration", f->layer, st != CUDNN_STATUS_SUCCESS ? what : "",
             st != CUDNN_STATUS_SUCCESS ? ": " : "",
             st != CUDNN_STATUS_SUCCESS ? cudnnGetErrorString(st)
             : e.engine != want          ? "another engine"
                                         : "not usable here");
    return -1;
}

/* The configuration the plans file names for s, if it is still rank's
 * engine, admissible, and finalizes (or loads, where the file has it
 * serialized): its index (the plan in *plan, *ws); -1 (no entry, or
 * refused and logged). A tuning run adds the serialized plan of a
 * runtime-compiled engine the file names without one. */
static int from_file(cuda_backend_t *cb, fplan_t *f, const cu_fused_shape_t *s,
                     cudnnBackendDescriptor_t *cfg, int n, cudnnBackendDescriptor_t *plan,
                     size_t *ws)
{
    double secs = 0;
    int64_t want = -1;
    const char *json = NULL;
    size_t json_n = 0;
    int rank = cu_tune_lookup(cb->tune, s, &want, &json, &json_n);
    if (rank < 0)
        return -1;
    if (json && rank < n && load_json(cb, f, s, want, json, json_n, plan, ws) == 0) {
        atomic_fetch_add(&n_from_file, 1);
        return rank;
    }
    cu_dg_t why = {.st = CUDNN_STATUS_SUCCESS};
    cu_dg_engine_t e = {.engine = -1};
    int rc = rank < n ? try_cfg(cb, s, cfg[rank], &why, plan, ws, &e, &secs) : 1;
    if (rc == 0 && e.engine == want) {
        atomic_fetch_add(&n_from_file, 1);
        f->rtc = CU_DG_RTC(e);
        f->final_s = secs;
        char *out = NULL;
        size_t out_n = 0;
        if (f->rtc && !json && cu_tune_timing(cb->tune) &&
            cu_dg_plan_json(*plan, &out, &out_n) == CUDNN_STATUS_SUCCESS) {
            cu_tune_add_json(cb->tune, s, out, out_n);
            free(out);
        }
        return rank;
    }
    if (rc == 0)
        cudnnBackendDestroyDescriptor(*plan);
    atomic_fetch_add(&n_file_refused, 1);
    log_warn("cuda: cuDNN plans file's engine %lld (rank %d) for %s refused: %s; the "
             "heuristics' choice runs it", (long long)want, rank, f->layer,
             rank >= n              ? "heuristics give fewer configurations"
             : rc < 0 ? (why.what ? why.what : "no plan")
             : rc == 1 ? "not admissible (nondeterministic or reduced precision; or "
                         "runtime-compiled under DDPIPE_CUDNN_RTC=0)"
                       : "another engine at that rank");
    return -1;
}

/* The tuning buffers of s in one allocation: ptr[] in cu_dg_graph's uid
 * order (X, W, Y, [B], [R]), values 0x3c bytes (finite, not zero, in every
 * format). The allocation, or NULL. */
static void *tune_buffers(const cu_fused_shape_t *s, const int64_t *uid, int nio, void **ptr)
{
    size_t es = s->bf16_nhwc ? 2 : 4;
    size_t nx = (size_t)s->in[0] * s->in[1] * s->in[2] * s->in[3];
    size_t ny = (size_t)s->out[0] * s->out[1] * s->out[2] * s->out[3];
    size_t nw = (size_t)s->out[1] * s->in[1] * s->kh * s->kw;
    size_t bytes[CU_DG_NIO + 1] = {0};   /* by uid: 1..5 */
    bytes[CU_DG_X] = nx * es;
    bytes[CU_DG_W] = nw * es;
    bytes[CU_DG_Y] = ny * es;
    bytes[CU_DG_B] = (size_t)s->out[1] * 4;
    bytes[CU_DG_R] = ny * es;
    size_t total = 0, off[N_IO];
    for (int i = 0; i < nio; i++) {
        off[i] = total;
        total += (bytes[uid[i]] + 255) & ~(size_t)255;
    }
    char *base = NULL;
    if (cudaMalloc((void **)&base, total) != cudaSuccess) {
        cudaGetLastError();   /* not sticky: tuning is skipped for this shape */
        return NULL;
    }
    if (cudaMemset(base, 0x3c, total) != cudaSuccess) {
        cudaFree(base);
        return NULL;
    }
    for (int i = 0; i < nio; i++)
        ptr[i] = base + off[i];
    return base;
}

/* ms a run of plan on ptr[] (one warm-up, TUNE_REPS timed), or -1. */
static double time_plan(cuda_backend_t *cb, const fplan_t *f, cudnnBackendDescriptor_t plan,
                        void *const *ptr)
{
    cudnnBackendDescriptor_t vp = NULL;
    const char *what = NULL;
    if (cu_dg_pack(f->uid, f->nio, ptr, cb->ws, &vp, &what) != CUDNN_STATUS_SUCCESS)
        return -1;
    cudaEvent_t ev[2] = {NULL, NULL};
    float ms = -1.0f;
    int ok = cudaEventCreate(&ev[0]) == cudaSuccess && cudaEventCreate(&ev[1]) == cudaSuccess &&
             cudnnBackendExecute(cb->dnn, plan, vp) == CUDNN_STATUS_SUCCESS &&
             cudaEventRecord(ev[0], cb->stream) == cudaSuccess;
    for (int r = 0; ok && r < TUNE_REPS; r++)
        ok = cudnnBackendExecute(cb->dnn, plan, vp) == CUDNN_STATUS_SUCCESS;
    ok = ok && cudaEventRecord(ev[1], cb->stream) == cudaSuccess &&
         cudaEventSynchronize(ev[1]) == cudaSuccess &&
         cudaEventElapsedTime(&ms, ev[0], ev[1]) == cudaSuccess;
    if (!ok) {
        cudaStreamSynchronize(cb->stream);
        cudaGetLastError();   /* a refused engine is not the backend's failure */
    }
    for (int i = 0; i < 2; i++)
        if (ev[i])
            cudaEventDestroy(ev[i]);
    cudnnBackendDestroyDescriptor(vp);
    return ok ? (double)ms / TUNE_REPS : -1.0;
}

typedef struct {
    int i;                  /* index in the heuristics' list; -1 none */
    double ms;
    int64_t engine;
    int rtc;                /* runtime-compiled */
} timed_t;

/* DDPIPE_CUDNN_TUNE: heuristics' first cu_tune_max() configurations timed,
 * the fastest admissible one's index returned (its plan in *plan, *ws),
 * recorded in the tuning and logged; -1 when none was timed (the caller's
 * order then). -2 when g failed (the workspace could not grow). */
static int timed(bk_ctx_t *g, cuda_backend_t *cb, fplan_t *f, const cu_fused_shape_t *s,
                 cudnnBackendDescriptor_t *cfg, int n, cudnnBackendDescriptor_t *plan, size_t *ws)
{
    enum cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
    if (!cu_tune_timing(cb->tune) || cudaStreamIsCapturing(cb->stream, &cap) != cudaSuccess ||
        cap != cudaStreamCaptureStatusNone)
        return -1;
    void *ptr[N_IO] = {0};
    void *mem = tune_buffers(s, f->uid, f->nio, ptr);
    if (!mem) {
        log_warn("cuda: cuDNN tuning of %s: no device memory for its buffers; the heuristics' "
                 "choice runs it", f->layer);
        return -1;
    }
    timed_t best = {-1, 0, -1, 0}, first = {-1, 0, -1, 0}, any = {-1, 0, -1, 0};
    double best_s = 0;
    cudnnBackendDescriptor_t best_plan = NULL;
    size_t best_ws = 0;
    int tried = 0, nd_any = 0, failed = 0, max = cu_tune_max(), capped = 0;
    double t_start = clock_mono_s(), limit = cu_tune_seconds();
    for (int i = 0; i < n && i < max && !failed; i++) {
        if (best.i >= 0 && clock_mono_s() - t_start > limit) {
            capped = 1;   /* the rest untimed: DDPIPE_CUDNN_TUNE_SECONDS */
            break;
        }
        cu_dg_engine_t e = {.engine = -1};
        if (cu_dg_engine_of(cfg[i], &e) != CUDNN_STATUS_SUCCESS)
            continue;
        int adm = usable(cb, s, e);
        cudnnBackendDescriptor_t p = NULL;
        size_t need = 0;
        const char *what = NULL;
        double secs = 0;
        if (plan_of(cb, cfg[i], &p, &need, &secs, &what) != CUDNN_STATUS_SUCCESS)
            continue;
        if (cu_workspace(g, need) < 0) {
            cudnnBackendDestroyDescriptor(p);
            failed = 1;
            break;
        }
        double ms = time_plan(cb, f, p, ptr);
        tried++;
        timed_t now = {i, ms, e.engine, CU_DG_RTC(e)};
        if (ms >= 0 && (any.i < 0 || ms < any.ms)) {
            any = now;
            nd_any = !adm;
        }
        if (ms >= 0 && adm && first.i < 0)
            first = now;
        if (ms >= 0 && adm && (best.i < 0 || ms < best.ms)) {
            if (best_plan)
                cudnnBackendDestroyDescriptor(best_plan);
            best = now;
            best_plan = p;
            best_ws = need;
            best_s = secs;
        } else
            cudnnBackendDestroyDescriptor(p);
    }
    cudaFree(mem);   /* synchronises: nothing of the timing is left queued */
    if (failed || best.i < 0) {
        if (best_plan)
            cudnnBackendDestroyDescriptor(best_plan);
        return failed ? -2 : -1;
    }
    atomic_fetch_add(&n_timed, 1);
    char *json = NULL;   /* a runtime-compiled plan, serialized: later runs load it */
    size_t json_n = 0;
    if (best.rtc && cu_dg_plan_json(best_plan, &json, &json_n) != CUDNN_STATUS_SUCCESS)
        json = NULL;
    cu_tune_record(cb->tune, s, best.i, best.engine, best.ms, first.ms, any.ms, json, json_n);
    free(json);
    log_info("cuda conv tune %s: engine %lld (rank %d%s) %.3f ms; heuristics' first "
             "deterministic engine %lld (rank %d%s) %.3f ms; fastest of all engine %lld (rank "
             "%d%s%s) %.3f ms; %d configurations timed%s", f->layer, (long long)best.engine,
             best.i, best.rtc ? ", runtime-compiled" : "", best.ms, (long long)first.engine,
             first.i, first.rtc ? ", runtime-compiled" : "", first.ms, (long long)any.engine,
             any.i, nd_any ? ", not admissible" : "", any.rtc ? ", runtime-compiled" : "", any.ms,
             tried, capped ? " (time cap)" : "");
    *plan = best_plan;
    *ws = best_ws;
    f->rtc = best.rtc;
    f->final_s = best_s;
    return best.i;
}

/* The plan of mode's heuristics: from the plans file or timing (mode A,
 * with cb->tune), else the first admissible configuration that finalizes
 * into a plan within the workspace cap. f->heur, f->cfg, f->plan set, 0;
 * else -1 with the last failure in *why (-2: g failed). */
static int pick(bk_ctx_t *g, cuda_backend_t *cb, fplan_t *f, const cu_fused_shape_t *s,
                cudnnBackendDescriptor_t og, cudnnBackendHeurMode_t mode, cu_dg_t *why,
                int *seen, int *filtered)
{
    cu_dg_t h = {.st = CUDNN_STATUS_SUCCESS};
    cudnnBackendDescriptor_t cfg[MAX_CFG] = {0}, plan = NULL;
    int n = cu_dg_heuristics(&h, og, mode, cfg, MAX_CFG);
    if (n < 0) {
        cu_dg_fail(why, h.st, h.what);
        cu_dg_destroy(&h);
        return -1;
    }
    size_t ws = 0;
    int won = -1;
    if (mode == CUDNN_HEUR_MODE_A && cb->tune &&
        (won = from_file(cb, f, s, cfg, n, &plan, &ws)) < 0)
        won = timed(g, cb, f, s, cfg, n, &plan, &ws);
    for (int i = 0; i < n && won == -1; i++) {
        (*seen)++;
        cu_dg_engine_t e;
        double secs = 0;
        int rc = try_cfg(cb, s, cfg[i], why, &plan, &ws, &e, &secs);
        *filtered += rc == 1;
        if (rc == 0) {
            won = i;
            f->rtc = CU_DG_RTC(e);
            f->final_s = secs;
        }
    }
    for (int i = 0; i < n; i++)
        if (i != won)
            cudnnBackendDestroyDescriptor(cfg[i]);
    if (won < 0) {
        cu_dg_destroy(&h);
        return won == -2 ? -2 : -1;
    }
    f->plan = plan;   /* owned by f from here */
    f->ws_need = ws;
    f->heur = h.d[0];   /* h holds only the heuristics */
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
    cu_dg_destroy(&c->graph);
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

/* The engine f runs (cuDNN's global index), logged with DDPIPE_CUDA_PROFILE
 * set as the legacy path logs its algorithms (where the time goes), else
 * at debug level. */
static void log_choice(const fplan_t *f, size_t ws)
{
    cu_dg_engine_t e = {.engine = -1};
    if (cu_dg_engine_of(f->cfg, &e) != CUDNN_STATUS_SUCCESS)
        e.engine = -1;   /* unknown: logged as -1 */
    if (cu_profile_env(NULL))
        log_info("cuda conv graph %s: engine %lld%s, workspace %zu KB, %s in %.3fs",
                 f->layer, (long long)e.engine, f->rtc ? " (runtime-compiled)" : "", ws >> 10,
                 f->loaded ? "loaded serialized" : "finalized", f->final_s);
    else
        log_debug("cuda: cuDNN graph for %s: fused (engine %lld%s, workspace %zu bytes, "
                  "finalized in %.3fs)", f->layer, (long long)e.engine,
                  f->rtc ? ", runtime-compiled" : "", ws, f->final_s);
}

/* A new plan for shape s, in cb->fplans with no reference yet; NULL
 * (logged, counted legacy) where cuDNN builds none or memory runs out, or
 * (g failed) where the workspace could not grow while tuning. */
static fplan_t *fplan_build(bk_ctx_t *g, cuda_backend_t *cb, const cu_fused_shape_t *s)
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
    f->res = cu_dg_has_res(s);
    f->out_bytes = (size_t)s->out[0] * s->out[1] * s->out[2] * s->out[3] *
                   (s->bf16_nhwc ? 2 : sizeof(float));
    cu_dg_describe(f->layer, sizeof f->layer, s);
    cudnnBackendDescriptor_t og = cu_dg_graph(&f->graph, cb->dnn, s, f->uid, &f->nio);
    cu_dg_t why = {.st = CUDNN_STATUS_SUCCESS};
    int seen = 0, filtered = 0, ok = -1;
    if (f->graph.st != CUDNN_STATUS_SUCCESS)
        cu_dg_fail(&why, f->graph.st, f->graph.what);
    else if ((ok = pick(g, cb, f, s, og, CUDNN_HEUR_MODE_A, &why, &seen, &filtered)) == -1)
        ok = pick(g, cb, f, s, og, CUDNN_HEUR_MODE_FALLBACK, &why, &seen, &filtered);
    if (ok == -2) {   /* g failed: its error says why */
        fplan_free(f);
        return NULL;
    }
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
    cb->nplan_rtc += f->rtc != 0;
    cb->nplan_loaded += f->loaded != 0;
    cb->plan_rtc_s += f->rtc ? f->final_s : 0.0;
    log_choice(f, f->ws_need);
    return f;
}

static int wanted(void)
{
    return env_switch_on("DDPIPE_CUDNN_GRAPH");
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
    else if (!(c = fplan_build(g, cb, &key)))
        return NULL;   /* logged: the legacy path runs it */
    c->refs++;
    cu_tune_use(cb->tune, &key);
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
    cudnnBackendDescriptor_t vp = NULL;
    cudnnStatus_t st = cu_dg_pack(f->c->uid, f->c->nio, ptr, ws, &vp, what);
    if (st != CUDNN_STATUS_SUCCESS)
        return st;
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
        if (!ptr[i] || (uintptr_t)ptr[i] % CU_DG_ALIGN != 0)
            return give_up(f, "a buffer is not 16-byte aligned (or missing)",
                           CUDNN_STATUS_SUCCESS);
    const char *what = "cudnnBackendExecute";
    cudnnStatus_t st = variant_pack(f, ptr, cb->ws, &what);
    if (st == CUDNN_STATUS_SUCCESS)
        st = cudnnBackendExecute(cb->dnn, f->c->plan, f->vp);
    return st == CUDNN_STATUS_SUCCESS ? 0 : give_up(f, what, st);
}

/* X, W, Y are uids 1-3 for every kind: a gradient's DX sits in X's place,
 * DW in W's, DY in Y's (cu_dg_graph) */
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
    if (b && !(c->nio > k && c->uid[k] == CU_DG_B))
        return give_up(f, "a bias given to a conv planned without one", CUDNN_STATUS_SUCCESS);
    if (c->nio > k && c->uid[k] == CU_DG_B)
        ptr[k++] = b ? (void *)b : f->zero_bias;
    if (c->nio > k && c->uid[k] == CU_DG_R)
        ptr[k++] = (void *)res;
    int rc = execute(cb, f, ptr);
    if (rc != 0 || !c->res)
        return rc;
    return cu_check(g, cudaMemcpyAsync(y, tmp, c->out_bytes, cudaMemcpyDeviceToDevice,
                                       cb->stream), "fused conv output copy");
}
