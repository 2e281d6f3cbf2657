/* wire — send and receive ddpipe messages on ZeroMQ sockets. */
#include "proto/wire.h"

#include "common/errbuf.h"
#include "common/log.h"
#include "proto/codec.h"
#include "proto/ratelog.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Prepends a copy of identity (the caller keeps its frame: a ROUTER often
 * answers the same peer many times) and sends; destroys zmsg either way. */
static int send_routed(void *sock, zframe_t *identity, zmsg_t **zmsg)
{
    if (!*zmsg) {
        errno = EINVAL;
        return -1;
    }
    if (identity) {
        zframe_t *copy = zframe_dup(identity);
        if (!copy || zmsg_prepend(*zmsg, &copy) != 0) {
            zframe_destroy(&copy);
            zmsg_destroy(zmsg);
            errno = ENOMEM;
            return -1;
        }
    }
    int rc = zmsg_send(zmsg, sock);
    if (rc != 0) {
        int saved = errno;
        zmsg_destroy(zmsg); /* czmq leaves it to us on failure */
        errno = saved;
    }
    return rc;
}

int proto_send(void *sock, zframe_t *identity, const ddp_msg_t *msg)
{
    zmsg_t *zmsg = proto_encode(msg);
    return send_routed(sock, identity, &zmsg);
}

int proto_send_batch(void *sock, zframe_t *identity, ddp_batch_t *batch)
{
    zmsg_t *zmsg = proto_encode_batch(batch);
    return send_routed(sock, identity, &zmsg);
}

/* "0a1b2c..." of at most 32 identity bytes, for the reject log line. */
static void hex_identity(zframe_t *route, char *buf, size_t cap)
{
    if (!route) {
        snprintf(buf, cap, "peer");
        return;
    }
    const uint8_t *p = zframe_data(route);
    size_t n = zframe_size(route), off = 0;
    for (size_t i = 0; i < n && i < 32 && off + 3 <= cap; i++)
        off += (size_t)snprintf(buf + off, cap - off, "%02x", p[i]);
    if (n == 0)
        snprintf(buf, cap, "empty identity");
    else if (n > 32 && off + 4 <= cap)
        snprintf(buf + off, cap - off, "...");
}

int proto_recv(void *sock, zframe_t **route, ddp_msg_t *out, proto_stats_t *stats)
{
    if (route)
        *route = NULL;
    zmsg_t *zmsg = zmsg_recv(sock);
    if (!zmsg) {
        memset(out, 0, sizeof *out); /* decode zeroes it on every other path */
        return -1;
    }
    if (stats)
        stats->received++;
    zframe_t *id = route ? zmsg_pop(zmsg) : NULL;
    char err[256];
    int rc;
    if (route && !id) {
        memset(out, 0, sizeof *out);
        err_set(err, sizeof err, "empty message (no identity frame)");
        rc = -1;
    } else {
        rc = proto_decode(zmsg, out, err, sizeof err);
    }
    zmsg_destroy(&zmsg);
    if (rc == 0) {
        if (route)
            *route = id;
        return 0;
    }
    char hex[80];
    hex_identity(id, hex, sizeof hex);
    uint64_t held = 0;
    if (!stats || ratelog_allow(&stats->log, sock, hex, err, &held)) {
        if (held)
            log_warn("rejected %s (from %s; %llu other reject lines held back before this one)",
                     err, hex,
                     (unsigned long long)held);
        else
            log_warn("rejected %s (from %s)", err, hex);
    }
    if (stats)
        stats->rejected++;
    zframe_destroy(&id);
    return 1;
}
