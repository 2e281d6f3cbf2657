/* reducerd — exact tally of per-sample results and the job's coordinator.
 *
 * Sockets: ROUTER --bind (JOIN, PLAN, RESULT, FAILED, HEARTBEAT, DONE in;
 * WELCOME, STOP out) and XPUB --pub (events to reporterd and monitors).
 * One epoch plan per job for eval: when every id of the plan has a result
 * or a failure, reducerd publishes the predictions, the final metric and
 * "end", tells every peer to stop, waits for reporterd's DONE and exits.
 * With --train it coordinates a training job instead (daemon_train.c).
 */
#include "common/clock.h"
#include "common/flags.h"
#include "common/log.h"
#include "common/zsockopt.h"
#include "proto/event.h"
#include "proto/proto.h"
#include "reducerd/daemon_reducer.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *f)
{
    fprintf(f,
            "usage: reducerd --bind ENDPOINT --pub ENDPOINT [options]\n"
            "  --bind EP            ROUTER for joins, plans, results (e.g. tcp://127.0.0.1:5560)\n"
            "  --pub EP             XPUB for events (metric, predictions, progress, log, worker, end)\n"
            "  --workers N          gpud ranks expected (world size; default 1)\n"
            "  --reporters N        reporterd DONE replies to wait for before exiting (default 1)\n"
            "  --job NAME           job name handed to joiners\n"
            "  --predictions        publish per-sample predictions (for predictions.csv; training:\n"
            "                       of the last validation)\n"
            "  --worker-timeout S   a gpud silent this long is reported dead (default 10)\n"
            "  --stall-timeout S    fail the job when nothing arrives for S seconds (default 600, 0 off)\n"
            "  --done-timeout S     how long to wait for reporterd at the end (default 60)\n"
            "training (docs/TRAINING.md):\n"
            "  --train              coordinate a training job: WELCOME the gpuds once all --workers\n"
            "                       ranks joined, tally each epoch's train and validation, decide\n"
            "                       early stopping and send EPOCH; a dead rank fails the job\n"
            "  --epochs E           epochs of the run (default 1)\n"
            "  --target-accuracy A  stop once val top-1 >= A (a fraction) for --patience epochs in a\n"
            "                       row (default 0: off)\n"
            "  --patience P         epochs in a row at the target before stopping (default 1)\n"
            "  --no-val             no validation plan comes (loaderd without --val): decide after\n"
            "                       each epoch's train tally, by --epochs only\n"
            "  --start-epoch E      the epoch a resumed run continues with (default 0)\n"
            "  --streak K           the streak a resumed run continues (checkpoint ckpt.streak)\n"
            "  --resume-dir DIR     run directory named in a failure's \"resume with\" hint\n"
            "  --verbose\n");
}

static int parse_train_checks(opts_t *o)
{
    if (!o->train)
        return 0;
    if (o->start_epoch >= o->epochs) {
        fprintf(stderr, "reducerd: --start-epoch %ld is not below --epochs %ld: nothing to train\n",
                o->start_epoch, o->epochs);
        return -1;
    }
    if (o->no_val && o->target > 0) {
        fprintf(stderr, "reducerd: --target-accuracy needs validation: drop --no-val (and give "
                        "loaderd --val) or drop --target-accuracy\n");
        return -1;
    }
    return 0;
}

static int parse(int argc, char **argv, opts_t *o)
{
    static struct option lo[] = {
        {"bind", 1, 0, 'b'},           {"pub", 1, 0, 'p'},
        {"workers", 1, 0, 'w'},        {"reporters", 1, 0, 'r'},
        {"job", 1, 0, 'j'},            {"predictions", 0, 0, 'P'},
        {"worker-timeout", 1, 0, 't'}, {"stall-timeout", 1, 0, 's'},
        {"done-timeout", 1, 0, 'd'},   {"verbose", 0, 0, 'v'},
        {"train", 0, 0, 'T'},          {"epochs", 1, 0, 'E'},
        {"target-accuracy", 1, 0, 'A'}, {"patience", 1, 0, 'Q'},
        {"no-val", 0, 0, 'N'},         {"start-epoch", 1, 0, 'S'},
        {"streak", 1, 0, 'K'},         {"resume-dir", 1, 0, 'R'},
        {"help", 0, 0, 'h'},           {0, 0, 0, 0}};
    *o = (opts_t){.workers = 1, .reporters = 1, .job = "ddpipe", .worker_timeout_s = 10,
                  .stall_timeout_s = 600, .done_timeout_s = 60, .epochs = 1, .patience = 1};
    int c;
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        int rc = 0;
        switch (c) {
        case 'b': o->bind = optarg; break;
        case 'p': o->pub = optarg; break;
        case 'j': o->job = optarg; break;
        case 'P': o->predictions = 1; break;
        case 'v': o->verbose = 1; break;
        case 'T': o->train = 1; break;
        case 'N': o->no_val = 1; break;
        case 'R': o->resume_dir = optarg; break;
        case 'w': rc = flags_long("workers", optarg, 1, 4096, &o->workers); break;
        case 'r': rc = flags_long("reporters", optarg, 0, 16, &o->reporters); break;
        case 't': rc = flags_long("worker-timeout", optarg, 1, 86400, &o->worker_timeout_s); break;
        case 's': rc = flags_long("stall-timeout", optarg, 0, 86400 * 7, &o->stall_timeout_s); break;
        case 'd': rc = flags_long("done-timeout", optarg, 1, 86400, &o->done_timeout_s); break;
        case 'E': rc = flags_long("epochs", optarg, 1, 1000000, &o->epochs); break;
        case 'A': rc = flags_double("target-accuracy", optarg, 0, 1, &o->target); break;
        case 'Q': rc = flags_long("patience", optarg, 1, 1000000, &o->patience); break;
        case 'S': rc = flags_long("start-epoch", optarg, 0, 1000000, &o->start_epoch); break;
        case 'K': rc = flags_long("streak", optarg, 0, 1000000, &o->streak); break;
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
    return parse_train_checks(o);
}

/* ---- peers --------------------------------------------------------------- */

void send_to(reducer_t *r, zframe_t *identity, const ddp_msg_t *m)
{
    zframe_t *id = zframe_dup(identity);
    if (proto_send(zsock_resolve(r->router), id, m) < 0)
        log_warn("sending %s failed: %s", proto_type_name(m->type), zmq_strerror(zmq_errno()));
    zframe_destroy(&id);
}

void stop_everyone(reducer_t *r, int code, const char *reason)
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
    if (r->o.train) {
        train_on_join(r, route, j);
        return;
    }
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
void ack_plan(reducer_t *r, zframe_t *route)
{
    ddp_msg_t w = {.type = DDP_WELCOME};
    w.u.welcome.rank = 0;
    w.u.welcome.world = 1;
    snprintf(w.u.welcome.job, sizeof w.u.welcome.job, "%s", r->o.job);
    send_to(r, route, &w);
}

slot_t *open_slot(reducer_t *r, ddp_plan_t *plan, bool keep_predictions)
{
    double now = clock_mono_s();
    slot_t *s = slot_new(plan, keep_predictions, (uint32_t)r->o.workers, now);
    if (!s)
        return NULL;
    const ddp_plan_t *p = slot_plan(s);
    r->slot[p->phase] = s;
    if (r->t_job == 0)
        r->t_job = now;
    log_info("plan: epoch %u %s, %llu samples%s%.0llu, %u classes, dataset %s", p->epoch,
             p->phase == DDP_PHASE_TRAIN ? "train" : r->o.train ? "validation" : "eval",
             (unsigned long long)p->n, p->skip ? ", resumed after " : "",
             (unsigned long long)p->skip, p->num_classes, p->dataset);
    return s;
}

static void on_plan(reducer_t *r, zframe_t *route, ddp_plan_t *plan)
{
    if (r->o.train) {
        train_on_plan(r, route, plan);
        return;
    }
    slot_t *have = r->slot[DDP_PHASE_EVAL] ? r->slot[DDP_PHASE_EVAL] : r->slot[DDP_PHASE_TRAIN];
    if (have) {
        const ddp_plan_t *p = slot_plan(have);
        if (plan->n != p->n || plan->epoch != p->epoch) {
            log_warn("ignoring a second, different plan (n=%llu); a restarted loaderd must "
                     "plan the same dataset", (unsigned long long)plan->n);
            return;
        }
        ack_plan(r, route);   /* a restarted loader: same plan, carry on */
        return;
    }
    if (plan->phase > DDP_PHASE_TRAIN || !open_slot(r, plan, true)) {
        r->exit_code = 1;
        return;
    }
    ack_plan(r, route);
}

/* The slot counting (epoch, phase), or NULL (logged, counted as rejected). */
static slot_t *slot_for(reducer_t *r, uint32_t epoch, uint8_t phase, const char *what)
{
    slot_t *s = phase <= DDP_PHASE_TRAIN ? r->slot[phase] : NULL;
    if (s && slot_plan(s)->epoch == epoch)
        return s;
    r->stats.rejected++;
    if (!r->slot[0] && !r->slot[1])
        log_warn("%s before any plan: dropped (the loader must send PLAN first)", what);
    else
        log_warn("%s for epoch %u phase %u, no such plan is being counted: dropped", what, epoch,
                 phase);
    return NULL;
}

/* A class id beyond the dataset's is a model/dataset mismatch, not noise:
 * waiting would only hang. */
static bool classes_fit(reducer_t *r, const slot_t *s, const ddp_result_t *res)
{
    uint32_t nc = slot_plan(s)->num_classes;
    for (uint64_t i = 0; i < (uint64_t)res->n * res->k; i++) {
        if (res->topk[i] >= (int32_t)nc) {
            char why[512];
            snprintf(why, sizeof why,
                     "rank %d predicts class %d but the dataset has %u classes: the model's classes "
                     "(--num-classes, the weights' fc) must match the dataset's",
                     res->rank, res->topk[i], nc);
            log_error("%s", why);
            publish_log(r, "error", "%s", why);
            finish(r, 1, why);
            return false;
        }
    }
    return true;
}

static void on_result(reducer_t *r, zframe_t *route, const ddp_result_t *res)
{
    slot_t *s = slot_for(r, res->epoch, res->phase, "RESULT");
    if (!s || !classes_fit(r, s, res))
        return;
    peer_t *p = peers_by_identity(r->peers, route);
    uint64_t invalid, dup;
    slot_add_result(s, res, clock_mono_s(), &invalid, &dup);
    if (r->o.train)
        train_note_step(r, res);
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
    slot_t *s = slot_for(r, f->epoch, f->phase, "FAILED");
    if (!s)
        return;
    int rc = slot_add_failed(s, f, clock_mono_s());
    if (rc < 0) {
        r->stats.rejected++;
        log_warn("FAILED for id %llu outside the plan: ignored", (unsigned long long)f->id);
        return;
    }
    if (rc == 0)
        publish_log(r, "warn", "failed %s: %s", f->path, f->reason);
}

static void on_heartbeat(reducer_t *r, zframe_t *route, const ddp_heartbeat_t *hb)
{
    peer_t *p = peers_by_name(r->peers, hb->worker);
    if (!p)
        p = peers_by_identity(r->peers, route);
    if (!p)
        return;
    if (p->dead) {
        if (r->o.train)
            return; /* the job already failed on its death */
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
    /* training ranks wait for their gang without heartbeats: judge them
     * from the WELCOME on */
    if (r->o.train && !r->gang)
        return;
    int64_t now = clock_mono_ms();
    for (int i = 0; i < peers_count(r->peers) && !r->finished; i++) {
        peer_t *p = peers_at(r->peers, i);
        if (p->role == DDP_ROLE_GPUD && !p->dead &&
            now - p->last_seen_ms > r->o.worker_timeout_s * 1000) {
            p->dead = true;
            log_warn("rank %d (%s) silent for %lds: declared dead%s", p->rank, p->name,
                     r->o.worker_timeout_s, r->o.train ? "" : "; loaderd re-sends its batches");
            publish_log(r, "warn", "rank %d (%s) declared dead", p->rank, p->name);
            publish_worker(r, p, "dead");
            if (r->o.train)
                train_rank_died(r, p);
        }
    }
}

slot_t *active_slot(reducer_t *r)
{
    slot_t *e = r->slot[DDP_PHASE_EVAL], *t = r->slot[DDP_PHASE_TRAIN];
    if (e && t)
        return slot_complete(t) ? e : t;
    return e ? e : t;
}

void finish(reducer_t *r, int code, const char *reason)
{
    if (r->finished)
        return;
    slot_t *s = active_slot(r);
    if (code == 0 && !r->o.train && s) {
        publish_progress(r); /* a last one at done == total for monitors and plots */
        publish_failed_files(r, s);
        if (r->o.predictions)
            publish_predictions(r, s);
        publish_metric(r, s, true, NULL);
    }
    publish_end(r, code, reason);
    stop_everyone(r, code, reason);
    r->finished = true;
    r->exit_code = r->exit_code ? r->exit_code : code;
    if (code == 0)
        log_info("job complete: %s", reason);
    else
        log_error("job failed: %s", reason);
}

/* Events are lost on a PUB with nobody listening: results wait until the
 * expected reporter has subscribed. */
bool reporter_listening(reducer_t *r)
{
    static bool announced;
    if (r->o.reporters == 0 || r->subscribers >= 1)
        return true;
    if (!announced)
        log_info("results complete; waiting for reporterd to subscribe");
    announced = true;
    return false;
}

static void tick(reducer_t *r, int64_t now)
{
    if (now - r->last_progress_ms >= 1000) {
        r->last_progress_ms = now;
        check_liveness(r);
        if (!r->finished)
            publish_progress(r);
    }
    slot_t *s = active_slot(r);
    if (!r->finished && r->o.train)
        train_tick(r);
    else if (!r->finished && s && slot_complete(s) && reporter_listening(r))
        finish(r, 0, "all samples accounted for");
    if (!r->finished && r->o.stall_timeout_s > 0 &&
        now - r->last_activity_ms > r->o.stall_timeout_s * 1000)
        finish(r, 1, "no message for --stall-timeout seconds: are loaderd and gpud running?");
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
        bool was_finished = r->finished;
        tick(r, now);
        if (r->finished && !was_finished)
            finished_at = now;
        if (r->finished) {
            /* nobody to confirm when no reporter ever listened (a failure
             * before it subscribed): the end event went nowhere */
            if (r->reporters_done >= r->o.reporters || r->subscribers < 1)
                break;
            if (finished_at == 0)
                finished_at = now;
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
    slot_destroy(&r->slot[0]);
    slot_destroy(&r->slot[1]);
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
    r.epoch = (uint32_t)r.o.start_epoch;
    r.streak = (uint32_t)r.o.streak;
    if (r.o.train)
        log_info("listening on %s, publishing on %s: training %ld ranks, epochs %ld..%ld, target "
                 "%g, patience %ld, streak %ld%s", r.o.bind, r.o.pub, r.o.workers, r.o.start_epoch,
                 r.o.epochs - 1, r.o.target, r.o.patience, r.o.streak,
                 r.o.no_val ? ", no validation" : "");
    else
        log_info("listening on %s, publishing on %s, expecting %ld workers", r.o.bind, r.o.pub,
                 r.o.workers);
    int rc = run(&r);
    log_info("exiting (%llu messages, %llu rejected)", (unsigned long long)r.stats.received,
             (unsigned long long)r.stats.rejected);
    reducer_cleanup(&r);
    return rc;
}
