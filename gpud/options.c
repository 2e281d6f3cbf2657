/* gpud's option table and the checks across its options. */
#include "gpud/options.h"

#include "common/cpus.h"
#include "common/file_digest.h"
#include "common/zsecurity.h"
#include "gpud/backend_caps.h"
#include "gpud/optim/optim.h"
#include "proto/messages.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define T gpud_options_t
static const option_t s_rows[] = {
    OPTION_STRING(T, loader, "loader", "EP[,EP...]", NULL,
                  "loaderd's endpoint: batches in, credits out; several loaderds of one dataset "
                  "(loaderd --shard), comma-separated: each gets --window credits"),
    OPTION_STRING(T, reducer, "reducer", "EP", NULL,
                  "reducerd's endpoint: JOIN, results, heartbeats"),
    OPTION_STRING(T, join, "join", "EP", NULL,
                  "--train: reducerd's endpoint, joining a job that may run already (then the "
                  "weights, optimizer state and step come from a live rank; docs/ELASTIC.md)"),
    OPTION_STRING(T, model, "model", "resnet18|resnet34|resnet50|wideresnet|densenet121", NULL,
                  "the architecture"),
    OPTION_STRING(T, weights, "weights", "FILE", NULL,
                  "safetensors with PyTorch state_dict names (--train without it: "
                  "PyTorch-default init from --seed)"),
    GPUD_INPUT_OPTIONS(T),
    OPTION_STRING(T, backend, "backend", "cpu|cuda", "cpu",
                  "compute backend (cuda when built with it)"),
    GPUD_PRECISION_OPTION(T),
    OPTION_LONG(T, threads, "threads", "N", 0, 1, 1024,
                "compute threads (default: the CPUs it may use, divided by "
                "DDPIPE_LOCAL_WORLD_SIZE or LOCAL_WORLD_SIZE, the ranks on this host)"),
    OPTION_LONG(T, micro_batch, "micro-batch", "N", 0, 1, 4096,
                "samples per forward pass, the same on every worker of a job (default: the "
                "model's, 16)"),
    OPTION_LONG(T, window, "window", "N", 2, 1, 64, "batches in flight to this worker"),
    OPTION_LONG(T, rank, "rank", "N", -1, 0, 65535, "ask reducerd for this rank (default: any)"),
    OPTION_STRING(T, name, "name", "NAME", NULL, "worker name (default gpud-HOST-PID)"),
    OPTION_LONG(T, join_timeout_s, "join-timeout", "S", 60, 1, 86400,
                "give up when reducerd does not answer the JOIN, or later cannot be reached "
                "by any heartbeat, for S s"),
    OPTION_LONG(T, fault_after, "fault-after", "N", -1, 0, 1L << 40,
                "test hook: die without answering the batch after N (default: off)"),
    OPTION_FLAG(T, probs, "probs",
                "eval: send every class's softmax probability, quantized to 1e-4 (2 bytes per "
                "class and sample), for reducerd --probs"),
    OPTION_LONG(T, decode_threads, "decode-threads", "N", 0, 1, 1024,
                "threads decoding the files of a loaderd --wire jpeg batch (default: as many as "
                "--threads' default)"),
    OPTION_STRING(T, decode, "decode", "cpu|gpu", "cpu",
                  "where a loaderd --wire jpeg batch's files are decoded: cpu (common/image, "
                  "PIL's pixels) or gpu (--backend cuda: nvJPEG, the resize, crop and flip on "
                  "the device; a rotation's batches on the host; docs/CUDA.md \"Decoding on "
                  "the GPU\")"),
    OPTION_FLAG(T, verbose, "verbose", NULL),
    OPTION_SECTION("training (--train; see docs/TRAINING.md):"),
    OPTION_FLAG(T, train, "train", "one data-parallel rank of a training job"),
    GPUD_TRAINING_OPTIONS(T),
    OPTION_DOUBLE(T, lr, "lr", "LR", 0.01, 0, 1e6, "base learning rate"),
    OPTION_DOUBLE(T, momentum, "momentum", "M", NAN, 0, 1e6, "SGD momentum (default 0)"),
    OPTION_DOUBLE(T, weight_decay, "weight-decay", "WD", NAN, 0, 1e6,
                  "weight decay (default: the optimizer's, 0 or AdamW's 0.01)"),
    OPTION_DOUBLE(T, dampening, "dampening", "D", NAN, -1e6, 1e6, "SGD dampening (default 0)"),
    OPTION_FLAG(T, amsgrad, "amsgrad", "Adam/AdamW/NovoGrad AMSGrad"),
    OPTION_FLAG(T, no_decay_bn_bias, "no-decay-bn-bias",
                "biases and BatchNorm weights get no weight decay"),
    OPTION_DOUBLE(T, gamma, "gamma", "G", 0.1, 0, 1e6, "step schedule: the decay factor"),
    OPTION_DOUBLE(T, eta_min, "eta-min", "LR", 0, 0, 1e6, "cosine schedule: the lowest lr"),
    OPTION_DOUBLE(T, warmup_start_factor, "warmup-start-factor", "F", 0, 1e-12, 1,
                  "lr factor of the warmup's first epoch (default 1/3)"),
    OPTION_STRINGS(T, freeze, "freeze", "PREFIX", 16,
                   "parameters whose name starts with PREFIX get no gradient (repeatable)"),
    OPTION_STRINGS(T, freeze_bn, "freeze-bn", "PREFIX", 16,
                   "BatchNorm layers under PREFIX run in eval mode (repeatable; \"\": all)"),
    OPTION_LONG(T, seed, "seed", "S", 0, 0, LONG_MAX, "initial weights and dropout"),
    OPTION_STRING(T, ring_bind, "ring-bind", "EP", "tcp://127.0.0.1:0",
                  "all-reduce PULL endpoint"),
    OPTION_LONG(T, commit_timeout_s, "commit-timeout", "S", 0, 1, 172800,
                "how long a rank waits for reducerd's answer to its step (COMMIT, MEMBERS or "
                "STOP) before it fails (default 2 x --ring-timeout; give at least --ring-timeout "
                "+ reducerd's --worker-timeout)"),
    OPTION_STRING(T, checkpoint, "checkpoint", "FILE", NULL, "rank 0 writes checkpoints there"),
    OPTION_STRING(T, save_weights, "save-weights", "FILE", NULL,
                  "rank 0 writes the final weights (loadable by --weights)"),
    OPTION_STRING(T, resume, "resume", "FILE", NULL, "continue from a checkpoint (every rank)"),
    OPTION_LONG(T, global_batch, "global-batch-size", "G", 0, 1, 1L << 31,
                "recorded in checkpoints (default: inferred)"),
    OPTION_LONG(T, fault_at_step, "fault-at-step", "S", -1, 0, LONG_MAX,
                "test hook: SIGKILL before train step S (default: off)"),
    OPTION_LONG(T, fault_hold_epoch, "fault-hold-epoch", "E", -1, 0, 1000000,
                "test hook: leave reducerd's EPOCH(E) unhandled until a new membership "
                "generation (default: off)"),
    OPTION_FLAG(T, fault_in_checkpoint, "fault-in-checkpoint",
                "test hook: SIGKILL in the first checkpoint write, after the temporary file, "
                "before the rename"),
    ZS_SECURITY_OPTIONS,
    OPTION_END};
#undef T

const option_table_t gpud_options_table = {
    "gpud",
    "--loader EP --reducer EP --model ARCH --weights FILE [options]\n"
    "       gpud --train --loader EP --reducer EP --model ARCH [--weights FILE] [train options]\n"
    "       gpud --list-models   (the architectures, one a line: name params buffers "
    "in_channels h w fixed_size num_classes, tab-separated)",
    s_rows};

static int check_required(const gpud_options_t *self)
{
    if (!self->loader || !self->reducer || !self->model || (!self->weights && !self->train)) {
        fprintf(stderr, "gpud: --loader, --reducer, --model and --weights (optional with "
                        "--train) are required\n");
        options_usage(&gpud_options_table, stderr);
        return -1;
    }
    if (!self->train && (self->resume || self->checkpoint || self->save_weights)) {
        fprintf(stderr, "gpud: --resume, --checkpoint and --save-weights need --train\n");
        return -1;
    }
    return 0;
}

/* The optimizer's name and the schedule's needs (their values are train.c's). */
static int check_training(const gpud_options_t *self)
{
    optim_kind_t kind;
    if (optim_kind_parse(self->optimizer, &kind) < 0) {
        fprintf(stderr, "gpud: --optimizer: sgd, adam, adamw or novograd, not '%s'\n",
                self->optimizer);
        return -1;
    }
    if (gpud_check_schedule("gpud", self->lr_schedule, self->step_size, self->t_max) < 0)
        return -1;
    return gpud_check_loss_scale("gpud", self->loss_scale);
}

int gpud_check_schedule(const char *cmd, const char *schedule, long step_size, long t_max)
{
    if (strcmp(schedule, "none") && strcmp(schedule, "step") && strcmp(schedule, "cosine")) {
        fprintf(stderr, "%s: --lr-schedule %s: choose none, step or cosine\n", cmd, schedule);
        return -1;
    }
    /* torch.optim.lr_scheduler's StepLR and CosineAnnealingLR need them too */
    if (strcmp(schedule, "step") == 0 && step_size < 1) {
        fprintf(stderr, "%s: --lr-schedule step needs --step-size N (epochs per decay, "
                        "StepLR's step_size)\n", cmd);
        return -1;
    }
    if (strcmp(schedule, "cosine") == 0 && t_max < 1) {
        fprintf(stderr, "%s: --lr-schedule cosine needs --t-max N (epochs of the cosine, "
                        "CosineAnnealingLR's T_max; usually --epochs)\n", cmd);
        return -1;
    }
    return 0;
}

int gpud_check_loss_scale(const char *cmd, double scale)
{
    int e;
    if (frexp(scale, &e) == 0.5)   /* the table bounds it to 2^-126 .. 2^127 */
        return 0;
    fprintf(stderr, "%s: --loss-scale %g: a power of two (65536, 1024, 1, 0.5, ...), so that "
                    "scaling the loss and unscaling the gradients are exact\n", cmd, scale);
    return -1;
}

int gpud_check_precision(const char *cmd, const char *precision)
{
    if (strcmp(precision, "fp32") == 0 || strcmp(precision, "bf16") == 0 ||
        strcmp(precision, "fp16") == 0)
        return 0;
    fprintf(stderr, "%s: --precision %s: fp32, bf16 or fp16\n", cmd, precision);
    return -1;
}

int gpud_check_decode(const char *cmd, const char *decode, const char *device, const char *wire,
                      long chunk)
{
    if (strcmp(decode, "cpu") != 0 && strcmp(decode, "gpu") != 0) {
        fprintf(stderr, "%s: --decode %s: cpu or gpu\n", cmd, decode);
        return -1;
    }
    if (strcmp(decode, "gpu") != 0)
        return 0;
    if (strcmp(device, "cuda") != 0) {
        fprintf(stderr, "%s: --decode gpu decodes on the cuda backend's device: add --%s cuda, "
                        "or leave --decode at cpu\n", cmd,
                strcmp(cmd, "gpud") == 0 ? "backend" : "device");
        return -1;
    }
    if (wire && strcmp(wire, "jpeg") != 0) {
        fprintf(stderr, "%s: --decode gpu decodes the files loaderd sends with --wire jpeg: "
                        "add --wire jpeg\n", cmd);
        return -1;
    }
    if (chunk > 0) {
        fprintf(stderr, "%s: --decode gpu with bitwise training (--chunk): nvJPEG decodes a "
                        "batch of 50 images or fewer another way than a larger one, and a "
                        "rank's batch depends on the worker count, so the pixels and the bytes "
                        "of the weights could too; leave --decode at cpu\n", cmd);
        return -1;
    }
    return 0;
}

int gpud_check_device(const char *cmd, const char *flag, const char *device,
                      const char *precision, int train)
{
    int caps = backend_caps(device);
    if (caps < 0) {
        fprintf(stderr, "%s: %s %s: cpu or cuda\n", cmd, flag, device);
        return -1;
    }
    if (!(caps & BK_CAN_BF16) && strcmp(precision, "bf16") == 0) {
        fprintf(stderr, "%s: --precision bf16 is not implemented on the %s backend yet "
                        "(--precision fp32, or %s cpu)\n", cmd, device, flag);
        return -1;
    }
    if (!(caps & BK_CAN_FP16) && strcmp(precision, "fp16") == 0) {
        fprintf(stderr, "%s: --precision fp16 is not implemented on the %s backend "
                        "(--precision fp32 or bf16)\n", cmd, device);
        return -1;
    }
    if (train && !(caps & BK_CAN_BF16_TRAIN) && strcmp(precision, "bf16") == 0) {
        fprintf(stderr, "%s: training with --precision bf16 is not implemented on the %s "
                        "backend yet (bf16 runs there for eval only): train with --precision "
                        "fp32 on %s for now, or with %s cpu\n", cmd, device, device, flag);
        return -1;
    }
    return 0;
}

int gpud_check_chunk(const char *cmd, const char *device, long chunk, long global_batch)
{
    if (chunk <= 0)
        return 0;
    /* cuda: the same bytes for any W needs the same engines in every gpud
     * (cuDNN's heuristics, deterministic engines only: the default), not
     * per-process timings */
    const char *tune = getenv("DDPIPE_CUDNN_TUNE"), *algo = getenv("DDPIPE_CUDA_ALGO");
    if (strcmp(device, "cuda") == 0 && ((tune && strcmp(tune, "1") == 0) ||
                                        (algo && strcmp(algo, "find") == 0))) {
        fprintf(stderr, "%s: bitwise training (--chunk) with %s would let each gpud time its "
                        "own cuDNN engines, and the bytes depend on them: run it without it "
                        "(heuristics' engines), or tune once and give every gpud the plans file "
                        "(DDPIPE_CUDNN_PLANS, docs/CUDA.md \"Tuned engines\")\n", cmd,
                tune && strcmp(tune, "1") == 0 ? "DDPIPE_CUDNN_TUNE=1" : "DDPIPE_CUDA_ALGO=find");
        return -1;
    }
    if (global_batch > 0 && global_batch % chunk != 0) {
        long down = global_batch / chunk * chunk, up = down + chunk;
        fprintf(stderr, "%s: --chunk %ld: the global batch %ld is not a multiple of it (every "
                        "step but an epoch's last is whole chunks); use a global batch of ",
                cmd, chunk, global_batch);
        if (down > 0)
            fprintf(stderr, "%ld or ", down);
        fprintf(stderr, "%ld, or a --chunk that divides %ld\n", up, global_batch);
        return -1;
    }
    return 0;
}

/* 1 when the whole word w is in /proc/cpuinfo's line that starts with key
 * (the first such line: every core lists the same). */
static int cpuinfo_has(const char *key, const char *w)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return 0;
    char line[8192];
    size_t kl = strlen(key), wl = strlen(w);
    int found = 0;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, key, kl) != 0)
            continue;
        /* the whole word after a blank, followed by a blank or the end */
        for (const char *p = line; !found && (p = strstr(p, w)) != NULL; p += wl)
            found = p > line && (p[-1] == ' ' || p[-1] == '\t') &&
                    (p[wl] == ' ' || p[wl] == '\n' || p[wl] == '\0');
        break;
    }
    fclose(f);
    return found;
}

int gpud_cpu_fast_bf16(void)
{
    return cpuinfo_has("flags", "amx_bf16") ||
           (cpuinfo_has("flags", "avx512_bf16") && cpuinfo_has("vendor_id", "AuthenticAMD"));
}

void gpud_precision_note(const char *precision, FILE *f)
{
    if (strcmp(precision, "fp16") == 0) {   /* no native fp16 kernel on the CPU backends */
        fprintf(f, "fp16: fp16 numerics through the fp32 kernels: no faster than fp32 on a CPU "
                   "(docs/FP16.md)\n");
        return;
    }
    if (strcmp(precision, "bf16") != 0)
        return;
    const char *env = getenv("DDPIPE_BF16");
    if (env && strcmp(env, "native") == 0)
        return;   /* gpud runs oneDNN's bf16 kernels or refuses, and says which */
    if (!gpud_cpu_fast_bf16())
        fprintf(f, "bf16: this CPU has no AMX (amx_bf16); bf16 numerics are emulated on the "
                   "fp32 kernels, faster than oneDNN's bf16 kernels there, no faster than fp32 "
                   "(docs/BF16.md)\n");
    else if (env && strcmp(env, "emulated") == 0)
        fprintf(f, "bf16: DDPIPE_BF16=emulated: bf16 numerics are emulated and no faster than "
                   "fp32\n");
    /* else gpud's probe picks oneDNN's native bf16 kernels (docs/BF16.md "Native") */
}

/* The count of ranks on this host that --threads' default divides the
 * CPUs by (gpud_new): a bad one is a usage error now, not a guess later. */
static int check_local_world(const gpud_options_t *self)
{
    const char *from;
    if ((self->threads && self->decode_threads) || cpus_local_world(&from) > 0)
        return 0;
    fprintf(stderr, "gpud: %s=%s: the number of ranks on this host, 1..4096 (gpud splits the "
                    "CPUs among them); fix it, or give --threads and --decode-threads\n",
            from, getenv(from));
    return -1;
}

int gpud_options_parse(gpud_options_t *self, int argc, char **argv)
{
    if (zs_security_args(&argc, argv) < 0)
        return -1;
    int rc = options_parse(&gpud_options_table, argc, argv, self, NULL);
    if (rc != 0)
        return rc;
    if (self->normalize && strcmp(self->normalize, "none") != 0 &&
        strcmp(self->normalize, "imagenet") != 0) {
        fprintf(stderr, "--normalize: none or imagenet\n");
        return -1;
    }
    if (gpud_check_precision("gpud", self->precision) < 0)
        return -1;
    if (gpud_check_device("gpud", "--backend", self->backend, self->precision,
                          self->train) < 0)
        return -1;
    if (gpud_check_decode("gpud", self->decode, self->backend, NULL, self->chunk) < 0)
        return -1;
    if (self->join && !self->train) {
        fprintf(stderr, "gpud: --join is for a training rank: add --train (an eval worker "
                        "joins with --reducer at any time)\n");
        return -1;
    }
    if (self->join && self->reducer && strcmp(self->join, self->reducer) != 0) {
        fprintf(stderr, "gpud: --join %s and --reducer %s name different reducerds: give one\n",
                self->join, self->reducer);
        return -1;
    }
    if (self->join)
        self->reducer = self->join;
    if (self->chunk && !self->train) {
        fprintf(stderr, "gpud: --chunk (bitwise training) needs --train\n");
        return -1;
    }
    if (gpud_check_chunk("gpud", self->backend, self->chunk, self->global_batch) < 0)
        return -1;
    if (check_local_world(self) < 0)
        return -1;
    if (check_required(self) < 0)
        return -1;
    return self->train ? check_training(self) : 0;
}

/* The settings every rank of a training job must share (docs/ELASTIC.md
 * "Joining"): a joiner whose differ is refused. Not here: what a rank may
 * choose alone (threads, window, names, endpoints, timeouts, --weights and
 * --resume: a joiner gets the state of a live rank). */
static const char *const s_job_wide[] = {
    "model", "channels", "num-classes", "in-channels", "mean", "std", "normalize",
    "precision", "micro-batch", "optimizer", "nesterov", "betas", "eps", "grad-averaging", "lr-schedule",
    "step-size", "t-max", "warmup-epochs", "label-smoothing", "loss-scale", "loss-scale-growth",
    "sync-bn", "chunk", "lr", "momentum",
    "weight-decay", "dampening", "amsgrad", "no-decay-bn-bias", "gamma", "eta-min",
    "warmup-start-factor", "freeze", "freeze-bn", "seed", "global-batch-size", NULL};

typedef struct {
    char *buf;
    size_t cap, len;
} config_text_t;

static void add_flag(void *arg, const char *flag, const char *value)
{
    config_text_t *t = arg;
    int n = snprintf(t->buf + t->len, t->cap - t->len, "%s%s%s%s", t->len ? " " : "", flag,
                     value ? " " : "", value ? value : "");
    if (n > 0 && (size_t)n < t->cap - t->len)
        t->len += (size_t)n;
}

void gpud_options_job_config(const gpud_options_t *self, char *buf, size_t cap)
{
    config_text_t t = {buf, cap, 0};
    buf[0] = '\0';
    options_emit(&gpud_options_table, self, s_job_wide, add_flag, &t);
}

/* The eval transform's other half (resize, crop) is loaderd's: one per job. */
static const char *const s_eval_wide[] = {
    "model", "channels", "num-classes", "in-channels", "mean", "std", "normalize", "precision",
    NULL};

void gpud_options_eval_config(const gpud_options_t *self, char *buf, size_t cap)
{
    config_text_t t = {buf, cap, 0};
    buf[0] = '\0';
    options_emit(&gpud_options_table, self, s_eval_wide, add_flag, &t);
}

int gpud_options_eval_identity(const gpud_options_t *self, char *buf, size_t cap, char *err,
                               size_t errlen)
{
    char digest[FILE_DIGEST_HEX];
    if (!self->weights) {
        snprintf(err, errlen, "no --weights to digest");
        return -1;
    }
    if (file_digest_hex(self->weights, digest, sizeof digest, err, errlen) < 0)
        return -1;
    gpud_options_eval_config(self, buf, cap);
    size_t len = strlen(buf);
    snprintf(buf + len, cap - len, "%s--weights-digest %s", len ? " " : "", digest);
    /* The cuDNN plans file (docs/CUDA.md "Tuned engines") says which
     * engines sum a sample's convolutions: two workers on different files
     * would give one sample different bits. Read from the environment the
     * daemons inherit from ddpipe, which computes the job's identity with
     * this same function; a file that does not exist yet (a tuning run
     * writes it at its end) is no file. */
    const char *plans = getenv("DDPIPE_CUDNN_PLANS");
    if (plans && *plans && access(plans, F_OK) == 0) {
        if (file_digest_hex(plans, digest, sizeof digest, err, errlen) < 0)
            return -1;
        len = strlen(buf);
        snprintf(buf + len, cap - len, " --cudnn-plans-digest %s", digest);
    }
    return 0;
}
