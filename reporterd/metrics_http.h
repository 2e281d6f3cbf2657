/* metrics_http — the Prometheus endpoint of reporterd (--metrics-http
 * HOST:PORT): libmicrohttpd serves GET /metrics from its own thread with
 * promstate_render(), so a slow or stuck scraper never touches the event
 * loop. Other paths: 404; methods other than GET/HEAD: 405. */
#ifndef DDP_METRICS_HTTP_H
#define DDP_METRICS_HTTP_H

#include <stddef.h>

#include "reporterd/promstate.h"

typedef struct metrics_http metrics_http_t;

/* hostport: "127.0.0.1:9100", "localhost:9100", "[::1]:9100" or
 * "0.0.0.0:9100" (all interfaces, only when asked). state is borrowed and
 * must outlive the server. NULL with a reason (bad address, port in use). */
metrics_http_t *metrics_http_new(const char *hostport, promstate_t *state, char *err,
                                 size_t errlen);
/* Stops the server thread. NULL-safe. */
void metrics_http_destroy(metrics_http_t **self_p);

#endif
