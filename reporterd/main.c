/* reporterd — subscribes to reducerd's events, writes the run directory
 * (summary.json, CSVs, classification report, plots) and re-publishes every
 * event on its tap for monitors. Tells reducerd when the files are written. */
#include "common/flags.h"
#include "common/log.h"
#include "common/zsockopt.h"
#include "proto/event.h"
#include "proto/proto.h"
#include "reporterd/plot.h"
#include "reporterd/rundir.h"

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
    int verbose;
} opts_t;

typedef struct {
    opts_t o;
    zsock_t *sub;
    zsock_t *reducer;
    zsock_t *tap;
    rundir_t *rd;
    uint64_t events, rejected;
    int exit_code;
    bool done;
} reporter_t;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: reporterd --sub EP --reducer EP --out DIR [--tap EP]\n"
            "  --sub EP       reducerd's event endpoint (its --pub)\n"
            "  --reducer EP   reducerd's ROUTER (join, and DONE when the files are written)\n"
            "  --out DIR      run directory\n"
            "  --tap EP       PUB endpoint re-publishing every event for monitors (ddpipe tap EP)\n"
            "  --verbose\n");
}

static int parse(int argc, char **argv, opts_t *o)
{
    static struct option lo[] = {{"sub", 1, 0, 's'}, {"reducer", 1, 0, 'r'}, {"out", 1, 0, 'o'},
                                 {"tap", 1, 0, 't'}, {"verbose", 0, 0, 'v'}, {"help", 0, 0, 'h'},
                                 {0, 0, 0, 0}};
    memset(o, 0, sizeof *o);
    int c;
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (c) {
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
        } else {
            log_info("run directory %s written", R->o.out);
        }
    } else {
        log_error("the job failed (code %d: %s): no summary written", end->code, end->reason);
    }
    send_done(R, code, code ? err : "ok");
    /* our exit status tells the launcher whether the run directory is whole */
    R->exit_code = code ? code : (end->code != 0);
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
    case EV_END: on_end(R, &ev->u.end); break;
    default: break;
    }
    if (rc < 0)
        log_error("writing %s for a %s event failed: %s", R->o.out, event_topic_name(ev->topic), err);
}

static void on_event(reporter_t *R)
{
    zmsg_t *m = zmsg_recv(R->sub);
    if (!m)
        return;
    R->events++;
    if (R->tap) {
        zmsg_t *copy = zmsg_dup(m);
        if (copy && zmsg_send(&copy, R->tap) < 0)
            zmsg_destroy(&copy);
    }
    ddp_event_t ev;
    char why[256];
    if (event_decode(m, &ev, why, sizeof why) != 0) {
        R->rejected++;
        log_warn("rejected an event: %s", why);
    } else {
        handle(R, &ev);
        event_clear(&ev);
    }
    zmsg_destroy(&m);
}

static int setup(reporter_t *R)
{
    char err[512];
    R->rd = rundir_new(R->o.out, err, sizeof err);
    if (!R->rd) {
        log_error("cannot use run directory %s: %s", R->o.out, err);
        return -1;
    }
    R->sub = zs_connect(ZMQ_SUB, R->o.sub, "event", NULL);
    R->reducer = zs_connect(ZMQ_DEALER, R->o.reducer, "reducer", NULL);
    if (!R->sub || !R->reducer)
        return -1;
    zsock_set_rcvhwm(R->sub, 0);   /* never drop an event: they are the results */
    zsock_set_subscribe(R->sub, "");
    zsock_set_subscribe(R->sub, EVENT_REPORTER_TOPIC);
    if (R->o.tap && !(R->tap = zs_bind(ZMQ_PUB, R->o.tap, "tap")))
        return -1;
    ddp_msg_t j = {.type = DDP_JOIN};
    j.u.join.role = DDP_ROLE_REPORTER;
    j.u.join.pid = (uint32_t)getpid();
    j.u.join.want_rank = -1;
    gethostname(j.u.join.host, sizeof j.u.join.host - 1);
    snprintf(j.u.join.name, sizeof j.u.join.name, "reporterd-%d", (int)getpid());
    return proto_send(zsock_resolve(R->reducer), NULL, &j);
}

int main(int argc, char **argv)
{
    reporter_t R;
    memset(&R, 0, sizeof R);
    if (parse(argc, argv, &R.o) < 0)
        return 2;
    log_init("reporterd", -1, R.o.verbose);
    zs_install_signals();
    int rc = 1;
    if (setup(&R) == 0) {
        zpoller_t *poller = zpoller_new(R.sub, R.reducer, NULL);
        while (!R.done && !zs_interrupted()) {
            void *which = zpoller_wait(poller, 200);
            if (which == R.sub) {
                on_event(&R);
            } else if (which == R.reducer) {
                ddp_msg_t m;
                proto_stats_t st = {0};
                if (proto_recv(zsock_resolve(R.reducer), NULL, &m, &st) == 0)
                    ddp_msg_clear(&m);   /* WELCOME: nothing to do */
                R.rejected += st.rejected;
            }
        }
        zpoller_destroy(&poller);
        rc = R.done ? R.exit_code : 130;
    }
    log_info("exiting (%llu events, %llu rejected)", (unsigned long long)R.events,
             (unsigned long long)R.rejected);
    rundir_destroy(&R.rd);
    zsock_destroy(&R.tap);
    zsock_destroy(&R.sub);
    zsock_destroy(&R.reducer);
    plot_shutdown();   /* fontconfig's caches, or LeakSanitizer reports them */
    return rc;
}
