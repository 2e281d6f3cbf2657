/* reporterd's option table and the checks across its options. */
#include "reporterd/options.h"

#include "common/zsecurity.h"

#include <stdio.h>

#define T reporter_options_t
static const option_t s_rows[] = {
    OPTION_STRING(T, sub, "sub", "EP", NULL, "reducerd's event endpoint (its --pub)"),
    OPTION_STRING(T, reducer, "reducer", "EP", NULL,
                  "reducerd's ROUTER (join, and DONE when the files are written)"),
    OPTION_STRING(T, out, "out", "DIR", NULL, "run directory"),
    OPTION_STRING(T, tap, "tap", "EP", NULL,
                  "PUB endpoint re-publishing every event for monitors (ddpipe tap EP); a late "
                  "subscriber first gets the last metric, progress and worker events"),
    OPTION_LONG(T, tap_hwm, "tap-hwm", "N", 1000, 1, 1000000,
                "events queued per tap subscriber before it drops"),
    OPTION_STRING(T, metrics_http, "metrics-http", "H:P",
                  NULL, "Prometheus text exposition at http://H:P/metrics"),
    OPTION_LONG(T, http_max_connections, "http-max-connections", "N", 128, 32, 4096,
                "--metrics-http connections at once (a thread each); more wait in the backlog"),
    OPTION_LONG(T, http_max_per_address, "http-max-per-address", "N", 64, 24, 4096,
                "--metrics-http connections from one client address; more are closed at once"),
    OPTION_STRING(T, tensorboard, "tensorboard", "DIR", NULL,
                  "write the job's scalars (loss, accuracy, lr, img/s) as TensorBoard event "
                  "files in DIR"),
    OPTION_LONG(T, linger_s, "linger", "S", 0, 0, 86400,
                "after the job's end keep serving /metrics and the tap for S seconds, or until "
                "SIGTERM (compose: a scrape after the end still sees the final values)"),
    OPTION_SECTION("training (docs/TRAINING.md):"),
    OPTION_STRING(T, seed_csv, "seed-csv", "NAME", NULL,
                  "also write the seed course's time,val_accuracy log as NAME in the run "
                  "directory ({W}ranks-{bs}bs-{lr}lr-{m}m-{w}w.csv)"),
    OPTION_LONG(T, start_epoch, "start-epoch", "E", -1, 0, 1000000,
                "a resumed run: keep metrics.csv rows of epochs < E from the earlier run, drop "
                "the rest (they are redone)"),
    ZS_SECURITY_OPTIONS,
    OPTION_FLAG(T, verbose, "verbose", NULL),
    OPTION_END};
#undef T

const option_table_t reporter_options_table = {
    "reporterd", "--sub EP --reducer EP --out DIR [--tap EP] [--metrics-http HOST:PORT]", s_rows};

int reporter_options_parse(reporter_options_t *self, int argc, char **argv)
{
    if (zs_security_args(&argc, argv) < 0)
        return -1;
    int rc = options_parse(&reporter_options_table, argc, argv, self, NULL);
    if (rc != 0)
        return rc;
    if (!self->sub || !self->reducer || !self->out) {
        fprintf(stderr, "reporterd: --sub, --reducer and --out are required\n");
        options_usage(&reporter_options_table, stderr);
        return -1;
    }
    return 0;
}
