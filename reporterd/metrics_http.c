#include "reporterd/metrics_http.h"
#include "common/clock.h"
#include "common/errbuf.h"
#include "common/log.h"
#include "reporterd/http_guard.h"
#include "reporterd/webpage.h"

#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* A page's wait for its stream to end when the server stops. */
#define DRAIN_MS 2000
/* An event stream sends a keep-alive every WEBFEED_KEEPALIVE_MS: it is
 * cut only when the page takes nothing for this long. */
#define STREAM_TIMEOUT_S 10
/* libmicrohttpd's messages (e.g. a refused connection): at most one line
 * this often, with how many were left out. */
#define MHD_LOG_EVERY_MS 10000

struct metrics_http {
    struct MHD_Daemon *daemon;
    promstate_t *state;
    webfeed_t *web;
    http_guard_t *guard;
    pthread_mutex_t log_lock;
    int64_t logged_ms;  /* last libmicrohttpd line; 0: none yet */
    size_t log_skipped; /* lines left out since */
};

/* One /events stream: its connection thread reads the client's queue. */
typedef struct {
    webfeed_t *web;
    webfeed_client_t *client;
} stream_t;

static enum MHD_Result s_reply(struct MHD_Connection *conn, unsigned int status, char *body,
                               const char *type)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    /* an error (a refused stream above all) frees its connection at once */
    if (status >= 400)
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result rc = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return rc;
}

/* The response owns nothing: the page is static. Headers that keep the
 * page from loading anything but its own stream (no CDN, no injected
 * script) and from being cached. */
static enum MHD_Result s_page(struct MHD_Connection *conn)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(
        (size_t)web_index_html_len, (void *)web_index_html, MHD_RESPMEM_PERSISTENT);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/html; charset=utf-8");
    MHD_add_response_header(r, "Content-Security-Policy",
                            "default-src 'none'; script-src 'unsafe-inline'; "
                            "style-src 'unsafe-inline'; connect-src 'self'; img-src data:");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    enum MHD_Result rc = MHD_queue_response(conn, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return rc;
}

/* The connection's own thread (MHD_USE_THREAD_PER_CONNECTION) blocks here
 * until events come, so a quiet stream costs no CPU; a comment line every
 * WEBFEED_KEEPALIVE_MS keeps it open. */
static ssize_t s_stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    stream_t *s = cls;
    (void)pos;
    ssize_t n = webfeed_read(s->web, s->client, buf, max, WEBFEED_KEEPALIVE_MS);
    if (n > 0)
        return n;
    if (n < 0)
        return MHD_CONTENT_READER_END_OF_STREAM;
    static const char keepalive[] = ": keep-alive\n\n";
    size_t k = sizeof keepalive - 1 < max ? sizeof keepalive - 1 : max;
    memcpy(buf, keepalive, k);
    return (ssize_t)k;
}

static void s_stream_free(void *cls)
{
    stream_t *s = cls;
    webfeed_detach(s->web, s->client);
    free(s);
}

static enum MHD_Result s_events(metrics_http_t *self, struct MHD_Connection *conn)
{
    stream_t *s = calloc(1, sizeof *s);
    if (s) {
        s->web = self->web;
        s->client = webfeed_attach(self->web);
    }
    if (!s || !s->client) {
        free(s);
        return s_reply(conn, MHD_HTTP_SERVICE_UNAVAILABLE,
                       strdup("ddpipe reporterd: too many dashboard streams open (at most 16); "
                              "close a page and retry\n"),
                       "text/plain");
    }
    /* longer than the header timeout: a quiet stream waits for events */
    if (MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT,
                                  (unsigned int)STREAM_TIMEOUT_S) != MHD_YES) {
        s_stream_free(s);
        return MHD_NO;
    }
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024,
                                                               s_stream_read, s, s_stream_free);
    if (!r) {
        s_stream_free(s);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream; charset=utf-8");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    MHD_add_response_header(r, "X-Accel-Buffering", "no");
    enum MHD_Result rc = MHD_queue_response(conn, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return rc;
}

static enum MHD_Result s_handle(void *cls, struct MHD_Connection *conn, const char *url,
                                const char *method, const char *version, const char *upload,
                                size_t *upload_size, void **req_cls)
{
    metrics_http_t *self = cls;
    (void)version;
    (void)upload;
    (void)upload_size;
    (void)req_cls;
    http_guard_serving(self->guard, conn);
    bool get = strcmp(method, "GET") == 0;
    if (!get && strcmp(method, "HEAD") != 0)
        return s_reply(conn, MHD_HTTP_METHOD_NOT_ALLOWED,
                       strdup("use GET /metrics, GET / (the dashboard) or GET /events\n"),
                       "text/plain");
    if (self->web && (strcmp(url, "/") == 0 || strcmp(url, "/index.html") == 0))
        return s_page(conn);
    if (self->web && get && strcmp(url, "/events") == 0)
        return s_events(self, conn);
    if (strcmp(url, "/metrics") != 0)
        return s_reply(conn, MHD_HTTP_NOT_FOUND,
                       strdup("ddpipe reporterd: the Prometheus metrics are at /metrics, "
                              "the dashboard at /\n"),
                       "text/plain");
    char *text = promstate_render(self->state);
    if (!text)
        return s_reply(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, strdup("out of memory\n"),
                       "text/plain");
    return s_reply(conn, MHD_HTTP_OK, text, CONTENT_TYPE);
}

/* Splits "host:port" / "[v6]:port" into its parts (in buf). */
static int s_split(const char *hostport, char *buf, size_t len, const char **host,
                   const char **port)
{
    if (snprintf(buf, len, "%s", hostport) >= (int)len)
        return -1;
    char *colon = strrchr(buf, ':');
    if (!colon || colon == buf || !colon[1])
        return -1;
    *colon = 0;
    *port = colon + 1;
    *host = buf;
    if (buf[0] == '[') {
        size_t n = strlen(buf);
        if (n < 3 || buf[n - 1] != ']')
            return -1;
        buf[n - 1] = 0;
        *host = buf + 1;
    }
    return 0;
}

/* libmicrohttpd's messages as log lines, rate-limited: a client that
 * opens connections past the limits must not fill the log. */
static void s_mhd_log(void *cls, const char *fmt, va_list ap)
{
    metrics_http_t *self = cls;
    char msg[256];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
        msg[--n] = 0;
    int64_t now = clock_mono_ms();
    pthread_mutex_lock(&self->log_lock);
    if (self->logged_ms && now - self->logged_ms < MHD_LOG_EVERY_MS) {
        self->log_skipped++;
        pthread_mutex_unlock(&self->log_lock);
        return;
    }
    size_t skipped = self->log_skipped;
    self->logged_ms = now;
    self->log_skipped = 0;
    pthread_mutex_unlock(&self->log_lock);
    if (skipped)
        log_warn("--metrics-http: %s (and %zu more libmicrohttpd messages left out)", msg,
                 skipped);
    else
        log_warn("--metrics-http: %s", msg);
}

static struct MHD_Daemon *s_start(metrics_http_t *self, const struct addrinfo *ai,
                                  const metrics_http_limits_t *limits)
{
    unsigned int total = limits->max_connections;
    unsigned int per_address =
        limits->max_per_address < total ? limits->max_per_address : total;
    /* silent connections take at most half of what one address has left
     * after the dashboard's streams: the rest is for requests, /metrics first */
    size_t max_waiting =
        per_address > WEBFEED_MAX_CLIENTS + 2 ? (per_address - WEBFEED_MAX_CLIENTS) / 2 : 1;
    if (!(self->guard = http_guard_new(max_waiting, METRICS_HTTP_HEADER_TIMEOUT_S * 1000)))
        return NULL;
    /* libmicrohttpd counts a connection the guard has cut until its thread
     * has closed it: a burst of silent connections, each admitted by
     * cutting an older one, held the address at its limit for that moment
     * and a scrape arriving then was refused (it_metrics_slowloris, 4 of 10
     * runs on a loaded 2-core box). The cut ones get that many slots more:
     * the guard, not this count, bounds the live ones. */
    unsigned int per_address_mhd = per_address + (unsigned int)max_waiting;
    if (per_address_mhd > total)
        per_address_mhd = total;
    /* a thread per connection: an event stream waits for events in its own
     * thread (webfeed_read) instead of polling; the limits and the guard
     * bound the threads */
    unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
                         MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    /* port 0 here: the address (with its port) comes from SOCK_ADDR */
    /* the logger first: libmicrohttpd uses it from the next option on */
    return MHD_start_daemon(
        flags, 0, NULL, NULL, s_handle, self, MHD_OPTION_EXTERNAL_LOGGER, s_mhd_log, self,
        MHD_OPTION_SOCK_ADDR, ai->ai_addr, MHD_OPTION_CONNECTION_LIMIT, total,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_address_mhd, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned int)METRICS_HTTP_HEADER_TIMEOUT_S, MHD_OPTION_NOTIFY_CONNECTION,
        http_guard_on_connection, self->guard, MHD_OPTION_NOTIFY_COMPLETED,
        http_guard_on_completed, self->guard, MHD_OPTION_END);
}

metrics_http_t *metrics_http_new(const char *hostport, promstate_t *state, webfeed_t *web,
                                 const metrics_http_limits_t *limits, char *err, size_t errlen)
{
    char buf[512];
    const char *host, *port;
    if (s_split(hostport, buf, sizeof buf, &host, &port) != 0) {
        err_set(err, errlen, "--metrics-http '%s': want HOST:PORT, e.g. 127.0.0.1:9100",
                 hostport);
        return NULL;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICSERV}, *ai = NULL;
    int gai = getaddrinfo(host, port, &hints, &ai);
    if (gai != 0) {
        err_set(err, errlen, "--metrics-http '%s': %s", hostport, gai_strerror(gai));
        return NULL;
    }
    metrics_http_t *self = calloc(1, sizeof *self);
    if (self && pthread_mutex_init(&self->log_lock, NULL) != 0) {
        free(self);
        self = NULL;
    }
    if (self) {
        self->state = state;
        self->web = web;
        self->daemon = s_start(self, ai, limits);
    }
    freeaddrinfo(ai);
    if (!self || !self->daemon) {
        err_set(err, errlen,
                 "--metrics-http %s: cannot listen (port in use, or not this host's address?)",
                 hostport);
        if (self) {
            http_guard_destroy(&self->guard);
            pthread_mutex_destroy(&self->log_lock);
        }
        free(self);
        return NULL;
    }
    return self;
}

void metrics_http_destroy(metrics_http_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    metrics_http_t *self = *self_p;
    if (self->web) {
        webfeed_close(self->web);
        webfeed_wait_detached(self->web, DRAIN_MS);
    }
    MHD_stop_daemon(self->daemon);
    size_t timed_out, evicted;
    http_guard_counts(self->guard, &timed_out, &evicted);
    if (timed_out || evicted)
        log_info("--metrics-http: %zu connections were cut for sending no request within %d s, "
                 "%zu as the oldest silent one",
                 timed_out, METRICS_HTTP_HEADER_TIMEOUT_S, evicted);
    http_guard_destroy(&self->guard); /* after the server: no callback left */
    pthread_mutex_destroy(&self->log_lock);
    free(*self_p);
    *self_p = NULL;
}
