/* train_save — see train_save.h. */
#include "gpud/train_save.h"

#include "common/atomic_file.h"
#include "common/log.h"
#include "gpud/rank_report.h"
#include "proto/wire.h"

#include <stdlib.h>

/* The counters a checkpoint (or a joiner's state) holds. */
static ckpt_info_t state_info(const gpud_t *self)
{
    const train_state_t *ts = self->train;
    return (ckpt_info_t){.epoch = ts->epoch, .step = (int64_t)ts->next_step,
                         .streak = ts->streak, .global_batch = (int64_t)ts->global_batch,
                         .steps_per_epoch = (int64_t)ts->steps_per_epoch,
                         .chunk = self->options.chunk};
}

int train_save_checkpoint(gpud_t *self, const char *why, char *reason, size_t cap)
{
    train_state_t *ts = self->train;
    const char *path = self->options.checkpoint;
    if (self->rank != 0 || !path || !ts->trainer)
        return 0;
    ckpt_info_t info = state_info(self);
    char err[1024];
    if (self->options.fault_in_checkpoint) {
        log_warn("--fault-in-checkpoint: dying inside this checkpoint write (test hook)");
        atomic_file_fault_before_rename();
    }
    if (trainer_save(ts->trainer, path, &info, err, sizeof err) < 0) {
        rank_report_write_failed(self, "checkpoint", why, err, reason, cap);
        return -1;
    }
    ts->good_epoch = info.epoch;
    ts->good_step = info.step;
    log_info("checkpoint %s: epoch %lld, step %lld (%s)", path, (long long)info.epoch,
             (long long)info.step, why);
    return 0;
}

void train_save_state(gpud_t *self)
{
    train_state_t *ts = self->train;
    ts->pending.snapshot = false;
    ckpt_info_t info = state_info(self);
    uint8_t *image = NULL;
    size_t len = 0;
    char err[1024];
    if (trainer_save_to(ts->trainer, NULL, &image, &len, &info, err, sizeof err) < 0) {
        log_error("the state a joiner waits for was not sent: %s", err);
        return;
    }
    ddp_msg_t m = {.type = DDP_STATE};
    m.u.state = (ddp_state_t){.gen = self->gen, .epoch = (uint32_t)ts->epoch,
                              .step = ts->next_step, .image = zframe_new(image, len),
                              .auth = self->auth};
    free(image);
    if (!m.u.state.image || proto_send(zsock_resolve(self->reducer), NULL, &m) < 0)
        log_error("the state a joiner waits for was not sent: %s",
                  m.u.state.image ? zmq_strerror(zmq_errno()) : "out of memory");
    else
        log_info("state of step %llu (%zu bytes) sent for a joiner",
                 (unsigned long long)ts->next_step, len);
    zframe_destroy(&m.u.state.image);
}
