/* train_state — a training rank's state (see train_state.h). */
#include "gpud/train_state.h"

#include "common/log.h"

#include <stdlib.h>

train_state_t *train_state_new(void)
{
    train_state_t *self = calloc(1, sizeof *self);
    if (!self) {
        log_error("out of memory for the training state");
        return NULL;
    }
    self->epoch_done = self->train_end_done = -1;
    self->good_epoch = self->good_step = -1;
    return self;
}

void train_state_destroy(train_state_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    train_state_t *self = *self_p;
    parts_destroy(&self->parts);
    trainer_destroy(&self->trainer);
    collective_destroy(&self->coll);
    allreduce_destroy(&self->ring);
    ddp_msg_t pending = {.type = DDP_MEMBERS, .u.members = self->members};
    ddp_msg_clear(&pending);   /* a MEMBERS never applied */
    if (self->have_ahead)
        ddp_msg_clear(&self->ahead);   /* read ahead, never handled */
    free(self->loss);
    free(self->topk);
    free(self);
    *self_p = NULL;
}
