#include "reporterd/metrics_http.h"
#include "common/errbuf.h"

#include <microhttpd.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

struct metrics_http {
    struct MHD_Daemon *daemon;
    promstate_t *state;
};

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

static enum MHD_Result s_handle(void *cls, struct MHD_Connection *conn, const char *url,
                                const char *method, const char *version, const char *upload,
                                size_t *upload_size, void **req_cls)
{
    metrics_http_t *self = cls;
    (void)version;
    (void)upload;
    (void)upload_size;
    (void)req_cls;
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
        return s_reply(conn, MHD_HTTP_METHOD_NOT_ALLOWED, strdup("use GET /metrics\n"),
                       "text/plain");
    if (strcmp(url, "/metrics") != 0)
        return s_reply(conn, MHD_HTTP_NOT_FOUND,
                       strdup("ddpipe reporterd: the Prometheus metrics are at /metrics\n"),
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

metrics_http_t *metrics_http_new(const char *hostport, promstate_t *state, char *err,
                                 size_t errlen)
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
        unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
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
    MHD_stop_daemon((*self_p)->daemon);
    free(*self_p);
    *self_p = NULL;
}
