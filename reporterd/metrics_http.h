/* metrics_http — the HTTP endpoint of reporterd (--metrics-http
 * HOST:PORT), served by libmicrohttpd from its own threads (one per
 * connection), so a slow or stuck client never touches the event loop:
 *   GET /metrics   Prometheus text (promstate_render)
 *   GET /          the live dashboard (webpage.h, compiled in)
 *   GET /events    its server-sent events (webfeed.h); 503 past 16 streams
 * Other paths: 404; methods other than GET/HEAD: 405.
 *
 * Hostile clients (docs/SECURITY.md, "The HTTP endpoint") are bounded so a
 * scrape is always answered: at most max_connections at once and
 * max_per_address from one client address; a connection with no whole
 * request after METRICS_HTTP_HEADER_TIMEOUT_S, or silent for that long, is
 * closed, and silent ones take at most half of an address's slots left
 * after the 16 streams (http_guard.h); a stream is closed when its page
 * takes nothing for 10 s. */
#ifndef DDP_METRICS_HTTP_H
#define DDP_METRICS_HTTP_H

#include <stddef.h>

#include "reporterd/promstate.h"
#include "reporterd/webfeed.h"

typedef struct metrics_http metrics_http_t;

/* Seconds a client has to send its request (and a keep-alive connection
 * to send its next one). */
#define METRICS_HTTP_HEADER_TIMEOUT_S 2

typedef struct {
    unsigned int max_connections; /* at once, from all clients */
    unsigned int max_per_address; /* from one client address */
} metrics_http_limits_t;

/* hostport: "127.0.0.1:9100", "localhost:9100", "[::1]:9100" or
 * "0.0.0.0:9100" (all interfaces, only when asked). state and web (NULL:
 * no dashboard) are borrowed and must outlive the server. NULL with a
 * reason (bad address, port in use). */
metrics_http_t *metrics_http_new(const char *hostport, promstate_t *state, webfeed_t *web,
                                 const metrics_http_limits_t *limits, char *err, size_t errlen);
/* Closes the event streams (each page first gets what was queued for it,
 * within 2 s) and stops the server's threads. NULL-safe. */
void metrics_http_destroy(metrics_http_t **self_p);

#endif
