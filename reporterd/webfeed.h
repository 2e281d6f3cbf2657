/* webfeed — the dashboard's server-sent events (GET /events on
 * --metrics-http): the same events as the tap, as the same JSON as
 * `ddpipe tap --json` (event_to_json), one "data: {json}\n\n" per event.
 *
 * The reporter's thread publishes (webfeed_on_event); each browser is a
 * client read by its own HTTP connection thread (webfeed_read). Nothing
 * the browser does can block the reporter: a client has a bounded buffer
 * and is dropped (its stream ends, the page reconnects and gets the
 * replay) when it falls WEBFEED_CLIENT_BUF bytes behind; at most
 * WEBFEED_MAX_CLIENTS streams at once.
 *
 * A progress event's JSON gets one more key at its end, "t_s": its time in
 * seconds since the job's first plan arrived, on reducerd's clock
 * (tputhist.h), so every page draws throughput on the same axis whenever
 * it connected.
 *
 * A client that connects late first gets the state so far: the metrics
 * (loss/accuracy curves; the confusion matrix only on the newest), the
 * whole job's throughput samples as one {"topic":"tput_history",
 * "window_s":2,"stride":S,"points":[[t_s, epoch, "phase", done], ...]}
 * message, the
 * last progress, the last worker event of each rank, the last membership
 * and the end. Bounds, so a replay stays far below WEBFEED_CLIENT_BUF
 * however long the job ran: at most 2000 metrics (every epoch's until
 * then; beyond, every other epoch is dropped, again each time it fills, so
 * the curves still span the whole job) and TPUTHIST_MAX (4096) throughput
 * samples, merged the same way (tputhist.h). Predictions are not sent
 * (large, and the page does not use them); a metric of more than
 * WEBFEED_MAX_CONFUSION classes travels without its confusion matrix. */
#ifndef DDP_WEBFEED_H
#define DDP_WEBFEED_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "proto/event.h"

#define WEBFEED_MAX_CLIENTS 16
#define WEBFEED_CLIENT_BUF (4u << 20)
#define WEBFEED_MAX_CONFUSION 100u
/* A comment line this often keeps proxies and the browser from timing out. */
#define WEBFEED_KEEPALIVE_MS 3000

typedef struct webfeed webfeed_t;
typedef struct webfeed_client webfeed_client_t;

webfeed_t *webfeed_new(void);
/* Call after the HTTP server stopped (no reader left). NULL-safe. */
void webfeed_destroy(webfeed_t **self_p);

/* A decoded event (the reporter's thread), received at now_s (monotonic
 * seconds: places progress events when they carry no elapsed_s). 0, or -1
 * when out of memory (the event is lost for the page; the tap and run
 * directory are not affected). */
int webfeed_on_event(webfeed_t *self, const ddp_event_t *ev, double now_s);

/* A new stream with the replay queued; NULL when WEBFEED_MAX_CLIENTS are
 * open, the feed is closing, or memory ran out. */
webfeed_client_t *webfeed_attach(webfeed_t *self);
/* Up to max bytes of the client's stream into buf, waiting up to wait_ms
 * for some: > 0 bytes; 0 after wait_ms with nothing (send a keep-alive);
 * -1 when the client was dropped (too slow) or the feed is closing. */
ssize_t webfeed_read(webfeed_t *self, webfeed_client_t *c, char *buf, size_t max, int wait_ms);
void webfeed_detach(webfeed_t *self, webfeed_client_t *c);
/* Refuses new clients and wakes every reader: each gets what is still
 * queued for it, then -1 (before stopping the HTTP server, whose threads
 * may be waiting in webfeed_read). */
void webfeed_close(webfeed_t *self);
/* After webfeed_close: waits up to wait_ms for every stream to end (so the
 * end event reaches the pages before the server stops); true if none is
 * left. */
bool webfeed_wait_detached(webfeed_t *self, int wait_ms);

/* Open streams, and those dropped for falling behind (for tests, logs). */
size_t webfeed_clients(webfeed_t *self);
size_t webfeed_dropped(webfeed_t *self);

#endif
