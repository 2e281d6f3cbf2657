/* reducerd — exact tally of per-sample results and the job's coordinator.
 *
 * Sockets: ROUTER --bind (JOIN, PLAN, RESULT, FAILED, HEARTBEAT, DONE in;
 * WELCOME, STOP out) and XPUB --pub (events to reporterd and monitors).
 * One epoch plan per job for eval: when every id of the plan has a result
 * or a failure, reducerd publishes the predictions, the final metric and
 * "end", tells every peer to stop, waits for reporterd's DONE and exits.
 */
#include "common/clock.h"
#include "common/flags.h"
#include "common/log.h"
#include "common/zsockopt.h"
#include "proto/event.h"
#include "proto/proto.h"
#include "reducerd/daemon_peers.h"
#include "reducerd/tally.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    const char *bind;
    const char *pub;
    const char *job;
    long workers;
    long reporters;
    long worker_timeout_s;
    long stall_timeout_s;
    long done_timeout_s;
    int predictions;
    int verbose;
} opts_t;

typedef struct {
    opts_t o;
    zsock_t *router;
    zsock_t *xpub;
    peers_t *peers;
    proto_stats_t stats;
    tally_t *tally;
    ddp_plan_t plan;          /* class names and paths kept for events */
    bool have_plan;
    int subscribers;          /* reporterd subscriptions seen on the XPUB */
    double t_plan;            /* when the plan arrived */
    double t_first_result;
    int64_t last_progress_ms;
    int64_t last_activity_ms;
    bool finished;            /* end published */
    int exit_code;
    int reporters_done;
    char **fail_reason;       /* per failed id: "path\treason" (sparse, by id) */
    uint64_t failed;          /* distinct failed ids of the plan (progress events) */
} reducer_t;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: reducerd --bind ENDPOINT --pub ENDPOINT [options]\n"
            "  --bind EP            ROUTER for joins, plans, results (e.g. tcp://127.0.0.1:5560)\n"
            "  --pub EP             XPUB for events (metric, predictions, progress, log, worker, end)\n"
            "  --workers N          gpud ranks expected (world size; default 1)\n"
            "  --reporters N        reporterd DONE replies to wait for before exiting (default 1)\n"
            "  --job NAME           job name handed to joiners\n"
            "  --predictions        publish per-sample predictions (for predictions.csv)\n"
            "  --worker-timeout S   a gpud silent this long is reported dead (default 10)\n"
            "  --stall-timeout S    fail the job when nothing arrives for S seconds (default 600, 0 off)\n"
            "  --done-timeout S     how long to wait for reporterd at the end (default 60)\n"
            "  --verbose\n");
}

static int parse(int argc, char **argv, opts_t *o)
{
    static struct option lo[] = {
        {"bind", 1, 0, 'b'},           {"pub", 1, 0, 'p'},
        {"workers", 1, 0, 'w'},        {"reporters", 1, 0, 'r'},
        {"job", 1, 0, 'j'},            {"predictions", 0, 0, 'P'},
        {"worker-timeout", 1, 0, 't'}, {"stall-timeout", 1, 0, 's'},
        {"done-timeout", 1, 0, 'd'},   {"verbose", 0, 0, 'v'},
        {"help", 0, 0, 'h'},           {0, 0, 0, 0}};
    *o = (opts_t){.workers = 1, .reporters = 1, .job = "ddpipe", .worker_timeout_s = 10,
                  .stall_timeout_s = 600, .done_timeout_s = 60};
    int c;
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        int rc = 0;
        switch (c) {
        case 'b': o->bind = optarg; break;
        case 'p': o->pub = optarg; break;
        case 'j': o->job = optarg; break;
        case 'P': o->predictions = 1; break;
        case 'v': o->verbose = 1; break;
        case 'w': rc = flags_long("workers", optarg, 1, 4096, &o->workers); break;
        case 'r': rc = flags_long("reporters", optarg, 0, 16, &o->reporters); break;
        case 't': rc = flags_long("worker-timeout", optarg, 1, 86400, &o->worker_timeout_s); break;
        case 's': rc = flags_long("stall-timeout", optarg, 0, 86400 * 7, &o->stall_timeout_s); break;
        case 'd': rc = flags_long("done-timeout", optarg, 1, 86400, &o->done_timeout_s); break;
        case 'h': usage(stdout); exit(0);
        default: usage(stderr); return -1;
        }
        if (rc < 0)
            return -1;
    }
    if (!o->bind || !o->pub) {
        fprintf(stderr, "reducerd: --bind and --pub are required\n");
        usage(stderr);
        return -1;
    }
    return 0;
}

/* ---- publishing ---------------------------------------------------------- */

static void publish(reducer_t *r, const ddp_event_t *ev)
{
    zmsg_t *m = event_encode(ev);
    if (!m) {
        log_error("cannot encode a %s event (bug: please report)", event_topic_name(ev->topic));
        return;
    }
    if (zmsg_send(&m, r->xpub) < 0) {
        log_warn("publishing a %s event failed: %s", event_topic_name(ev->topic),
                 zmq_strerror(zmq_errno()));
        zmsg_destroy(&m);
    }
}

static void publish_log(reducer_t *r, const char *level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void publish_log(reducer_t *r, const char *level, const char *fmt, ...)
{
    ddp_event_t ev = {.topic = EV_LOG};
    snprintf(ev.u.log.level, sizeof ev.u.log.level, "%s", level);
    snprintf(ev.u.log.daemon, sizeof ev.u.log.daemon, "reducerd");
    ev.u.log.rank = -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ev.u.log.msg, sizeof ev.u.log.msg, fmt, ap);
    va_end(ap);
    publish(r, &ev);
}

static void publish_worker(reducer_t *r, const peer_t *p, const char *state)
{
    ddp_event_t ev = {.topic = EV_WORKER};
    ev.u.worker.rank = p->rank;
    snprintf(ev.u.worker.name, sizeof ev.u.worker.name, "%s", p->name);
    snprintf(ev.u.worker.host, sizeof ev.u.worker.host, "%s", p->host);
    snprintf(ev.u.worker.state, sizeof ev.u.worker.state, "%s", state);
    double dt = clock_mono_s() - r->t_plan;
    ev.u.worker.images_per_sec = (r->have_plan && dt > 0) ? p->results / dt : 0;
    publish(r, &ev);
}

static double elapsed(const reducer_t *r) { return r->have_plan ? clock_mono_s() - r->t_plan : 0; }

static void publish_progress(reducer_t *r)
{
    if (!r->tally)
        return;
    ddp_event_t ev = {.topic = EV_PROGRESS};
    ev.u.progress.epoch = r->plan.epoch;
    ev.u.progress.phase = r->plan.phase;
    ev.u.progress.done = tally_accounted(r->tally);
    ev.u.progress.total = r->plan.n;
    double dt = elapsed(r);
    ev.u.progress.images_per_sec = dt > 0 ? ev.u.progress.done / dt : 0;
    ev.u.progress.eta_s = ev.u.progress.images_per_sec > 0
                              ? (ev.u.progress.total - ev.u.progress.done) / ev.u.progress.images_per_sec
                              : -1;
    ev.u.progress.workers = peers_alive(r->peers, DDP_ROLE_GPUD);
    ev.u.progress.elapsed_s = dt;
    ev.u.progress.failed = r->failed;
    ev.u.progress.rejected = r->stats.rejected;
    /* per-rank result counts: reporterd plots and exports per-worker throughput */
    uint64_t rank_done[64] = {0};
    uint32_t nranks = r->o.workers < 64 ? (uint32_t)r->o.workers : 64;
    for (uint32_t rank = 0; rank < nranks; rank++) {
        const peer_t *p = peers_by_rank(r->peers, (int32_t)rank);
        rank_done[rank] = p ? p->results : 0;
    }
    ev.u.progress.nranks = nranks;
    ev.u.progress.rank_done = rank_done;
    publish(r, &ev);
}

static void publish_failed_files(reducer_t *r)
{
    for (uint64_t id = 0; id < r->plan.n; id++) {
        if (!r->fail_reason[id])
            continue;
        ddp_event_t ev = {.topic = EV_FAILED};
        ev.u.failed.epoch = r->plan.epoch;
        ev.u.failed.phase = r->plan.phase;
        ev.u.failed.id = id;
        char *tab = strchr(r->fail_reason[id], '\t');
        snprintf(ev.u.failed.path, sizeof ev.u.failed.path, "%.*s",
                 (int)(tab - r->fail_reason[id]), r->fail_reason[id]);
        snprintf(ev.u.failed.reason, sizeof ev.u.failed.reason, "%s", tab + 1);
        publish(r, &ev);
    }
}

static void publish_predictions(reducer_t *r)
{
    const uint64_t chunk = 8192;
    for (uint64_t first = 0; first < r->plan.n; first += chunk) {
        uint64_t n = r->plan.n - first < chunk ? r->plan.n - first : chunk;
        ddp_event_t ev = {.topic = EV_PREDICTIONS};
        if (tally_fill_predictions(r->tally, first, n, &ev.u.predictions) < 0) {
            log_error("cannot gather predictions %llu..%llu (bug)", (unsigned long long)first,
                      (unsigned long long)(first + n));
            return;
        }
        ev.u.predictions.paths = r->plan.paths ? r->plan.paths + first : NULL;
        publish(r, &ev);
    }
}

static void publish_metric(reducer_t *r, bool final)
{
    ddp_event_t ev = {.topic = EV_METRIC};
    tally_fill_metric(r->tally, &ev.u.metric);
    ev.u.metric.final = final;
    ev.u.metric.class_names = r->plan.class_names;
    ev.u.metric.workers = peers_gpud_ranks(r->peers);
    ev.u.metric.wall_s = elapsed(r);
    ev.u.metric.images_per_sec =
        ev.u.metric.wall_s > 0 ? ev.u.metric.samples / ev.u.metric.wall_s : 0;
    publish(r, &ev);
    log_info("epoch %u %s: %llu samples, %llu failed, top1 %.4f, top5 %.4f, loss %.4f, %.1f img/s",
             ev.u.metric.epoch, ev.u.metric.phase ? "train" : "eval",
             (unsigned long long)ev.u.metric.samples, (unsigned long long)ev.u.metric.failed,
             ev.u.metric.samples ? (double)ev.u.metric.correct_top1 / ev.u.metric.samples : 0,
             ev.u.metric.samples ? (double)ev.u.metric.correct_top5 / ev.u.metric.samples : 0,
             ev.u.metric.samples ? ev.u.metric.loss_sum / ev.u.metric.samples : 0,
             ev.u.metric.images_per_sec);
}

static void publish_end(reducer_t *r, int code, const char *reason)
{
    ddp_event_t ev = {.topic = EV_END};
    ev.u.end.code = code;
    snprintf(ev.u.end.reason, sizeof ev.u.end.reason, "%s", reason);
    publish(r, &ev);
}

static void finish(reducer_t *r, int code, const char *reason);

/* ---- peers --------------------------------------------------------------- */

static void send_to(reducer_t *r, zframe_t *identity, const ddp_msg_t *m)
{
    zframe_t *id = zframe_dup(identity);
    if (proto_send(zsock_resolve(r->router), id, m) < 0)
        log_warn("sending %s failed: %s", proto_type_name(m->type), zmq_strerror(zmq_errno()));
    zframe_destroy(&id);
}

static void stop_everyone(reducer_t *r, int code, const char *reason)
{
    ddp_msg_t m = {.type = DDP_STOP};
    m.u.stop.code = code;
    snprintf(m.u.stop.reason, sizeof m.u.stop.reason, "%s", reason);
    for (int i = 0; i < peers_count(r->peers); i++) {
        peer_t *p = peers_at(r->peers, i);
        if (!p->dead && p->role != DDP_ROLE_REPORTER)
            send_to(r, p->identity, &m);
    }
}

static void on_join(reducer_t *r, zframe_t *route, const ddp_join_t *j)
{
    peer_t *p = peers_join(r->peers, route, j);
    if (!p)
        return;
    if (p->role == DDP_ROLE_GPUD) {
        /* only workers need a rank; the loader and reporters just start */
        ddp_msg_t w = {.type = DDP_WELCOME};
        w.u.welcome.rank = p->rank;
        w.u.welcome.world = p->rank < r->o.workers ? (int32_t)r->o.workers : p->rank + 1;
        snprintf(w.u.welcome.job, sizeof w.u.welcome.job, "%s", r->o.job);
        send_to(r, route, &w);
    }
    log_info("%s %s joined from %s (pid %u)", proto_role_name(j->role), j->name, j->host, j->pid);
    if (p->role == DDP_ROLE_GPUD) {
        log_info("%s is rank %d of %ld", p->name, p->rank, r->o.workers);
        publish_worker(r, p, "joined");
    }
    if (r->finished && p->role != DDP_ROLE_REPORTER) {
        /* a late joiner (e.g. restarted by supervisord) after the end: tell it to go home */
        ddp_msg_t s = {.type = DDP_STOP};
        snprintf(s.u.stop.reason, sizeof s.u.stop.reason, "job already finished");
        send_to(r, route, &s);
    }
}

/* The loader hands out no batch before this ack: a result can then never
 * arrive before the plan it belongs to. */
static void ack_plan(reducer_t *r, zframe_t *route)
{
    ddp_msg_t w = {.type = DDP_WELCOME};
    w.u.welcome.rank = 0;
    w.u.welcome.world = 1;
    snprintf(w.u.welcome.job, sizeof w.u.welcome.job, "%s", r->o.job);
    send_to(r, route, &w);
}

static void on_plan(reducer_t *r, zframe_t *route, ddp_plan_t *plan)
{
    if (r->have_plan) {
        if (plan->n != r->plan.n || plan->epoch != r->plan.epoch) {
            log_warn("ignoring a second, different plan (n=%llu); a restarted loaderd must "
                     "plan the same dataset", (unsigned long long)plan->n);
            return;
        }
        ack_plan(r, route);   /* a restarted loader: same plan, carry on */
        return;
    }
    uint32_t k = plan->num_classes < DDP_MAX_K ? plan->num_classes : DDP_MAX_K; /* as gpud sends */
    r->tally = tally_new(plan->epoch, plan->phase, plan->n, plan->num_classes, k, true);
    r->fail_reason = calloc(plan->n ? plan->n : 1, sizeof(char *));
    if (!r->tally || !r->fail_reason) {
        log_error("out of memory for a plan of %llu samples", (unsigned long long)plan->n);
        r->exit_code = 1;
        return;
    }
    r->plan = *plan;            /* take ownership of the arrays */
    memset(plan, 0, sizeof *plan);
    r->have_plan = true;
    r->t_plan = clock_mono_s();
    log_info("plan: epoch %u, %llu samples, %u classes, dataset %s", r->plan.epoch,
             (unsigned long long)r->plan.n, r->plan.num_classes, r->plan.dataset);
    ack_plan(r, route);
}

static bool plan_matches(reducer_t *r, uint32_t epoch, uint8_t phase, const char *what)
{
    if (!r->have_plan) {
        log_warn("%s before any plan: dropped (the loader must send PLAN first)", what);
        r->stats.rejected++;
        return false;
    }
    if (epoch != r->plan.epoch || phase != r->plan.phase) {
        log_warn("%s for epoch %u phase %u, plan is epoch %u phase %u: dropped", what, epoch, phase,
                 r->plan.epoch, r->plan.phase);
        r->stats.rejected++;
        return false;
    }
    return true;
}

static void on_result(reducer_t *r, zframe_t *route, const ddp_result_t *res)
{
    if (!plan_matches(r, res->epoch, res->phase, "RESULT"))
        return;
    peer_t *p = peers_by_identity(r->peers, route);
    if (r->t_first_result == 0)
        r->t_first_result = clock_mono_s();
    for (uint64_t i = 0; i < (uint64_t)res->n * res->k; i++) {
        if (res->topk[i] >= (int32_t)r->plan.num_classes) {
            /* not noise but a model/dataset mismatch: waiting would only hang */
            char why[512];
            snprintf(why, sizeof why,
                     "rank %d predicts class %d but the dataset has %u classes: the model's classes "
                     "(--num-classes, the weights' fc) must match the dataset's",
                     res->rank, res->topk[i], r->plan.num_classes);
            log_error("%s", why);
            publish_log(r, "error", "%s", why);
            finish(r, 1, why);
            return;
        }
    }
    uint64_t invalid = 0, dup = 0;
    for (uint32_t i = 0; i < res->n; i++) {
        int rc = tally_add_result(r->tally, res->ids[i], res->labels[i], res->topk + (size_t)i * res->k,
                                  res->k, res->loss[i]);
        invalid += rc < 0;
        dup += rc == 1;
    }
    if (p) {
        p->results += res->n - invalid - dup;
        p->last_seen_ms = clock_mono_ms();
    }
    if (invalid) {
        r->stats.rejected++;
        log_warn("RESULT seq %llu from rank %d: %llu of %u samples invalid (id/label/class out of range "
                 "or bad loss), ignored", (unsigned long long)res->seq, res->rank,
                 (unsigned long long)invalid, res->n);
    }
    if (dup)
        log_debug("RESULT seq %llu: %llu duplicates ignored (re-sent batch)",
                  (unsigned long long)res->seq, (unsigned long long)dup);
}

static void on_failed(reducer_t *r, const ddp_failed_t *f)
{
    if (!plan_matches(r, f->epoch, f->phase, "FAILED"))
        return;
    int rc = tally_add_failed(r->tally, f->id);
    if (rc < 0) {
        r->stats.rejected++;
        log_warn("FAILED for id %llu outside the plan: ignored", (unsigned long long)f->id);
        return;
    }
    if (rc == 0)
        r->failed++;
    if (rc == 0 && !r->fail_reason[f->id]) {
        size_t len = strlen(f->path) + strlen(f->reason) + 2;
        r->fail_reason[f->id] = malloc(len);
        if (r->fail_reason[f->id])
            snprintf(r->fail_reason[f->id], len, "%s\t%s", f->path, f->reason);
        publish_log(r, "warn", "failed %s: %s", f->path, f->reason);
    }
}

static void on_heartbeat(reducer_t *r, zframe_t *route, const ddp_heartbeat_t *hb)
{
    peer_t *p = peers_by_name(r->peers, hb->worker);
    if (!p)
        p = peers_by_identity(r->peers, route);
    if (!p)
        return;
    if (p->dead) {
        p->dead = false;
        log_info("%s is alive again", p->name);
        publish_worker(r, p, "joined");
    }
    p->last_seen_ms = clock_mono_ms();
}

static void on_message(reducer_t *r, zframe_t *route, ddp_msg_t *m)
{
    r->last_activity_ms = clock_mono_ms();
    switch (m->type) {
    case DDP_JOIN: on_join(r, route, &m->u.join); break;
    case DDP_PLAN: on_plan(r, route, &m->u.plan); break;
    case DDP_RESULT: on_result(r, route, &m->u.result); break;
    case DDP_FAILED: on_failed(r, &m->u.failed); break;
    case DDP_HEARTBEAT: on_heartbeat(r, route, &m->u.heartbeat); break;
    case DDP_DONE:
        r->reporters_done++;
        if (m->u.done.code != 0) {
            log_error("reporterd could not write the run directory: %s", m->u.done.reason);
            r->exit_code = 1;
        } else {
            log_info("reporterd wrote the run directory");
        }
        break;
    default:
        r->stats.rejected++;
        log_warn("unexpected %s on the reducer socket: ignored", proto_type_name(m->type));
    }
}

/* XPUB hands us subscriptions: a reporter is listening once one arrives. */
static void on_subscription(reducer_t *r)
{
    zframe_t *f = zframe_recv(r->xpub);
    if (!f)
        return;
    /* reporterd subscribes to the never-published topic EVENT_REPORTER_TOPIC
     * as well, so monitors tapping the stream are not mistaken for it */
    size_t tl = strlen(EVENT_REPORTER_TOPIC);
    bool is_reporter = zframe_size(f) == tl + 1 &&
                       memcmp(zframe_data(f) + 1, EVENT_REPORTER_TOPIC, tl) == 0;
    if (is_reporter && zframe_data(f)[0] == 1) {
        r->subscribers++;
        log_debug("reporterd subscribed to the event stream (%d)", r->subscribers);
    } else if (is_reporter && zframe_data(f)[0] == 0) {
        r->subscribers--;
    }
    zframe_destroy(&f);
}

static void check_liveness(reducer_t *r)
{
    int64_t now = clock_mono_ms();
    for (int i = 0; i < peers_count(r->peers); i++) {
        peer_t *p = peers_at(r->peers, i);
        if (p->role == DDP_ROLE_GPUD && !p->dead &&
            now - p->last_seen_ms > r->o.worker_timeout_s * 1000) {
            p->dead = true;
            log_warn("rank %d (%s) silent for %lds: declared dead; loaderd re-sends its batches",
                     p->rank, p->name, r->o.worker_timeout_s);
            publish_log(r, "warn", "rank %d (%s) declared dead", p->rank, p->name);
            publish_worker(r, p, "dead");
        }
    }
}

static void finish(reducer_t *r, int code, const char *reason)
{
    if (r->finished)
        return;
    if (code == 0) {
        publish_progress(r); /* a last one at done == total for monitors and plots */
        publish_failed_files(r);
        if (r->o.predictions)
            publish_predictions(r);
        publish_metric(r, true);
    }
    publish_end(r, code, reason);
    stop_everyone(r, code, reason);
    r->finished = true;
    r->exit_code = r->exit_code ? r->exit_code : code;
    log_info("job %s: %s", code == 0 ? "complete" : "failed", reason);
}

static int run(reducer_t *r)
{
    zpoller_t *poller = zpoller_new(r->router, r->xpub, NULL);
    if (!poller) {
        log_error("cannot create a poller (out of memory?)");
        return 1;
    }
    r->last_activity_ms = clock_mono_ms();
    int64_t finished_at = 0;
    bool announced_wait = false;
    while (!zs_interrupted()) {
        void *which = zpoller_wait(poller, 200);
        if (which == r->router) {
            zframe_t *route = NULL;
            ddp_msg_t m;
            if (proto_recv(zsock_resolve(r->router), &route, &m, &r->stats) == 0) {
                on_message(r, route, &m);
                ddp_msg_clear(&m);
            }
            zframe_destroy(&route);
        } else if (which == r->xpub) {
            on_subscription(r);
        } else if (zpoller_terminated(poller)) {
            break;
        }
        int64_t now = clock_mono_ms();
        if (now - r->last_progress_ms >= 1000) {
            r->last_progress_ms = now;
            check_liveness(r);
            if (!r->finished)
                publish_progress(r);
        }
        if (!r->finished && r->have_plan && tally_complete(r->tally)) {
            /* events are lost on a PUB with nobody listening: hold the end until
             * the expected reporter has subscribed */
            if (r->o.reporters > 0 && r->subscribers < 1) {
                if (!announced_wait)
                    log_info("plan complete; waiting for reporterd to subscribe");
                announced_wait = true;
            } else {
                finish(r, 0, "all samples accounted for");
                finished_at = now;
            }
        }
        if (!r->finished && r->o.stall_timeout_s > 0 &&
            now - r->last_activity_ms > r->o.stall_timeout_s * 1000) {
            finish(r, 1, "no message for --stall-timeout seconds: are loaderd and gpud running?");
            finished_at = now;
        }
        if (r->finished) {
            /* nobody to confirm when no reporter ever listened (a failure
             * before it subscribed): the end event went nowhere */
            if (r->reporters_done >= r->o.reporters || r->subscribers < 1)
                break;
            if (now - finished_at > r->o.done_timeout_s * 1000) {
                log_error("reporterd did not confirm the run directory within %lds; check its log",
                          r->o.done_timeout_s);
                r->exit_code = 1;
                break;
            }
        }
    }
    if (zs_interrupted() && !r->finished) {
        log_warn("interrupted: stopping the job");
        finish(r, 130, "interrupted");
        r->exit_code = 130;
    }
    zpoller_destroy(&poller);
    return r->exit_code;
}

static void reducer_cleanup(reducer_t *r)
{
    if (r->fail_reason) {
        for (uint64_t i = 0; i < r->plan.n; i++)
            free(r->fail_reason[i]);
        free(r->fail_reason);
    }
    ddp_msg_t m = {.type = DDP_PLAN};
    m.u.plan = r->plan;
    ddp_msg_clear(&m);
    tally_destroy(&r->tally);
    peers_destroy(&r->peers);
    zsock_destroy(&r->router);
    zsock_destroy(&r->xpub);
}

int main(int argc, char **argv)
{
    reducer_t r;
    memset(&r, 0, sizeof r);
    if (parse(argc, argv, &r.o) < 0)
        return 2;
    log_init("reducerd", -1, r.o.verbose);
    zs_install_signals();
    r.router = zs_bind(ZMQ_ROUTER, r.o.bind, "reducer");
    r.xpub = zs_bind(ZMQ_XPUB, r.o.pub, "event");
    r.peers = peers_new((int)r.o.workers);
    if (!r.router || !r.xpub || !r.peers) {
        reducer_cleanup(&r);
        return 1;
    }
    zsock_set_xpub_verbose(r.xpub, 1);
    log_info("listening on %s, publishing on %s, expecting %ld workers", r.o.bind, r.o.pub,
             r.o.workers);
    int rc = run(&r);
    log_info("exiting (%llu messages, %llu rejected)", (unsigned long long)r.stats.received,
             (unsigned long long)r.stats.rejected);
    reducer_cleanup(&r);
    return rc;
}
