/* eval — an eval batch: forward on the model, per-sample top-k and loss
 * to reducerd as RESULT (never averages), then CREDIT acks the batch to
 * loaderd, after the result is sent, so a crash between the two only
 * causes a harmless duplicate.
 *
 * Pipelined (an eval job): a batch's forward is queued (model_eval_begin_u8)
 * and the batch kept, unanswered, in self->pending; the next batch's first
 * micro-batch is staged (model_eval_stage_u8: on cuda the host copies its
 * bytes while the device runs the batch before, and a --wire jpeg batch is
 * decoded meanwhile too) before the kept one's logits are read and it is
 * answered. With no batch waiting the loop answers it at once (main.c
 * polls without waiting while one is kept). The same forwards on the same
 * bytes: the same results; only when RESULT and CREDIT leave moves. */
#include "gpud/eval.h"

#include "common/clock.h"
#include "common/log.h"
#include "gpud/wire_input.h"
#include "proto/wire.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

int eval_start(gpud_t *self)
{
    if (self->welcome_train) {
        log_error("reducerd runs a training job but this gpud was started without --train");
        return -1;
    }
    return 0;
}

/* The --fault-after hook: die as a worker that took a batch and never
 * answered (loaderd must hand it to another worker). */
static void die_after(gpud_t *self, const ddp_batch_t *batch)
{
    log_warn("--fault-after %ld reached: dying without answering batch %llu (test hook)",
             self->options.fault_after, (unsigned long long)batch->seq);
    raise(SIGKILL);
}

/* A kept batch: its message (owned), decoded input, start, loaderd, and
 * the logits buffer its forward writes (the next batch's go to
 * self->logits, which may grow meanwhile). */
struct eval_pending {
    ddp_msg_t msg;
    wire_input_t in;
    double t0;
    int loader;
    float *logits;
    size_t cap;
};

/* The forward of batch: queued (then the logits are read by
 * model_eval_end), or with wait run whole. */
static int forward(gpud_t *self, const ddp_batch_t *batch, const uint8_t *pixels, int wait)
{
    char err[512];
    const float *mean, *std;
    gpud_norm(self, &mean, &std);
    int rc = wait ? model_forward_u8(self->model, pixels, (int)batch->n, batch->c, batch->h,
                                     batch->w, mean, std, self->logits, err, sizeof err)
                  : model_eval_begin_u8(self->model, pixels, (int)batch->n, batch->c,
                                        batch->h, batch->w, mean, std, self->logits, err,
                                        sizeof err);
    if (rc < 0) {
        log_error("forward pass failed on batch %llu: %s", (unsigned long long)batch->seq, err);
        return -1;
    }
    return 0;
}

/* RESULT: the batch's ids and labels with this worker's top-k and loss
 * from its logits. */
static int send_result(gpud_t *self, const ddp_batch_t *batch, const wire_input_t *in,
                       double t0, const float *logits)
{
    int classes = model_num_classes(self->model), k = classes < DDP_MAX_K ? classes : DDP_MAX_K;
    ddp_msg_t r = {.type = DDP_RESULT};
    ddp_result_t *res = &r.u.result;
    *res = (ddp_result_t){.rank = self->rank, .epoch = batch->epoch, .phase = batch->phase,
                          .seq = batch->seq, .n = batch->n, .k = (uint32_t)k, .ids = batch->ids,
                          .labels = batch->labels, .auth = self->auth};
    res->topk = malloc((size_t)batch->n * k * sizeof *res->topk);
    res->loss = malloc((size_t)batch->n * sizeof *res->loss);
    if (self->options.probs) {
        /* 2 bytes per class and sample: 2 KB a sample at 1000 classes,
         * ~1% of the 224x224x3 pixels that came in */
        res->nprob = (uint32_t)classes;
        res->probs = malloc((size_t)batch->n * classes * sizeof *res->probs);
    }
    if (!res->topk || !res->loss || (res->nprob && !res->probs) || wire_input_attach(res, in) < 0) {
        free(res->topk), free(res->loss), free(res->probs), free(res->why);
        log_error("out of memory for results");
        return -1;
    }
    model_topk_ce(logits, (int)batch->n, classes, batch->labels, k, res->topk, res->loss);
    if (res->probs)
        model_softmax_q(logits, (int)batch->n, classes, res->probs);
    /* from its start, or from the answer before where the two overlap
     * (a kept batch's span covers the next one's decode): the sum stays
     * the worker's busy time */
    double now = clock_mono_s();
    res->compute_s = now - (t0 > self->answered_at ? t0 : self->answered_at);
    self->answered_at = now;
    self->compute_s += res->compute_s;
    int rc = proto_send(zsock_resolve(self->reducer), NULL, &r);
    free(res->topk), free(res->loss), free(res->probs), free(res->why); /* why's strings are IN's */
    if (rc < 0) {
        log_error("cannot send results to reducerd: %s", zmq_strerror(zmq_errno()));
        return -1;
    }
    log_debug("batch %llu: %u samples in %.3fs", (unsigned long long)batch->seq, batch->n,
              res->compute_s);
    return 0;
}

/* After RESULT: the batch counted and acked to the loaderd it came from. */
static int answered(gpud_t *self, const ddp_batch_t *batch, double t0, int loader)
{
    if (atomic_fetch_add(&self->batches, 1) == 0)   /* where a job's start-up goes */
        log_info("first batch: %u samples in %.2fs (the backend's first pass: its plans and "
                 "algorithm choices)", batch->n, clock_mono_s() - t0);
    self->samples += batch->n;
    int from = self->from_loader;
    self->from_loader = loader;
    int rc = gpud_send_credit(self, 1, &batch->seq);
    self->from_loader = from;
    return rc;
}

bool eval_pending(const gpud_t *self)
{
    return self->pending && self->pending->msg.type == DDP_BATCH;
}

int eval_finish(gpud_t *self)
{
    if (!eval_pending(self))
        return 0;
    struct eval_pending *p = self->pending;
    ddp_batch_t *batch = &p->msg.u.batch;
    char err[512];
    int rc = 0;
    if (model_eval_end(self->model, err, sizeof err) < 0) {
        log_error("forward pass failed on batch %llu: %s", (unsigned long long)batch->seq, err);
        rc = -1;
    }
    rc = rc < 0 || send_result(self, batch, &p->in, p->t0, p->logits) < 0 ||
                 answered(self, batch, p->t0, p->loader) < 0 ? -1 : 0;
    wire_input_clear(&p->in);
    ddp_msg_clear(&p->msg);
    memset(&p->msg, 0, sizeof p->msg);
    return rc;
}

void eval_drop(gpud_t *self)
{
    struct eval_pending *p = self->pending;
    if (!p)
        return;
    wire_input_clear(&p->in);
    ddp_msg_clear(&p->msg);
    free(p->logits);
    free(p);
    self->pending = NULL;
}

/* The batch kept (self->pending made before its forward): its message
 * moved out of *msg, its logits buffer and self->logits swapped (the kept
 * forward writes the one it was given). */
static void keep(gpud_t *self, ddp_msg_t *msg, const wire_input_t *in, double t0)
{
    struct eval_pending *p = self->pending;
    p->msg = *msg;
    memset(msg, 0, sizeof *msg);   /* moved: the caller's clear frees nothing */
    p->in = *in;
    p->t0 = t0;
    p->loader = self->from_loader;
    float *l = p->logits;
    size_t cap = p->cap;
    p->logits = self->logits;
    p->cap = self->logits_cap;
    self->logits = l;
    self->logits_cap = cap;
}

/* Batch's first micro-batch staged into the kept batch's forward (the
 * host's copy overlaps the device's work); a failure only costs the
 * overlap: its begin writes it again. */
static void stage_next(gpud_t *self, const ddp_batch_t *batch, const uint8_t *pixels)
{
    char err[512];
    const float *mean, *std;
    gpud_norm(self, &mean, &std);
    int st = pixels ? model_eval_stage_u8(self->model, pixels, (int)batch->n, batch->c,
                                          batch->h, batch->w, mean, std, err, sizeof err)
                    : 0;
    if (st < 0)
        log_warn("batch %llu: staging ahead failed (%s); it is written again",
                 (unsigned long long)batch->seq, err);
    self->staged_ahead += st > 0;
}

int eval_on_batch(gpud_t *self, ddp_msg_t *msg)
{
    ddp_batch_t *batch = &msg->u.batch;
    int pipe = !self->train && model_eval_overlap();
    if (self->options.fault_after >= 0 &&
        atomic_load(&self->batches) + (eval_pending(self) ? 1 : 0) >=
            (uint64_t)self->options.fault_after) {
        if (eval_finish(self) < 0)   /* the kept one answered: only this one is lost */
            return -1;
        die_after(self, batch);
    }
    if (gpud_check_batch_shape(self, batch) < 0)
        return -1;
    if (self->eval_stale && gpud_sync_eval(self) < 0)   /* reads a kept forward first */
        return -1;
    if (pipe && !self->pending && !(self->pending = calloc(1, sizeof *self->pending))) {
        log_warn("out of memory for a batch in flight: answered at once");
        pipe = 0;
    }
    if (gpud_fit_logits(self, batch->n) < 0) {
        log_error("out of memory for %zu logits",
                  (size_t)batch->n * (size_t)model_num_classes(self->model));
        return -1;
    }
    double t0 = clock_mono_s(); /* compute_s includes a --wire jpeg batch's decode */
    wire_input_t in;
    if (wire_input(self, batch, &in) < 0)
        return -1;
    if (eval_pending(self)) {
        /* this batch's first bytes copied while the kept one runs, then
         * the kept one answered */
        stage_next(self, batch, in.pixels);
        if (eval_finish(self) < 0) {
            wire_input_clear(&in);
            return -1;
        }
    }
    if (forward(self, batch, in.pixels, !pipe) < 0) {
        wire_input_clear(&in);
        return -1;
    }
    if (pipe) {
        keep(self, msg, &in, t0);
        return 0;
    }
    int rc = send_result(self, batch, &in, t0, self->logits);
    wire_input_clear(&in);
    return rc < 0 ? -1 : answered(self, batch, t0, self->from_loader);
}
