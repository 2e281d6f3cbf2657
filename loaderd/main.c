/* loaderd — scans the dataset, plans the epoch, decodes and transforms
 * images on a thread pool and hands uint8 batches to whichever gpud has
 * credit. A batch a dead worker never acked is decoded and sent again;
 * reducerd ignores what was already counted, so the count stays exact.
 *
 * With --train it drives the epochs of docs/TRAINING.md instead: every
 * global step's shards go to their ranks (daemon_train.c), then the
 * validation set goes out as in eval mode, then reducerd's EPOCH decides
 * whether another epoch follows.
 */
#include "common/clock.h"
#include "common/flags.h"
#include "common/log.h"
#include "common/zsecurity.h"
#include "common/zsockopt.h"
#include "loaderd/daemon_loader.h"
#include "proto/ratelog.h"
#include "proto/wire.h"

#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *f)
{
    fprintf(f,
            "usage: loaderd --data PATH --bind ENDPOINT --reducer ENDPOINT [options]\n"
            "  --data PATH          ImageFolder directory or idx:PREFIX (training: the train set)\n"
            "  --bind EP            ROUTER the gpud workers connect to\n"
            "  --reducer EP         reducerd's ROUTER (plan and failed samples go there)\n"
            "  --batch-size N       samples per batch (default 64; training: per worker)\n"
            "  --threads N          decode threads (default: all cores)\n"
            "  --prefetch N         batches decoded ahead (default 4; bounds memory)\n"
            "  --resize N           resize the shorter side to N (PIL bilinear + antialias)\n"
            "  --crop N|HxW         center crop (training: also the RandomResizedCrop size)\n"
            "  --channels 1|3       channels the model wants (gray<->RGB as torchvision)\n"
            "  --no-dct-scaling     decode JPEGs at full size before resizing (exact PIL parity)\n"
            "  --limit N            use only the first N samples of the dataset(s)\n"
            "  --predictions        send sample paths to reducerd (for predictions.csv)\n"
            "  --worker-timeout S   a gpud that leaves a batch unanswered this long (heartbeats do\n"
            "                       not count) or is silent this long is dropped and its batches\n"
            "                       go to the others (default 10)\n"
            "  --verbose\n"
            "training (docs/TRAINING.md):\n"
            "  --train              train: epochs of global steps sharded over the ranks\n"
            "  --val PATH           validation set, eval transform, after each epoch\n"
            "  --workers W          ranks (default 1)\n"
            "  --global-batch-size G  samples per global step (default --batch-size * W)\n"
            "  --epochs E           most epochs (default 1; reducerd decides the stop)\n"
            "  --seed S             shuffle and augmentation seed (default 0)\n"
            "  --augment none|flip|crop-flip  (default crop-flip, none for idx:)\n"
            "  --rotate DEG         RandomRotation((-DEG, DEG)) after the other transforms\n"
            "  --start-epoch E      resume: first epoch (default 0)\n"
            "  --start-step K       resume: first global step of the first epoch (default 0)\n"
            ZS_SECURITY_USAGE);
}

static int parse_crop(const char *v, transform_t *t)
{
    int h, w;
    char extra;
    if (sscanf(v, "%dx%d%c", &h, &w, &extra) == 2 && h > 0 && w > 0 && h <= 16384 && w <= 16384) {
        t->crop_h = h;
        t->crop_w = w;
        return 0;
    }
    long s;
    if (flags_long("crop", v, 1, 16384, &s) < 0)
        return -1;
    t->crop_h = t->crop_w = (int)s;
    return 0;
}

static int parse_augment(const char *v, int *out)
{
    static const char *names[] = {"none", "flip", "crop-flip"};
    for (int i = 0; i < 3; i++)
        if (strcmp(v, names[i]) == 0) {
            *out = i;
            return 0;
        }
    fprintf(stderr, "loaderd: --augment: '%s' is not one of none, flip, crop-flip\n", v);
    return -1;
}

/* The training flags, given without --train, are a mistake worth naming. */
static int check_train_opts(loader_opts_t *o, int train_flags)
{
    if (!o->train) {
        if (train_flags) {
            fprintf(stderr, "loaderd: --val, --workers, --global-batch-size, --epochs, --seed, "
                            "--augment, --rotate, --start-epoch and --start-step need --train\n");
            return -1;
        }
        return 0;
    }
    if (!o->global_batch) {
        if (o->batch_size > LONG_MAX / o->workers) {
            fprintf(stderr, "loaderd: --batch-size x --workers overflows\n");
            return -1;
        }
        o->global_batch = o->batch_size * o->workers;
    }
    /* the largest shard is ceil(G / W) samples: it must fit one BATCH */
    if ((o->global_batch + o->workers - 1) / o->workers > DDP_MAX_BATCH) {
        fprintf(stderr, "loaderd: a global batch of %ld over %ld workers gives shards over %d "
                        "samples; use more workers or a smaller --global-batch-size\n",
                o->global_batch, o->workers, DDP_MAX_BATCH);
        return -1;
    }
    if (o->start_epoch >= o->epochs) {
        fprintf(stderr, "loaderd: --start-epoch %ld is not below --epochs %ld: nothing to train\n",
                o->start_epoch, o->epochs);
        return -1;
    }
    return 0;
}

static int parse(int argc, char **argv, loader_opts_t *o)
{
    static struct option lo[] = {
        {"data", 1, 0, 'D'},      {"bind", 1, 0, 'b'},        {"reducer", 1, 0, 'r'},
        {"batch-size", 1, 0, 'B'}, {"threads", 1, 0, 'T'},    {"prefetch", 1, 0, 'p'},
        {"resize", 1, 0, 'R'},    {"crop", 1, 0, 'C'},        {"channels", 1, 0, 'c'},
        {"no-dct-scaling", 0, 0, 'S'}, {"limit", 1, 0, 'l'},  {"predictions", 0, 0, 'P'},
        {"worker-timeout", 1, 0, 't'}, {"verbose", 0, 0, 'v'}, {"help", 0, 0, 'h'},
        {"train", 0, 0, 'X'},     {"val", 1, 0, 'V'},         {"workers", 1, 0, 'W'},
        {"global-batch-size", 1, 0, 'G'}, {"epochs", 1, 0, 'E'}, {"seed", 1, 0, 's'},
        {"augment", 1, 0, 'A'},   {"rotate", 1, 0, 'o'},      {"start-epoch", 1, 0, 'e'},
        {"start-step", 1, 0, 'k'}, {0, 0, 0, 0}};
    *o = (loader_opts_t){.batch_size = 64, .prefetch = 4, .worker_timeout_s = 10, .limit = -1,
                         .workers = 1, .epochs = 1, .augment = AUG_DEFAULT};
    o->t.channels = 0;
    o->t.dct_scaling = 1;
    long v;
    int c, train_flags = 0;
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        int rc = 0;
        train_flags += strchr("VWGEsAoek", c) != NULL;
        switch (c) {
        case 'D': o->data = optarg; break;
        case 'b': o->bind = optarg; break;
        case 'r': o->reducer = optarg; break;
        case 'B': rc = flags_long("batch-size", optarg, 1, DDP_MAX_BATCH, &o->batch_size); break;
        case 'T': rc = flags_long("threads", optarg, 1, 1024, &o->threads); break;
        case 'p': rc = flags_long("prefetch", optarg, 1, LOADER_MAX_READY, &o->prefetch); break;
        case 'R': rc = flags_long("resize", optarg, 1, 16384, &v); o->t.resize = (int)v; break;
        case 'C': rc = parse_crop(optarg, &o->t); break;
        case 'c': rc = flags_long("channels", optarg, 1, 3, &v); o->t.channels = (int)v;
            if (!rc && v == 2) { fprintf(stderr, "--channels: 1 or 3\n"); rc = -1; }
            break;
        case 'S': o->t.dct_scaling = 0; break;
        case 'l': rc = flags_long("limit", optarg, 0, (long)1 << 40, &o->limit); break;
        case 'P': o->predictions = 1; break;
        case 't': rc = flags_long("worker-timeout", optarg, 1, 86400, &o->worker_timeout_s); break;
        case 'v': o->verbose = 1; break;
        case 'X': o->train = 1; break;
        case 'V': o->val = optarg; break;
        case 'W': rc = flags_long("workers", optarg, 1, 4096, &o->workers); break;
        case 'G': rc = flags_long("global-batch-size", optarg, 1, (long)1 << 40, &o->global_batch); break;
        case 'E': rc = flags_long("epochs", optarg, 1, 1000000, &o->epochs); break;
        case 's': rc = flags_long("seed", optarg, 0, LONG_MAX, &o->seed); break;
        case 'A': rc = parse_augment(optarg, &o->augment); break;
        case 'o': rc = flags_double("rotate", optarg, 0, 360, &o->rotate); break;
        case 'e': rc = flags_long("start-epoch", optarg, 0, 1000000, &o->start_epoch); break;
        case 'k': rc = flags_long("start-step", optarg, 0, (long)1 << 40, &o->start_step); break;
        case 'h': usage(stdout); exit(0);
        default: usage(stderr); return -1;
        }
        if (rc < 0)
            return -1;
    }
    if (!o->data || !o->bind || !o->reducer) {
        fprintf(stderr, "loaderd: --data, --bind and --reducer are required\n");
        usage(stderr);
        return -1;
    }
    if (!o->threads) {
        long nc = sysconf(_SC_NPROCESSORS_ONLN);
        o->threads = nc > 0 ? nc : 1;
    }
    return check_train_opts(o, train_flags);
}

/* ---- plans ---------------------------------------------------------------- */

static int send_join(loader_t *L)
{
    ddp_msg_t j = {.type = DDP_JOIN};
    j.u.join.role = DDP_ROLE_LOADER;
    j.u.join.pid = (uint32_t)getpid();
    j.u.join.want_rank = -1;
    char host[DDP_MAX_NAME] = "?";
    gethostname(host, sizeof host - 1);
    snprintf(j.u.join.host, sizeof j.u.join.host, "%s", host);
    snprintf(L->name, sizeof L->name, "loaderd-%.40s-%d", host, (int)getpid());
    snprintf(j.u.join.name, sizeof j.u.join.name, "%s", L->name);
    if (proto_send(zsock_resolve(L->reducer), NULL, &j) < 0) {
        log_error("cannot send JOIN to reducerd: %s", zmq_strerror(zmq_errno()));
        return -1;
    }
    return 0;
}

/* The plan of the current (epoch, phase): the train set (skipping what a
 * resumed run already trained of its first epoch) or the eval/val set. */
static int send_plan(loader_t *L)
{
    bool train = L->phase == DDP_PHASE_TRAIN;
    const dataset_t *ds = train ? L->ds : L->eval_ds;
    ddp_msg_t p = {.type = DDP_PLAN};
    ddp_plan_t *pl = &p.u.plan;
    pl->epoch = L->epoch;
    pl->phase = L->phase;
    pl->n = train ? L->n : L->eval_n;
    if (train && L->epoch == (uint32_t)L->o.start_epoch) {
        uint64_t skip = (uint64_t)L->o.start_step * L->global_batch;
        pl->skip = skip < pl->n ? skip : pl->n;
    }
    pl->num_classes = dataset_num_classes(ds);
    snprintf(pl->dataset, sizeof pl->dataset, "%s", ds == L->val_ds ? L->o.val : L->o.data);
    if (L->trusted)
        pl->auth = L->auth;
    /* borrow the dataset's strings: the encoder only reads them */
    bool paths = L->o.predictions && !train;
    pl->class_names = calloc(pl->num_classes ? pl->num_classes : 1, sizeof(char *));
    if (paths)
        pl->paths = calloc(pl->n ? pl->n : 1, sizeof(char *));
    if (!pl->class_names || (paths && !pl->paths)) {
        free(pl->class_names);
        free(pl->paths);
        log_error("out of memory building the plan");
        return -1;
    }
    for (uint32_t c = 0; c < pl->num_classes; c++)
        pl->class_names[c] = (char *)dataset_class_name(ds, c);
    for (uint64_t i = 0; pl->paths && i < pl->n; i++)
        pl->paths[i] = (char *)dataset_path(ds, i);
    int rc = proto_send(zsock_resolve(L->reducer), NULL, &p);
    free(pl->class_names);
    free(pl->paths);
    if (rc < 0)
        log_error("cannot send the plan to reducerd: %s", zmq_strerror(zmq_errno()));
    else
        L->plans_sent++;
    return rc;
}

/* Sends the plan of (epoch, phase) and waits (ST_PLAN) for its ack:
 * nothing is handed out before reducerd has the plan, or the results of
 * samples it has not planned would be dropped. */
static int start_plan(loader_t *L, uint32_t epoch, uint8_t phase)
{
    L->epoch = epoch;
    L->phase = phase;
    L->ack_target = L->plans_sent + 1;
    L->next_plan_ms = clock_mono_ms() + 2000;
    L->state = ST_PLAN;
    return send_plan(L);
}

static bool plan_acked(const loader_t *L) { return L->acks_got >= L->ack_target; }

/* ST_PLAN: reducerd may have started after us, or restarted: plan again. */
static int plan_retry(loader_t *L)
{
    if (clock_mono_ms() < L->next_plan_ms)
        return 0;
    log_info("waiting for reducerd at %s to take the plan (epoch %u, %s)", L->o.reducer, L->epoch,
             L->phase == DDP_PHASE_TRAIN ? "train" : "eval");
    L->next_plan_ms = clock_mono_ms() + 5000;
    return send_join(L) < 0 || send_plan(L) < 0 ? -1 : 0;
}

/* ---- failed samples, END ---------------------------------------------------- */

void loader_report_failed(loader_t *L, const dataset_t *ds, uint32_t epoch, uint8_t phase,
                          uint64_t id, const char *why)
{
    const char *path = dataset_path(ds, id);
    log_warn("cannot load %s: %s (counted as failed)", path, why);
    ddp_msg_t f = {.type = DDP_FAILED};
    f.u.failed.epoch = epoch;
    f.u.failed.phase = phase;
    f.u.failed.id = id;
    snprintf(f.u.failed.path, sizeof f.u.failed.path, "%s", path);
    snprintf(f.u.failed.reason, sizeof f.u.failed.reason, "%s", why);
    f.u.failed.auth = L->auth;
    if (proto_send(zsock_resolve(L->reducer), NULL, &f) < 0)
        log_error("cannot report a failed sample to reducerd: %s", zmq_strerror(zmq_errno()));
    L->failed++;
}

void loader_send_issued(loader_t *L, const ddp_batch_t *b, const char *name)
{
    if (b->n == 0)
        return; /* an empty train shard has no RESULT to match */
    ddp_msg_t m = {.type = DDP_ISSUED};
    m.u.issued = (ddp_issued_t){.seq = b->seq, .epoch = b->epoch, .phase = b->phase,
                                .rank = dispatch_worker_rank(L->dispatch, name), .n = b->n,
                                .ids = b->ids, .labels = b->labels,
                                .rejected = L->stats.rejected, .auth = L->auth};
    if (m.u.issued.rank < 0)
        m.u.issued.rank = 0; /* cannot happen: only verified workers (with a rank) get batches */
    if (proto_send(zsock_resolve(L->reducer), NULL, &m) < 0)
        log_error("cannot tell reducerd batch %llu was issued: %s (its RESULT will be refused)",
                  (unsigned long long)b->seq, zmq_strerror(zmq_errno()));
}

/* Every second once trusted: reducerd keeps the loader role bound to us
 * while it hears from us, and learns our rejected count. */
static void loader_beat(loader_t *L)
{
    int64_t now = clock_mono_ms();
    if (!L->trusted || now < L->next_beat_ms)
        return;
    L->next_beat_ms = now + 1000;
    ddp_msg_t m = {.type = DDP_HEARTBEAT};
    snprintf(m.u.heartbeat.worker, sizeof m.u.heartbeat.worker, "%s", L->name);
    m.u.heartbeat.rank = -1;
    m.u.heartbeat.rejected = L->stats.rejected;
    m.u.heartbeat.auth = L->auth;
    if (proto_send(zsock_resolve(L->reducer), NULL, &m) < 0)
        log_debug("heartbeat to reducerd not sent: %s", zmq_strerror(zmq_errno()));
}

void loader_broadcast_end(loader_t *L, uint32_t epoch, uint8_t phase)
{
    ddp_msg_t e = {.type = DDP_END};
    e.u.end.epoch = epoch;
    e.u.end.phase = phase;
    bool alive;
    zframe_t *identity;
    for (int i = 0; (identity = dispatch_worker_identity(L->dispatch, i, &alive)); i++) {
        if (!alive)
            continue;
        zframe_t *id = zframe_dup(identity);
        if (proto_send(zsock_resolve(L->router), id, &e) < 0)
            log_warn("cannot send END to a worker: %s", zmq_strerror(zmq_errno()));
        zframe_destroy(&id);
    }
}

/* ---- eval / validation: decode ------------------------------------------------ */

typedef struct {
    loader_t *L;
    batch_range_t r;
    uint8_t *pixels;
    size_t sample_bytes;
    int *ok;
    char (*why)[256];
} decode_job_t;

static void decode_one(void *ctx, int i)
{
    decode_job_t *job = ctx;
    loader_t *L = job->L;
    uint64_t id = job->r.first + (uint64_t)i;
    job->ok[i] = sample_load(L->eval_ds, id, &L->o.t, job->pixels + (size_t)i * job->sample_bytes,
                             L->eval_h, L->eval_w, job->why[i], sizeof job->why[i]) == 0;
}

/* Decode range r into a ready batch; failed samples are reported and left out. */
static int decode_batch(loader_t *L, batch_range_t r, ready_t *out)
{
    int c = L->o.t.channels;
    size_t sb = (size_t)c * L->eval_h * L->eval_w;
    zframe_t *frame = zframe_new(NULL, sb * r.count);
    int *ok = calloc(r.count, sizeof *ok);
    char(*why)[256] = calloc(r.count, sizeof *why);
    uint64_t *ids = calloc(r.count, sizeof *ids);
    int32_t *labels = calloc(r.count, sizeof *labels);
    if (!frame || !ok || !why || !ids || !labels) {
        zframe_destroy(&frame);
        free(ok), free(why), free(ids), free(labels);
        log_error("out of memory for a batch of %u samples; lower --batch-size or --prefetch", r.count);
        return -1;
    }
    decode_job_t job = {.L = L, .r = r, .pixels = zframe_data(frame), .sample_bytes = sb, .ok = ok, .why = why};
    pool_for(L->pool, (int)r.count, decode_one, &job);
    uint32_t n = 0;
    for (uint32_t i = 0; i < r.count; i++) {
        uint64_t id = r.first + i;
        if (!ok[i]) {
            loader_report_failed(L, L->eval_ds, L->epoch, DDP_PHASE_EVAL, id, why[i]);
            continue;
        }
        if (n != i)
            memmove(job.pixels + n * sb, job.pixels + i * sb, sb);
        ids[n] = id;
        labels[n] = dataset_label(L->eval_ds, id);
        n++;
    }
    free(ok);
    free(why);
    out->range = r;
    out->batch = (ddp_batch_t){.epoch = L->epoch, .phase = DDP_PHASE_EVAL, .n = n, .c = (uint16_t)c,
                               .h = (uint16_t)L->eval_h, .w = (uint16_t)L->eval_w, .ids = ids,
                               .labels = labels};
    if (n < r.count) {
        /* shrink the frame to the samples that decoded */
        zframe_t *small = n ? zframe_new(zframe_data(frame), sb * n) : NULL;
        zframe_destroy(&frame);
        frame = small;
    }
    out->batch.pixels = frame;
    return 0;
}

static void ready_free(ready_t *r)
{
    free(r->batch.ids);
    free(r->batch.labels);
    zframe_destroy(&r->batch.pixels);
    memset(r, 0, sizeof *r);
}

static void decode_ahead(loader_t *L)
{
    batch_range_t r;
    if (L->n_ready >= L->o.prefetch || !dispatch_pop(L->dispatch, &r))
        return;
    ready_t *slot = &L->ready[L->n_ready];
    if (decode_batch(L, r, slot) < 0) {
        L->exit_code = 1;
        L->stopped = true;
        return;
    }
    if (slot->batch.n == 0) {
        ready_free(slot);   /* every sample failed: nothing to send */
        return;
    }
    L->n_ready++;
}

/* ---- eval / validation: dispatch ------------------------------------------------ */

static void send_ready(loader_t *L)
{
    while (L->n_ready > 0) {
        zframe_t *identity = NULL;
        const char *name = dispatch_ready_worker(L->dispatch, &identity);
        if (!name)
            return;
        ready_t *r = &L->ready[0];
        r->batch.seq = dispatch_sent(L->dispatch, name, r->range);
        uint32_t n = r->batch.n;
        loader_send_issued(L, &r->batch, name);
        zframe_t *id = zframe_dup(identity);
        if (proto_send_batch(zsock_resolve(L->router), id, &r->batch) < 0)
            log_warn("sending batch %llu to %s failed: %s (it will be re-sent if %s is dead)",
                     (unsigned long long)r->batch.seq, name, zmq_strerror(zmq_errno()), name);
        zframe_destroy(&id);
        log_debug("batch %llu (%u samples from %llu) -> %s", (unsigned long long)r->batch.seq, n,
                  (unsigned long long)r->range.first, name);
        L->sent_samples += n;
        ready_free(r);
        memmove(&L->ready[0], &L->ready[1], (size_t)(L->n_ready - 1) * sizeof L->ready[0]);
        L->n_ready--;
        memset(&L->ready[L->n_ready], 0, sizeof L->ready[0]);
    }
}

/* ST_EVAL: 1 when every batch is handed out and answered. */
static int eval_pump(loader_t *L)
{
    send_ready(L);
    decode_ahead(L);
    send_ready(L);
    return L->n_ready == 0 && dispatch_all_acked(L->dispatch);
}

/* ---- messages ------------------------------------------------------------------ */

/* Counts a rejected message; logs it at most once per (peer, kind) per
 * RATELOG_WINDOW_S. */
static void loader_reject(loader_t *L, const char *peer, const char *kind, const char *why)
{
    L->stats.rejected++;
    ratelog_reject(L, peer, kind, why);
}

/* A gpud message is trusted with the token reducerd gave (session, gpud,
 * rank, name), from the socket named after the worker (suffix: ".hb" for
 * the heartbeat socket). */
static bool worker_trusted(const loader_t *L, zframe_t *route, const char *suffix,
                           const char *name, int32_t rank, const ddp_auth_t *a)
{
    char want[DDP_MAX_NAME + 8];
    snprintf(want, sizeof want, "%s%s", name, suffix);
    return rank >= 0 && a->session == L->auth.session && strcmp(a->job, L->auth.job) == 0 &&
           zframe_size(route) == strlen(want) && memcmp(zframe_data(route), want, strlen(want)) == 0 &&
           token_valid(L->secret, L->auth.session, DDP_ROLE_GPUD, rank, name, a->token);
}

static void on_credit(loader_t *L, zframe_t *route, const ddp_credit_t *c)
{
    if (!worker_trusted(L, route, "", c->worker, c->rank, &c->auth)) {
        loader_reject(L, c->worker, "CREDIT", "no valid session token for this worker and rank "
                      "(a gpud that did not join this job): it gets no batch");
        return;
    }
    dispatch_credit(L->dispatch, route, c->worker, c->credits, c->acks, c->n_acks);
    if (L->o.train && c->rank >= (int32_t)L->o.workers)
        log_warn("%s says it is rank %d but the job has %ld ranks: it gets no train shards",
                 c->worker, c->rank, L->o.workers);
    else
        dispatch_set_rank(L->dispatch, c->worker, c->rank);
}

#define LOADER_MAX_HELD 256

/* CREDITs before the plan ack cannot be checked yet: kept (bounded) and
 * judged when the secret arrives. */
static void hold_credit(loader_t *L, zframe_t **route, ddp_credit_t *c)
{
    if (L->n_held >= LOADER_MAX_HELD) {
        loader_reject(L, c->worker, "CREDIT", "too many CREDITs before reducerd acked the plan");
        return;
    }
    if (!L->held) {
        L->held = calloc(LOADER_MAX_HELD, sizeof *L->held);
        L->held_route = calloc(LOADER_MAX_HELD, sizeof *L->held_route);
        if (!L->held || !L->held_route) {
            loader_reject(L, c->worker, "CREDIT", "out of memory holding it");
            return;
        }
    }
    L->held[L->n_held] = *c;
    c->acks = NULL;   /* moved */
    L->held_route[L->n_held++] = *route;
    *route = NULL;
}

static void judge_held_credits(loader_t *L)
{
    for (int i = 0; i < L->n_held; i++) {
        on_credit(L, L->held_route[i], &L->held[i]);
        free(L->held[i].acks);
        zframe_destroy(&L->held_route[i]);
    }
    L->n_held = 0;
}

static void on_worker_msg(loader_t *L)
{
    zframe_t *route = NULL;
    ddp_msg_t m;
    if (proto_recv(zsock_resolve(L->router), &route, &m, &L->stats) != 0) {
        zframe_destroy(&route);
        return;
    }
    if (m.type == DDP_CREDIT && !L->trusted) {
        hold_credit(L, &route, &m.u.credit);
    } else if (m.type == DDP_CREDIT) {
        on_credit(L, route, &m.u.credit);
    } else if (m.type == DDP_HEARTBEAT) {
        const ddp_heartbeat_t *hb = &m.u.heartbeat;
        if (L->trusted && worker_trusted(L, route, ".hb", hb->worker, hb->rank, &hb->auth))
            dispatch_heartbeat(L->dispatch, hb->worker);
        else if (L->trusted)
            loader_reject(L, hb->worker, "HEARTBEAT", "no valid session token for this worker");
    } else {
        loader_reject(L, "a worker", proto_type_name(m.type), "unexpected on the worker socket");
    }
    ddp_msg_clear(&m);
    zframe_destroy(&route);
}

/* The plan ack: reducerd's session, our token and the job secret. */
static void on_welcome(loader_t *L, const ddp_welcome_t *w)
{
    L->acks_got++;
    if (!w->session || !w->has_secret) {
        log_warn("reducerd's plan ack carries no session token: a reducerd of another version? "
                 "gpud CREDITs cannot be checked, no batch goes out");
        return;
    }
    if (L->trusted && w->session == L->auth.session)
        return;
    snprintf(L->auth.job, sizeof L->auth.job, "%s", w->job);
    L->auth.session = w->session;
    memcpy(L->auth.token, w->token, sizeof L->auth.token);
    memcpy(L->secret, w->secret, sizeof L->secret);
    L->trusted = true;
    judge_held_credits(L);
}

static void on_reissue(loader_t *L, const ddp_reissue_t *ri)
{
    log_warn("reducerd refused rank %d's answer to batch %llu (%s): handing it out again",
             ri->rank, (unsigned long long)ri->seq, ri->reason);
    if (dispatch_reissue(L->dispatch, ri->seq, true) < 0) {
        log_info("batch %llu is neither in flight nor answered (re-queued already, with its "
                 "worker?): nothing more to do", (unsigned long long)ri->seq);
        return;
    }
    /* the eval (or validation) phase is not done after all */
    if ((L->state == ST_IDLE && !L->o.train) ||
        (L->state == ST_EPOCH && !L->have_decision && L->val_ds && ri->phase == DDP_PHASE_EVAL))
        L->state = ST_EVAL;
}

static void on_epoch(loader_t *L, const ddp_epoch_t *e)
{
    if (!L->o.train || e->epoch != L->epoch || L->have_decision) {
        L->stats.rejected++;
        log_warn("EPOCH %u from reducerd while at epoch %u%s: ignored", e->epoch, L->epoch,
                 L->o.train ? "" : " of an eval job");
        return;
    }
    L->have_decision = true;
    L->decision = e->decision;
    log_info("reducerd: epoch %u %s (streak %u, val top-1 %.4f%s%s)", e->epoch,
             e->decision == DDP_DECISION_STOP ? "is the last" : "done, continue", e->streak,
             e->val_top1, e->reason[0] ? "; " : "", e->reason);
}

static void on_reducer_msg(loader_t *L)
{
    ddp_msg_t m;
    if (proto_recv(zsock_resolve(L->reducer), NULL, &m, &L->stats) != 0)
        return;
    if (m.type == DDP_STOP) {
        if (m.u.stop.code != 0)
            log_warn("reducerd stops the job (%d: %s)", m.u.stop.code, m.u.stop.reason);
        else
            log_info("reducerd says stop (%d: %s)", m.u.stop.code, m.u.stop.reason);
        L->stopped = true;
        L->exit_code = m.u.stop.code == DDP_STOP_JOB_LOST ? DDP_STOP_JOB_LOST : 0;
    } else if (m.type == DDP_WELCOME) {
        on_welcome(L, &m.u.welcome);
    } else if (m.type == DDP_REISSUE) {
        on_reissue(L, &m.u.reissue);
    } else if (m.type == DDP_EPOCH) {
        on_epoch(L, &m.u.epoch);
    } else {
        L->stats.rejected++;
        log_warn("unexpected %s from reducerd: ignored", proto_type_name(m.type));
    }
    ddp_msg_clear(&m);
}

/* ---- the state machine ------------------------------------------------------- */

static int begin_train_epoch(loader_t *L, uint32_t epoch)
{
    L->have_decision = false;
    return start_plan(L, epoch, DDP_PHASE_TRAIN);
}

static int after_train(loader_t *L)
{
    loader_broadcast_end(L, L->epoch, DDP_PHASE_TRAIN);
    log_info("epoch %u: all %llu train steps handed out (%llu samples sent, %llu failed so far)",
             L->epoch, (unsigned long long)L->spe, (unsigned long long)L->sent_samples,
             (unsigned long long)L->failed);
    if (!L->val_ds) {
        L->state = ST_EPOCH;   /* no validation: reducerd decides on epochs alone */
        return 0;
    }
    if (dispatch_replan(L->dispatch, L->eval_n, (uint32_t)L->o.batch_size) < 0) {
        log_error("validation of epoch %u: eval batches of the last one are still out", L->epoch);
        return -1;
    }
    return start_plan(L, L->epoch, DDP_PHASE_EVAL);
}

static int after_eval(loader_t *L)
{
    loader_broadcast_end(L, L->epoch, DDP_PHASE_EVAL);
    log_info("%s%u: all %llu samples handed out and answered (%llu failed, %llu batches re-queued)",
             L->o.train ? "validation of epoch " : "epoch ", L->epoch,
             (unsigned long long)L->eval_n, (unsigned long long)L->failed,
             (unsigned long long)dispatch_requeued(L->dispatch));
    L->state = L->o.train ? ST_EPOCH : ST_IDLE;
    return 0;
}

static int after_epoch(loader_t *L)
{
    if (L->decision == DDP_DECISION_STOP) {
        log_info("training ends after epoch %u; waiting for reducerd's STOP", L->epoch);
        L->state = ST_IDLE;
        return 0;
    }
    if ((long)L->epoch + 1 >= L->o.epochs) {
        log_warn("reducerd continues after epoch %u but --epochs is %ld: no more epochs; waiting "
                 "for STOP", L->epoch, L->o.epochs);
        L->state = ST_IDLE;
        return 0;
    }
    return begin_train_epoch(L, L->epoch + 1);
}

static int plan_done(loader_t *L)
{
    if (L->phase != DDP_PHASE_TRAIN) {
        L->state = ST_EVAL;
        return 0;
    }
    uint64_t first = L->epoch == (uint32_t)L->o.start_epoch ? (uint64_t)L->o.start_step : 0;
    train_begin_epoch(L, first);
    log_info("epoch %u: %llu train samples in %llu steps of %llu from step %llu; waiting for %ld "
             "ranks", L->epoch, (unsigned long long)L->n, (unsigned long long)L->spe,
             (unsigned long long)L->global_batch, (unsigned long long)first, L->o.workers);
    L->state = ST_RANKS;
    return 0;
}

/* One move of the state machine; -1 on a fatal error. */
static int advance(loader_t *L)
{
    int rc;
    switch (L->state) {
    case ST_PLAN:
        return plan_acked(L) ? plan_done(L) : plan_retry(L);
    case ST_RANKS:
        if (train_ranks_known(L)) {
            log_info("epoch %u: all %ld ranks have credit; training", L->epoch, L->o.workers);
            L->state = ST_TRAIN;
        }
        return 0;
    case ST_TRAIN:
        rc = train_pump(L);
        return rc < 0 ? -1 : rc ? after_train(L) : 0;
    case ST_EVAL:
        return eval_pump(L) ? after_eval(L) : 0;
    case ST_EPOCH:
        return L->have_decision ? after_epoch(L) : 0;
    case ST_IDLE:
        break;
    }
    return 0;
}

static bool busy(const loader_t *L)
{
    if (L->state == ST_EVAL)
        return L->n_ready < L->o.prefetch && !dispatch_all_sent(L->dispatch);
    return L->state == ST_TRAIN && train_busy(L);
}

static void reap(loader_t *L, int64_t now)
{
    if (dispatch_reap(L->dispatch, now) <= 0)
        return;
    if (L->state == ST_IDLE && !L->o.train && !dispatch_all_acked(L->dispatch))
        L->state = ST_EVAL;    /* re-queued work: the epoch is not done */
    if (L->o.train && (L->state == ST_RANKS || L->state == ST_TRAIN))
        log_error("a rank died during training (epoch %u): its shards go to no other rank; "
                  "reducerd fails the job", L->epoch);
}

/* Everything that queued up (a step can take a while to load): credits
 * and heartbeats are seen before the next reap, so a worker is never
 * declared dead for our own delay. Capped so sending is not starved. */
static void drain(loader_t *L)
{
    for (int i = 0; i < 1024; i++) {
        bool w = zsock_events(L->router) & ZMQ_POLLIN, r = zsock_events(L->reducer) & ZMQ_POLLIN;
        if (!w && !r)
            return;
        if (w)
            on_worker_msg(L);
        if (r)
            on_reducer_msg(L);
    }
}

static int run(loader_t *L)
{
    zpoller_t *poller = zpoller_new(L->router, L->reducer, NULL);
    if (!poller)
        return 1;
    int64_t last_reap = clock_mono_ms();
    while (!L->stopped && !zs_interrupted()) {
        void *which = zpoller_wait(poller, busy(L) ? 0 : 100);
        if (!which && zpoller_terminated(poller))
            break;
        drain(L);
        loader_beat(L);
        int64_t now = clock_mono_ms();
        if (now - last_reap >= 250) {
            last_reap = now;
            reap(L, now);
        }
        loader_state_t before;
        int rc;
        do {   /* follow transitions at once: no poll wait between them */
            before = L->state;
            rc = advance(L);
        } while (rc == 0 && L->state != before && !L->stopped);
        if (rc < 0) {
            L->exit_code = 1;
            break;
        }
    }
    zpoller_destroy(&poller);
    if (zs_interrupted())
        log_info("interrupted");
    return L->exit_code;
}

/* ---- setup ---------------------------------------------------------------------- */

static dataset_t *open_dataset(const char *spec, long limit, uint64_t *n)
{
    char err[512];
    dataset_t *ds = dataset_open(spec, err, sizeof err);
    if (!ds) {
        log_error("cannot open dataset %s: %s", spec, err);
        return NULL;
    }
    *n = dataset_size(ds);
    if (limit >= 0 && (uint64_t)limit < *n)
        *n = (uint64_t)limit;
    return ds;
}

/* The validation set must name the same classes, in the same order. */
static int check_val_classes(const loader_t *L)
{
    uint32_t nt = dataset_num_classes(L->ds), nv = dataset_num_classes(L->val_ds);
    if (nt != nv) {
        log_error("--val %s has %u classes, the train set %s has %u: they must be the same",
                  L->o.val, nv, L->o.data, nt);
        return -1;
    }
    for (uint32_t c = 0; c < nt; c++) {
        if (strcmp(dataset_class_name(L->ds, c), dataset_class_name(L->val_ds, c)) != 0) {
            log_error("class %u is '%s' in the train set but '%s' in --val %s: the class lists "
                      "must be the same", c, dataset_class_name(L->ds, c),
                      dataset_class_name(L->val_ds, c), L->o.val);
            return -1;
        }
    }
    return 0;
}

static int setup_augment(loader_t *L)
{
    int mode = L->o.augment == AUG_DEFAULT ? (dataset_is_idx(L->ds) ? AUG_NONE : AUG_CROP_FLIP)
                                           : L->o.augment;
    int ch = L->o.t.channels;
    L->aug = mode == AUG_CROP_FLIP ? augment_default(ch) : (augment_t){.channels = ch};
    if (mode == AUG_FLIP)
        L->aug.flip_p = 0.5;
    if (L->o.rotate > 0) {
        L->aug.rotate = 1;
        L->aug.degrees[0] = -L->o.rotate;
        L->aug.degrees[1] = L->o.rotate;
    }
    char err[256];
    if (augment_check(&L->aug, err, sizeof err) < 0) {
        log_error("%s", err);
        return -1;
    }
    static const char *names[] = {"none", "flip", "crop-flip"};
    log_info("train augmentation: %s%s, rotation %g degrees, seed %ld", names[mode],
             L->o.augment == AUG_DEFAULT ? " (default)" : "", L->aug.rotate ? L->o.rotate : 0.0,
             L->o.seed);
    return 0;
}

static int setup_train(loader_t *L)
{
    if (setup_augment(L) < 0)
        return -1;
    L->global_batch = (uint64_t)L->o.global_batch;
    L->sampler = sampler_new(L->n, (uint64_t)L->o.seed, 1);
    if (!L->sampler) {
        log_error("out of memory for the epoch permutation of %llu samples", (unsigned long long)L->n);
        return -1;
    }
    L->spe = sampler_steps(L->sampler, L->global_batch);
    if ((uint64_t)L->o.start_step >= L->spe && L->o.start_step > 0) {
        log_error("--start-step %ld is past the epoch's end: an epoch has %llu steps of %llu",
                  L->o.start_step, (unsigned long long)L->spe, (unsigned long long)L->global_batch);
        return -1;
    }
    /* steps held ahead: about --prefetch per-worker batches' worth */
    long depth = L->o.prefetch / L->o.workers;
    L->window = train_window_new((int)L->o.workers, depth < 1 ? 1 : (int)depth);
    if (!L->window) {
        log_error("out of memory for the train step window");
        return -1;
    }
    if (L->o.val) {
        if (!(L->val_ds = open_dataset(L->o.val, L->o.limit, &L->eval_n)) || check_val_classes(L) < 0)
            return -1;
        char err[512];
        if (transform_output_hw(&L->o.t, L->val_ds, &L->eval_h, &L->eval_w, err, sizeof err) < 0) {
            log_error("cannot decide the validation image size: %s", err);
            return -1;
        }
        L->eval_ds = L->val_ds;
    }
    log_info("training: %ld ranks, global batch %llu, %llu steps per epoch, epochs %ld..%ld; "
             "validation %s (%llu samples, %dx%d, batches of %ld)", L->o.workers,
             (unsigned long long)L->global_batch, (unsigned long long)L->spe, L->o.start_epoch,
             L->o.epochs - 1, L->o.val ? L->o.val : "none", (unsigned long long)L->eval_n,
             L->eval_w, L->eval_h, L->o.batch_size);
    return 0;
}

static int setup(loader_t *L)
{
    char err[512];
    if (!(L->ds = open_dataset(L->o.data, L->o.limit, &L->n)))
        return -1;
    if (!L->o.t.channels)
        L->o.t.channels = dataset_is_idx(L->ds) ? 1 : 3;
    if (transform_output_hw(&L->o.t, L->ds, &L->out_h, &L->out_w, err, sizeof err) < 0) {
        log_error("cannot decide the batch image size: %s", err);
        return -1;
    }
    if (L->o.train)
        log_info("train set %s: %llu samples, %u classes; samples of %dx%dx%d", L->o.data,
                 (unsigned long long)L->n, dataset_num_classes(L->ds), L->o.t.channels, L->out_h,
                 L->out_w);
    else
        log_info("dataset %s: %llu samples, %u classes; batches of %ld x %dx%dx%d", L->o.data,
                 (unsigned long long)L->n, dataset_num_classes(L->ds), L->o.batch_size,
                 L->o.t.channels, L->out_h, L->out_w);
    if (!L->o.train) {
        L->eval_ds = L->ds;
        L->eval_n = L->n;
        L->eval_h = L->out_h;
        L->eval_w = L->out_w;
    } else if (setup_train(L) < 0) {
        return -1;
    }
    L->pool = pool_new((int)L->o.threads);
    L->dispatch = dispatch_new(L->o.train ? 0 : L->n, (uint32_t)L->o.batch_size,
                               L->o.worker_timeout_s * 1000);
    L->router = zs_bind(ZMQ_ROUTER, L->o.bind, "worker");
    L->reducer = zs_connect(ZMQ_DEALER, L->o.reducer, "reducer", NULL);
    if (!L->pool || !L->dispatch || !L->router || !L->reducer)
        return -1;
    if (send_join(L) < 0)
        return -1;
    return L->o.train ? begin_train_epoch(L, (uint32_t)L->o.start_epoch)
                      : start_plan(L, 0, DDP_PHASE_EVAL);
}

static void loader_cleanup(loader_t *L)
{
    for (int i = 0; i < L->n_held; i++) {
        free(L->held[i].acks);
        zframe_destroy(&L->held_route[i]);
    }
    free(L->held);
    free(L->held_route);
    for (int i = 0; i < L->n_ready; i++)
        ready_free(&L->ready[i]);
    train_window_destroy(&L->window);
    sampler_destroy(&L->sampler);
    dispatch_destroy(&L->dispatch);
    zsock_destroy(&L->router);
    zsock_destroy(&L->reducer);
    pool_destroy(&L->pool);
    dataset_destroy(&L->val_ds);
    dataset_destroy(&L->ds);
}

int main(int argc, char **argv)
{
    loader_t L;
    memset(&L, 0, sizeof L);
    if (zs_security_args(&argc, argv) < 0)
        return 2;
    if (parse(argc, argv, &L.o) < 0)
        return 2;
    log_init("loaderd", -1, L.o.verbose);
    zs_install_signals();
    int rc = setup(&L) < 0 ? 1 : run(&L);
    log_info("exiting (%llu samples sent, %llu failed, %llu train shards lost, %llu messages, "
             "%llu rejected)", (unsigned long long)L.sent_samples, (unsigned long long)L.failed,
             (unsigned long long)(L.dispatch ? dispatch_lost_train(L.dispatch) : 0),
             (unsigned long long)L.stats.received, (unsigned long long)L.stats.rejected);
    loader_cleanup(&L);
    return rc;
}
