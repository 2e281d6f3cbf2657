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
#include "common/zsecurity.h"
#include "common/zsockopt.h"
#include "proto/event.h"
#include "proto/proto.h"
#include "proto/ratelog.h"
#include "reducerd/daemon_reducer.h"

#include <getopt.h>
#include <stdarg.h>
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
            "  --stall-timeout S    fail the job after S seconds without progress: no accepted\n"
            "                       result, failure, plan or new worker (heartbeats and rejected\n"
            "                       messages do not count; default 600, 0 off)\n"
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
            ZS_SECURITY_USAGE
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

/* ---- trust (PROTOCOL.md "Trust") ------------------------------------------ */

void reject(reducer_t *r, const char *peer, const char *kind, const char *fmt, ...)
{
    r->stats.rejected++;
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ratelog_reject(r, peer, kind, msg);
}

uint64_t rejected_total(const reducer_t *r) { return r->stats.rejected + r->loader_rejected; }

void welcome_auth(reducer_t *r, ddp_welcome_t *w, uint8_t role, int32_t rank, const char *name)
{
    w->session = r->session;
    token_compute(r->secret, r->session, role, rank, name, w->token);
}

/* job, session and token of a message claiming (role, rank, name). */
static bool auth_ok(const reducer_t *r, const ddp_auth_t *a, uint8_t role, int32_t rank,
                    const char *name)
{
    return a->session == r->session && strcmp(a->job, r->o.job) == 0 &&
           token_valid(r->secret, r->session, role, rank, name, a->token);
}

/* A printable name for a ROUTER identity: the joined peer's name, or hex. */
static void peer_label(reducer_t *r, zframe_t *route, char *buf, size_t cap)
{
    peer_t *p = route ? peers_by_identity(r->peers, route) : NULL;
    if (p) {
        snprintf(buf, cap, "%s", p->name);
        return;
    }
    size_t n = route ? zframe_size(route) : 0, off = 0;
    const uint8_t *d = route ? zframe_data(route) : NULL;
    off += (size_t)snprintf(buf, cap, "unjoined ");
    for (size_t i = 0; i < n && i < 16 && off + 3 < cap; i++)
        off += (size_t)snprintf(buf + off, cap - off, "%02x", d[i]);
}

static bool loader_alive(const reducer_t *r)
{
    return r->loader_id && clock_mono_ms() - r->loader_seen_ms <= r->o.worker_timeout_s * 1000;
}

/* The loader role belongs to the identity that joined as loader; a second
 * one is refused while the first is heard from (PLAN, ISSUED, FAILED,
 * HEARTBEAT), so a stranger cannot take the plan over. A loader silent for
 * --worker-timeout may be replaced (a restarted loaderd). */
bool loader_join_ok(reducer_t *r, zframe_t *route, const ddp_join_t *j)
{
    if (r->loader_id && zframe_eq(r->loader_id, route)) {
        r->loader_seen_ms = clock_mono_ms();
        return true;
    }
    if (loader_alive(r)) {
        reject(r, j->name, "JOIN", "a second loader while %s is alive: only one loaderd per job",
               r->loader_name);
        return false;
    }
    if (r->loader_id) {
        uint64_t dropped = issued_reset(r->issued);
        r->stats.rejected += dropped;
        log_warn("loader %s replaces %s (silent for more than %lds)", j->name, r->loader_name,
                 r->o.worker_timeout_s);
    }
    zframe_destroy(&r->loader_id);
    r->loader_id = zframe_dup(route);
    snprintf(r->loader_name, sizeof r->loader_name, "%s", j->name);
    r->loader_seen_ms = clock_mono_ms();
    return true;
}

/* From the loader's identity (and, once it has one, with its token). */
static bool from_loader(reducer_t *r, zframe_t *route, const ddp_auth_t *a, bool need_token,
                        const char *kind)
{
    char who[64];
    if (!r->loader_id || !zframe_eq(r->loader_id, route)) {
        peer_label(r, route, who, sizeof who);
        reject(r, who, kind, "only the loader that joined (%s) may send %s",
               r->loader_id ? r->loader_name : "none yet", kind);
        return false;
    }
    if ((need_token || a->session) && !auth_ok(r, a, DDP_ROLE_LOADER, -1, r->loader_name)) {
        reject(r, r->loader_name, kind, "missing or wrong session token");
        return false;
    }
    r->loader_seen_ms = clock_mono_ms();
    return true;
}

void end_issued(reducer_t *r, uint32_t epoch, uint8_t phase)
{
    uint64_t dropped = issued_end(r->issued, epoch, phase);
    if (dropped) {
        r->rejected_results += dropped;
        reject(r, "ranks", "RESULT", "%llu RESULTs of epoch %u phase %u never matched an issued "
               "batch", (unsigned long long)dropped, epoch, phase);
        r->stats.rejected += dropped - 1;
    }
}

/* ---- joins and plans ------------------------------------------------------ */

static void on_join(reducer_t *r, zframe_t *route, const ddp_join_t *j)
{
    if (r->o.train) {
        train_on_join(r, route, j);
        return;
    }
    if (j->role == DDP_ROLE_LOADER && !loader_join_ok(r, route, j))
        return;
    peer_t *held = peers_by_name(r->peers, j->name);
    bool known = held != NULL;
    if (held && !zframe_eq(held->identity, route) && !held->dead &&
        clock_mono_ms() - held->last_seen_ms <= r->o.worker_timeout_s * 1000) {
        /* a name is a rank's: a second socket may take it only once the
         * first fell silent (a restarted gpud), never from a live one */
        reject(r, j->name, "JOIN", "the name is held by a live %s (rank %d)",
               proto_role_name(held->role), held->rank);
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
        welcome_auth(r, &w.u.welcome, DDP_ROLE_GPUD, p->rank, p->name);
        send_to(r, route, &w);
        if (!known)
            r->last_activity_ms = clock_mono_ms(); /* a new worker is progress */
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
 * arrive before the plan it belongs to. It carries the loader's session
 * token and the job secret (loaderd checks gpud tokens with it). */
void ack_plan(reducer_t *r, zframe_t *route)
{
    ddp_msg_t w = {.type = DDP_WELCOME};
    w.u.welcome.rank = 0;
    w.u.welcome.world = 1;
    snprintf(w.u.welcome.job, sizeof w.u.welcome.job, "%s", r->o.job);
    welcome_auth(r, &w.u.welcome, DDP_ROLE_LOADER, -1, r->loader_name);
    w.u.welcome.has_secret = true;
    memcpy(w.u.welcome.secret, r->secret, sizeof r->secret);
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
    r->last_activity_ms = clock_mono_ms();
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
    if (!from_loader(r, route, &plan->auth, false, "PLAN"))
        return;
    if (r->o.train) {
        train_on_plan(r, route, plan);
        return;
    }
    slot_t *have = r->slot[DDP_PHASE_EVAL] ? r->slot[DDP_PHASE_EVAL] : r->slot[DDP_PHASE_TRAIN];
    if (have) {
        const ddp_plan_t *p = slot_plan(have);
        if (plan->n != p->n || plan->epoch != p->epoch) {
            reject(r, r->loader_name, "PLAN", "a second, different plan (n=%llu); a restarted "
                   "loaderd must plan the same dataset", (unsigned long long)plan->n);
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
static slot_t *slot_for(reducer_t *r, const char *peer, uint32_t epoch, uint8_t phase,
                        const char *what)
{
    slot_t *s = phase <= DDP_PHASE_TRAIN ? r->slot[phase] : NULL;
    if (s && slot_plan(s)->epoch == epoch)
        return s;
    if (!r->slot[0] && !r->slot[1])
        reject(r, peer, what, "before any plan (the loader must send PLAN first)");
    else
        reject(r, peer, what, "for epoch %u phase %u: no such plan is being counted", epoch,
               phase);
    return NULL;
}

/* ---- results ---------------------------------------------------------------- */

/* Asks the loader to hand an eval batch out again: its answer was refused,
 * and waiting for it would hang the epoch. Train shards cannot be redone
 * alone (the step's gradient is summed): the stall rule names them. */
static void ask_reissue(reducer_t *r, const ddp_result_t *res, const char *why)
{
    if (res->phase != DDP_PHASE_EVAL || !r->loader_id)
        return;
    ddp_msg_t m = {.type = DDP_REISSUE};
    m.u.reissue = (ddp_reissue_t){.seq = res->seq, .epoch = res->epoch, .phase = res->phase,
                                  .rank = res->rank};
    snprintf(m.u.reissue.reason, sizeof m.u.reissue.reason, "%s", why);
    send_to(r, r->loader_id, &m);
}

static void refuse_result(reducer_t *r, const char *peer, const ddp_result_t *res, const char *why)
{
    if (!r->first_reject[0])
        snprintf(r->first_reject, sizeof r->first_reject, "rank %d: %s", res->rank, why);
    r->rejected_results++;
    snprintf(r->last_reject, sizeof r->last_reject, "rank %d: %s", res->rank, why);
    reject(r, peer, "RESULT", "seq %llu: %s", (unsigned long long)res->seq, why);
}

/* Every class id within the plan's classes; else why. */
static bool classes_fit(const slot_t *s, const ddp_result_t *res, char *why, size_t whylen)
{
    uint32_t nc = slot_plan(s)->num_classes;
    for (uint64_t i = 0; i < (uint64_t)res->n * res->k; i++) {
        if (res->topk[i] >= (int32_t)nc) {
            snprintf(why, whylen, "rank %d predicts class %d but the dataset has %u classes: "
                     "--num-classes (the weights' fc) and --classes must match the dataset",
                     res->rank, res->topk[i], nc);
            return false;
        }
    }
    return true;
}

/* Counts a RESULT that answers its issued batch, with the issued labels. */
static void count_result(reducer_t *r, slot_t *s, peer_t *p, const ddp_result_t *res,
                         int32_t *labels)
{
    ddp_result_t view = *res;
    view.labels = labels;   /* a worker cannot change the labels */
    uint64_t invalid, dup;
    slot_add_result(s, &view, clock_mono_s(), &invalid, &dup);
    if (r->o.train)
        train_note_step(r, res);
    uint64_t counted = res->n - invalid - dup;
    p->results += counted;
    if (counted)
        r->last_activity_ms = clock_mono_ms();
    if (invalid) {
        r->stats.rejected++;
        log_warn("RESULT seq %llu from rank %d: %llu of %u samples invalid (id out of the plan "
                 "or bad loss), ignored", (unsigned long long)res->seq, res->rank,
                 (unsigned long long)invalid, res->n);
    }
    if (dup)
        log_debug("RESULT seq %llu: %llu duplicates ignored (re-sent batch)",
                  (unsigned long long)res->seq, (unsigned long long)dup);
}

/* A RESULT from a trusted rank, judged against what was issued. held: it
 * was held back before (its ISSUED has now arrived). */
static void judge_result(reducer_t *r, peer_t *p, ddp_result_t *res)
{
    char why[512] = "";
    slot_t *s = slot_for(r, p->name, res->epoch, res->phase, "RESULT");
    if (!s) {
        r->rejected_results++;
        return;
    }
    int32_t *labels = NULL;
    switch (issued_judge(r->issued, res, &labels, why, sizeof why)) {
    case ISSUED_LATER:
        if (issued_hold(r->issued, res) < 0)
            refuse_result(r, p->name, res, "too many RESULTs ahead of their ISSUED");
        return;
    case ISSUED_FOREIGN:
        refuse_result(r, p->name, res, why);
        return;
    case ISSUED_WRONG:
        refuse_result(r, p->name, res, why);
        ask_reissue(r, res, why);
        return;
    case ISSUED_MATCH: break;
    }
    if (!classes_fit(s, res, why, sizeof why)) {
        refuse_result(r, p->name, res, why);
        if (!p->told_classes)   /* once per peer: the hint, not a flood */
            publish_log(r, "error", "%s", why);
        p->told_classes = true;
        snprintf(r->class_hint, sizeof r->class_hint, "%s", why);
        ask_reissue(r, res, why);
    } else {
        count_result(r, s, p, res, labels);
    }
    free(labels);
}

static void on_result(reducer_t *r, zframe_t *route, ddp_result_t *res)
{
    /* the sender: the socket that joined as this rank, with its token */
    peer_t *p = peers_by_identity(r->peers, route);
    char who[64];
    peer_label(r, route, who, sizeof who);
    if (!p || p->role != DDP_ROLE_GPUD || p->rank != res->rank) {
        r->rejected_results++;
        reject(r, who, "RESULT", "claims rank %d but this socket did not join as rank %d",
               res->rank, res->rank);
        return;
    }
    if (!auth_ok(r, &res->auth, DDP_ROLE_GPUD, p->rank, p->name)) {
        r->rejected_results++;
        reject(r, who, "RESULT", "missing or wrong job/session token");
        return;
    }
    p->last_seen_ms = clock_mono_ms();
    judge_result(r, p, res);
}

static void on_failed(reducer_t *r, zframe_t *route, const ddp_failed_t *f)
{
    if (!from_loader(r, route, &f->auth, true, "FAILED"))
        return;
    slot_t *s = slot_for(r, r->loader_name, f->epoch, f->phase, "FAILED");
    if (!s)
        return;
    int rc = slot_add_failed(s, f, clock_mono_s());
    if (rc < 0) {
        reject(r, r->loader_name, "FAILED", "id %llu is outside the plan",
               (unsigned long long)f->id);
        return;
    }
    if (rc == 0) {
        r->last_activity_ms = clock_mono_ms();
        publish_log(r, "warn", "failed %s: %s", f->path, f->reason);
    }
}

/* RESULTs held back for an ISSUED that has now come are judged. */
static void judge_held(reducer_t *r)
{
    ddp_result_t res;
    while (issued_pop_decidable(r->issued, &res)) {
        peer_t *p = peers_by_rank(r->peers, res.rank);
        if (p)
            judge_result(r, p, &res);
        ddp_msg_t m = {.type = DDP_RESULT};
        m.u.result = res;
        ddp_msg_clear(&m);
    }
}

static void on_issued(reducer_t *r, zframe_t *route, ddp_issued_t *is)
{
    if (!from_loader(r, route, &is->auth, true, "ISSUED"))
        return;
    if (is->rejected > r->loader_rejected)
        r->loader_rejected = is->rejected;
    char why[256];
    if (issued_add(r->issued, is, why, sizeof why) < 0) {
        reject(r, r->loader_name, "ISSUED", "%s", why);
        return;
    }
    judge_held(r);
}

static void on_heartbeat(reducer_t *r, zframe_t *route, const ddp_heartbeat_t *hb)
{
    char who[64];
    peer_label(r, route, who, sizeof who);
    if (r->loader_id && hb->rank == -1 && strcmp(hb->worker, r->loader_name) == 0) {
        if (!auth_ok(r, &hb->auth, DDP_ROLE_LOADER, -1, r->loader_name)) {
            reject(r, who, "HEARTBEAT", "loader heartbeat without its session token");
            return;
        }
        r->loader_seen_ms = clock_mono_ms();
        if (hb->rejected > r->loader_rejected)
            r->loader_rejected = hb->rejected;
        return;
    }
    peer_t *p = peers_by_name(r->peers, hb->worker);
    if (!p || p->role != DDP_ROLE_GPUD || p->rank != hb->rank ||
        !auth_ok(r, &hb->auth, DDP_ROLE_GPUD, p->rank, p->name)) {
        reject(r, who, "HEARTBEAT", "from '%s' rank %d: not a joined worker with its session "
               "token", hb->worker, hb->rank);
        return;
    }
    if (p->dead) {
        if (r->o.train)
            return; /* the job already failed on its death */
        p->dead = false;
        log_info("%s is alive again", p->name);
        publish_worker(r, p, "joined");
    }
    p->last_seen_ms = clock_mono_ms();
}

static void on_done(reducer_t *r, zframe_t *route, const ddp_done_t *d)
{
    peer_t *p = peers_by_identity(r->peers, route);
    if (!p || p->role != DDP_ROLE_REPORTER) {
        char who[64];
        peer_label(r, route, who, sizeof who);
        reject(r, who, "DONE", "only a joined reporterd sends DONE");
        return;
    }
    r->reporters_done++;
    if (d->code != 0) {
        log_error("reporterd could not write the run directory: %s", d->reason);
        r->exit_code = 1;
    } else {
        log_info("reporterd wrote the run directory");
    }
}

/* Heartbeats and rejected messages are not progress: only what moves the
 * count (accepted results and failures, plans, new workers) resets the
 * stall clock (last_activity_ms), so nothing keeps a stuck job alive. */
/* The trust keys a message carries, or NULL. */
static const ddp_auth_t *msg_auth(const ddp_msg_t *m)
{
    switch (m->type) {
    case DDP_PLAN: return &m->u.plan.auth;
    case DDP_RESULT: return &m->u.result.auth;
    case DDP_FAILED: return &m->u.failed.auth;
    case DDP_ISSUED: return &m->u.issued.auth;
    case DDP_HEARTBEAT: return &m->u.heartbeat.auth;
    default: return NULL;
    }
}

/* A message of this job under another session comes from a peer that an
 * earlier reducerd welcomed: that reducerd died (kill -9, a crash) and its
 * tallies died with it. The peer is told to stop with DDP_STOP_JOB_LOST,
 * and a reducerd that has no job of its own yet (no plan, no rank: the
 * restarted one) ends too, so nothing waits for state that is gone. A
 * reducerd with a job only rejects it (a stranger must not end a job). */
static bool stale_session(reducer_t *r, zframe_t *route, const ddp_msg_t *m)
{
    const ddp_auth_t *a = msg_auth(m);
    if (!a || a->session == 0 || a->session == r->session || strcmp(a->job, r->o.job) != 0)
        return false;
    static const char why[] =
        "reducerd restarted and this job's tallies were lost with the previous one: every "
        "daemon stops (exit 3); run the job again";
    ddp_msg_t s = {.type = DDP_STOP};
    s.u.stop.code = DDP_STOP_JOB_LOST;
    snprintf(s.u.stop.reason, sizeof s.u.stop.reason, "%s", why);
    send_to(r, route, &s);
    char who[64];
    peer_label(r, route, who, sizeof who);
    reject(r, who, proto_type_name(m->type), "session of an earlier reducerd: told to stop");
    bool fresh = !r->slot[0] && !r->slot[1] && peers_alive(r->peers, DDP_ROLE_GPUD) == 0;
    if (fresh && !r->finished) {
        r->job_lost = true;
        finish(r, DDP_STOP_JOB_LOST, why);
    }
    return true;
}

static void on_message(reducer_t *r, zframe_t *route, ddp_msg_t *m)
{
    if (stale_session(r, route, m))
        return;
    switch (m->type) {
    case DDP_JOIN: on_join(r, route, &m->u.join); break;
    case DDP_PLAN: on_plan(r, route, &m->u.plan); break;
    case DDP_RESULT: on_result(r, route, &m->u.result); break;
    case DDP_FAILED: on_failed(r, route, &m->u.failed); break;
    case DDP_ISSUED: on_issued(r, route, &m->u.issued); break;
    case DDP_HEARTBEAT: on_heartbeat(r, route, &m->u.heartbeat); break;
    case DDP_DONE: on_done(r, route, &m->u.done); break;
    default: {
        char who[64];
        peer_label(r, route, who, sizeof who);
        reject(r, who, proto_type_name(m->type), "unexpected on the reducer socket");
    }
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
        if (r->job_lost)   /* a reporterd reconnecting after the end: tell it too */
            publish_end(r, r->exit_code, r->end_reason);
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
    if (s && !r->o.train)
        end_issued(r, slot_plan(s)->epoch, slot_plan(s)->phase);
    publish_end(r, code, reason);
    snprintf(r->end_reason, sizeof r->end_reason, "%s", reason);
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

/* No progress for --stall-timeout: fail, saying what is missing and why. */
static void stalled(reducer_t *r)
{
    char why[1536], what[256] = "no plan from loaderd yet (is loaderd running?)";
    slot_t *s = active_slot(r);
    if (s)
        snprintf(what, sizeof what, "epoch %u %s has %llu of %llu samples accounted for",
                 slot_plan(s)->epoch, slot_plan(s)->phase == DDP_PHASE_TRAIN ? "train" : "eval",
                 (unsigned long long)slot_accounted(s), (unsigned long long)slot_expected(s));
    if (r->rejected_results)
        snprintf(why, sizeof why, "no progress for %lds (--stall-timeout): %s; %llu RESULTs were "
                 "rejected (first: %s; latest: %s)", r->o.stall_timeout_s, what,
                 (unsigned long long)r->rejected_results,
                 r->first_reject[0] ? r->first_reject : "not from a joined rank", r->last_reject);
    else
        snprintf(why, sizeof why, "no progress for %lds (--stall-timeout): %s; are loaderd and "
                 "the gpuds running and reachable?", r->o.stall_timeout_s, what);
    publish_log(r, "error", "%s", why);
    finish(r, 1, why);
}

/* Every live worker had its answers refused for classes outside the
 * dataset's and nothing moved for --worker-timeout: a model/dataset
 * mismatch, not noise; no worker is left whose answers can count (loaderd
 * gives refused workers no more batches), so waiting would only hang. A
 * worker refused while others count changes nothing. */
static void check_refused_workers(reducer_t *r, int64_t now)
{
    int live = 0, refused = 0;
    for (int i = 0; i < peers_count(r->peers); i++) {
        peer_t *p = peers_at(r->peers, i);
        if (p->role == DDP_ROLE_GPUD && !p->dead) {
            live++;
            refused += p->told_classes;
        }
    }
    if (live == 0 || refused < live || now - r->last_activity_ms <= r->o.worker_timeout_s * 1000)
        return;
    char why[1024];
    snprintf(why, sizeof why, "every worker's answers were refused (%d of %d): %s", refused, live,
             r->class_hint);
    log_error("%s", why);
    finish(r, 1, why);
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
    if (!r->finished)
        check_refused_workers(r, now);
    if (!r->finished && r->o.stall_timeout_s > 0 &&
        now - r->last_activity_ms > r->o.stall_timeout_s * 1000)
        stalled(r);
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
            if (finished_at == 0)
                finished_at = now;
            /* A lost job stays up for --worker-timeout, so that every live
             * peer of the earlier reducerd (each speaks at least that
             * often) hears its STOP, and until a reporterd of it has
             * resubscribed and heard the end (at most --done-timeout); no
             * DONE comes from it. */
            if (r->job_lost) {
                int64_t up = now - finished_at;
                if (up > r->o.worker_timeout_s * 1000 &&
                    (r->subscribers >= 1 || up > r->o.done_timeout_s * 1000))
                    break;
                continue;
            }
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
    slot_destroy(&r->slot[0]);
    slot_destroy(&r->slot[1]);
    peers_destroy(&r->peers);
    issued_destroy(&r->issued);
    zframe_destroy(&r->loader_id);
    zsock_destroy(&r->router);
    zsock_destroy(&r->xpub);
}

int main(int argc, char **argv)
{
    reducer_t r;
    memset(&r, 0, sizeof r);
    if (zs_security_args(&argc, argv) < 0)
        return 2;
    if (parse(argc, argv, &r.o) < 0)
        return 2;
    log_init("reducerd", -1, r.o.verbose);
    zs_install_signals();
    r.router = zs_bind(ZMQ_ROUTER, r.o.bind, "reducer");
    r.xpub = zs_bind(ZMQ_XPUB, r.o.pub, "event");
    r.peers = peers_new((int)r.o.workers);
    r.issued = issued_new();
    if (token_random(r.secret, sizeof r.secret) < 0 || token_new_session(&r.session) < 0) {
        log_error("cannot draw the job secret: no kernel randomness (getrandom)?");
        reducer_cleanup(&r);
        return 1;
    }
    if (!r.router || !r.xpub || !r.peers || !r.issued) {
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
    log_info("exiting (%llu messages, %llu rejected); loaderd reported %llu rejected",
             (unsigned long long)r.stats.received, (unsigned long long)r.stats.rejected,
             (unsigned long long)r.loader_rejected);
    reducer_cleanup(&r);
    return rc;
}
