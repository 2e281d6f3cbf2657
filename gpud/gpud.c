/* gpud — the worker's state (gpud.h lists the files above it). */
#include "gpud/gpud.h"

#include "common/clock.h"
#include "common/errbuf.h"
#include "common/cpus.h"
#include "common/log.h"
#include "common/zsockopt.h"
#include "gpud/backend_caps.h"
#include "gpud/cuda_device.h"
#include "proto/wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void name_worker(gpud_t *self)
{
    if (self->options.name) {
        snprintf(self->name, sizeof self->name, "%s", self->options.name);
        return;
    }
    char host[48] = "host";
    gethostname(host, sizeof host - 1);
    snprintf(self->name, sizeof self->name, "gpud-%s-%d", host, (int)getpid());
}

/* --threads and --decode-threads not given: this rank's share of the CPUs
 * it may use (common/cpus.h; the local world size was checked with the
 * options), resolved once: --wire jpeg batches would read /proc and the
 * cgroup files for every batch. */
static void settle_threads(gpud_t *self)
{
    gpud_options_t *o = &self->options;
    if (o->threads && o->decode_threads)
        return;
    const char *from;
    long cpus = cpus_available(), local = cpus_local_world(&from);
    long share = cpus_per_rank(cpus, local);
    if (local > 1 && !o->threads)
        snprintf(self->threads_why, sizeof self->threads_why,
                 ": %ld CPU%s / %ld ranks on this host (%s)", cpus, cpus == 1 ? "" : "s", local, from);
    if (!o->threads)
        o->threads = share;
    if (!o->decode_threads)
        o->decode_threads = share;
}

/* What model_new is given; training from scratch draws the initial
 * weights from --seed. */
static void settle_model_options(gpud_t *self)
{
    const gpud_options_t *o = &self->options;
    model_opts_t *m = &self->model_options;
    *m = (model_opts_t){.arch = o->model, .num_classes = (int)o->num_classes,
                        .in_channels = (int)o->in_channels, .n_channels = o->channels.n,
                        .threads = (int)o->threads, .micro_batch = (int)o->micro_batch,
                        .train = o->train, .bf16 = strcmp(o->precision, "bf16") == 0,
                        .fp16 = strcmp(o->precision, "fp16") == 0};
    for (int i = 0; i < o->channels.n && i < 4; i++)
        m->channels[i] = o->channels.v[i];
    if (o->train && !o->weights) {
        m->init = 1;
        m->init_seed = (uint64_t)o->seed;
    }
}

/* Up to 4 values, the last repeated for the channels after it. */
static void per_channel(const option_doubles_t *values, float out[4])
{
    for (int i = 0; i < 4; i++)
        out[i] = (float)values->v[i < values->n ? i : values->n - 1];
}

/* Defaults follow the model: torchvision models use ImageNet statistics,
 * the seed WideResNet plain ToTensor. Explicit flags win. */
static void settle_normalisation(gpud_t *self)
{
    static const float in_mean[3] = {0.485f, 0.456f, 0.406f}, in_std[3] = {0.229f, 0.224f, 0.225f};
    const gpud_options_t *o = &self->options;
    if (o->mean.n || o->std.n) {
        for (int i = 0; i < 4; i++)
            self->mean[i] = 0, self->std[i] = 1;
        if (o->mean.n)
            per_channel(&o->mean, self->mean);
        if (o->std.n)
            per_channel(&o->std, self->std);
        self->normalize = true;
        return;
    }
    if (o->normalize)
        self->normalize = strcmp(o->normalize, "imagenet") == 0;
    else
        self->normalize = strcmp(o->model, "wideresnet") != 0;
    for (int i = 0; i < 4; i++) {
        self->mean[i] = in_mean[i < 3 ? i : 2];
        self->std[i] = in_std[i < 3 ? i : 2];
    }
}

gpud_t *gpud_new(const gpud_options_t *options)
{
    gpud_t *self = calloc(1, sizeof *self);
    if (!self) {
        log_error("out of memory");
        return NULL;
    }
    self->options = *options;
    settle_threads(self);
    rank_state_init(&self->state);
    self->rank = -1;
    name_worker(self);
    settle_model_options(self);
    settle_normalisation(self);
    return self;
}

void gpud_destroy(gpud_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    gpud_t *self = *self_p;
    zactor_destroy(&self->heartbeat);
    for (int i = 0; i < self->n_loaders; i++)
        zsock_destroy(&self->loaders[i]);
    self->loader = NULL;
    zsock_destroy(&self->reducer);
    train_state_destroy(&self->train);   /* the trainer before the model it holds */
    model_destroy(&self->model);
    free(self->logits);
    free(self->wire_px);
    free(self);
    *self_p = NULL;
}

int gpud_load_model(gpud_t *self)
{
    const gpud_options_t *o = &self->options;
    char err[1024];
    double t0 = clock_mono_s();
    if (backend_can(o->backend, BK_CAN_DEVICE_PER_RANK))
        cuda_device_set_local_rank(o->rank);   /* a GPU per local rank (docs/CUDA.md) */
    self->model = model_new(&self->model_options, o->backend, o->weights, err, sizeof err);
    if (!self->model) {
        /* the cause may be the device as well as the weights: name both */
        err_set(self->start_error, sizeof self->start_error,
                "cannot set up model %s on the %s backend (weights %s): %s", o->model, o->backend,
                o->weights ? o->weights : "initial", err);
        log_error("%s", self->start_error);
        return -1;
    }
    if (strcmp(o->decode, "gpu") == 0 &&
        backend_decode_ready(model_backend(self->model), err, sizeof err) != 0) {
        err_set(self->start_error, sizeof self->start_error, "%s", err);
        log_error("%s", self->start_error);
        return -1;
    }
    log_info("model %s (%d classes, %d input channels) on %s (%ld thread%s%s), %s, ready in "
             "%.2fs", o->model, model_num_classes(self->model), model_in_channels(self->model),
             o->backend, o->threads, o->threads == 1 ? "" : "s", self->threads_why,
             model_precision(self->model), clock_mono_s() - t0);
    return 0;
}

int gpud_connect(gpud_t *self)
{
    self->reducer = zs_connect(ZMQ_DEALER, self->options.reducer, "reducer", self->name);
    if (!self->reducer)
        return -1;
    /* --loader EP1,EP2,...: a DEALER to each loaderd, identity our name at each */
    char eps[DDP_MAX_STR];
    snprintf(eps, sizeof eps, "%s", self->options.loader);
    char *save = NULL;
    for (char *ep = strtok_r(eps, ",", &save); ep; ep = strtok_r(NULL, ",", &save)) {
        if (self->n_loaders == DDP_MAX_LOADERS) {
            log_error("--loader names more than %d loaderds", DDP_MAX_LOADERS);
            return -1;
        }
        zsock_t *s = zs_connect(ZMQ_DEALER, ep, "loader", self->name);
        if (!s)
            return -1;
        self->loaders[self->n_loaders++] = s;
    }
    if (!self->n_loaders) {
        log_error("--loader '%s' names no endpoint", self->options.loader);
        return -1;
    }
    self->loader = self->loaders[0];
    if (self->n_loaders > 1)
        log_info("taking batches from %d loaderds: %s", self->n_loaders, self->options.loader);
    return 0;
}

int gpud_start_heartbeat(gpud_t *self)
{
    self->heartbeat_args = (heartbeat_args_t){
        .loader = self->options.loader, .reducer = self->options.reducer, .worker = self->name,
        .rank = self->rank, .interval_ms = 1000, .batches_done = &self->batches,
        .auth = self->auth, .unreachable_ms = self->options.join_timeout_s * 1000};
    self->heartbeat = heartbeat_new(&self->heartbeat_args);
    if (!self->heartbeat) {
        log_error("cannot start the heartbeat thread");
        return -1;
    }
    return 0;
}

int gpud_send_credit(gpud_t *self, uint32_t credits, const uint64_t *ack)
{
    ddp_msg_t m = {.type = DDP_CREDIT};
    snprintf(m.u.credit.worker, sizeof m.u.credit.worker, "%s", self->name);
    m.u.credit.credits = credits;
    m.u.credit.rank = self->rank;   /* loaderd addresses train shards by rank */
    m.u.credit.gen = self->gen;     /* ... of this generation */
    m.u.credit.n_acks = ack ? 1 : 0;
    m.u.credit.acks = (uint64_t *)ack;
    m.u.credit.auth = self->auth;
    if (ack) /* an answer: to the loaderd whose batch it was */
        return proto_send(zsock_resolve(self->loaders[self->from_loader]), NULL, &m);
    for (int i = 0; i < self->n_loaders; i++)   /* a window at each loaderd */
        if (proto_send(zsock_resolve(self->loaders[i]), NULL, &m) < 0)
            return -1;
    return 0;
}

int64_t gpud_commit_timeout_ms(const gpud_t *self)
{
    long s = self->options.commit_timeout_s;
    return (s > 0 ? s : 2 * self->options.ring_timeout_s) * 1000;
}

/* STOP(0) while the job's last EPOCH waits for its END(TRAIN) (between
 * steps: a step of the next epoch first handles that EPOCH). A second
 * STOP while deferred is not deferred again. */
static bool defer_stop(gpud_t *self, const ddp_stop_t *stop)
{
    const train_state_t *ts = self->train;
    if (stop->code != 0 || !ts || self->state.now != RANK_IDLE || !ts->pending.epoch ||
        (int64_t)ts->pending_epoch.epoch <= ts->train_end_done)
        return false;
    if (rank_state_to(&self->state, RANK_STOP_DEFERRED, "STOP(0) before the last END(TRAIN)") < 0)
        return false;
    log_info("reducerd says stop (0: %s); first loaderd's END of epoch %u (its BatchNorm "
             "broadcast, the final checkpoint)", stop->reason, self->train->pending_epoch.epoch);
    self->deferred_stop = *stop;
    self->deferred_until_ms = clock_mono_ms() + gpud_commit_timeout_ms(self);
    return true;
}

void gpud_end_handled(gpud_t *self)
{
    if (self->state.now == RANK_STOP_DEFERRED && !self->train->pending.epoch)
        gpud_stop(self, &self->deferred_stop);
}

void gpud_tick(gpud_t *self)
{
    if (self->state.now == RANK_STOP_DEFERRED && clock_mono_ms() > self->deferred_until_ms) {
        log_error("loaderd's END of epoch %u did not come: stopping without the final "
                  "checkpoint", self->train->pending_epoch.epoch);
        gpud_stop(self, &self->deferred_stop);
    }
}

void gpud_stop(gpud_t *self, const ddp_stop_t *stop)
{
    if (defer_stop(self, stop))
        return;
    if (stop->code == 0) {
        log_info("reducerd says stop (0: %s)", stop->reason);
    } else if (strncmp(stop->reason, "fenced", 6) == 0) {
        /* the job went on without this rank (docs/ELASTIC.md): whatever it
         * holds is behind the survivors', so it writes nothing */
        log_error("reducerd removed this rank from the job (%d): %s", stop->code, stop->reason);
        self->exit_code = 1;
        rank_state_end(&self->state, RANK_FENCED, "STOP: fenced");
        return;
    } else {
        log_error("reducerd stops the job (%d): %s", stop->code, stop->reason);
        /* 3, 4, 5: the job ended for a reason every rank shares (the
         * launcher tells them from a rank that failed alone) */
        bool shared = stop->code == DDP_STOP_JOB_LOST || stop->code == DDP_STOP_NONFINITE ||
                      stop->code == DDP_STOP_CHECKPOINT_FAILED;
        self->exit_code = shared ? stop->code : 1;
        /* after a failed checkpoint write the file holds the last good one;
         * after a non-finite step the rank decided (rank_report.c) */
        if (self->train && stop->code != DDP_STOP_CHECKPOINT_FAILED &&
            stop->code != DDP_STOP_NONFINITE)
            self->train->checkpoint_on_exit = true;
    }
    rank_state_end(&self->state, RANK_STOPPED, stop->code ? "STOP" : "STOP(0)");
}

void gpud_on_heartbeat(gpud_t *self)
{
    char *verb = NULL, *code = NULL, *reason = NULL;
    if (zstr_recvx(self->heartbeat, &verb, &code, &reason, NULL) == 3 &&
        strcmp(verb, "STOP") == 0) {
        ddp_stop_t stop = {.code = atoi(code)};
        snprintf(stop.reason, sizeof stop.reason, "%s", reason);
        gpud_stop(self, &stop);
    }
    zstr_free(&verb);
    zstr_free(&code);
    zstr_free(&reason);
}

zpoller_t *gpud_reducer_poller(gpud_t *self)
{
    zpoller_t *poller = zpoller_new(self->reducer, NULL);
    if (poller && self->heartbeat && zpoller_add(poller, self->heartbeat) != 0)
        zpoller_destroy(&poller);
    return poller;
}

int gpud_poll_reducer(gpud_t *self, zpoller_t *poller, int timeout_ms, ddp_msg_t *m)
{
    void *which = zpoller_wait(poller, timeout_ms);
    if (which && which == (void *)self->heartbeat)
        gpud_on_heartbeat(self);
    if (which != self->reducer)
        return 0;
    return proto_recv(zsock_resolve(self->reducer), NULL, m, &self->stats) == 0;
}

void gpud_norm(const gpud_t *self, const float **mean, const float **std)
{
    *mean = self->normalize ? self->mean : NULL;
    *std = self->normalize ? self->std : NULL;
}

int gpud_check_batch_shape(gpud_t *self, const ddp_batch_t *batch)
{
    int want_c = model_in_channels(self->model), h = 0, w = 0;
    const char *arch = self->options.model;
    if (batch->c != want_c) {
        log_error("loaderd sends %u-channel images but %s wants %d: start loaderd with "
                  "--channels %d", batch->c, arch, want_c, want_c);
        return -1;
    }
    if (model_input_hw(self->model, &h, &w) && (batch->h != h || batch->w != w)) {
        log_error("loaderd sends %ux%u images but %s wants %dx%d: fix loaderd's --resize/--crop",
                  batch->h, batch->w, arch, h, w);
        return -1;
    }
    return 0;
}

int gpud_fit_logits(gpud_t *self, uint32_t n)
{
    size_t need = (size_t)n * (size_t)model_num_classes(self->model);
    if (need <= self->logits_cap)
        return 0;
    float *p = realloc(self->logits, need * sizeof *p);
    if (!p)
        return -1;
    self->logits = p;
    self->logits_cap = need;
    return 0;
}

int gpud_sync_eval(gpud_t *self)
{
    char err[512];
    if (model_sync_eval(self->model, err, sizeof err) < 0) {
        log_error("cannot give validation the trained weights: %s", err);
        return -1;
    }
    self->eval_stale = false;
    return 0;
}
