#include "gpud/heartbeat.h"

#include "common/log.h"
#include "common/zsecurity.h"
#include "proto/wire.h"

#include <string.h>

/* The loader DEALER connects to every endpoint of the comma-separated
 * list (several loaderds: --loader EP1,EP2,...); returns how many, or -1. */
static int connect_loaders(zsock_t *s, const char *list)
{
    char eps[DDP_MAX_STR];
    snprintf(eps, sizeof eps, "%s", list);
    char *save = NULL;
    int n = 0;
    for (char *ep = strtok_r(eps, ",", &save); ep; ep = strtok_r(NULL, ",", &save), n++)
        if (zs_secure_client(s, ep, "heartbeat") < 0 || zsock_connect(s, "%s", ep) < 0)
            return -1;
    return n;
}

static bool send_beat(zsock_t *to, const heartbeat_args_t *a, int32_t rank, const ddp_auth_t *auth)
{
    ddp_msg_t m = {.type = DDP_HEARTBEAT};
    snprintf(m.u.heartbeat.worker, sizeof m.u.heartbeat.worker, "%s", a->worker);
    m.u.heartbeat.rank = rank;
    m.u.heartbeat.batches_done = atomic_load(a->batches_done);
    m.u.heartbeat.auth = *auth;
    if (proto_send(zsock_resolve(to), NULL, &m) == 0)
        return true;
    log_debug("heartbeat not sent: %s", zmq_strerror(zmq_errno()));
    return false;
}

/* A STOP on the beat socket (reducerd answers beats of an earlier
 * reducerd's session with STOP(DDP_STOP_JOB_LOST)) goes to the main
 * thread as "STOP" code reason: it may be idle, waiting for batches that
 * will never come. Anything else there is dropped. */
static void forward_stop(zsock_t *from, zsock_t *pipe, proto_stats_t *st)
{
    ddp_msg_t m;
    if (proto_recv(zsock_resolve(from), NULL, &m, st) != 0)
        return;
    if (m.type == DDP_STOP)
        zstr_sendx(pipe, "STOP",
                   m.u.stop.code == DDP_STOP_JOB_LOST            ? "3"
                   : m.u.stop.code == DDP_STOP_CHECKPOINT_FAILED ? "4"
                   : m.u.stop.code == DDP_STOP_NONFINITE         ? "5"
                                                                 : "1",
                   m.u.stop.reason, NULL);
    ddp_msg_clear(&m);
}

/* "AUTH" rank auth: the beats' new rank and token. */
static void take_auth(zmsg_t *cmd, int32_t *rank, ddp_auth_t *auth)
{
    zframe_t *r = zmsg_pop(cmd), *a = zmsg_pop(cmd);
    if (r && a && zframe_size(r) == sizeof *rank && zframe_size(a) == sizeof *auth) {
        memcpy(rank, zframe_data(r), sizeof *rank);
        memcpy(auth, zframe_data(a), sizeof *auth);
    }
    zframe_destroy(&r);
    zframe_destroy(&a);
}

int heartbeat_set_auth(zactor_t *self, int32_t rank, const ddp_auth_t *auth)
{
    zmsg_t *m = zmsg_new();
    if (!m || zmsg_addstr(m, "AUTH") < 0 || zmsg_addmem(m, &rank, sizeof rank) < 0 ||
        zmsg_addmem(m, auth, sizeof *auth) < 0) {
        zmsg_destroy(&m);
        return -1;
    }
    return zmsg_send(&m, self);
}

static void heartbeat_actor(zsock_t *pipe, void *argp)
{
    heartbeat_args_t *a = argp;
    int32_t rank = a->rank;      /* ours: the main thread renumbers through AUTH */
    ddp_auth_t auth = a->auth;
    char id[DDP_MAX_NAME + 8];
    snprintf(id, sizeof id, "%s.hb", a->worker);
    zsock_t *loader = zsock_new(ZMQ_DEALER);
    int n_loaders = 1;
    zsock_t *reducer = zsock_new(ZMQ_DEALER);
    if (loader && reducer) {
        zsock_set_linger(loader, 0);
        zsock_set_linger(reducer, 0);
        /* never queue stale beats: a beat only matters when fresh */
        zsock_set_sndhwm(loader, 4);
        zsock_set_sndhwm(reducer, 4);
        zsock_set_sndtimeo(loader, 0);
        zsock_set_sndtimeo(reducer, 0);
        zsock_set_identity(loader, id);
        zsock_set_identity(reducer, id);
        /* CURVE on tcp as every other socket (zsecurity); a beat that
         * cannot go out is only logged: the main sockets carry the job */
        if ((n_loaders = connect_loaders(loader, a->loader)) < 0 ||
            zs_secure_client(reducer, a->reducer, "heartbeat") < 0 ||
            zsock_connect(reducer, "%s", a->reducer) < 0) {
            log_error("heartbeats cannot be sent to %s and %s: %s", a->loader, a->reducer,
                      zmq_strerror(zmq_errno()));
            zsock_destroy(&loader);
        }
    }
    zpoller_t *poller = zpoller_new(pipe, NULL);
    if (poller && loader && reducer)
        zpoller_add(poller, reducer);
    zsock_signal(pipe, 0);
    int64_t next_beat = 0, reducer_ok = zclock_mono();
    proto_stats_t beat_stats = {0};   /* this thread's: the reject lines' rate limit */
    bool told = false;
    while (poller) {
        zmsg_t *cmd = NULL;
        void *which = zpoller_wait(poller, a->interval_ms);
        if (which == reducer) {
            forward_stop(reducer, pipe, &beat_stats);
        } else if (which == pipe) {
            cmd = zmsg_recv(pipe);
            char *verb = cmd ? zmsg_popstr(cmd) : NULL;
            bool term = !verb || strcmp(verb, "$TERM") == 0;
            if (verb && strcmp(verb, "AUTH") == 0)
                take_auth(cmd, &rank, &auth);
            free(verb);
            zmsg_destroy(&cmd);
            if (term)
                break;
        }
        if (loader && reducer && zclock_mono() >= next_beat) {
            next_beat = zclock_mono() + a->interval_ms;
            /* a DEALER sends round-robin over its loaderds: one beat each */
            for (int i = 0; i < n_loaders; i++)
                send_beat(loader, a, rank, &auth);
            if (send_beat(reducer, a, rank, &auth))
                reducer_ok = zclock_mono();
            /* a beat that cannot even be queued: no reducerd at the other
             * end (gone, or the host down). An idle worker would wait for
             * batches forever: past the bound it stops, resumable. */
            if (!told && a->unreachable_ms > 0 && zclock_mono() - reducer_ok > a->unreachable_ms) {
                char why[DDP_MAX_STR];
                snprintf(why, sizeof why, "reducerd at %s unreachable for %llds (no heartbeat "
                         "could be delivered): stopping; restart the job (or --resume)",
                         a->reducer, (long long)(a->unreachable_ms / 1000));
                zstr_sendx(pipe, "STOP", "1", why, NULL);
                told = true;
            }
        }
    }
    zpoller_destroy(&poller);
    zsock_destroy(&loader);
    zsock_destroy(&reducer);
}

zactor_t *heartbeat_new(heartbeat_args_t *args)
{
    return zactor_new(heartbeat_actor, args);
}
