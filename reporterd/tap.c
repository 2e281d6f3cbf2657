/* tap — the monitors' XPUB of reporterd. */
#include "reporterd/tap.h"

#include "common/log.h"
#include "common/zsecurity.h"
#include "common/zsockopt.h"

int tap_open(reporter_t *self)
{
    const char *endpoint = self->options.tap;
    self->tapcache = tapcache_new();
    self->tap = zsock_new(ZMQ_XPUB);
    if (!self->tapcache || !self->tap) {
        log_error("cannot create the tap socket (out of memory?)");
        return -1;
    }
    /* every subscription reaches us (also a second "" subscriber), so each
     * late monitor gets its replay */
    zsock_set_xpub_verbose(self->tap, 1);
    zsock_set_sndhwm(self->tap, (int)self->options.tap_hwm);
    zsock_set_linger(self->tap, 0);
    if (zs_secure_server(self->tap, endpoint, "tap") < 0)
        return -1;
    if (zs_prepare_ipc(endpoint) != 0 || zsock_bind(self->tap, "%s", endpoint) < 0) {
        log_error("cannot bind the tap on %s: %s", endpoint, zmq_strerror(zmq_errno()));
        return -1;
    }
    return 0;
}

void tap_forward(reporter_t *self, const ddp_event_t *ev, zmsg_t *m)
{
    /* unchanged bytes; a PUB never blocks: a slow monitor loses events */
    zmsg_t *copy = zmsg_dup(m);
    if (copy && zmsg_send(&copy, self->tap) < 0)
        zmsg_destroy(&copy);
    if (tapcache_keep(self->tapcache, ev, m) != 0)
        log_warn("out of memory keeping the last %s event for late tap subscribers",
                 event_topic_name(ev->topic));
}

void tap_on_subscription(reporter_t *self)
{
    zframe_t *f = zframe_recv(self->tap);
    if (!f)
        return;
    if (zframe_size(f) >= 1 && zframe_data(f)[0] == 1) {
        int n = tapcache_replay(self->tapcache, self->tap, (const char *)zframe_data(f) + 1,
                                zframe_size(f) - 1);
        self->replays += n > 0;
        log_debug("tap subscription '%.*s': replayed %d events", (int)zframe_size(f) - 1,
                  (const char *)zframe_data(f) + 1, n);
    }
    zframe_destroy(&f);
}

void tap_linger(reporter_t *self)
{
    log_info("job over: serving the final values for %lds (SIGTERM to stop)",
             self->options.linger_s);
    zpoller_t *poller = self->tap ? zpoller_new(self->tap, NULL) : NULL;
    int64_t until = zclock_mono() + self->options.linger_s * 1000;
    while (!zs_interrupted() && zclock_mono() < until) {
        if (poller && zpoller_wait(poller, 200) == self->tap)
            tap_on_subscription(self);
        else if (!poller)
            zclock_sleep(200);
    }
    zpoller_destroy(&poller);
}
