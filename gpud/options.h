/* gpud's options: the table every flag is declared in once (usage,
 * parsing, and the argv a launcher emits from it) and the checks across
 * options. The fields hold the flags as given; what the daemon makes of
 * them (the model's options, the normalisation, the trainer's optimizer
 * and schedule) is gpud.c's and train.c's. */
#ifndef DDP_GPUD_OPTIONS_H
#define DDP_GPUD_OPTIONS_H

#include "common/options.h"
#include "proto/messages.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>

/* Rows `ddpipe eval` and `ddpipe train` declare through gpud's (cli/):
 * each option is declared once, here; a table that uses them names its
 * fields as gpud_options_t does. */
#define GPUD_INPUT_OPTIONS(T)                                                  \
    OPTION_INTS(T, channels, "channels", "a,b,c,d", "16,160,320,640", 4, 4, 0, INT_MAX,    \
                "WideResNet widths"),                                                      \
    OPTION_LONG(T, num_classes, "num-classes", "N", 0, 1, DDP_MAX_CLASSES,                 \
                "classes (default: from the weights)"),                                    \
    OPTION_LONG(T, in_channels, "in-channels", "N", 0, 1, 3,                               \
                "model input channels (default: the architecture's)"),                     \
    OPTION_DOUBLES(T, mean, "mean", "a,b,c", NULL, 1, 4, -1e30, 1e30,                      \
                   "normalisation mean per channel (default: the architecture's)"),        \
    OPTION_DOUBLES(T, std, "std", "a,b,c", NULL, 1, 4, -1e30, 1e30,                        \
                   "normalisation std per channel (default: the architecture's)"),         \
    OPTION_STRING(T, normalize, "normalize", "none|imagenet", NULL,                        \
                  "ImageNet statistics or plain ToTensor (default: the architecture's)")

/* --precision, a row of gpud's table and of `ddpipe eval` / `ddpipe train`'s. */
#define GPUD_PRECISION_OPTION(T)                                               \
    OPTION_STRING(T, precision, "precision", "fp32|bf16|fp16", "fp32",                     \
                  "bf16: PyTorch's CPU autocast numbers (bf16 convolutions and linear "    \
                  "layers, fp32 BatchNorm statistics, loss, optimizer and master weights; "\
                  "native oneDNN bf16 kernels where the CPU has AMX, else emulated; "     \
                  "env DDPIPE_BF16=native|emulated forces one; docs/BF16.md). "           \
                  "fp16: CUDA autocast's float16 numbers (fp16 NHWC activations on "      \
                  "tensor cores with --device cuda, the fp32 kernels on a CPU), training " \
                  "with dynamic loss scaling (docs/FP16.md)")

/* The largest --chunk: one chunk is one batch of the model. */
#define GPUD_MAX_CHUNK DDP_MAX_BATCH

#define GPUD_TRAINING_OPTIONS(T)                                               \
    OPTION_STRING(T, optimizer, "optimizer", "sgd|adam|adamw|novograd", "sgd", "the optimizer"),\
    OPTION_FLAG(T, nesterov, "nesterov", "SGD with Nesterov momentum"),                    \
    OPTION_DOUBLES(T, betas, "betas", "a,b", NULL, 2, 2, -1e30, 1e30,                      \
                   "Adam/AdamW/NovoGrad betas (default: the optimizer's)"),                \
    OPTION_DOUBLE(T, eps, "eps", "E", NAN, 0, 1, "Adam/AdamW/NovoGrad eps (default 1e-8)"),\
    OPTION_FLAG(T, grad_averaging, "grad-averaging", "NovoGrad gradient averaging"),       \
    OPTION_STRING(T, lr_schedule, "lr-schedule", "none|step|cosine", "none",               \
                  "learning-rate schedule after the warmup"),                              \
    OPTION_LONG(T, step_size, "step-size", "N", 0, 1, 1000000,                             \
                "step schedule: epochs per decay (needed by --lr-schedule step)"),         \
    OPTION_LONG(T, t_max, "t-max", "N", 0, 1, 1000000,                                     \
                "cosine schedule: epochs of the cosine (needed by --lr-schedule cosine)"), \
    OPTION_LONG(T, warmup_epochs, "warmup-epochs", "N", 0, 0, 1000000, "linear warmup epochs"),\
    OPTION_DOUBLE(T, label_smoothing, "label-smoothing", "E", 0, 0, 1,                     \
                  "CrossEntropyLoss label smoothing"),                                     \
    OPTION_DOUBLE(T, loss_scale, "loss-scale", "S", 65536, 0x1p-126, 0x1p127,               \
                  "--precision fp16: the initial loss scale, a power of two (GradScaler's "\
                  "init_scale; docs/FP16.md)"),                                            \
    OPTION_LONG(T, loss_scale_growth, "loss-scale-growth", "N", 2000, 1, 1000000000,       \
                "--precision fp16: finite steps before the loss scale doubles "           \
                "(GradScaler's growth_interval)"),                                         \
    OPTION_FLAG(T, sync_bn, "sync-bn", "SyncBatchNorm over the ranks"),                    \
    OPTION_LONG(T, chunk, "chunk", "N", 0, 0, GPUD_MAX_CHUNK,                              \
                "bitwise training: each step's samples run in chunks of N with exact sums, "\
                "so the weights are the same bytes for any worker count (a fixed global "  \
                "batch, a multiple of N; on cuda the sums on the host; 0: off; "          \
                "docs/TRAINING.md \"Bitwise training\")"),                              \
    OPTION_LONG(T, ring_timeout_s, "ring-timeout", "S", 60, 1, 86400,                      \
                "a silent ring peer fails the job after S s"),                             \
    OPTION_LONG(T, checkpoint_every, "checkpoint-every", "N", 1, 1, 1000000,               \
                "a checkpoint every N epochs")

typedef struct {
    const char *loader;          /* loaderd's ROUTER: batches in, credits out */
    const char *reducer;         /* reducerd's ROUTER: JOIN, RESULT, STOP */
    const char *join;            /* --join: the same, for a rank that may join a running job */
    const char *model;           /* the architecture */
    const char *weights;         /* NULL: initial weights (--train only) */
    option_ints_t channels;      /* WideResNet widths */
    long num_classes;            /* 0: from the weights */
    long in_channels;            /* 0: the architecture's */
    const char *backend;
    const char *precision;       /* "fp32" | "bf16" | "fp16" */
    long threads;                /* 0: this rank's share of the CPUs (gpud_new) */
    long micro_batch;            /* 0: the model's default */
    option_doubles_t mean, std;  /* none given: the architecture's normalisation */
    const char *normalize;       /* "none" | "imagenet"; NULL: the architecture's */
    long window;
    long rank;                   /* -1: reducerd chooses */
    const char *name;            /* NULL: gpud-HOST-PID */
    long join_timeout_s;
    int probs;                   /* eval: send the quantized softmax in each RESULT */
    long decode_threads;         /* --wire jpeg batches: decode threads; 0: as threads' 0 */
    const char *decode;          /* --wire jpeg batches decoded on: "cpu" | "gpu" */
    long fault_after;            /* test hook: die on the batch after this many; -1 off */
    int verbose;
    /* training (--train) */
    int train;
    const char *optimizer;       /* sgd | adam | adamw | novograd */
    double lr;
    double momentum, weight_decay, dampening, eps;   /* NAN: the optimizer's default */
    option_doubles_t betas;      /* none given: the optimizer's default */
    int nesterov, grad_averaging, amsgrad;
    int no_decay_bn_bias;
    const char *lr_schedule;     /* none | step | cosine */
    long step_size, t_max;       /* 0: not given */
    double gamma, eta_min;
    long warmup_epochs;
    double warmup_start_factor;  /* 0: LinearLR's default 1/3 */
    double label_smoothing;
    double loss_scale;           /* --precision fp16: the initial loss scale */
    long loss_scale_growth;      /* --precision fp16: GradScaler's growth_interval */
    int sync_bn;
    long chunk;                  /* --chunk: > 0 bitwise training (chunks of this many); 0 off */
    option_strings_t freeze, freeze_bn;   /* parameter / BatchNorm name prefixes */
    long seed;
    const char *ring_bind;
    long ring_timeout_s;
    long commit_timeout_s;       /* 0: 2 x ring_timeout_s */
    const char *checkpoint;
    long checkpoint_every;
    const char *save_weights;
    const char *resume;
    long fault_at_step;          /* test hook: SIGKILL before this train step; -1 off */
    int fault_in_checkpoint;     /* test hook: SIGKILL inside the first checkpoint write */
    long fault_hold_epoch;       /* test hook: EPOCH(this) held in generation 0; -1 off */
    long global_batch;           /* 0: inferred (checkpoint metadata only) */
} gpud_options_t;

/* Every option of gpud, for its usage and for a launcher's options_emit
 * (with a filled gpud_options_t). */
extern const option_table_t gpud_options_table;

/* Takes the security options (zs_security_args), then the table's, then
 * checks them together. 0; 1 after --help (exit 0); -1 after the error
 * went to stderr (exit 2). */
int gpud_options_parse(gpud_options_t *self, int argc, char **argv);
/* 0 when precision is "fp32", "bf16" or "fp16"; else -1 after "CMD:
 * --precision X: fp32, bf16 or fp16" went to stderr. */
int gpud_check_precision(const char *cmd, const char *precision);
/* 0 when --loss-scale is a power of two; else -1 after the error went to
 * stderr. */
int gpud_check_loss_scale(const char *cmd, double scale);
/* --lr-schedule none|step|cosine, with the --step-size or --t-max it needs;
 * 0, or -1 after the error went to stderr prefixed with cmd. */
int gpud_check_schedule(const char *cmd, const char *schedule, long step_size, long t_max);
/* 0 when device (gpud --backend, ddpipe --device: FLAG) is cpu, ref or cuda
 * and the precision runs there for this job (train: a training job; bf16
 * on cuda is eval only); else -1 after the error went to stderr. Whether
 * this build has cuda, gpud says when it starts. */
int gpud_check_device(const char *cmd, const char *flag, const char *device,
                      const char *precision, int train);
/* --decode cpu|gpu: gpu needs device (gpud --backend, ddpipe --device)
 * cuda, wire (ddpipe's --wire; NULL: not known here, gpud) jpeg and no
 * bitwise training (chunk 0); 0, or -1 after the error went to stderr
 * prefixed with cmd. Whether the build and machine have nvJPEG, gpud says
 * when it starts. */
int gpud_check_decode(const char *cmd, const char *decode, const char *device, const char *wire,
                      long chunk);
/* --chunk N (bitwise training) against the rest of a training job: 0 when
 * chunk is 0, or when global_batch (0: not known here) is a multiple of it
 * and, on device (gpud --backend, ddpipe --device) cuda, no gpud times its
 * own cuDNN engines (DDPIPE_CUDNN_TUNE=1, DDPIPE_CUDA_ALGO=find); else -1
 * after the error went to stderr. */
int gpud_check_chunk(const char *cmd, const char *device, long chunk, long global_batch);
/* 1 when /proc/cpuinfo lists amx_bf16, or avx512_bf16 on an AMD CPU (bf16
 * runs natively, by default, and fast: the probe's level 3, backend.h), 0
 * when not or unreadable. */
int gpud_cpu_fast_bf16(void);
/* --precision bf16: the one line saying that bf16 is emulated and no faster
 * (no bf16 instructions here, or DDPIPE_BF16=emulated), to f (the launcher
 * says it once); fp16 on a CPU: that it runs on the fp32 kernels. Nothing
 * for fp32, nor where gpud runs bf16 natively. */
void gpud_precision_note(const char *precision, FILE *f);
/* The job-wide training settings as flags ("--model wideresnet --lr 0.1
 * ..."), the same text on every rank of a job (JOIN.config). */
void gpud_options_job_config(const gpud_options_t *self, char *buf, size_t cap);
/* The same for an eval worker: what, besides the weights, makes its
 * predictions differ (architecture, input, normalisation, precision). */
void gpud_options_eval_config(const gpud_options_t *self, char *buf, size_t cap);
/* What an eval worker proves in JOIN `config` (docs/SECURITY.md "Another
 * job's daemons"): gpud_options_eval_config and "--weights-digest HEX", the
 * BLAKE2b-256 of the --weights file, and "--cudnn-plans-digest HEX" where
 * the environment names an existing DDPIPE_CUDNN_PLANS file. 0, or -1 with
 * the reason in err. */
int gpud_options_eval_identity(const gpud_options_t *self, char *buf, size_t cap, char *err,
                               size_t errlen);

#endif
