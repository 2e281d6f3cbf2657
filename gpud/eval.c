/* eval — an eval batch: forward on the model, per-sample top-k and loss
 * to reducerd as RESULT (never averages), then CREDIT acks the batch to
 * loaderd, after the result is sent, so a crash between the two only
 * causes a harmless duplicate. */
#include "gpud/eval.h"

#include "common/clock.h"
#include "common/log.h"
#include "gpud/wire_decode.h"
#include "proto/wire.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

/* A --wire jpeg batch's decode: the tensor and, per sample, whether it
 * failed and why (reported in the RESULT, PROTOCOL.md 'failed'). */
typedef struct {
    const uint8_t *pixels;     /* n*c*h*w uint8: the frame, or self->wire_px */
    uint8_t *failed;           /* n flags; NULL: every sample decoded */
    char (*why)[DDP_MAX_WHY];  /* n reasons */
    uint32_t nfailed;
} eval_input_t;

static void input_clear(eval_input_t *in)
{
    free(in->failed);
    free(in->why);
    memset(in, 0, sizeof *in);
}

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

/* The batch's uint8 tensor: its frame (--wire uint8), or its files decoded
 * here (--wire jpeg) into self->wire_px. -1 (logged) fails the worker. */
static int batch_input(gpud_t *self, const ddp_batch_t *batch, eval_input_t *in)
{
    memset(in, 0, sizeof *in);
    if (batch->wire != DDP_WIRE_ENCODED) {
        in->pixels = zframe_data(batch->pixels);
        return 0;
    }
    size_t need = (size_t)batch->n * batch->c * batch->h * batch->w;
    if (need > self->wire_px_cap) {
        uint8_t *p = realloc(self->wire_px, need);
        if (!p) {
            log_error("out of memory for a decoded batch of %zu bytes; lower --batch-size", need);
            return -1;
        }
        self->wire_px = p;
        self->wire_px_cap = need;
    }
    in->failed = malloc(batch->n);
    in->why = malloc((size_t)batch->n * sizeof *in->why);
    if (!in->failed || !in->why) {
        input_clear(in);
        log_error("out of memory for a batch of %u files", batch->n);
        return -1;
    }
    char err[512];
    int nfailed = wire_decode_batch(batch, (int)self->options.decode_threads, self->wire_px,
                                    in->failed, in->why, err, sizeof err);
    if (nfailed < 0) {
        input_clear(in);
        log_error("cannot decode batch %llu (--wire jpeg): %s", (unsigned long long)batch->seq,
                  err);
        return -1;
    }
    for (uint32_t i = 0; i < batch->n; i++)
        if (in->failed[i])
            log_warn("sample %llu of batch %llu did not decode: %s (reported failed)",
                     (unsigned long long)batch->ids[i], (unsigned long long)batch->seq,
                     in->why[i]);
    in->pixels = self->wire_px;
    in->nfailed = (uint32_t)nfailed;
    return 0;
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

/* The failed rows and their reasons on RESULT R (pointers into IN). */
static int attach_failed(ddp_result_t *r, const eval_input_t *in)
{
    if (!in->nfailed)
        return 0;
    r->why = malloc(in->nfailed * sizeof *r->why);
    if (!r->why)
        return -1;
    for (uint32_t i = 0; i < r->n; i++)
        if (in->failed[i])
            r->why[r->nwhy++] = in->why[i];
    r->failed = in->failed;
    return 0;
}

/* RESULT: the batch's ids and labels with this worker's top-k and loss. */
static int send_result(gpud_t *self, const ddp_batch_t *batch, const eval_input_t *in,
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
    if (!res->topk || !res->loss || (res->nprob && !res->probs) || attach_failed(res, in) < 0) {
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
    eval_input_t in;
    if (batch_input(self, batch, &in) < 0)
        return -1;
    int rc = forward(self, batch, in.pixels) < 0 || send_result(self, batch, &in, t0) < 0;
    input_clear(&in);
    if (rc)
        return -1;
    atomic_fetch_add(&self->batches, 1);
    self->samples += batch->n;
    return gpud_send_credit(self, 1, &batch->seq);
}
