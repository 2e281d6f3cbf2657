/* gpud — one compute worker: holds the model, asks loaderd for batches by
 * credit, runs forward, sends per-sample top-k and loss to reducerd (never
 * averages), and acks the batch to loaderd after the result is sent so a
 * crash between the two only causes a harmless duplicate. */
#include "common/clock.h"
#include "common/flags.h"
#include "common/log.h"
#include "common/zsockopt.h"
#include "gpud/daemon_heartbeat.h"
#include "gpud/model.h"
#include "proto/proto.h"

#include <getopt.h>
#include <signal.h>
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
    volatile uint64_t batches;
    uint64_t samples;
    double compute_s;
    float *logits;
    size_t logits_cap;
    int exit_code;
    bool stopped;
} gpud_t;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: gpud --loader EP --reducer EP --model ARCH --weights FILE [options]\n"
            "  --model resnet18|wideresnet\n"
            "  --weights FILE         safetensors with PyTorch state_dict names\n"
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
            "  --verbose\n");
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

static int parse(int argc, char **argv, opts_t *o)
{
    static struct option lo[] = {
        {"loader", 1, 0, 'L'},     {"reducer", 1, 0, 'r'},     {"model", 1, 0, 'm'},
        {"weights", 1, 0, 'W'},    {"channels", 1, 0, 'c'},    {"num-classes", 1, 0, 'n'},
        {"in-channels", 1, 0, 'i'}, {"backend", 1, 0, 'b'},    {"threads", 1, 0, 'T'},
        {"mean", 1, 0, 'M'},       {"std", 1, 0, 'S'},         {"normalize", 1, 0, 'N'},
        {"window", 1, 0, 'w'},     {"rank", 1, 0, 'R'},        {"name", 1, 0, 'a'},
        {"join-timeout", 1, 0, 'j'}, {"fault-after", 1, 0, 'F'}, {"micro-batch", 1, 0, 'u'},
        {"verbose", 0, 0, 'v'},    {"help", 0, 0, 'h'},        {0, 0, 0, 0}};
    *o = (opts_t){.backend = "cpu", .window = 2, .want_rank = -1, .join_timeout_s = 60,
                  .fault_after = -1, .normalize = -1};
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
        default: usage(stderr); return -1;
        }
        if (rc < 0)
            return -1;
    }
    if (!o->loader || !o->reducer || !o->m.arch || !o->weights) {
        fprintf(stderr, "gpud: --loader, --reducer, --model and --weights are required\n");
        usage(stderr);
        return -1;
    }
    return 0;
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
            log_set_rank(g->rank);
            log_info("joined job %s as rank %d of %d", m.u.welcome.job, g->rank, m.u.welcome.world);
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
    m.u.credit.n_acks = ack ? 1 : 0;
    m.u.credit.acks = (uint64_t *)ack;
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

static int on_batch(gpud_t *g, ddp_batch_t *b)
{
    if (g->o.fault_after >= 0 && g->batches >= (uint64_t)g->o.fault_after) {
        log_warn("--fault-after %ld reached: dying without answering batch %llu (test hook)",
                 g->o.fault_after, (unsigned long long)b->seq);
        raise(SIGKILL);
    }
    if (check_batch_shape(g, b) < 0)
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
                          .n = b->n, .k = (uint32_t)k, .ids = b->ids, .labels = b->labels};
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
    g->batches++;
    g->samples += b->n;
    log_debug("batch %llu: %u samples in %.3fs", (unsigned long long)b->seq, b->n, res->compute_s);
    return send_credit(g, 1, &b->seq);
}

static void on_loader_msg(gpud_t *g)
{
    ddp_msg_t m;
    if (proto_recv(zsock_resolve(g->loader), NULL, &m, &g->stats) != 0)
        return;
    if (m.type == DDP_BATCH) {
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
        log_info("reducerd says stop (%d: %s)", m.u.stop.code, m.u.stop.reason);
        g->stopped = true;
    } else if (m.type != DDP_WELCOME) {
        g->stats.rejected++;
        log_warn("unexpected %s from reducerd: ignored", proto_type_name(m.type));
    }
    ddp_msg_clear(&m);
}

static int run(gpud_t *g)
{
    if (send_credit(g, (uint32_t)g->o.window, NULL) < 0) {
        log_error("cannot ask loaderd for work: %s", zmq_strerror(zmq_errno()));
        return 1;
    }
    zpoller_t *poller = zpoller_new(g->loader, g->reducer, NULL);
    while (!g->stopped && !zs_interrupted()) {
        void *which = zpoller_wait(poller, 500);
        if (which == g->reducer)
            on_reducer_msg(g);
        else if (which == g->loader)
            on_loader_msg(g);
        else if (zpoller_terminated(poller))
            break;
    }
    zpoller_destroy(&poller);
    return g->exit_code;
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
    g->model = model_new(&g->o.m, g->o.backend, g->o.weights, err, sizeof err);
    if (!g->model) {
        log_error("cannot load model %s from %s: %s", g->o.m.arch, g->o.weights, err);
        return -1;
    }
    log_info("model %s (%d classes, %d input channels) on %s ready in %.2fs", g->o.m.arch,
             model_num_classes(g->model), model_in_channels(g->model), g->o.backend, clock_mono_s() - t0);
    g->reducer = zs_connect(ZMQ_DEALER, g->o.reducer, "reducer", g->name);
    g->loader = zs_connect(ZMQ_DEALER, g->o.loader, "loader", g->name);
    if (!g->reducer || !g->loader)
        return -1;
    if (join(g) < 0)
        return -1;
    g->hb = (heartbeat_args_t){.loader = g->o.loader, .reducer = g->o.reducer, .worker = g->name,
                               .rank = g->rank, .interval_ms = 1000, .batches_done = &g->batches};
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
    if (parse(argc, argv, &g.o) < 0)
        return 2;
    settle_normalisation(&g.o);
    log_init("gpud", -1, g.o.verbose);
    zs_install_signals();
    int rc = setup(&g) < 0 ? 1 : (g.stopped ? 0 : run(&g));
    log_info("exiting: %llu batches, %llu samples, %.2fs compute (%.1f img/s); %llu messages, %llu rejected",
             (unsigned long long)g.batches, (unsigned long long)g.samples, g.compute_s,
             g.compute_s > 0 ? g.samples / g.compute_s : 0.0, (unsigned long long)g.stats.received,
             (unsigned long long)g.stats.rejected);
    zactor_destroy(&g.heartbeat);
    zsock_destroy(&g.loader);
    zsock_destroy(&g.reducer);
    model_destroy(&g.model);
    free(g.logits);
    return rc;
}
