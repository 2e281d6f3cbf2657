/* eval — an eval batch: forward on the model, per-sample top-k and loss
 * to reducerd as RESULT (never averages), then CREDIT acks the batch to
 * loaderd, after the result is sent, so a crash between the two only
 * causes a harmless duplicate. */
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

static int forward(gpud_t *self, const ddp_batch_t *batch, const uint8_t *pixels)
{
    char err[512];
    const float *mean = self->normalize ? self->mean : NULL;
    const float *std = self->normalize ? self->std : NULL;
    if (model_forward_u8(self->model, pixels, (int)batch->n, batch->c,
                         batch->h, batch->w, mean, std, self->logits, err, sizeof err) < 0) {
        log_error("forward pass failed on batch %llu: %s", (unsigned long long)batch->seq, err);
        return -1;
    }
    return 0;
}

/* RESULT: the batch's ids and labels with this worker's top-k and loss. */
static int send_result(gpud_t *self, const ddp_batch_t *batch, const wire_input_t *in,
                       double t0)
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
    model_topk_ce(self->logits, (int)batch->n, classes, batch->labels, k, res->topk, res->loss);
    if (res->probs)
        model_softmax_q(self->logits, (int)batch->n, classes, res->probs);
    res->compute_s = clock_mono_s() - t0;
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

int eval_on_batch(gpud_t *self, ddp_batch_t *batch)
{
    if (self->options.fault_after >= 0 &&
        atomic_load(&self->batches) >= (uint64_t)self->options.fault_after)
        die_after(self, batch);
    if (gpud_check_batch_shape(self, batch) < 0)
        return -1;
    if (self->eval_stale && gpud_sync_eval(self) < 0)
        return -1;
    if (gpud_fit_logits(self, batch->n) < 0) {
        log_error("out of memory for %zu logits",
                  (size_t)batch->n * (size_t)model_num_classes(self->model));
        return -1;
    }
    double t0 = clock_mono_s(); /* compute_s includes a --wire jpeg batch's decode */
    wire_input_t in;
    if (wire_input(self, batch, &in) < 0)
        return -1;
    int rc = forward(self, batch, in.pixels) < 0 || send_result(self, batch, &in, t0) < 0;
    wire_input_clear(&in);
    if (rc)
        return -1;
    if (atomic_fetch_add(&self->batches, 1) == 0)   /* where a job's start-up goes */
        log_info("first batch: %u samples in %.2fs (the backend's first pass: its plans and "
                 "algorithm choices)", batch->n, clock_mono_s() - t0);
    self->samples += batch->n;
    return gpud_send_credit(self, 1, &batch->seq);
}
