#include "reporterd/metrics_http.h"
#include "common/errbuf.h"
#include "reporterd/webpage.h"

#include <microhttpd.h>
#include <netdb.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* A page's wait for its stream to end when the server stops. */
#define DRAIN_MS 2000

struct metrics_http {
    struct MHD_Daemon *daemon;
    promstate_t *state;
    webfeed_t *web;
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

metrics_http_t *metrics_http_new(const char *hostport, promstate_t *state, webfeed_t *web,
                                 char *err, size_t errlen)
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
    if (self) {
        self->state = state;
        self->web = web;
        /* a thread per connection: an event stream waits for events in its
         * own thread (webfeed_read) instead of polling */
        unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
                             MHD_USE_ERROR_LOG;
        if (ai->ai_family == AF_INET6)
            flags |= MHD_USE_IPv6;
        /* port 0 here: the address (with its port) comes from SOCK_ADDR */
        self->daemon = MHD_start_daemon(flags, 0, NULL, NULL, s_handle, self,
                                        MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                                        MHD_OPTION_CONNECTION_LIMIT, (unsigned int)64,
                                        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)10,
                                        MHD_OPTION_END);
    }
    freeaddrinfo(ai);
    if (!self || !self->daemon) {
        err_set(err, errlen,
                 "--metrics-http %s: cannot listen (port in use, or not this host's address?)",
                 hostport);
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
    free(*self_p);
    *self_p = NULL;
}
