/* ddpipe tap — print the live event stream of a job, one line per event. */
#include "cli/commands.h"
#include "common/flags.h"
#include "common/options.h"
#include "common/utf8.h"
#include "common/zsecurity.h"
#include "common/zsockopt.h"
#include "proto/event.h"

#include <czmq.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

static volatile sig_atomic_t s_stop = 0;
static void on_sig(int sig) { s_stop = sig; }

/* Text from the wire (file names, reasons) as one line: utf8_escape_line. */
#define ESC(s, buf) (utf8_escape_line((s), (buf), sizeof(buf)), (buf))

static void print_line(const ddp_event_t *ev)
{
    char a[4 * sizeof ev->u.failed.path], b[4 * sizeof ev->u.failed.reason];
    switch (ev->topic) {
    case EV_METRIC: {
        const ev_metric_t *m = &ev->u.metric;
        double s = m->samples ? (double)m->samples : 1;
        printf("metric   epoch %u %s: samples %llu failed %llu top1 %.4f top5 %.4f loss %.4f %.1f img/s%s\n",
               m->epoch, m->phase ? "train" : "eval", (unsigned long long)m->samples,
               (unsigned long long)m->failed, m->correct_top1 / s, m->correct_top5 / s, m->loss_sum / s,
               m->images_per_sec, m->final ? " (final)" : "");
        break;
    }
    case EV_PROGRESS:
        printf("progress epoch %u: %llu/%llu %.1f img/s ETA %.0fs workers %d\n", ev->u.progress.epoch,
               (unsigned long long)ev->u.progress.done, (unsigned long long)ev->u.progress.total,
               ev->u.progress.images_per_sec, ev->u.progress.eta_s, ev->u.progress.workers);
        break;
    case EV_LOG:
        printf("log      %s %s[%d]: %s\n", ev->u.log.level, ev->u.log.daemon, ev->u.log.rank,
               ESC(ev->u.log.msg, b));
        break;
    case EV_WORKER:
        printf("worker   rank %d %s on %s: %s\n", ev->u.worker.rank, ev->u.worker.name, ev->u.worker.host,
               ev->u.worker.state);
        break;
    case EV_END:
        printf("end      code %d: %s\n", ev->u.end.code, ESC(ev->u.end.reason, b));
        break;
    case EV_FAILED:
        printf("failed   #%llu %s: %s\n", (unsigned long long)ev->u.failed.id,
               ESC(ev->u.failed.path, a), ESC(ev->u.failed.reason, b));
        break;
    case EV_MEMBERSHIP:
        printf("membership gen %u world %d: %s (%u rank%s) step %llu%s: %s\n", ev->u.membership.gen,
               ev->u.membership.world, ev->u.membership.change, ev->u.membership.n,
               ev->u.membership.n == 1 ? "" : "s", (unsigned long long)ev->u.membership.step,
               ev->u.membership.redone ? " redone" : "", ev->u.membership.reason);
        break;
    case EV_PREDICTIONS:
        printf("predictions %llu..%llu of %llu\n", (unsigned long long)ev->u.predictions.first,
               (unsigned long long)(ev->u.predictions.first + ev->u.predictions.n),
               (unsigned long long)ev->u.predictions.total);
        break;
    }
}

typedef struct {
    int json, until_end;
} tap_options_t;

#define T tap_options_t
static const option_t s_rows[] = {
    OPTION_FLAG(T, json, "json",
                "one JSON object per line and event (its keys: docs/OPERATIONS.md, \"Watching a job\")"),
    OPTION_FLAG(T, until_end, "until-end", "exit after the job's end event, with its verdict"),
    ZS_SECURITY_OPTIONS,
    OPTION_END};
#undef T

const option_table_t tap_options_table = {
    "ddpipe tap", "ENDPOINT [--json] [--until-end] [options]", s_rows};

int cmd_tap(int argc, char **argv)
{
    tap_options_t o;
    int next = 0;
    int prc = options_parse(&tap_options_table, argc, argv, &o, &next);
    if (prc != 0)
        return prc > 0 ? 0 : 2;
    if (next >= argc) {
        fprintf(stderr, "ddpipe tap: which endpoint? e.g. ddpipe tap tcp://head:5563\n");
        return 2;
    }
    int json = o.json, until_end = o.until_end;
    const char *endpoint = argv[next];
    zsys_handler_set(NULL);
    signal(SIGINT, on_sig);
    signal(SIGTERM, on_sig);
    /* zs_connect: CURVE on tcp with --curve-dir, as every ddpipe socket */
    zsock_t *sub = zs_connect(ZMQ_SUB, endpoint, "tap", NULL);
    if (!sub)
        return 1;
    zsock_set_subscribe(sub, "");
    setvbuf(stdout, NULL, _IOLBF, 0);
    int rc = 0;
    zpoller_t *poller = zpoller_new(sub, NULL);
    while (!s_stop) {
        if (zpoller_wait(poller, 200) != sub)
            continue;
        zmsg_t *m = zmsg_recv(sub);
        ddp_event_t ev;
        char err[256];
        if (m && event_decode(m, &ev, err, sizeof err) == 0) {
            if (json) {
                char *s = event_to_json(&ev);
                if (s)
                    puts(s);
                free(s);
            } else {
                print_line(&ev);
            }
            bool end = ev.topic == EV_END;
            rc = end ? ev.u.end.code != 0 : rc;
            event_clear(&ev);
            if (end && until_end) {
                zmsg_destroy(&m);
                break;
            }
        } else if (m) {
            fprintf(stderr, "ddpipe tap: ignoring a malformed event: %s\n", err);
        }
        zmsg_destroy(&m);
    }
    zpoller_destroy(&poller);
    zsock_destroy(&sub);
    return rc;
}
