#include "reporterd/http_guard.h"

#include "common/clock.h"
#include "common/log.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

/* At most one log line this often while connections are being cut. */
#define LOG_EVERY_MS 10000

typedef enum {
    GUARD_WAITING, /* no whole request read yet (new, or between keep-alive requests) */
    GUARD_SERVING, /* its request is being answered */
    GUARD_SHUT     /* shut down by the guard; libmicrohttpd closes it */
} guard_phase_t;

typedef struct guard_conn {
    struct guard_conn *prev, *next;
    int fd;
    guard_phase_t phase;
    int64_t since_ms; /* when it began to wait */
} guard_conn_t;

struct http_guard {
    pthread_mutex_t lock;
    guard_conn_t *head;
    size_t max_waiting;
    int header_timeout_ms;
    size_t timed_out, evicted;
    int64_t logged_ms; /* last log line; 0: none yet */
};

http_guard_t *http_guard_new(size_t max_waiting, int header_timeout_ms)
{
    http_guard_t *self = calloc(1, sizeof *self);
    if (!self)
        return NULL;
    if (pthread_mutex_init(&self->lock, NULL) != 0) {
        free(self);
        return NULL;
    }
    self->max_waiting = max_waiting ? max_waiting : 1;
    self->header_timeout_ms = header_timeout_ms > 0 ? header_timeout_ms : 1;
    return self;
}

void http_guard_destroy(http_guard_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    http_guard_t *self = *self_p;
    while (self->head) { /* none when the server stopped; kept safe anyway */
        guard_conn_t *c = self->head;
        self->head = c->next;
        free(c);
    }
    pthread_mutex_destroy(&self->lock);
    free(self);
    *self_p = NULL;
}

/* Bytes the client sent that libmicrohttpd has not read yet; an error
 * counts as some (never cut a connection we know nothing about). */
static int s_unread(int fd)
{
    int n = 0;
    return ioctl(fd, FIONREAD, &n) != 0 || n > 0;
}

/* Under the lock: libmicrohttpd sees end of stream and closes it (its
 * fd stays open until the CLOSED notification, which takes the lock). */
static void s_shut(guard_conn_t *c)
{
    shutdown(c->fd, SHUT_RDWR);
    c->phase = GUARD_SHUT;
}

/* Under the lock: cuts what waited too long, then the oldest silent ones
 * while max_waiting wait (the new connection is about to be one more). */
static void s_admit(http_guard_t *self, int64_t now)
{
    size_t waiting = 0;
    for (guard_conn_t *c = self->head; c; c = c->next) {
        if (c->phase != GUARD_WAITING)
            continue;
        if (now - c->since_ms >= self->header_timeout_ms) {
            s_shut(c);
            self->timed_out++;
        } else {
            waiting++;
        }
    }
    while (waiting >= self->max_waiting) {
        guard_conn_t *oldest = NULL;
        for (guard_conn_t *c = self->head; c; c = c->next)
            if (c->phase == GUARD_WAITING && (!oldest || c->since_ms < oldest->since_ms) &&
                !s_unread(c->fd))
                oldest = c;
        if (!oldest)
            break; /* every waiting one has a request on its way in */
        s_shut(oldest);
        self->evicted++;
        waiting--;
    }
}

static void s_log(http_guard_t *self, int64_t now)
{
    if ((self->timed_out || self->evicted) &&
        (!self->logged_ms || now - self->logged_ms >= LOG_EVERY_MS)) {
        self->logged_ms = now;
        log_warn("--metrics-http: cutting connections that send no request (slow or hostile "
                 "clients; /metrics is still served): %zu so far past %d ms, %zu to keep at most "
                 "%zu waiting",
                 self->timed_out, self->header_timeout_ms, self->evicted, self->max_waiting);
    }
}

static void s_started(http_guard_t *self, struct MHD_Connection *conn, void **socket_context)
{
    const union MHD_ConnectionInfo *fd = MHD_get_connection_info(conn,
                                                                 MHD_CONNECTION_INFO_CONNECTION_FD);
    guard_conn_t *c = fd ? calloc(1, sizeof *c) : NULL;
    /* out of memory: the connection goes unguarded (libmicrohttpd's limits still hold) */
    int64_t now = clock_mono_ms();
    pthread_mutex_lock(&self->lock);
    s_admit(self, now);
    if (c) {
        c->fd = fd->connect_fd;
        c->phase = GUARD_WAITING;
        c->since_ms = now;
        c->next = self->head;
        if (self->head)
            self->head->prev = c;
        self->head = c;
    }
    s_log(self, now);
    pthread_mutex_unlock(&self->lock);
    *socket_context = c;
}

static void s_closed(http_guard_t *self, void **socket_context)
{
    guard_conn_t *c = *socket_context;
    if (!c)
        return;
    pthread_mutex_lock(&self->lock);
    if (c->prev)
        c->prev->next = c->next;
    else
        self->head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    pthread_mutex_unlock(&self->lock);
    free(c);
    *socket_context = NULL;
}

void http_guard_on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                              enum MHD_ConnectionNotificationCode code)
{
    http_guard_t *self = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED)
        s_started(self, conn, socket_context);
    else if (code == MHD_CONNECTION_NOTIFY_CLOSED)
        s_closed(self, socket_context);
}

/* The connection's entry (its socket context), or NULL when unguarded. */
static guard_conn_t *s_entry(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return info ? info->socket_context : NULL;
}

static void s_set_phase(http_guard_t *self, struct MHD_Connection *conn, guard_phase_t phase)
{
    guard_conn_t *c = s_entry(conn);
    if (!c)
        return;
    pthread_mutex_lock(&self->lock);
    if (c->phase != GUARD_SHUT) {
        c->phase = phase;
        c->since_ms = clock_mono_ms();
    }
    pthread_mutex_unlock(&self->lock);
}

void http_guard_on_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
                             enum MHD_RequestTerminationCode code)
{
    (void)req_cls;
    (void)code;
    s_set_phase(cls, conn, GUARD_WAITING);
}

void http_guard_serving(http_guard_t *self, struct MHD_Connection *conn)
{
    s_set_phase(self, conn, GUARD_SERVING);
}

void http_guard_counts(http_guard_t *self, size_t *timed_out, size_t *evicted)
{
    pthread_mutex_lock(&self->lock);
    *timed_out = self->timed_out;
    *evicted = self->evicted;
    pthread_mutex_unlock(&self->lock);
}
