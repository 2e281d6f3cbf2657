#include "gpud/joining.h"

#include "common/clock.h"
#include "common/log.h"
#include "common/zsockopt.h"
#include "gpud/members.h"
#include "gpud/train.h"
#include "proto/wire.h"

#include <stdio.h>
#include <string.h>

/* The state image: loaded, then the answer. 0, or -1 (logged). */
static int take_state(gpud_t *self, const ddp_state_t *st, bool *loaded)
{
    if (*loaded || !st->image) {
        self->stats.rejected++;
        log_warn("a STATE %s from reducerd: ignored", *loaded ? "twice" : "without an image");
        return 0;
    }
    if (train_load_state(self, "the job's state", zframe_data(st->image),
                         zframe_size(st->image)) < 0)
        return -1;
    if (self->train->next_step != st->step) {
        log_error("the state says step %llu, reducerd says %llu: not joining",
                  (unsigned long long)self->train->next_step, (unsigned long long)st->step);
        return -1;
    }
    ddp_msg_t m = {.type = DDP_STATE};
    m.u.state = (ddp_state_t){.gen = st->gen, .epoch = st->epoch, .step = st->step,
                              .auth = self->auth};
    if (proto_send(zsock_resolve(self->reducer), NULL, &m) < 0) {
        log_error("cannot tell reducerd the state is loaded: %s", zmq_strerror(zmq_errno()));
        return -1;
    }
    *loaded = true;
    return 0;
}

/* The MEMBERS that makes this rank a member; 1 when it did. */
static int take_place(gpud_t *self, ddp_members_t *m, bool loaded)
{
    if (!loaded || m->rank < 0 || m->step != self->train->next_step) {
        log_error("reducerd's membership (generation %u, rank %d, step %llu) came before this "
                  "rank had the state of that step: not joining", m->gen, m->rank,
                  (unsigned long long)m->step);
        return -1;
    }
    members_take(self, m);
    self->train->welcome_nccl = m->nccl;
    int64_t ended = members_bn_epoch(self->train, m->step);
    if (ended >= 0) {   /* the state is of after END(ended): one broadcast, not two */
        if (self->train->train_end_done < ended)
            self->train->train_end_done = ended;
        self->train->pending.bn_redo = self->train->train_end_done == ended;
    }
    log_info("entered the job as rank %d of %d at step %llu (generation %u)", m->rank, m->world,
             (unsigned long long)m->step, m->gen);
    return rank_state_to(&self->state, RANK_JOINED, "MEMBERS gave a place") < 0 ? -1 : 1;
}

static int on_message(gpud_t *self, ddp_msg_t *m, bool *loaded)
{
    switch (m->type) {
    case DDP_STATE: return take_state(self, &m->u.state, loaded);
    case DDP_MEMBERS: return take_place(self, &m->u.members, *loaded);
    case DDP_STOP:
        log_error("reducerd stops this rank before it entered the job (%d): %s",
                  m->u.stop.code, m->u.stop.reason);
        self->exit_code = m->u.stop.code ? m->u.stop.code : 0;
        rank_state_end(&self->state, RANK_STOPPED, "STOP while joining");
        return 1;
    case DDP_WELCOME:
        return 0;   /* our JOIN answered twice */
    case DDP_NCCLID:   /* our generation's, relayed before we took the place */
        self->train->early_id = m->u.ncclid;
        self->train->have_early_id = true;
        return 0;
    default:
        self->stats.rejected++;
        log_warn("%s from reducerd while joining: ignored", proto_type_name(m->type));
        return 0;
    }
}

int joining_enter(gpud_t *self)
{
    if (self->state.now != RANK_JOINING)
        return 0;
    int64_t deadline = clock_mono_ms() + self->options.join_timeout_s * 1000;
    zpoller_t *poller = zpoller_new(self->reducer, NULL);
    bool loaded = false;
    int rc = 0;
    while (rc == 0 && !zs_interrupted() && clock_mono_ms() < deadline) {
        if (zpoller_wait(poller, 200) != self->reducer)
            continue;
        ddp_msg_t m;
        if (proto_recv(zsock_resolve(self->reducer), NULL, &m, &self->stats) != 0)
            continue;
        rc = on_message(self, &m, &loaded);
        ddp_msg_clear(&m);
    }
    zpoller_destroy(&poller);
    if (rc <= 0)
        rank_state_end(&self->state, RANK_STOPPED, "no place in the job");
    if (rc == 0 && !zs_interrupted())
        log_error("no place in the running job within %lds (--join-timeout): reducerd admits a "
                  "joiner at a step boundary inside an epoch's training, one at a time",
                  self->options.join_timeout_s);
    return rc > 0 ? 0 : -1;
}
