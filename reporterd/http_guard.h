/* http_guard — which connections of --metrics-http may keep their slot
 * (issue 28: slowloris). libmicrohttpd limits connections in total and per
 * client address, but a connection that sends nothing, or a byte now and
 * then, holds its slot until the idle timeout, and enough of them lock out
 * a scraper from the same address (on loopback every client shares
 * 127.0.0.1). The guard tracks each connection's phase:
 *   WAITING  connected (or between keep-alive requests), no whole request
 *            read yet;
 *   SERVING  its request was read (the access handler ran) until the
 *            response is done.
 * When a connection arrives it shuts down (shutdown(2), so libmicrohttpd
 * closes it as if the client had left) every WAITING connection older than
 * the header timeout, and, while more than max_waiting wait, the oldest
 * WAITING one whose socket holds no unread bytes (a client that sent its
 * request is never cut before it is read). So silent and trickling
 * connections take at most max_waiting slots, and a scraper, whose request
 * follows its connect at once, always finds one.
 *
 * Thread-safe: libmicrohttpd calls it from its listening thread and the
 * connection threads. */
#ifndef DDP_HTTP_GUARD_H
#define DDP_HTTP_GUARD_H

#include <microhttpd.h>
#include <stddef.h>

typedef struct http_guard http_guard_t;

/* max_waiting >= 1; header_timeout_ms > 0. NULL when out of memory. */
http_guard_t *http_guard_new(size_t max_waiting, int header_timeout_ms);
/* After the server stopped (every connection closed). NULL-safe. */
void http_guard_destroy(http_guard_t **self_p);

/* MHD_OPTION_NOTIFY_CONNECTION's callback; cls is the guard. */
void http_guard_on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                              enum MHD_ConnectionNotificationCode code);
/* MHD_OPTION_NOTIFY_COMPLETED's callback; cls is the guard: the response
 * is done, the connection waits for its next request (keep-alive). */
void http_guard_on_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
                             enum MHD_RequestTerminationCode code);
/* From the access handler: conn's request was read. */
void http_guard_serving(http_guard_t *self, struct MHD_Connection *conn);

/* Connections shut down so far: past the header timeout, and evicted as
 * the oldest silent one (for the log at the end). */
void http_guard_counts(http_guard_t *self, size_t *timed_out, size_t *evicted);

#endif
