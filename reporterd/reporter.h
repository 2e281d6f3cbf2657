/* reporter — reporterd's state: its options, sockets, the run directory
 * and the Prometheus state, with one owner (reporter_new/_destroy).
 *
 * Layering (imports point down; nothing calls back into main.c):
 *
 *   main.c            options, the loop, the linger after the end
 *   events.c tap.c    roles over reporter_t: reducerd's events -> the run
 *                     directory and DONE; the tap for monitors
 *   reporter.c        this state: setup of sockets, run directory, /metrics
 *   rundir.c, promstate.c, metrics_http.c, tapcache.c ... (ddp_reporter)
 *   common/, proto/
 */
#ifndef DDP_REPORTERD_REPORTER_H
#define DDP_REPORTERD_REPORTER_H

#include "reporterd/metrics_http.h"
#include "reporterd/options.h"
#include "reporterd/promstate.h"
#include "reporterd/rundir.h"
#include "reporterd/tfevents.h"
#include "reporterd/tapcache.h"
#include "proto/wire.h"

#include <czmq.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct {
    reporter_options_t options;
    zsock_t *sub;              /* reducerd's events */
    zsock_t *reducer;          /* DEALER to reducerd: JOIN, DONE */
    proto_stats_t reducer_stats; /* what came back on it (rejects and their log limit) */
    zsock_t *tap;              /* XPUB for monitors; NULL without --tap */
    tapcache_t *tapcache;      /* the last state, replayed to a late subscriber */
    promstate_t *prom;
    metrics_http_t *http;      /* NULL without --metrics-http */
    webfeed_t *web;            /* the dashboard's event streams; NULL without --metrics-http */
    rundir_t *rundir;
    tfevents_t *tb;            /* --tensorboard: the scalars' event file; NULL without */
    int64_t tb_ticks;          /* progress events written (their TensorBoard step) */
    uint64_t events, rejected, replays;
    char write_error[512];     /* the first failed write of the run directory */
    int exit_code;
    bool done;                 /* the end event came and DONE was sent */
} reporter_t;

/* Opens the run directory (checked writable now, not at the end), /metrics,
 * the sockets and the tap, and joins reducerd. NULL after the reason was
 * logged. */
reporter_t *reporter_new(const reporter_options_t *options);
void reporter_destroy(reporter_t **self_p);

#endif
