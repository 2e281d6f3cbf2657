/* reporterd — subscribes to reducerd's events, writes the run directory
 * (summary.json, CSVs, classification report, plots), re-publishes every
 * event on its tap for monitors (an XPUB that replays the last state to a
 * late subscriber), serves Prometheus metrics on --metrics-http, and tells
 * reducerd when the files are written. Nothing here blocks on a consumer:
 * the tap drops for a slow subscriber at its high-water mark and the HTTP
 * server has its own thread. */
#include "common/flags.h"
#include "common/log.h"
#include "common/zsecurity.h"
#include "common/zsockopt.h"
#include "proto/event.h"
#include "proto/wire.h"
#include "common/clock.h"
#include "reporterd/metrics_http.h"
#include "reporterd/plot.h"
#include "reporterd/promstate.h"
#include "reporterd/rundir.h"
#include "reporterd/tapcache.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    const char *sub;
    const char *reducer;
    const char *out;
    const char *tap;
    const char *metrics_http;
    long tap_hwm;
    long linger_s;        /* after the end, keep /metrics and the tap up this long */
    int verbose;
    const char *seed_csv; /* training: the seed course's time,val_accuracy file */
    long start_epoch;     /* training resume: earlier rows kept; -1 none */
} opts_t;

typedef struct {
    opts_t o;
    zsock_t *sub;
    zsock_t *reducer;
    zsock_t *tap;
    tapcache_t *tapcache;
    promstate_t *prom;
    metrics_http_t *http;
    rundir_t *rd;
    uint64_t events, rejected, replays;
    char write_error[512]; /* the first failed write of the run directory */
    int exit_code;
    bool done;
} reporter_t;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: reporterd --sub EP --reducer EP --out DIR [--tap EP] [--metrics-http HOST:PORT]\n"
            "  --sub EP                reducerd's event endpoint (its --pub)\n"
            "  --reducer EP            reducerd's ROUTER (join, and DONE when the files are written)\n"
            "  --out DIR               run directory\n"
            "  --tap EP                PUB endpoint re-publishing every event for monitors\n"
            "                          (ddpipe tap EP); a late subscriber first gets the last\n"
            "                          metric, progress and worker events\n"
            "  --tap-hwm N             events queued per tap subscriber before it drops (default 1000)\n"
            "  --metrics-http H:P      Prometheus text exposition at http://H:P/metrics\n"
            "  --linger S              after the job's end keep serving /metrics and the tap for\n"
            "                          S seconds, or until SIGTERM (compose: a scrape after the\n"
            "                          end still sees the final values; default 0)\n"
            "training (docs/TRAINING.md):\n"
            "  --seed-csv NAME         also write the seed course's time,val_accuracy log as NAME\n"
            "                          in the run directory ({W}ranks-{bs}bs-{lr}lr-{m}m-{w}w.csv)\n"
            "  --start-epoch E         a resumed run: keep metrics.csv rows of epochs < E from the\n"
            "                          earlier run, drop the rest (they are redone)\n"
            ZS_SECURITY_USAGE
            "  --verbose\n");
}

static int parse(int argc, char **argv, opts_t *o)
{
    static struct option lo[] = {{"sub", 1, 0, 's'}, {"reducer", 1, 0, 'r'}, {"out", 1, 0, 'o'},
                                 {"tap", 1, 0, 't'}, {"tap-hwm", 1, 0, 'H'},
                                 {"metrics-http", 1, 0, 'm'}, {"verbose", 0, 0, 'v'},
                                 {"linger", 1, 0, 'L'},
                                 {"seed-csv", 1, 0, 'S'}, {"start-epoch", 1, 0, 'E'},
                                 {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    memset(o, 0, sizeof *o);
    o->tap_hwm = 1000;
    o->start_epoch = -1;
    int c;
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (c) {
        case 'm': o->metrics_http = optarg; break;
        case 'L':
            if (flags_long("linger", optarg, 0, 86400, &o->linger_s) < 0)
                return -1;
            break;
        case 'H':
            if (flags_long("tap-hwm", optarg, 1, 1000000, &o->tap_hwm) < 0)
                return -1;
            break;
        case 'S': o->seed_csv = optarg; break;
        case 'E':
            if (flags_long("start-epoch", optarg, 0, 1000000, &o->start_epoch) < 0)
                return -1;
            break;
        case 's': o->sub = optarg; break;
        case 'r': o->reducer = optarg; break;
        case 'o': o->out = optarg; break;
        case 't': o->tap = optarg; break;
        case 'v': o->verbose = 1; break;
        case 'h': usage(stdout); exit(0);
        default: usage(stderr); return -1;
        }
    }
    if (!o->sub || !o->reducer || !o->out) {
        fprintf(stderr, "reporterd: --sub, --reducer and --out are required\n");
        usage(stderr);
        return -1;
    }
    return 0;
}

static void send_done(reporter_t *R, int code, const char *reason)
{
    ddp_msg_t m = {.type = DDP_DONE};
    m.u.done.code = code;
    snprintf(m.u.done.reason, sizeof m.u.done.reason, "%s", reason);
    if (proto_send(zsock_resolve(R->reducer), NULL, &m) < 0)
        log_error("cannot tell reducerd the run directory is written: %s", zmq_strerror(zmq_errno()));
}

static void on_end(reporter_t *R, const ev_end_t *end)
{
    char err[512] = "";
    int code = 0;
    if (end->code == 0) {
        if (rundir_finish(R->rd, err, sizeof err) < 0) {
            log_error("cannot write the run directory %s: %s", R->o.out, err);
            code = 1;
        } else if (R->write_error[0]) {
            /* finished, but a file written during the run was lost: say so */
            snprintf(err, sizeof err, "%s", R->write_error);
            log_error("the run directory %s is incomplete: %s", R->o.out, err);
            code = 1;
        } else {
            log_info("run directory %s written", R->o.out);
        }
    } else {
        log_error("the job failed (code %d: %s): no summary written", end->code, end->reason);
    }
    send_done(R, code, code ? err : "ok");
    /* our exit status tells the launcher whether the run directory is whole */
    R->exit_code = code                               ? code
                   : end->code == DDP_STOP_JOB_LOST ? DDP_STOP_JOB_LOST
                                                    : (end->code != 0);
    R->done = true;
}

static void handle(reporter_t *R, const ddp_event_t *ev)
{
    char err[512] = "";
    int rc = 0;
    switch (ev->topic) {
    case EV_METRIC: rc = rundir_on_metric(R->rd, &ev->u.metric, err, sizeof err); break;
    case EV_PREDICTIONS: rc = rundir_on_predictions(R->rd, &ev->u.predictions, err, sizeof err); break;
    case EV_FAILED:
        rc = rundir_on_failed(R->rd, &ev->u.failed);
        break;
    case EV_PROGRESS:
        rc = rundir_on_progress(R->rd, &ev->u.progress, clock_mono_s(), err, sizeof err);
        break;
    case EV_END: on_end(R, &ev->u.end); break;
    default: break;
    }
    if (rc < 0) {
        log_error("writing %s for a %s event failed: %s", R->o.out, event_topic_name(ev->topic), err);
        if (!R->write_error[0])
            snprintf(R->write_error, sizeof R->write_error, "%s", err);
    }
}

static void on_event(reporter_t *R)
{
    zmsg_t *m = zmsg_recv(R->sub);
    if (!m)
        return;
    R->events++;
    ddp_event_t ev;
    char why[256];
    bool ok = event_decode(m, &ev, why, sizeof why) == 0;
    if (R->tap && ok) {
        /* unchanged bytes; a PUB never blocks: a slow monitor loses events */
        zmsg_t *copy = zmsg_dup(m);
        if (copy && zmsg_send(&copy, R->tap) < 0)
            zmsg_destroy(&copy);
        if (tapcache_keep(R->tapcache, &ev, m) != 0)
            log_warn("out of memory keeping the last %s event for late tap subscribers",
                     event_topic_name(ev.topic));
    }
    if (!ok) {
        R->rejected++;
        promstate_add_rejected(R->prom, 1);
        log_warn("rejected an event: %s", why);
    } else {
        promstate_on_event(R->prom, &ev, clock_mono_s());
        handle(R, &ev);
        event_clear(&ev);
    }
    zmsg_destroy(&m);
}

/* A monitor (un)subscribed on the tap: replay the state it asked for. */
static void on_tap_subscription(reporter_t *R)
{
    zframe_t *f = zframe_recv(R->tap);
    if (!f)
        return;
    if (zframe_size(f) >= 1 && zframe_data(f)[0] == 1) {
        int n = tapcache_replay(R->tapcache, R->tap, (const char *)zframe_data(f) + 1,
                                zframe_size(f) - 1);
        R->replays += n > 0;
        log_debug("tap subscription '%.*s': replayed %d events", (int)zframe_size(f) - 1,
                  (const char *)zframe_data(f) + 1, n);
    }
    zframe_destroy(&f);
}

/* Creating a file in the run directory now beats finding out at the end of
 * a long job that results cannot be written. 0, or -1 with path and errno. */
static int probe_writable(const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/.reporterd-probe.%d", dir, (int)getpid());
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0 || write(fd, "ok\n", 3) != 3 || fsync(fd) != 0) {
        int e = errno;
        log_error("run directory %s is not writable: creating %s failed: %s (errno %d); "
                  "choose another --out or fix its permissions/free space",
                  dir, path, strerror(e), e);
        if (fd >= 0) {
            close(fd);
            unlink(path);
        }
        return -1;
    }
    close(fd);
    unlink(path);
    return 0;
}

static int setup_tap(reporter_t *R)
{
    R->tapcache = tapcache_new();
    R->tap = zsock_new(ZMQ_XPUB);
    if (!R->tapcache || !R->tap) {
        log_error("cannot create the tap socket (out of memory?)");
        return -1;
    }
    /* every subscription reaches us (also a second "" subscriber), so each
     * late monitor gets its replay */
    zsock_set_xpub_verbose(R->tap, 1);
    zsock_set_sndhwm(R->tap, (int)R->o.tap_hwm);
    zsock_set_linger(R->tap, 0);
    if (zs_secure_server(R->tap, R->o.tap, "tap") < 0)
        return -1;
    if (zs_prepare_ipc(R->o.tap) != 0 || zsock_bind(R->tap, "%s", R->o.tap) < 0) {
        log_error("cannot bind the tap on %s: %s", R->o.tap, zmq_strerror(zmq_errno()));
        return -1;
    }
    return 0;
}

static int setup(reporter_t *R)
{
    char err[512];
    R->rd = rundir_new(R->o.out, err, sizeof err);
    if (!R->rd) {
        log_error("cannot use run directory %s: %s", R->o.out, err);
        return -1;
    }
    if (probe_writable(R->o.out) != 0)
        return -1;
    if ((R->o.seed_csv || R->o.start_epoch >= 0) &&
        rundir_train_setup(R->rd, R->o.start_epoch, R->o.seed_csv, err, sizeof err) != 0) {
        log_error("cannot set up the training files of %s: %s", R->o.out, err);
        return -1;
    }
    R->prom = promstate_new();
    if (!R->prom) {
        log_error("out of memory");
        return -1;
    }
    if (R->o.metrics_http) {
        if (zs_security_check_listen(R->o.metrics_http, "--metrics-http endpoint") < 0)
            return -1;
        if (!(R->http = metrics_http_new(R->o.metrics_http, R->prom, err, sizeof err))) {
            log_error("%s", err);
            return -1;
        }
        log_info("Prometheus metrics at http://%s/metrics", R->o.metrics_http);
    }
    R->sub = zs_connect(ZMQ_SUB, R->o.sub, "event", NULL);
    R->reducer = zs_connect(ZMQ_DEALER, R->o.reducer, "reducer", NULL);
    if (!R->sub || !R->reducer)
        return -1;
    zsock_set_rcvhwm(R->sub, 0);   /* never drop an event: they are the results */
    zsock_set_subscribe(R->sub, "");
    zsock_set_subscribe(R->sub, EVENT_REPORTER_TOPIC);
    if (R->o.tap && setup_tap(R) != 0)
        return -1;
    ddp_msg_t j = {.type = DDP_JOIN};
    j.u.join.role = DDP_ROLE_REPORTER;
    j.u.join.pid = (uint32_t)getpid();
    j.u.join.want_rank = -1;
    gethostname(j.u.join.host, sizeof j.u.join.host - 1);
    snprintf(j.u.join.name, sizeof j.u.join.name, "reporterd-%d", (int)getpid());
    return proto_send(zsock_resolve(R->reducer), NULL, &j);
}

/* The job is over; /metrics (its own thread) keeps serving the final
 * values and tap subscribers still get the cached last state, until
 * --linger seconds pass or SIGTERM/SIGINT comes. */
static void linger(reporter_t *R)
{
    log_info("job over: serving the final values for %lds (SIGTERM to stop)", R->o.linger_s);
    zpoller_t *poller = R->tap ? zpoller_new(R->tap, NULL) : NULL;
    int64_t until = zclock_mono() + R->o.linger_s * 1000;
    while (!zs_interrupted() && zclock_mono() < until) {
        if (poller && zpoller_wait(poller, 200) == R->tap)
            on_tap_subscription(R);
        else if (!poller)
            zclock_sleep(200);
    }
    zpoller_destroy(&poller);
}

int main(int argc, char **argv)
{
    reporter_t R;
    memset(&R, 0, sizeof R);
    if (zs_security_args(&argc, argv) < 0)
        return 2;
    if (parse(argc, argv, &R.o) < 0)
        return 2;
    log_init("reporterd", -1, R.o.verbose);
    zs_install_signals();
    int rc = 1;
    if (setup(&R) == 0) {
        zpoller_t *poller = zpoller_new(R.sub, R.reducer, NULL);
        if (R.tap)
            zpoller_add(poller, R.tap);
        while (!R.done && !zs_interrupted()) {
            void *which = zpoller_wait(poller, 200);
            if (which == R.sub) {
                on_event(&R);
            } else if (R.tap && which == R.tap) {
                on_tap_subscription(&R);
            } else if (which == R.reducer) {
                ddp_msg_t m;
                proto_stats_t st = {0};
                if (proto_recv(zsock_resolve(R.reducer), NULL, &m, &st) == 0)
                    ddp_msg_clear(&m);   /* WELCOME: nothing to do */
                R.rejected += st.rejected;
                promstate_add_rejected(R.prom, st.rejected);
            }
        }
        zpoller_destroy(&poller);
        rc = R.done ? R.exit_code : 130;
        if (R.done && R.o.linger_s > 0)
            linger(&R);
    }
    log_info("exiting (%llu events, %llu rejected, %llu tap replays)",
             (unsigned long long)R.events, (unsigned long long)R.rejected,
             (unsigned long long)R.replays);
    metrics_http_destroy(&R.http);
    promstate_destroy(&R.prom);
    rundir_destroy(&R.rd);
    tapcache_destroy(&R.tapcache);
    zsock_destroy(&R.tap);
    zsock_destroy(&R.sub);
    zsock_destroy(&R.reducer);
    plot_shutdown();   /* fontconfig's caches, or LeakSanitizer reports them */
    return rc;
}
