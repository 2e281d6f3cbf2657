/* train_ring — see train_ring.h. */
#include "gpud/train_ring.h"

#include "common/log.h"
#include "gpud/members.h"
#include "gpud/xsum_ring.h"

int train_ring_timeout_ms(const gpud_t *self)
{
    return (int)(self->options.ring_timeout_s * 1000);
}

int train_ring_sync_bn_sum(void *ctx, double *data, size_t n, char *err, size_t errlen)
{
    gpud_t *self = ctx;
    /* NCCL in an NCCL generation, else the ring (gpud/collective.h) */
    return collective_sum_f64(self->train->coll, data, n, train_ring_timeout_ms(self), err,
                              errlen);
}

int train_ring_exact_sum(void *ctx, struct xsum *x, char *err, size_t errlen)
{
    gpud_t *self = ctx;
    return xsum_allreduce(x, self->train->ring, train_ring_timeout_ms(self), err, errlen);
}

int train_ring_broadcast(gpud_t *self, trainer_set_t which, const char *what, uint32_t epoch)
{
    train_state_t *ts = self->train;
    char err[1024];
    for (int tries = 0; tries < DDP_MAX_WORLD; tries++) {   /* each try: a smaller world */
        if (trainer_broadcast(ts->trainer, ts->ring, which, train_ring_timeout_ms(self), err,
                              sizeof err) == 0)
            return 0;
        if (members_ring_failed(self, what, epoch, ts->next_step, err) < 0)
            return -1;
    }
    log_error("%s: the membership kept changing; giving up", what);
    return -1;
}
