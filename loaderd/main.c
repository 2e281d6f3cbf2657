/* loaderd — scans the dataset, plans the epoch, decodes and transforms
 * images on a thread pool and hands uint8 batches to whichever gpud has
 * credit. A batch a dead worker never acked is decoded and sent again;
 * reducerd ignores what was already counted, so the count stays exact.
 */
#include "common/clock.h"
#include "common/dataset.h"
#include "common/flags.h"
#include "common/log.h"
#include "common/zsockopt.h"
#include "loaderd/daemon_dispatch.h"
#include "loaderd/pool.h"
#include "loaderd/transform.h"
#include "proto/proto.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_READY 64

typedef struct {
    const char *data;
    const char *bind;
    const char *reducer;
    long threads;
    long batch_size;
    long prefetch;
    long worker_timeout_s;
    long limit;
    transform_t t;
    int predictions;
    int verbose;
} opts_t;

typedef struct {
    batch_range_t range;
    ddp_batch_t batch;         /* ids/labels malloc'd, pixels a frame */
} ready_t;

typedef struct {
    opts_t o;
    dataset_t *ds;
    pool_t *pool;
    zsock_t *router;
    zsock_t *reducer;
    dispatch_t *dispatch;
    proto_stats_t stats;
    uint64_t n;
    int out_h, out_w;
    ready_t ready[MAX_READY];
    int n_ready;
    bool end_sent;
    bool stopped;
    int exit_code;
    uint64_t failed, sent_samples;
} loader_t;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: loaderd --data PATH --bind ENDPOINT --reducer ENDPOINT [options]\n"
            "  --data PATH          ImageFolder directory or idx:PREFIX\n"
            "  --bind EP            ROUTER the gpud workers connect to\n"
            "  --reducer EP         reducerd's ROUTER (plan and failed samples go there)\n"
            "  --batch-size N       samples per batch (default 64)\n"
            "  --threads N          decode threads (default: all cores)\n"
            "  --prefetch N         batches decoded ahead (default 4; bounds memory)\n"
            "  --resize N           resize the shorter side to N (PIL bilinear + antialias)\n"
            "  --crop N|HxW         center crop\n"
            "  --channels 1|3       channels the model wants (gray<->RGB as torchvision)\n"
            "  --no-dct-scaling     decode JPEGs at full size before resizing (exact PIL parity)\n"
            "  --limit N            use only the first N samples of the dataset\n"
            "  --predictions        send sample paths to reducerd (for predictions.csv)\n"
            "  --worker-timeout S   re-queue the batches of a gpud silent this long (default 10)\n"
            "  --verbose\n");
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

static int parse(int argc, char **argv, opts_t *o)
{
    static struct option lo[] = {
        {"data", 1, 0, 'D'},      {"bind", 1, 0, 'b'},        {"reducer", 1, 0, 'r'},
        {"batch-size", 1, 0, 'B'}, {"threads", 1, 0, 'T'},    {"prefetch", 1, 0, 'p'},
        {"resize", 1, 0, 'R'},    {"crop", 1, 0, 'C'},        {"channels", 1, 0, 'c'},
        {"no-dct-scaling", 0, 0, 'S'}, {"limit", 1, 0, 'l'},  {"predictions", 0, 0, 'P'},
        {"worker-timeout", 1, 0, 't'}, {"verbose", 0, 0, 'v'}, {"help", 0, 0, 'h'},
        {0, 0, 0, 0}};
    *o = (opts_t){.batch_size = 64, .prefetch = 4, .worker_timeout_s = 10, .limit = -1};
    o->t.channels = 0;
    o->t.dct_scaling = 1;
    long v;
    int c;
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        int rc = 0;
        switch (c) {
        case 'D': o->data = optarg; break;
        case 'b': o->bind = optarg; break;
        case 'r': o->reducer = optarg; break;
        case 'B': rc = flags_long("batch-size", optarg, 1, DDP_MAX_BATCH, &o->batch_size); break;
        case 'T': rc = flags_long("threads", optarg, 1, 1024, &o->threads); break;
        case 'p': rc = flags_long("prefetch", optarg, 1, MAX_READY, &o->prefetch); break;
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
    return 0;
}

/* ---- plan ---------------------------------------------------------------- */

static int send_join_and_plan(loader_t *L)
{
    ddp_msg_t j = {.type = DDP_JOIN};
    j.u.join.role = DDP_ROLE_LOADER;
    j.u.join.pid = (uint32_t)getpid();
    j.u.join.want_rank = -1;
    char host[DDP_MAX_NAME] = "?";
    gethostname(host, sizeof host - 1);
    snprintf(j.u.join.host, sizeof j.u.join.host, "%s", host);
    snprintf(j.u.join.name, sizeof j.u.join.name, "loaderd-%s-%d", host, (int)getpid());
    if (proto_send(zsock_resolve(L->reducer), NULL, &j) < 0)
        return -1;

    ddp_msg_t p = {.type = DDP_PLAN};
    ddp_plan_t *pl = &p.u.plan;
    pl->epoch = 0;
    pl->phase = DDP_PHASE_EVAL;
    pl->n = L->n;
    pl->num_classes = dataset_num_classes(L->ds);
    snprintf(pl->dataset, sizeof pl->dataset, "%s", L->o.data);
    /* borrow the dataset's strings: the encoder only reads them */
    pl->class_names = calloc(pl->num_classes ? pl->num_classes : 1, sizeof(char *));
    if (L->o.predictions)
        pl->paths = calloc(L->n ? L->n : 1, sizeof(char *));
    if (!pl->class_names || (L->o.predictions && !pl->paths)) {
        free(pl->class_names);
        free(pl->paths);
        log_error("out of memory building the plan");
        return -1;
    }
    for (uint32_t c = 0; c < pl->num_classes; c++)
        pl->class_names[c] = (char *)dataset_class_name(L->ds, c);
    for (uint64_t i = 0; pl->paths && i < L->n; i++)
        pl->paths[i] = (char *)dataset_path(L->ds, i);
    int rc = proto_send(zsock_resolve(L->reducer), NULL, &p);
    free(pl->class_names);
    free(pl->paths);
    if (rc < 0)
        log_error("cannot send the plan to reducerd: %s", zmq_strerror(zmq_errno()));
    return rc;
}

/* ---- decode -------------------------------------------------------------- */

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
    uint64_t id = job->r.first + (uint64_t)i;
    job->ok[i] = sample_load(job->L->ds, id, &job->L->o.t, job->pixels + (size_t)i * job->sample_bytes,
                             job->L->out_h, job->L->out_w, job->why[i], sizeof job->why[i]) == 0;
}

static void report_failed(loader_t *L, uint64_t id, const char *why)
{
    const char *path = dataset_path(L->ds, id);
    log_warn("cannot load %s: %s (counted as failed)", path, why);
    ddp_msg_t f = {.type = DDP_FAILED};
    f.u.failed.epoch = 0;
    f.u.failed.phase = DDP_PHASE_EVAL;
    f.u.failed.id = id;
    snprintf(f.u.failed.path, sizeof f.u.failed.path, "%s", path);
    snprintf(f.u.failed.reason, sizeof f.u.failed.reason, "%s", why);
    if (proto_send(zsock_resolve(L->reducer), NULL, &f) < 0)
        log_error("cannot report a failed sample to reducerd: %s", zmq_strerror(zmq_errno()));
    L->failed++;
}

/* Decode range r into a ready batch; failed samples are reported and left out. */
static int decode_batch(loader_t *L, batch_range_t r, ready_t *out)
{
    int c = L->o.t.channels;
    size_t sb = (size_t)c * L->out_h * L->out_w;
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
            report_failed(L, id, why[i]);
            continue;
        }
        if (n != i)
            memmove(job.pixels + n * sb, job.pixels + i * sb, sb);
        ids[n] = id;
        labels[n] = dataset_label(L->ds, id);
        n++;
    }
    free(ok);
    free(why);
    out->range = r;
    out->batch = (ddp_batch_t){.epoch = 0, .phase = DDP_PHASE_EVAL, .n = n, .c = (uint16_t)c,
                               .h = (uint16_t)L->out_h, .w = (uint16_t)L->out_w, .ids = ids,
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

/* ---- dispatch ------------------------------------------------------------ */

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

static void broadcast_end(loader_t *L)
{
    ddp_msg_t e = {.type = DDP_END};
    bool alive;
    zframe_t *identity;
    for (int i = 0; (identity = dispatch_worker_identity(L->dispatch, i, &alive)); i++) {
        if (!alive)
            continue;
        zframe_t *id = zframe_dup(identity);
        proto_send(zsock_resolve(L->router), id, &e);
        zframe_destroy(&id);
    }
    log_info("all %llu samples handed out and answered (%llu failed, %llu batches re-queued)",
             (unsigned long long)L->n, (unsigned long long)L->failed,
             (unsigned long long)dispatch_requeued(L->dispatch));
}

static void on_worker_msg(loader_t *L)
{
    zframe_t *route = NULL;
    ddp_msg_t m;
    if (proto_recv(zsock_resolve(L->router), &route, &m, &L->stats) != 0) {
        zframe_destroy(&route);
        return;
    }
    if (m.type == DDP_CREDIT) {
        dispatch_credit(L->dispatch, route, m.u.credit.worker, m.u.credit.credits, m.u.credit.acks,
                        m.u.credit.n_acks);
    } else if (m.type == DDP_HEARTBEAT) {
        dispatch_heartbeat(L->dispatch, m.u.heartbeat.worker);
    } else {
        L->stats.rejected++;
        log_warn("unexpected %s on the worker socket: ignored", proto_type_name(m.type));
    }
    ddp_msg_clear(&m);
    zframe_destroy(&route);
}

/* Hand out nothing before reducerd has the plan (its WELCOME acks it):
 * results of samples it has not planned would be dropped. */
static int wait_plan_ack(loader_t *L)
{
    int64_t next_send = clock_mono_ms() + 2000;
    zpoller_t *poller = zpoller_new(L->reducer, NULL);
    int rc = -1;
    while (rc < 0 && poller && !zs_interrupted()) {
        if (zpoller_wait(poller, 200) == L->reducer) {
            ddp_msg_t m;
            if (proto_recv(zsock_resolve(L->reducer), NULL, &m, &L->stats) != 0)
                continue;
            ddp_type_t t = m.type;
            if (t == DDP_STOP) {
                log_info("reducerd says stop before we started: %s", m.u.stop.reason);
                L->stopped = true;
            }
            ddp_msg_clear(&m);
            if (t == DDP_WELCOME || t == DDP_STOP)
                rc = 0;
            continue;
        }
        if (clock_mono_ms() >= next_send) {
            /* reducerd may have started after us, or restarted: plan again */
            log_info("waiting for reducerd at %s to take the plan", L->o.reducer);
            if (send_join_and_plan(L) < 0)
                break;
            next_send = clock_mono_ms() + 5000;
        }
    }
    zpoller_destroy(&poller);
    return rc;
}

static void on_reducer_msg(loader_t *L)
{
    ddp_msg_t m;
    if (proto_recv(zsock_resolve(L->reducer), NULL, &m, &L->stats) != 0)
        return;
    if (m.type == DDP_STOP) {
        log_info("reducerd says stop (%d: %s)", m.u.stop.code, m.u.stop.reason);
        L->stopped = true;
        L->exit_code = 0;
    } else if (m.type != DDP_WELCOME) {
        L->stats.rejected++;
        log_warn("unexpected %s from reducerd: ignored", proto_type_name(m.type));
    }
    ddp_msg_clear(&m);
}

static int run(loader_t *L)
{
    zpoller_t *poller = zpoller_new(L->router, L->reducer, NULL);
    if (!poller)
        return 1;
    int64_t last_reap = clock_mono_ms();
    while (!L->stopped && !zs_interrupted()) {
        bool busy = L->n_ready < L->o.prefetch && !dispatch_all_sent(L->dispatch);
        void *which = zpoller_wait(poller, busy ? 0 : 100);
        if (which == L->router)
            on_worker_msg(L);
        else if (which == L->reducer)
            on_reducer_msg(L);
        else if (zpoller_terminated(poller))
            break;
        int64_t now = clock_mono_ms();
        if (now - last_reap >= 250) {
            last_reap = now;
            if (dispatch_reap(L->dispatch, now) > 0)
                L->end_sent = false;   /* re-queued work: the epoch is not done */
        }
        send_ready(L);
        decode_ahead(L);
        send_ready(L);
        if (!L->end_sent && L->n_ready == 0 && dispatch_all_acked(L->dispatch)) {
            broadcast_end(L);
            L->end_sent = true;
        }
    }
    zpoller_destroy(&poller);
    if (zs_interrupted())
        log_info("interrupted");
    return L->exit_code;
}

static void loader_cleanup(loader_t *L)
{
    for (int i = 0; i < L->n_ready; i++)
        ready_free(&L->ready[i]);
    dispatch_destroy(&L->dispatch);
    zsock_destroy(&L->router);
    zsock_destroy(&L->reducer);
    pool_destroy(&L->pool);
    dataset_destroy(&L->ds);
}

static int setup(loader_t *L)
{
    char err[512];
    L->ds = dataset_open(L->o.data, err, sizeof err);
    if (!L->ds) {
        log_error("cannot open dataset %s: %s", L->o.data, err);
        return -1;
    }
    L->n = dataset_size(L->ds);
    if (L->o.limit >= 0 && (uint64_t)L->o.limit < L->n)
        L->n = (uint64_t)L->o.limit;
    if (!L->o.t.channels)
        L->o.t.channels = dataset_is_idx(L->ds) ? 1 : 3;
    if (transform_output_hw(&L->o.t, L->ds, &L->out_h, &L->out_w, err, sizeof err) < 0) {
        log_error("cannot decide the batch image size: %s", err);
        return -1;
    }
    log_info("dataset %s: %llu samples, %u classes; batches of %ld x %dx%dx%d", L->o.data,
             (unsigned long long)L->n, dataset_num_classes(L->ds), L->o.batch_size, L->o.t.channels,
             L->out_h, L->out_w);
    L->pool = pool_new((int)L->o.threads);
    L->dispatch = dispatch_new(L->n, (uint32_t)L->o.batch_size, L->o.worker_timeout_s * 1000);
    L->router = zs_bind(ZMQ_ROUTER, L->o.bind, "worker");
    L->reducer = zs_connect(ZMQ_DEALER, L->o.reducer, "reducer", NULL);
    if (!L->pool || !L->dispatch || !L->router || !L->reducer)
        return -1;
    return send_join_and_plan(L);
}

int main(int argc, char **argv)
{
    loader_t L;
    memset(&L, 0, sizeof L);
    if (parse(argc, argv, &L.o) < 0)
        return 2;
    log_init("loaderd", -1, L.o.verbose);
    zs_install_signals();
    int rc = (setup(&L) < 0 || wait_plan_ack(&L) < 0) ? 1 : (L.stopped ? 0 : run(&L));
    log_info("exiting (%llu samples sent, %llu failed, %llu messages, %llu rejected)",
             (unsigned long long)L.sent_samples, (unsigned long long)L.failed,
             (unsigned long long)L.stats.received, (unsigned long long)L.stats.rejected);
    loader_cleanup(&L);
    return rc;
}
