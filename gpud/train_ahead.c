/* train_ahead — loaderd's next message read while a train step runs, and
 * the next step's batch staged (see train_ahead.h). */
#include "gpud/train_ahead.h"

#include "common/log.h"
#include "gpud/model.h"
#include "proto/wire.h"

#include <string.h>

/* Whether m is the train batch that follows cur's step: the same
 * generation, shard size and sample shape, pixels carried (uint8). */
static bool follows(const gpud_t *self, const ddp_msg_t *m, const ddp_batch_t *cur)
{
    const ddp_batch_t *b = &m->u.batch;
    return m->type == DDP_BATCH && b->phase == DDP_PHASE_TRAIN && b->gen == self->gen &&
           b->step == cur->step + 1 && b->wire != DDP_WIRE_ENCODED && b->pixels &&
           b->n == cur->n && b->n > 0 && b->c == cur->c && b->h == cur->h && b->w == cur->w;
}

void train_ahead_peek(void *ctx)
{
    const train_ahead_ctx_t *a = ctx;
    gpud_t *self = a->self;
    train_state_t *ts = self->train;
    if (ts->have_ahead || self->n_loaders != 1 || !model_train_overlap())
        return;
    zmq_pollitem_t it = {.socket = zsock_resolve(self->loaders[0]), .events = ZMQ_POLLIN};
    if (zmq_poll(&it, 1, 0) != 1 || !(it.revents & ZMQ_POLLIN))
        return;
    if (proto_recv(it.socket, NULL, &ts->ahead, &self->stats) != 0)
        return;   /* a bad message: counted and logged there, as in the loop */
    ts->have_ahead = true;
    if (!follows(self, &ts->ahead, a->cur))
        return;
    const ddp_batch_t *b = &ts->ahead.u.batch;
    const uint8_t *px = zframe_data(b->pixels);
    char err[512];
    const float *mean, *std;
    gpud_norm(self, &mean, &std);   /* the step's own: its begin finds the stage */
    int st = model_train_stage_u8(self->model, px, (int)b->n, b->c, b->h, b->w, mean, std, err,
                                  sizeof err);
    if (st < 0)
        log_warn("train batch %llu (step %llu): staging ahead failed (%s); it is written again",
                 (unsigned long long)b->seq, (unsigned long long)b->step, err);
    if (st > 0) {
        ts->staged_px = px;
        self->staged_ahead++;
    }
}

bool train_ahead_kept(const gpud_t *self)
{
    return self->train && self->train->have_ahead;
}

bool train_ahead_take(gpud_t *self, ddp_msg_t *m, int *loader)
{
    train_state_t *ts = self->train;
    if (!ts || !ts->have_ahead)
        return false;
    *m = ts->ahead;
    memset(&ts->ahead, 0, sizeof ts->ahead);
    ts->have_ahead = false;
    *loader = 0;
    return true;
}

void train_ahead_done(gpud_t *self, const ddp_msg_t *m)
{
    train_state_t *ts = self->train;
    if (!ts || !ts->staged_px || m->type != DDP_BATCH || !m->u.batch.pixels ||
        zframe_data(m->u.batch.pixels) != ts->staged_px)
        return;
    /* its step took it (then this is a no-op) or it was dropped (another
     * generation, a stop): either way no later begin may match it */
    model_train_unstage(self->model);
    ts->staged_px = NULL;
}
