/* job_options — the options `ddpipe eval` and `ddpipe train` share, each
 * declared once as a row of common/options.h for both commands' tables
 * (cli/eval_options.c, cli/train_options.c). A command's struct names the
 * fields as these rows do. Long defaults of 0 and -1 outside a row's range
 * are sentinels: derived later (common/options.h). */
#ifndef DDP_CLI_JOB_OPTIONS_H
#define DDP_CLI_JOB_OPTIONS_H

#include "common/options.h"
#include "common/zsecurity.h"
#include "gpud/options.h"

/* The model's input: gpud's rows (channels, num-classes, in-channels, mean,
 * std, normalize) and loaderd's transform sizes. */
#define JOB_MODEL_OPTIONS(T)                                                                   \
    GPUD_INPUT_OPTIONS(T),                                                                     \
    OPTION_LONG(T, resize, "resize", "N", 0, 1, 16384,                                          \
                "resize the shorter side to N (default: the model's; resnet18 256)"),          \
    OPTION_STRING(T, crop, "crop", "N", NULL,                                                   \
                  "centre crop N or HxW (default: the model's; resnet18 224)")

/* Where the job runs and how long it may take. */
#define JOB_RUN_OPTIONS(T)                                                                     \
    OPTION_LONG(T, workers, "workers", "N", 0, 1, 1024,                                         \
                "gpud processes (default 1; --launcher slurm: $SLURM_NTASKS)"),               \
    OPTION_STRING(T, device, "device", "cpu|cuda", "cpu", "compute backend"),                      \
    GPUD_PRECISION_OPTION(T),                                                                  \
    OPTION_LONG(T, threads, "threads", "N", 0, 1, 1024,                                         \
                "compute threads per worker (default: cores / workers; from 8 cores the 7/8 "   \
                "not decoding, split)"),                                                       \
    OPTION_LONG(T, loader_threads, "loader-threads", "N", 0, 1, 1024,                           \
                "JPEG decode threads (default: cores; from 8 cores, one in 8)"),              \
    OPTION_LONG(T, window, "window", "N", 2, 1, 64, "batches in flight per worker"),            \
    OPTION_LONG(T, timeout_s, "timeout", "S", 600, 0, 86400 * 30,                               \
                "fail the job when no sample is accounted for in S seconds, naming what is "   \
                "missing; heartbeats do not count; 0 off"),                                    \
    OPTION_LONG(T, max_time_s, "max-time", "S", 0, 1, 86400 * 365,                              \
                "stop the job after S seconds of wall time (default: none)"),                  \
    OPTION_LONG(T, worker_timeout_s, "worker-timeout", "S", 10, 1, 86400,                       \
                "declare a silent worker dead after S seconds"),                               \
    OPTION_STRING(T, metrics_http, "metrics-http", "H:P", NULL,                                 \
                  "Prometheus metrics at http://H:P/metrics while the job runs"),              \
    OPTION_STRING(T, tap, "tap", "ENDPOINT", NULL,                                              \
                  "publish the live event tap there (default: the job's private ipc folder)"), \
    OPTION_STRING(T, tensorboard, "tensorboard", "DIR", NULL,                                   \
                  "TensorBoard event files of the job's scalars in DIR"),                      \
    ZS_SECURITY_OPTIONS,                                                                       \
    OPTION_FLAG(T, quiet, "quiet", "no progress line"),                                         \
    OPTION_FLAG(T, verbose, "verbose", "every daemon logs more")

/* Where the gpuds run: here, or as one srun step of a Slurm allocation
 * (cli/slurm.h, docs/SLURM.md). */
#define JOB_LAUNCH_OPTIONS(T)                                                                  \
    OPTION_STRING(T, launcher, "launcher", "local|slurm", "local",                              \
                  "local: every daemon on this machine; slurm (inside an allocation): "         \
                  "reducerd, loaderd and reporterd here, one gpud per task with srun"),         \
    OPTION_STRING(T, host, "host", "HOST", NULL,                                                \
                  "slurm: the name the gpuds reach this node by (default: its host name)"),    \
    OPTION_LONG(T, port, "port", "P", 0, 1, 65534,                                              \
                "slurm: reducerd listens on tcp port P and loaderd on P+1 (default: free "    \
                "ports)"),                                                                     \
    OPTION_LONG(T, start_timeout_s, "start-timeout", "S", 120, 1, 86400,                        \
                "slurm: fail the job, naming the node, when a gpud task has not joined S s "   \
                "after srun started")

#endif
