/* cuda_tune — cuDNN engines chosen by measurement, made the same in every
 * gpud by a plans file (docs/CUDA.md "Tuned engines").
 *
 * cuDNN's heuristics rank a graph's engine configurations; cuda_fused.c
 * runs the first deterministic one. That choice is a function of the graph,
 * the device and cuDNN, so every worker of a job makes it, but it is not
 * the fastest deterministic engine. Timing the engines at plan time
 * (cuDNN's "benchmark", PyTorch's cudnn.benchmark) finds that one, but two
 * processes' timings can order two engines differently, and then a sample's
 * bits depend on its worker (seen on an H200 with the legacy calls' find).
 * So timing writes its choices to a file and jobs read them from it:
 *
 *   DDPIPE_CUDNN_TUNE=1 DDPIPE_CUDNN_PLANS=plans.txt <one run>   # times, writes
 *   DDPIPE_CUDNN_PLANS=plans.txt <every gpud of the job>          # reads
 *
 * A plan names a shape, the heuristics' rank of the chosen configuration
 * and that configuration's engine (cuDNN's global index), and, where the
 * engine compiles its kernel at plan time (runtime fusion), the plan
 * cuDNN serialized, which later runs load instead of compiling again (the
 * start-up of a job's gpuds); heuristics give
 * the same list for the same graph, device and cuDNN, so the rank finds the
 * configuration again, and an engine that no longer matches refuses the
 * entry (heuristics' choice instead, logged). The file names the device
 * and the cuDNN version it was timed on; another refuses the whole file.
 * Only admissible engines (cu_dg_admissible: deterministic) are ever
 * chosen; the others are timed too, to say what determinism costs. */
#ifndef DDP_CUDA_TUNE_H
#define DDP_CUDA_TUNE_H

#include "gpud/cuda/cuda_dnn_graph.h"

typedef struct cu_tune cu_tune_t;

/* From the environment at a backend's start, for device (its name) and the
 * cuDNN loaded (cudnnGetVersion): DDPIPE_CUDNN_PLANS=FILE reads FILE where
 * it exists (a malformed file or another device's is refused whole,
 * logged), DDPIPE_CUDNN_TUNE=1 times the shapes the file does not name.
 * NULL when neither is set: heuristics alone, as before. */
cu_tune_t *cu_tune_new(const char *device, long cudnn_version);
/* Writes FILE when timing added plans (whole, atomically), logs what the
 * timed shapes cost (cu_tune_use's layers) on the chosen engines, on
 * heuristics' first deterministic ones and on the fastest of all, frees. */
void cu_tune_free(cu_tune_t *t);

/* 1 when shapes without a plan are to be timed. */
int cu_tune_timing(const cu_tune_t *t);
/* The heuristics rank FILE names for s (its engine in *engine, and in
 * *json / *json_n the plan serialized, or NULL / 0), or -1. */
int cu_tune_lookup(const cu_tune_t *t, const cu_fused_shape_t *s, int64_t *engine,
                   const char **json, size_t *json_n);
/* What timing s found: the chosen configuration (rank, engine, ms), the
 * time of heuristics' first admissible one and of the fastest of all, and
 * its plan serialized (json may be NULL: a precompiled engine's). */
void cu_tune_record(cu_tune_t *t, const cu_fused_shape_t *s, int rank, int64_t engine, double ms,
                    double first_ms, double any_ms, const char *json, size_t json_n);
/* The serialized plan of a plan FILE names without one (a tuning run
 * completes the file with them: later runs load instead of compiling). */
void cu_tune_add_json(cu_tune_t *t, const cu_fused_shape_t *s, const char *json, size_t json_n);
/* One more layer runs s's plan (the summary counts each layer). */
void cu_tune_use(cu_tune_t *t, const cu_fused_shape_t *s);

/* The number of engine configurations timed per shape: heuristics' first
 * DDPIPE_CUDNN_TUNE_MAX (default 8, 1..32). */
int cu_tune_max(void);
/* Seconds of timing per shape after which no further configuration is
 * tried once an admissible one was timed (a runtime-compiled engine's
 * finalize is its kernel's compilation, up to seconds):
 * DDPIPE_CUDNN_TUNE_SECONDS, default 5. */
double cu_tune_seconds(void);

#endif
