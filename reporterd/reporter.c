/* reporter — reporterd's state and its setup. */
#include "reporterd/reporter.h"

#include "common/jobid.h"
#include "common/log.h"
#include "common/zsecurity.h"
#include "common/zsockopt.h"
#include "proto/event.h"
#include "proto/wire.h"
#include "reporterd/tap.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Creating a file in the run directory now beats finding out at the end of
 * a long job that results cannot be written. 0, or -1 with path and errno. */
static int probe_writable(const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/.reporterd-probe.%d", dir, (int)getpid());
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0 || write(fd, "ok\n", 3) != 3 || fsync(fd) != 0) {
        int e = errno;
        log_error("run directory %s is not writable: creating %s failed: %s (errno %d); "
                  "choose another --out or fix its permissions/free space",
                  dir, path, strerror(e), e);
        if (fd >= 0) {
            close(fd);
            unlink(path);
        }
        return -1;
    }
    close(fd);
    unlink(path);
    return 0;
}

static int open_rundir(reporter_t *self)
{
    const reporter_options_t *o = &self->options;
    char err[512];
    self->rundir = rundir_new(o->out, err, sizeof err);
    if (!self->rundir) {
        log_error("cannot use run directory %s: %s", o->out, err);
        return -1;
    }
    if (probe_writable(o->out) != 0)
        return -1;
    if ((o->seed_csv || o->start_epoch >= 0) &&
        rundir_train_setup(self->rundir, o->start_epoch, o->seed_csv, err, sizeof err) != 0) {
        log_error("cannot set up the training files of %s: %s", o->out, err);
        return -1;
    }
    if (o->tensorboard && !(self->tb = tfevents_new(o->tensorboard, err, sizeof err))) {
        log_error("--tensorboard %s: %s", o->tensorboard, err);
        return -1;
    }
    if (self->tb)
        log_info("TensorBoard scalars in %s", tfevents_path(self->tb));
    return 0;
}

static int open_metrics(reporter_t *self)
{
    const char *listen = self->options.metrics_http;
    self->prom = promstate_new();
    if (!self->prom) {
        log_error("out of memory");
        return -1;
    }
    if (!listen)
        return 0;
    if (zs_security_check_listen(listen, "--metrics-http endpoint") < 0)
        return -1;
    char err[512];
    if (!(self->web = webfeed_new())) {
        log_error("out of memory (the dashboard's event feed)");
        return -1;
    }
    metrics_http_limits_t limits = {(unsigned int)self->options.http_max_connections,
                                    (unsigned int)self->options.http_max_per_address};
    if (!(self->http =
              metrics_http_new(listen, self->prom, self->web, &limits, err, sizeof err))) {
        log_error("%s", err);
        return -1;
    }
    log_info("Prometheus metrics at http://%s/metrics, the live dashboard at http://%s/",
             listen, listen);
    return 0;
}

static int join_reducer(reporter_t *self)
{
    ddp_msg_t j = {.type = DDP_JOIN};
    j.u.join.role = DDP_ROLE_REPORTER;
    j.u.join.pid = (uint32_t)getpid();
    j.u.join.want_rank = -1;
    gethostname(j.u.join.host, sizeof j.u.join.host - 1);
    snprintf(j.u.join.name, sizeof j.u.join.name, "reporterd-%d", (int)getpid());
    char err[256];
    if (jobid_from_env(j.u.join.job, sizeof j.u.join.job, err, sizeof err) < 0) {
        log_error("%s", err);
        return -1;
    }
    return proto_send(zsock_resolve(self->reducer), NULL, &j);
}

static int setup(reporter_t *self)
{
    const reporter_options_t *o = &self->options;
    if (open_rundir(self) != 0 || open_metrics(self) != 0)
        return -1;
    self->sub = zs_connect(ZMQ_SUB, o->sub, "event", NULL);
    self->reducer = zs_connect(ZMQ_DEALER, o->reducer, "reducer", NULL);
    if (!self->sub || !self->reducer)
        return -1;
    zsock_set_rcvhwm(self->sub, 0);   /* never drop an event: they are the results */
    zsock_set_subscribe(self->sub, "");
    zsock_set_subscribe(self->sub, EVENT_REPORTER_TOPIC);
    if (o->tap && tap_open(self) != 0)
        return -1;
    return join_reducer(self);
}

reporter_t *reporter_new(const reporter_options_t *options)
{
    reporter_t *self = calloc(1, sizeof *self);
    if (!self) {
        log_error("out of memory");
        return NULL;
    }
    self->options = *options;
    if (setup(self) != 0)
        reporter_destroy(&self);
    return self;
}

void reporter_destroy(reporter_t **self_p)
{
    reporter_t *self = *self_p;
    if (!self)
        return;
    metrics_http_destroy(&self->http);
    webfeed_destroy(&self->web);   /* after the server: no reader left */
    promstate_destroy(&self->prom);
    rundir_destroy(&self->rundir);
    tfevents_destroy(&self->tb);
    tapcache_destroy(&self->tapcache);
    zsock_destroy(&self->tap);
    zsock_destroy(&self->sub);
    zsock_destroy(&self->reducer);
    free(self);
    *self_p = NULL;
}
