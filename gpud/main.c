/* gpud — one compute worker: holds the model, asks loaderd for batches by
 * credit, runs forward, sends per-sample top-k and loss to reducerd (never
 * averages), and acks the batch to loaderd after the result is sent so a
 * crash between the two only causes a harmless duplicate.
 *
 * With --train (docs/TRAINING.md) it is one data-parallel rank: train
 * batches run a train step, the gradients are summed over the ranks' ring
 * and every rank takes the same optimizer step; EPOCH messages from
 * reducerd drive checkpoints and the end of the job. */
#include "common/clock.h"
#include "common/flags.h"
#include "common/log.h"
#include "common/zsecurity.h"
#include "common/zsockopt.h"
#include "gpud/daemon_allreduce.h"
#include "gpud/daemon_heartbeat.h"
#include "gpud/daemon_train.h"
#include "gpud/model.h"
#include "proto/wire.h"

#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    const char *loader;
    const char *reducer;
    const char *weights;
    const char *backend;
    const char *name;
    model_opts_t m;
    float mean[4], std[4];
    int normalize;             /* 0 none, 1 mean/std */
    int mean_set, std_set;
    long window;
    long want_rank;
    long join_timeout_s;
    long fault_after;          /* test hook: die on the batch after this many */
    int verbose;
    /* --train */
    int train;
    trainer_cfg_t tc;
    const char *optimizer;
    double momentum, weight_decay, dampening, eps, beta1, beta2;   /* NAN: the default */
    int nesterov, grad_averaging, amsgrad;
    const char *lr_schedule;
    long step_size, t_max, warmup_epochs;
    double gamma, eta_min, warmup_start_factor;
    int sync_bn;
    const char *ring_bind;
    long ring_timeout_s;
    const char *checkpoint;
    long checkpoint_every;
    const char *save_weights;
    const char *resume;
    long fault_at_step;        /* test hook: SIGKILL before this train step */
    long global_batch;         /* 0: inferred (checkpoint metadata only) */
} opts_t;

typedef struct {
    opts_t o;
    model_t *model;
    zsock_t *loader;
    zsock_t *reducer;
    zactor_t *heartbeat;
    heartbeat_args_t hb;
    proto_stats_t stats;
    char name[DDP_MAX_NAME];
    int32_t rank;
    /* written by the main thread only; the heartbeat actor reads it (C11
     * atomic: a plain or volatile counter read across threads is a race) */
    _Atomic uint64_t batches;
    uint64_t samples;
    double compute_s;
    float *logits;
    size_t logits_cap;
    int exit_code;
    bool stopped;
    /* --train */
    trainer_t *trainer;
    allreduce_t *ar;
    char ring_ep[DDP_MAX_EP];      /* our resolved PULL endpoint (JOIN.ring) */
    char next_ring[DDP_MAX_EP];    /* WELCOME.next_ring */
    ddp_auth_t auth;               /* job, session, token from WELCOME: in every message */
    int32_t world;
    int welcome_train;
    uint64_t expect_step;          /* S of the next train step */
    int64_t cur_epoch;             /* the epoch a resume would continue with */
    int64_t epoch_done;            /* last EPOCH(e) handled; start epoch - 1 */
    int64_t train_end_done;        /* last END(e, TRAIN) handled */
    bool epoch_pending;            /* an EPOCH that came before its END(TRAIN) */
    ddp_epoch_t pending;
    uint32_t streak;
    uint64_t spe, gbatch;          /* steps per epoch, global batch (metadata) */
    bool step_open;                /* a step's buffers changed, its update not applied */
    bool eval_stale;               /* trained since the last model_sync_eval */
    bool fail_ckpt;                /* rank 0 saves the last completed step on exit */
    float *loss;
    int32_t *topk;
    size_t per_sample_cap;
} gpud_t;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: gpud --loader EP --reducer EP --model ARCH --weights FILE [options]\n"
            "       gpud --train --loader EP --reducer EP --model ARCH [--weights FILE] [train options]\n"
            "  --model resnet18|resnet34|resnet50|wideresnet|densenet121\n"
            "  --weights FILE         safetensors with PyTorch state_dict names\n"
            "                         (--train without it: PyTorch-default init from --seed)\n"
            "  --channels a,b,c,d     WideResNet widths (default 16,160,320,640)\n"
            "  --num-classes N        classes (default: from the weights)\n"
            "  --in-channels N        model input channels (default: arch's)\n"
            "  --backend cpu          compute backend (cuda when built with it)\n"
            "  --threads N            compute threads (default: all cores)\n"
            "  --mean a,b,c --std a,b,c   normalisation (default: arch's)\n"
            "  --normalize none|imagenet\n"
            "  --window N             batches in flight to this worker (default 2)\n"
            "  --rank N               ask reducerd for this rank\n"
            "  --name NAME            worker name (default gpud-HOST-PID)\n"
            "  --join-timeout S       give up when reducerd does not answer (default 60)\n"
            "  --verbose\n"
            "training (--train; see docs/TRAINING.md):\n"
            "  --optimizer sgd|adam|adamw|novograd (default sgd)   --lr LR (default 0.01)\n"
            "  --momentum M --weight-decay WD --nesterov --dampening D   (SGD)\n"
            "  --betas a,b --eps E --amsgrad --grad-averaging   (Adam/AdamW/NovoGrad)\n"
            "  --no-decay-bn-bias     biases and BatchNorm weights get no weight decay\n"
            "  --lr-schedule none|step|cosine   --step-size N --gamma G   --t-max N --eta-min LR\n"
            "  --warmup-epochs N --warmup-start-factor F (default 1/3)\n"
            "  --label-smoothing E    --sync-bn (SyncBatchNorm over the ranks)\n"
            "  --freeze PREFIX --freeze-bn PREFIX   (repeatable)\n"
            "  --seed S               init, dropout (default 0)\n"
            "  --ring-bind EP         all-reduce PULL endpoint (default tcp://127.0.0.1:0)\n"
            "  --ring-timeout S       a silent ring peer fails the job after S s (default 60)\n"
            "  --checkpoint FILE --checkpoint-every N (default 1)   rank 0 writes them\n"
            "  --save-weights FILE    rank 0 writes the final weights (loadable by --weights)\n"
            "  --resume FILE          continue from a checkpoint (every rank)\n"
            "  --global-batch-size G  recorded in checkpoints (default: inferred)\n"
            "  --fault-at-step S      test hook: SIGKILL before train step S\n"
            ZS_SECURITY_USAGE);
}

static int parse_floats(const char *name, const char *v, float *out, int *set)
{
    double d[4];
    int n;
    if (flags_doubles(name, v, d, 4, &n) < 0)
        return -1;
    for (int i = 0; i < 4; i++)
        out[i] = (float)d[i < n ? i : n - 1];
    *set = n;
    return 0;
}

enum {
    O_TRAIN = 256, O_OPTIMIZER, O_LR, O_MOMENTUM, O_WD, O_NESTEROV, O_DAMPENING, O_BETAS, O_EPS,
    O_GRAD_AVG, O_AMSGRAD, O_NO_DECAY, O_SCHED, O_STEP_SIZE, O_GAMMA, O_TMAX, O_ETA_MIN,
    O_WARMUP, O_WARMUP_F, O_SMOOTH, O_SYNC_BN, O_FREEZE, O_FREEZE_BN, O_SEED, O_RING_BIND,
    O_RING_TIMEOUT, O_CKPT, O_CKPT_EVERY, O_SAVE_W, O_RESUME, O_FAULT_STEP, O_GBATCH
};

static int add_prefix(const char *flag, const char *v, const char **list, int *n)
{
    if (*n >= TRAINER_MAX_PREFIXES) {
        fprintf(stderr, "gpud: --%s: at most %d prefixes\n", flag, TRAINER_MAX_PREFIXES);
        return -1;
    }
    list[(*n)++] = v;
    return 0;
}

/* The training flags (codes >= O_TRAIN). */
static int parse_train_flag(int c, const char *v, opts_t *o)
{
    double d[2];
    int n = 0;
    long l;
    switch (c) {
    case O_TRAIN: o->train = 1; return 0;
    case O_OPTIMIZER: o->optimizer = v; return 0;
    case O_LR: return flags_double("lr", v, 0, 1e6, &o->tc.lr);
    case O_MOMENTUM: return flags_double("momentum", v, 0, 1e6, &o->momentum);
    case O_WD: return flags_double("weight-decay", v, 0, 1e6, &o->weight_decay);
    case O_NESTEROV: o->nesterov = 1; return 0;
    case O_DAMPENING: return flags_double("dampening", v, -1e6, 1e6, &o->dampening);
    case O_BETAS:
        if (flags_doubles("betas", v, d, 2, &n) < 0)
            return -1;
        if (n != 2) {
            fprintf(stderr, "gpud: --betas: want two values a,b\n");
            return -1;
        }
        o->beta1 = d[0], o->beta2 = d[1];
        return 0;
    case O_EPS: return flags_double("eps", v, 0, 1, &o->eps);
    case O_GRAD_AVG: o->grad_averaging = 1; return 0;
    case O_AMSGRAD: o->amsgrad = 1; return 0;
    case O_NO_DECAY: o->tc.no_decay_bn_bias = 1; return 0;
    case O_SCHED: o->lr_schedule = v; return 0;
    case O_STEP_SIZE: return flags_long("step-size", v, 1, 1000000, &o->step_size);
    case O_GAMMA: return flags_double("gamma", v, 0, 1e6, &o->gamma);
    case O_TMAX: return flags_long("t-max", v, 1, 1000000, &o->t_max);
    case O_ETA_MIN: return flags_double("eta-min", v, 0, 1e6, &o->eta_min);
    case O_WARMUP: return flags_long("warmup-epochs", v, 0, 1000000, &o->warmup_epochs);
    case O_WARMUP_F: return flags_double("warmup-start-factor", v, 1e-12, 1, &o->warmup_start_factor);
    case O_SMOOTH: {
        double e;
        if (flags_double("label-smoothing", v, 0, 1, &e) < 0)
            return -1;
        o->tc.label_smoothing = (float)e;
        return 0;
    }
    case O_SYNC_BN: o->sync_bn = 1; return 0;
    case O_FREEZE: return add_prefix("freeze", v, o->tc.freeze, &o->tc.n_freeze);
    case O_FREEZE_BN: return add_prefix("freeze-bn", v, o->tc.freeze_bn, &o->tc.n_freeze_bn);
    case O_SEED:
        if (flags_long("seed", v, 0, LONG_MAX, &l) < 0)
            return -1;
        o->tc.seed = (uint64_t)l;
        return 0;
    case O_RING_BIND: o->ring_bind = v; return 0;
    case O_RING_TIMEOUT: return flags_long("ring-timeout", v, 1, 86400, &o->ring_timeout_s);
    case O_CKPT: o->checkpoint = v; return 0;
    case O_CKPT_EVERY: return flags_long("checkpoint-every", v, 1, 1000000, &o->checkpoint_every);
    case O_SAVE_W: o->save_weights = v; return 0;
    case O_RESUME: o->resume = v; return 0;
    case O_FAULT_STEP: return flags_long("fault-at-step", v, 0, LONG_MAX, &o->fault_at_step);
    case O_GBATCH: return flags_long("global-batch-size", v, 1, 1L << 31, &o->global_batch);
    default: return -1;
    }
}

/* optimizer + schedule config from the flags, PyTorch's defaults for the
 * rest. */
static int settle_train(opts_t *o)
{
    optim_kind_t kind = OPTIM_SGD;
    if (o->optimizer && optim_kind_parse(o->optimizer, &kind) < 0) {
        fprintf(stderr, "gpud: --optimizer: sgd, adam, adamw or novograd, not '%s'\n", o->optimizer);
        return -1;
    }
    optim_cfg_t *c = &o->tc.optim;
    *c = optim_cfg_default(kind);
    if (!isnan(o->momentum)) c->momentum = o->momentum;
    if (!isnan(o->weight_decay)) c->weight_decay = o->weight_decay;
    if (!isnan(o->dampening)) c->dampening = o->dampening;
    if (!isnan(o->eps)) c->eps = o->eps;
    if (!isnan(o->beta1)) c->beta1 = o->beta1, c->beta2 = o->beta2;
    c->nesterov = o->nesterov;
    c->amsgrad = o->amsgrad;
    c->grad_averaging = o->grad_averaging;
    const char *sched = o->lr_schedule ? o->lr_schedule : "none";
    o->tc.has_main = strcmp(sched, "none") != 0;
    if (strcmp(sched, "step") == 0) {
        o->tc.main = (lr_phase_t){.kind = LR_STEP, .step_size = (int)o->step_size, .gamma = o->gamma};
        if (o->step_size < 1) {
            fprintf(stderr, "gpud: --lr-schedule step needs --step-size N\n");
            return -1;
        }
    } else if (strcmp(sched, "cosine") == 0) {
        o->tc.main = (lr_phase_t){.kind = LR_COSINE, .t_max = (int)o->t_max, .eta_min = o->eta_min};
        if (o->t_max < 1) {
            fprintf(stderr, "gpud: --lr-schedule cosine needs --t-max N\n");
            return -1;
        }
    } else if (o->tc.has_main) {
        fprintf(stderr, "gpud: --lr-schedule: none, step or cosine, not '%s'\n", sched);
        return -1;
    }
    o->tc.warmup_epochs = (int)o->warmup_epochs;
    o->tc.warmup_start_factor = o->warmup_start_factor;
    return 0;
}

static int parse(int argc, char **argv, opts_t *o)
{
    static struct option lo[] = {
        {"loader", 1, 0, 'L'},     {"reducer", 1, 0, 'r'},     {"model", 1, 0, 'm'},
        {"weights", 1, 0, 'W'},    {"channels", 1, 0, 'c'},    {"num-classes", 1, 0, 'n'},
        {"in-channels", 1, 0, 'i'}, {"backend", 1, 0, 'b'},    {"threads", 1, 0, 'T'},
        {"mean", 1, 0, 'M'},       {"std", 1, 0, 'S'},         {"normalize", 1, 0, 'N'},
        {"window", 1, 0, 'w'},     {"rank", 1, 0, 'R'},        {"name", 1, 0, 'a'},
        {"join-timeout", 1, 0, 'j'}, {"fault-after", 1, 0, 'F'}, {"micro-batch", 1, 0, 'u'},
        {"verbose", 0, 0, 'v'},    {"help", 0, 0, 'h'},
        {"train", 0, 0, O_TRAIN},  {"optimizer", 1, 0, O_OPTIMIZER}, {"lr", 1, 0, O_LR},
        {"momentum", 1, 0, O_MOMENTUM}, {"weight-decay", 1, 0, O_WD},
        {"nesterov", 0, 0, O_NESTEROV}, {"dampening", 1, 0, O_DAMPENING},
        {"betas", 1, 0, O_BETAS},  {"eps", 1, 0, O_EPS},       {"grad-averaging", 0, 0, O_GRAD_AVG},
        {"amsgrad", 0, 0, O_AMSGRAD}, {"no-decay-bn-bias", 0, 0, O_NO_DECAY},
        {"lr-schedule", 1, 0, O_SCHED}, {"step-size", 1, 0, O_STEP_SIZE},
        {"gamma", 1, 0, O_GAMMA},  {"t-max", 1, 0, O_TMAX},    {"eta-min", 1, 0, O_ETA_MIN},
        {"warmup-epochs", 1, 0, O_WARMUP}, {"warmup-start-factor", 1, 0, O_WARMUP_F},
        {"label-smoothing", 1, 0, O_SMOOTH}, {"sync-bn", 0, 0, O_SYNC_BN},
        {"freeze", 1, 0, O_FREEZE}, {"freeze-bn", 1, 0, O_FREEZE_BN}, {"seed", 1, 0, O_SEED},
        {"ring-bind", 1, 0, O_RING_BIND}, {"ring-timeout", 1, 0, O_RING_TIMEOUT},
        {"checkpoint", 1, 0, O_CKPT}, {"checkpoint-every", 1, 0, O_CKPT_EVERY},
        {"save-weights", 1, 0, O_SAVE_W}, {"resume", 1, 0, O_RESUME},
        {"fault-at-step", 1, 0, O_FAULT_STEP}, {"global-batch-size", 1, 0, O_GBATCH},
        {0, 0, 0, 0}};
    *o = (opts_t){.backend = "cpu", .window = 2, .want_rank = -1, .join_timeout_s = 60,
                  .fault_after = -1, .normalize = -1, .tc.lr = 0.01, .momentum = NAN,
                  .weight_decay = NAN, .dampening = NAN, .eps = NAN, .beta1 = NAN, .beta2 = NAN,
                  .gamma = 0.1, .ring_bind = "tcp://127.0.0.1:0", .ring_timeout_s = 60,
                  .checkpoint_every = 1, .fault_at_step = -1};
    long v;
    int c;
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        int rc = 0;
        switch (c) {
        case 'L': o->loader = optarg; break;
        case 'r': o->reducer = optarg; break;
        case 'm': o->m.arch = optarg; break;
        case 'W': o->weights = optarg; break;
        case 'b': o->backend = optarg; break;
        case 'a': o->name = optarg; break;
        case 'c': rc = flags_ints("channels", optarg, o->m.channels, 4, &o->m.n_channels);
            if (!rc && o->m.n_channels != 4) { fprintf(stderr, "--channels: want 4 widths\n"); rc = -1; }
            break;
        case 'n': rc = flags_long("num-classes", optarg, 1, DDP_MAX_CLASSES, &v); o->m.num_classes = (int)v; break;
        case 'i': rc = flags_long("in-channels", optarg, 1, 3, &v); o->m.in_channels = (int)v; break;
        case 'T': rc = flags_long("threads", optarg, 1, 1024, &v); o->m.threads = (int)v; break;
        case 'u': rc = flags_long("micro-batch", optarg, 1, 4096, &v); o->m.micro_batch = (int)v; break;
        case 'M': rc = parse_floats("mean", optarg, o->mean, &o->mean_set); break;
        case 'S': rc = parse_floats("std", optarg, o->std, &o->std_set); break;
        case 'N':
            if (strcmp(optarg, "none") == 0) o->normalize = 0;
            else if (strcmp(optarg, "imagenet") == 0) o->normalize = 1;
            else { fprintf(stderr, "--normalize: none or imagenet\n"); rc = -1; }
            break;
        case 'w': rc = flags_long("window", optarg, 1, 64, &o->window); break;
        case 'R': rc = flags_long("rank", optarg, 0, 65535, &o->want_rank); break;
        case 'j': rc = flags_long("join-timeout", optarg, 1, 86400, &o->join_timeout_s); break;
        case 'F': rc = flags_long("fault-after", optarg, 0, 1L << 40, &o->fault_after); break;
        case 'v': o->verbose = 1; break;
        case 'h': usage(stdout); exit(0);
        default:
            if (c >= O_TRAIN) {
                rc = parse_train_flag(c, optarg, o);
                break;
            }
            usage(stderr);
            return -1;
        }
        if (rc < 0)
            return -1;
    }
    if (!o->loader || !o->reducer || !o->m.arch || (!o->weights && !o->train)) {
        fprintf(stderr, "gpud: --loader, --reducer, --model and --weights (optional with "
                "--train) are required\n");
        usage(stderr);
        return -1;
    }
    if (!o->train && (o->resume || o->checkpoint || o->save_weights)) {
        fprintf(stderr, "gpud: --resume, --checkpoint and --save-weights need --train\n");
        return -1;
    }
    o->m.train = o->train;
    return o->train ? settle_train(o) : 0;
}

/* Defaults follow the model: torchvision models use ImageNet statistics,
 * the seed WideResNet plain ToTensor. Explicit flags win. */
static void settle_normalisation(opts_t *o)
{
    static const float in_mean[3] = {0.485f, 0.456f, 0.406f}, in_std[3] = {0.229f, 0.224f, 0.225f};
    if (o->mean_set || o->std_set) {
        if (!o->mean_set)
            for (int i = 0; i < 4; i++) o->mean[i] = 0;
        if (!o->std_set)
            for (int i = 0; i < 4; i++) o->std[i] = 1;
        o->normalize = 1;
        return;
    }
    if (o->normalize < 0)
        o->normalize = strcmp(o->m.arch, "wideresnet") != 0;
    for (int i = 0; i < 4; i++) {
        o->mean[i] = in_mean[i < 3 ? i : 2];
        o->std[i] = in_std[i < 3 ? i : 2];
    }
}

static int join(gpud_t *g)
{
    ddp_msg_t j = {.type = DDP_JOIN};
    j.u.join.role = DDP_ROLE_GPUD;
    j.u.join.pid = (uint32_t)getpid();
    j.u.join.want_rank = (int32_t)g->o.want_rank;
    gethostname(j.u.join.host, sizeof j.u.join.host - 1);
    snprintf(j.u.join.name, sizeof j.u.join.name, "%s", g->name);
    snprintf(j.u.join.backend, sizeof j.u.join.backend, "%s", g->o.backend);
    snprintf(j.u.join.ring, sizeof j.u.join.ring, "%s", g->ring_ep);   /* "" unless --train */
    int64_t deadline = clock_mono_ms() + g->o.join_timeout_s * 1000;
    int64_t next_send = 0;
    zpoller_t *poller = zpoller_new(g->reducer, NULL);
    int rc = -1;
    while (rc < 0 && !zs_interrupted() && clock_mono_ms() < deadline) {
        if (clock_mono_ms() >= next_send) {
            /* re-sending is harmless: reducerd keys peers by name */
            proto_send(zsock_resolve(g->reducer), NULL, &j);
            next_send = clock_mono_ms() + 2000;
        }
        if (zpoller_wait(poller, 200) != g->reducer)
            continue;
        ddp_msg_t m;
        if (proto_recv(zsock_resolve(g->reducer), NULL, &m, &g->stats) != 0)
            continue;
        if (m.type == DDP_WELCOME) {
            g->rank = m.u.welcome.rank;
            g->world = m.u.welcome.world;
            g->welcome_train = m.u.welcome.train;
            snprintf(g->next_ring, sizeof g->next_ring, "%s", m.u.welcome.next_ring);
            snprintf(g->auth.job, sizeof g->auth.job, "%s", m.u.welcome.job);
            g->auth.session = m.u.welcome.session;
            memcpy(g->auth.token, m.u.welcome.token, sizeof g->auth.token);
            if (!g->auth.session)
                log_warn("reducerd's WELCOME carries no session token: loaderd and reducerd "
                         "will refuse this worker's messages (mixed versions?)");
            log_set_rank(g->rank);
            log_info("joined job %s as rank %d of %d%s", m.u.welcome.job, g->rank,
                     m.u.welcome.world, m.u.welcome.train ? " (training)" : "");
            rc = 0;
        } else if (m.type == DDP_STOP) {
            log_info("reducerd says stop before we started: %s", m.u.stop.reason);
            g->stopped = true;
            rc = 0;
        }
        ddp_msg_clear(&m);
    }
    zpoller_destroy(&poller);
    if (rc < 0 && !zs_interrupted())
        log_error("reducerd at %s did not answer within %lds; is it running and reachable?",
                  g->o.reducer, g->o.join_timeout_s);
    return rc;
}

static int send_credit(gpud_t *g, uint32_t credits, const uint64_t *ack)
{
    ddp_msg_t m = {.type = DDP_CREDIT};
    snprintf(m.u.credit.worker, sizeof m.u.credit.worker, "%s", g->name);
    m.u.credit.credits = credits;
    m.u.credit.rank = g->rank;   /* loaderd addresses train shards by rank */
    m.u.credit.n_acks = ack ? 1 : 0;
    m.u.credit.acks = (uint64_t *)ack;
    m.u.credit.auth = g->auth;
    return proto_send(zsock_resolve(g->loader), NULL, &m);
}

static int check_batch_shape(gpud_t *g, const ddp_batch_t *b)
{
    int want_c = model_in_channels(g->model), h = 0, w = 0;
    if (b->c != want_c) {
        log_error("loaderd sends %u-channel images but %s wants %d: start loaderd with --channels %d",
                  b->c, g->o.m.arch, want_c, want_c);
        return -1;
    }
    if (model_input_hw(g->model, &h, &w) && (b->h != h || b->w != w)) {
        log_error("loaderd sends %ux%u images but %s wants %dx%d: fix loaderd's --resize/--crop",
                  b->h, b->w, g->o.m.arch, h, w);
        return -1;
    }
    return 0;
}

static int sync_eval(gpud_t *g);

static int on_batch(gpud_t *g, ddp_batch_t *b)
{
    if (g->o.fault_after >= 0 && atomic_load(&g->batches) >= (uint64_t)g->o.fault_after) {
        log_warn("--fault-after %ld reached: dying without answering batch %llu (test hook)",
                 g->o.fault_after, (unsigned long long)b->seq);
        raise(SIGKILL);
    }
    if (check_batch_shape(g, b) < 0)
        return -1;
    if (g->eval_stale && sync_eval(g) < 0)
        return -1;
    int nc = model_num_classes(g->model);
    size_t need = (size_t)b->n * nc;
    if (need > g->logits_cap) {
        float *p = realloc(g->logits, need * sizeof *p);
        if (!p) {
            log_error("out of memory for %zu logits", need);
            return -1;
        }
        g->logits = p;
        g->logits_cap = need;
    }
    char err[512];
    double t0 = clock_mono_s();
    if (model_forward_u8(g->model, zframe_data(b->pixels), (int)b->n, b->c, b->h, b->w,
                         g->o.normalize ? g->o.mean : NULL, g->o.normalize ? g->o.std : NULL,
                         g->logits, err, sizeof err) < 0) {
        log_error("forward pass failed on batch %llu: %s", (unsigned long long)b->seq, err);
        return -1;
    }
    int k = nc < DDP_MAX_K ? nc : DDP_MAX_K;
    ddp_msg_t r = {.type = DDP_RESULT};
    ddp_result_t *res = &r.u.result;
    *res = (ddp_result_t){.rank = g->rank, .epoch = b->epoch, .phase = b->phase, .seq = b->seq,
                          .n = b->n, .k = (uint32_t)k, .ids = b->ids, .labels = b->labels,
                          .auth = g->auth};
    res->topk = malloc((size_t)b->n * k * sizeof *res->topk);
    res->loss = malloc((size_t)b->n * sizeof *res->loss);
    if (!res->topk || !res->loss) {
        free(res->topk), free(res->loss);
        log_error("out of memory for results");
        return -1;
    }
    model_topk_ce(g->logits, (int)b->n, nc, b->labels, k, res->topk, res->loss);
    res->compute_s = clock_mono_s() - t0;
    g->compute_s += res->compute_s;
    int rc = proto_send(zsock_resolve(g->reducer), NULL, &r);
    free(res->topk), free(res->loss);
    if (rc < 0) {
        log_error("cannot send results to reducerd: %s", zmq_strerror(zmq_errno()));
        return -1;
    }
    atomic_fetch_add(&g->batches, 1);
    g->samples += b->n;
    log_debug("batch %llu: %u samples in %.3fs", (unsigned long long)b->seq, b->n, res->compute_s);
    return send_credit(g, 1, &b->seq);
}

/* ------------------------------------------------------------ training */

static int ring_timeout_ms(const gpud_t *g)
{
    return (int)(g->o.ring_timeout_s * 1000);
}

/* The inference network takes the trained weights (before validation). */
static int sync_eval(gpud_t *g)
{
    char err[512];
    if (model_sync_eval(g->model, err, sizeof err) < 0) {
        log_error("cannot fold the trained weights for validation: %s", err);
        return -1;
    }
    g->eval_stale = false;
    return 0;
}

/* A collective failed: the ring is out of step and the job cannot go on.
 * Rank 0 saves the last completed step on the way out. */
static int ring_failed(gpud_t *g, const char *what, const char *err)
{
    int peer = g->world > 0 ? (g->rank + g->world - 1) % g->world : -1;
    if (zs_interrupted())
        log_error("%s interrupted by a signal: stopping (resume with --resume)", what);
    else
        log_error("all-reduce with rank %d failed (%s): %s; the job cannot continue — resume "
                  "with --resume", peer, what, err);
    g->fail_ckpt = true;
    return -1;
}

static int sync_bn_sum(void *ctx, float *data, size_t n, char *err, size_t errlen)
{
    gpud_t *g = ctx;
    return allreduce_sum(g->ar, data, n, ring_timeout_ms(g), err, errlen);
}

static void fill_info(const gpud_t *g, ckpt_info_t *info)
{
    *info = (ckpt_info_t){.epoch = g->cur_epoch, .step = (int64_t)g->expect_step,
                          .streak = g->streak, .global_batch = (int64_t)g->gbatch,
                          .steps_per_epoch = (int64_t)g->spe};
}

static int write_checkpoint(gpud_t *g, const char *why)
{
    if (g->rank != 0 || !g->o.checkpoint || !g->trainer)
        return 0;
    ckpt_info_t info;
    fill_info(g, &info);
    char err[1024];
    if (trainer_save(g->trainer, g->o.checkpoint, &info, err, sizeof err) < 0) {
        log_error("checkpoint (%s) not written: %s", why, err);
        return -1;
    }
    log_info("checkpoint %s: epoch %lld, step %lld (%s)", g->o.checkpoint, (long long)info.epoch,
             (long long)info.step, why);
    return 0;
}

static int grow_sample_bufs(gpud_t *g, uint32_t n)
{
    size_t nc = (size_t)model_num_classes(g->model);
    if ((size_t)n * nc > g->logits_cap) {
        float *p = realloc(g->logits, (size_t)n * nc * sizeof *p);
        if (!p)
            return -1;
        g->logits = p;
        g->logits_cap = (size_t)n * nc;
    }
    if (n > g->per_sample_cap) {
        float *l = realloc(g->loss, n * sizeof *l);
        if (l)
            g->loss = l;
        int32_t *t = realloc(g->topk, (size_t)n * DDP_MAX_K * sizeof *t);
        if (t)
            g->topk = t;
        if (!l || !t)
            return -1;
        g->per_sample_cap = n;
    }
    return 0;
}

/* RESULT of this rank's shard: the train step's per-sample loss, top-k
 * from its logits. */
static int send_train_result(gpud_t *g, const ddp_batch_t *b, double lr, double compute_s)
{
    int nc = model_num_classes(g->model), k = nc < DDP_MAX_K ? nc : DDP_MAX_K;
    model_topk_ce(g->logits, (int)b->n, nc, b->labels, k, g->topk, NULL);
    ddp_msg_t r = {.type = DDP_RESULT};
    r.u.result = (ddp_result_t){.rank = g->rank, .epoch = b->epoch, .phase = DDP_PHASE_TRAIN,
                                .seq = b->seq, .n = b->n, .k = (uint32_t)k, .ids = b->ids,
                                .labels = b->labels, .topk = g->topk, .loss = g->loss,
                                .compute_s = compute_s, .lr = lr, .step = b->step,
                                .auth = g->auth};
    if (proto_send(zsock_resolve(g->reducer), NULL, &r) < 0) {
        log_error("cannot send results to reducerd: %s", zmq_strerror(zmq_errno()));
        return -1;
    }
    return 0;
}

static int check_train_batch(gpud_t *g, const ddp_batch_t *b)
{
    if (b->step != g->expect_step) {
        log_error("loaderd sends step %llu, checkpoint/state says %llu: restart loaderd with the "
                  "checkpoint's --start-epoch/--start-step (or resume every gpud from the same "
                  "checkpoint)", (unsigned long long)b->step, (unsigned long long)g->expect_step);
        return -1;
    }
    if (b->n > b->global_count || (b->n > 0 && !b->pixels)) {
        log_error("train batch %llu: %u samples, global_count %u: malformed", 
                  (unsigned long long)b->seq, b->n, b->global_count);
        return -1;
    }
    if (grow_sample_bufs(g, b->n) < 0) {
        log_error("out of memory for a %u-sample train batch", b->n);
        return -1;
    }
    return check_batch_shape(g, b);
}

/* The --fault-at-step hook dies as a rank that completed step S-1. The
 * last ring frames of S-1 may still sit in ZeroMQ's queues: they are
 * flushed first (terminating the context waits for them, up to the
 * sockets' linger), else the peers would fail S-1 instead of S — a race a
 * loaded machine loses. */
static void die_at_fault(gpud_t *g)
{
    log_warn("--fault-at-step %ld reached: dying before the step (test hook)", g->o.fault_at_step);
    zactor_destroy(&g->heartbeat);
    allreduce_destroy(&g->ar);
    zsock_destroy(&g->loader);
    zsock_destroy(&g->reducer);
    zsys_shutdown();
    raise(SIGKILL);
}

/* One data-parallel step (docs/TRAINING.md step 5). */
static int on_train_batch(gpud_t *g, ddp_batch_t *b)
{
    if (g->o.fault_at_step >= 0 && b->step == (uint64_t)g->o.fault_at_step)
        die_at_fault(g);
    if (check_train_batch(g, b) < 0)
        return -1;
    g->cur_epoch = b->epoch;
    trainer_batch_t tb = {.pixels = b->n ? zframe_data(b->pixels) : NULL, .n = (int)b->n,
                          .c = b->c, .h = b->h, .w = b->w,
                          .mean = g->o.normalize ? g->o.mean : NULL,
                          .std = g->o.normalize ? g->o.std : NULL, .labels = b->labels,
                          .ids = b->ids, .global_count = b->global_count, .step = b->step};
    char err[1024];
    double t0 = clock_mono_s();
    g->step_open = true;
    if (trainer_forward_backward(g->trainer, &tb, g->loss, g->logits, err, sizeof err) < 0) {
        if (g->o.sync_bn && g->world > 1 && strstr(err, "allreduce"))
            return ring_failed(g, "sync-bn", err);
        log_error("train step %llu failed: %s", (unsigned long long)b->step, err);
        g->fail_ckpt = true;
        return -1;
    }
    double compute_s = clock_mono_s() - t0, lr = trainer_lr(g->trainer, (int)b->epoch);
    g->compute_s += compute_s;
    if (b->n > 0 && send_train_result(g, b, lr, compute_s) < 0)
        return -1;
    if (trainer_reduce(g->trainer, g->ar, ring_timeout_ms(g), err, sizeof err) < 0)
        return ring_failed(g, "gradients", err);
    trainer_apply(g->trainer, (int)b->epoch, b->global_count);
    g->step_open = false;
    g->eval_stale = true;
    g->expect_step++;
    if (!g->o.global_batch && b->global_count > g->gbatch)
        g->gbatch = b->global_count;
    atomic_fetch_add(&g->batches, 1);
    g->samples += b->n;
    log_debug("step %llu (epoch %u): %u of %u samples, lr %g, %.3fs", (unsigned long long)b->step,
              b->epoch, b->n, b->global_count, lr, compute_s);
    return send_credit(g, 1, &b->seq);
}

/* EPOCH(e): remember the decision; rank 0 checkpoints (step 7). */
static void handle_epoch(gpud_t *g, const ddp_epoch_t *ep)
{
    if ((int64_t)ep->epoch <= g->epoch_done)
        return;   /* a duplicate */
    g->epoch_done = ep->epoch;
    g->cur_epoch = (int64_t)ep->epoch + 1;
    g->streak = ep->streak;
    if (g->expect_step % (ep->epoch + 1) == 0)   /* S = (e+1) * spe after epoch e */
        g->spe = g->expect_step / (ep->epoch + 1);
    bool stop = ep->decision == DDP_DECISION_STOP;
    log_info("epoch %u done: %s (streak %u, val top-1 %.4f)%s%s", ep->epoch,
             stop ? "stop" : "continue", ep->streak, ep->val_top1, ep->reason[0] ? ": " : "",
             ep->reason);
    if (stop || (ep->epoch + 1) % (uint64_t)g->o.checkpoint_every == 0)
        write_checkpoint(g, stop ? "final" : "end of epoch");
    if (stop && g->rank == 0 && g->o.save_weights) {
        char err[1024];
        if (trainer_save_weights(g->trainer, g->o.save_weights, err, sizeof err) < 0)
            log_error("final weights not written: %s", err);
        else
            log_info("weights %s written", g->o.save_weights);
    }
}

/* EPOCH(e) is applied only after this rank's END(e, TRAIN): every step of
 * epoch e is then done here, so the checkpoint holds exactly epoch e. */
static void on_epoch_msg(gpud_t *g, const ddp_epoch_t *ep)
{
    if ((int64_t)ep->epoch <= g->train_end_done) {
        handle_epoch(g, ep);
    } else {
        g->pending = *ep;
        g->epoch_pending = true;
    }
}

static void on_stop(gpud_t *g, const ddp_stop_t *st)
{
    if (st->code == 0) {
        log_info("reducerd says stop (0: %s)", st->reason);
    } else {
        log_error("reducerd stops the job (%d): %s", st->code, st->reason);
        g->exit_code = st->code == DDP_STOP_JOB_LOST ? DDP_STOP_JOB_LOST : 1;
        g->fail_ckpt = true;
    }
    g->stopped = true;
}

/* END(e, TRAIN): rank 0's BatchNorm buffers to every rank (as DDP's
 * broadcast_buffers), the inference network refolded for validation. */
static int on_train_end(gpud_t *g, uint32_t epoch)
{
    char err[1024];
    if (trainer_broadcast(g->trainer, g->ar, TRAINER_BN_BUFFERS, ring_timeout_ms(g), err,
                          sizeof err) < 0)
        return ring_failed(g, "BatchNorm buffers", err);
    if (sync_eval(g) < 0)
        return -1;
    g->train_end_done = epoch;
    if (g->epoch_pending && (int64_t)g->pending.epoch <= g->train_end_done) {
        g->epoch_pending = false;
        handle_epoch(g, &g->pending);
    }
    return 0;
}

/* A train batch of epoch e waits until EPOCH(e-1) is handled: only the
 * reducer socket is read meanwhile (the batch stays with us). */
static int wait_epoch(gpud_t *g, int64_t e)
{
    if (g->epoch_pending && (int64_t)g->pending.epoch <= e) {
        g->epoch_pending = false;   /* a batch of e+1 proves this rank finished e */
        handle_epoch(g, &g->pending);
    }
    zpoller_t *poller = zpoller_new(g->reducer, NULL);
    while (g->epoch_done < e && !g->stopped && !zs_interrupted()) {
        if (zpoller_wait(poller, 200) != g->reducer)
            continue;
        ddp_msg_t m;
        if (proto_recv(zsock_resolve(g->reducer), NULL, &m, &g->stats) != 0)
            continue;
        if (m.type == DDP_EPOCH)
            handle_epoch(g, &m.u.epoch);
        else if (m.type == DDP_STOP)
            on_stop(g, &m.u.stop);
        ddp_msg_clear(&m);
    }
    zpoller_destroy(&poller);
    return g->epoch_done >= e ? 0 : -1;
}

static int on_loader_train_msg(gpud_t *g, ddp_msg_t *m)
{
    if (m->type == DDP_BATCH && m->u.batch.phase == DDP_PHASE_TRAIN) {
        if (wait_epoch(g, (int64_t)m->u.batch.epoch - 1) < 0)
            return 0;   /* stopped or interrupted while waiting */
        return on_train_batch(g, &m->u.batch);
    }
    if (m->type == DDP_END && m->u.end.phase == DDP_PHASE_TRAIN)
        return on_train_end(g, m->u.end.epoch);
    return 1;   /* not a training message */
}

/* Ring, SyncBatchNorm, rank 0's initial state on every rank (step 2). */
static int train_start(gpud_t *g)
{
    char err[1024];
    if (!g->welcome_train) {
        log_error("gpud --train joined a reducerd that is not training: start reducerd with --train");
        return -1;
    }
    if (allreduce_connect(g->ar, g->rank, g->world, g->next_ring, err, sizeof err) < 0) {
        log_error("cannot join the all-reduce ring: %s", err);
        return -1;
    }
    allreduce_set_cancel(g->ar, zs_interrupted);
    if (g->o.sync_bn && g->world > 1 && model_set_sync_bn(g->model, sync_bn_sum, g) < 0) {
        log_error("--sync-bn: the model refuses SyncBatchNorm");
        return -1;
    }
    if (trainer_broadcast(g->trainer, g->ar, TRAINER_ALL, ring_timeout_ms(g), err, sizeof err) < 0)
        return ring_failed(g, "initial weights", err);
    g->eval_stale = true;
    log_info("rank %d of %d: %zu trainable floats, next step %llu, ring %s -> %s", g->rank,
             g->world, trainer_grad_floats(g->trainer), (unsigned long long)g->expect_step,
             g->ring_ep, g->world > 1 ? g->next_ring : "(none)");
    return 0;
}

static void on_loader_msg(gpud_t *g)
{
    ddp_msg_t m;
    if (proto_recv(zsock_resolve(g->loader), NULL, &m, &g->stats) != 0)
        return;
    int t = g->trainer ? on_loader_train_msg(g, &m) : 1;
    if (t <= 0) {
        if (t < 0) {
            g->exit_code = 1;
            g->stopped = true;
        }
    } else if (m.type == DDP_BATCH && m.u.batch.phase == DDP_PHASE_TRAIN) {
        g->stats.rejected++;
        log_warn("a train batch, but this gpud runs without --train: ignored");
    } else if (m.type == DDP_BATCH) {
        if (on_batch(g, &m.u.batch) < 0) {
            g->exit_code = 1;
            g->stopped = true;
        }
    } else if (m.type == DDP_END) {
        log_debug("loaderd: epoch %u handed out", m.u.end.epoch);
    } else {
        g->stats.rejected++;
        log_warn("unexpected %s from loaderd: ignored", proto_type_name(m.type));
    }
    ddp_msg_clear(&m);
}

static void on_reducer_msg(gpud_t *g)
{
    ddp_msg_t m;
    if (proto_recv(zsock_resolve(g->reducer), NULL, &m, &g->stats) != 0)
        return;
    if (m.type == DDP_STOP) {
        if (g->trainer) {
            on_stop(g, &m.u.stop);
        } else {
            log_info("reducerd says stop (%d: %s)", m.u.stop.code, m.u.stop.reason);
            if (m.u.stop.code == DDP_STOP_JOB_LOST)
                g->exit_code = DDP_STOP_JOB_LOST;
            g->stopped = true;
        }
    } else if (m.type == DDP_EPOCH && g->trainer) {
        on_epoch_msg(g, &m.u.epoch);
    } else if (m.type != DDP_WELCOME) {
        g->stats.rejected++;
        log_warn("unexpected %s from reducerd: ignored", proto_type_name(m.type));
    }
    ddp_msg_clear(&m);
}

/* The heartbeat actor relays a STOP reducerd sent to the beat socket. */
static void on_heartbeat_msg(gpud_t *g)
{
    char *verb = NULL, *code = NULL, *reason = NULL;
    if (zstr_recvx(g->heartbeat, &verb, &code, &reason, NULL) == 3 && strcmp(verb, "STOP") == 0) {
        ddp_stop_t st = {.code = atoi(code)};
        snprintf(st.reason, sizeof st.reason, "%s", reason);
        on_stop(g, &st);
    }
    zstr_free(&verb);
    zstr_free(&code);
    zstr_free(&reason);
}

static int run(gpud_t *g)
{
    if (g->trainer && train_start(g) < 0)
        return 1;
    if (!g->trainer && g->welcome_train) {
        log_error("reducerd runs a training job but this gpud was started without --train");
        return 1;
    }
    if (send_credit(g, (uint32_t)g->o.window, NULL) < 0) {
        log_error("cannot ask loaderd for work: %s", zmq_strerror(zmq_errno()));
        return 1;
    }
    zpoller_t *poller = zpoller_new(g->loader, g->reducer, g->heartbeat, NULL);
    while (!g->stopped && !zs_interrupted()) {
        void *which = zpoller_wait(poller, 500);
        if (which == g->reducer)
            on_reducer_msg(g);
        else if (which == g->heartbeat)
            on_heartbeat_msg(g);
        else if (which == g->loader)
            on_loader_msg(g);
        else if (zpoller_terminated(poller))
            break;
    }
    zpoller_destroy(&poller);
    if (g->trainer && zs_interrupted()) {
        log_error("interrupted by a signal: stopping (resume with --resume)");
        g->fail_ckpt = true;
        g->exit_code = 1;
    }
    return g->exit_code;
}

/* Optimizer, resume, and the ring's PULL socket (bound before JOIN, which
 * carries its endpoint). */
static int train_setup(gpud_t *g)
{
    char err[1024];
    g->trainer = trainer_new(g->model, &g->o.tc, err, sizeof err);
    if (!g->trainer) {
        log_error("cannot set up training: %s", err);
        return -1;
    }
    g->epoch_done = g->train_end_done = -1;
    g->gbatch = (uint64_t)g->o.global_batch;
    if (g->o.resume) {
        ckpt_info_t info;
        if (trainer_load(g->trainer, g->o.resume, &info, err, sizeof err) < 0) {
            log_error("cannot resume: %s", err);
            return -1;
        }
        if (info.seed != g->o.tc.seed)
            log_warn("%s was trained with --seed %llu, this run has --seed %llu: dropout differs "
                     "from an uninterrupted run", g->o.resume, (unsigned long long)info.seed,
                     (unsigned long long)g->o.tc.seed);
        g->expect_step = (uint64_t)info.step;
        g->cur_epoch = info.epoch;
        g->epoch_done = g->train_end_done = info.epoch - 1;
        g->streak = (uint32_t)info.streak;
        g->spe = (uint64_t)info.steps_per_epoch;
        if (!g->gbatch)
            g->gbatch = (uint64_t)info.global_batch;
        log_info("resuming from %s: epoch %lld, step %lld, streak %lld", g->o.resume,
                 (long long)info.epoch, (long long)info.step, (long long)info.streak);
        ckpt_info_clear(&info);
    }
    if (zs_prepare_ipc(g->o.ring_bind) < 0)   /* ipc:// rings: the directory, path length */
        return -1;
    g->ar = allreduce_bind(g->o.ring_bind, g->ring_ep, sizeof g->ring_ep, err, sizeof err);
    if (!g->ar) {
        log_error("%s", err);
        return -1;
    }
    return 0;
}

static int setup(gpud_t *g)
{
    char err[1024];
    if (g->o.name)
        snprintf(g->name, sizeof g->name, "%s", g->o.name);
    else {
        char host[48] = "host";
        gethostname(host, sizeof host - 1);
        snprintf(g->name, sizeof g->name, "gpud-%s-%d", host, (int)getpid());
    }
    double t0 = clock_mono_s();
    if (g->o.train && !g->o.weights) {   /* training from scratch */
        g->o.m.init = 1;
        g->o.m.init_seed = g->o.tc.seed;
    }
    g->model = model_new(&g->o.m, g->o.backend, g->o.weights, err, sizeof err);
    if (!g->model) {
        log_error("cannot load model %s from %s: %s", g->o.m.arch,
                  g->o.weights ? g->o.weights : "its initial weights", err);
        return -1;
    }
    log_info("model %s (%d classes, %d input channels) on %s ready in %.2fs", g->o.m.arch,
             model_num_classes(g->model), model_in_channels(g->model), g->o.backend, clock_mono_s() - t0);
    if (g->o.train && train_setup(g) < 0)
        return -1;
    g->reducer = zs_connect(ZMQ_DEALER, g->o.reducer, "reducer", g->name);
    g->loader = zs_connect(ZMQ_DEALER, g->o.loader, "loader", g->name);
    if (!g->reducer || !g->loader)
        return -1;
    if (join(g) < 0)
        return -1;
    g->hb = (heartbeat_args_t){.loader = g->o.loader, .reducer = g->o.reducer, .worker = g->name,
                               .rank = g->rank, .interval_ms = 1000, .batches_done = &g->batches,
                               .auth = g->auth};
    g->heartbeat = heartbeat_new(&g->hb);
    if (!g->heartbeat) {
        log_error("cannot start the heartbeat thread");
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    gpud_t g;
    memset(&g, 0, sizeof g);
    g.rank = -1;
    if (zs_security_args(&argc, argv) < 0)
        return 2;
    if (parse(argc, argv, &g.o) < 0)
        return 2;
    settle_normalisation(&g.o);
    log_init("gpud", -1, g.o.verbose);
    zs_install_signals();
    int rc = setup(&g) < 0 ? 1 : (g.stopped ? 0 : run(&g));
    if (g.fail_ckpt && g.trainer) {   /* the last completed step, mid-epoch or not */
        if (g.step_open)
            trainer_restore(g.trainer);
        write_checkpoint(&g, "stopped early");
        rc = rc ? rc : 1;
    }
    log_info("exiting: %llu batches, %llu samples, %.2fs compute (%.1f img/s); %llu messages, %llu rejected",
             (unsigned long long)atomic_load(&g.batches), (unsigned long long)g.samples, g.compute_s,
             g.compute_s > 0 ? g.samples / g.compute_s : 0.0, (unsigned long long)g.stats.received,
             (unsigned long long)g.stats.rejected);
    zactor_destroy(&g.heartbeat);
    zsock_destroy(&g.loader);
    zsock_destroy(&g.reducer);
    trainer_destroy(&g.trainer);
    allreduce_destroy(&g.ar);
    model_destroy(&g.model);
    free(g.logits);
    free(g.loss);
    free(g.topk);
    return rc;
}
