#include "loaderd/phases.h"

#include "common/clock.h"
#include "common/log.h"
#include "loaderd/eval.h"
#include "loaderd/reducer_link.h"
#include "loaderd/training.h"
#include "loaderd/workers.h"

/* Sends the plan of (epoch, phase) and waits (STAGE_PLAN) for its ack:
 * nothing is handed out before reducerd has the plan, or the results of
 * samples it has not planned would be dropped. */
static int start_plan(loader_t *self, uint32_t epoch, uint8_t phase)
{
    self->epoch = epoch;
    self->phase = phase;
    self->ack_target = self->plans_sent + 1;
    self->next_plan_ms = clock_mono_ms() + 2000;
    self->stage = STAGE_PLAN;
    return reducer_link_send_plan(self);
}

static bool plan_acked(const loader_t *self) { return self->acks_received >= self->ack_target; }

/* STAGE_PLAN: reducerd may have started after us, or restarted: plan again. */
static int plan_retry(loader_t *self)
{
    if (clock_mono_ms() < self->next_plan_ms)
        return 0;
    log_info("waiting for reducerd at %s to take the plan (epoch %u, %s)", self->options.reducer,
             self->epoch, self->phase == DDP_PHASE_TRAIN ? "train" : "eval");
    self->next_plan_ms = clock_mono_ms() + 5000;
    return reducer_link_join(self) < 0 || reducer_link_send_plan(self) < 0 ? -1 : 0;
}

static int begin_train_epoch(loader_t *self, uint32_t epoch)
{
    self->have_decision = false;
    return start_plan(self, epoch, DDP_PHASE_TRAIN);
}

static int after_train(loader_t *self)
{
    workers_broadcast_end(self, self->epoch, DDP_PHASE_TRAIN);
    log_info("epoch %u: all %llu train steps handed out (%llu samples sent, %llu failed so far)",
             self->epoch, (unsigned long long)self->steps_per_epoch,
             (unsigned long long)self->sent_samples, (unsigned long long)self->failed);
    if (!self->val_set) {
        self->stage = STAGE_EPOCH; /* no validation: reducerd decides on epochs alone */
        return 0;
    }
    self->eval_positions = loader_shard_size(self, self->eval_samples);
    if (dispatch_replan(self->dispatch, self->eval_positions, (uint32_t)self->options.batch_size) <
        0) {
        log_error("validation of epoch %u: eval batches of the last one are still out",
                  self->epoch);
        return -1;
    }
    return start_plan(self, self->epoch, DDP_PHASE_EVAL);
}

static int after_eval(loader_t *self)
{
    workers_broadcast_end(self, self->epoch, DDP_PHASE_EVAL);
    log_info("%s%u: all %llu samples handed out and answered (%llu failed, %llu batches re-queued)",
             self->options.train ? "validation of epoch " : "epoch ", self->epoch,
             (unsigned long long)self->eval_positions, (unsigned long long)self->failed,
             (unsigned long long)dispatch_requeued(self->dispatch));
    self->stage = self->options.train ? STAGE_EPOCH : STAGE_IDLE;
    return 0;
}

static int after_epoch(loader_t *self)
{
    if (self->decision == DDP_DECISION_STOP) {
        log_info("training ends after epoch %u; waiting for reducerd's STOP", self->epoch);
        self->stage = STAGE_IDLE;
        return 0;
    }
    if ((long)self->epoch + 1 >= self->options.epochs) {
        log_warn("reducerd continues after epoch %u but --epochs is %ld: no more epochs; waiting "
                 "for STOP", self->epoch, self->options.epochs);
        self->stage = STAGE_IDLE;
        return 0;
    }
    return begin_train_epoch(self, self->epoch + 1);
}

static int plan_done(loader_t *self)
{
    if (self->phase != DDP_PHASE_TRAIN) {
        self->stage = STAGE_EVAL;
        return 0;
    }
    const loader_options_t *o = &self->options;
    uint64_t first = self->epoch == (uint32_t)o->start_epoch ? (uint64_t)o->start_step : 0;
    training_begin_epoch(self, first);
    log_info("epoch %u: %llu train samples in %llu steps of %llu from step %llu; waiting for %ld "
             "rank%s", self->epoch, (unsigned long long)self->samples,
             (unsigned long long)self->steps_per_epoch, (unsigned long long)self->global_batch,
             (unsigned long long)first, (long)self->world, self->world == 1 ? "" : "s");
    self->stage = STAGE_RANKS;
    return 0;
}

/* One move of the state machine; -1 on a fatal error. */
static int advance(loader_t *self)
{
    int rc;
    switch (self->stage) {
    case STAGE_PLAN:
        return plan_acked(self) ? plan_done(self) : plan_retry(self);
    case STAGE_RANKS:
        if (training_ranks_known(self)) {
            if (self->options.workers == 1)
                log_info("epoch %u: the only rank has credit; training", self->epoch);
            else
                log_info("epoch %u: all %ld ranks have credit; training", self->epoch,
                         self->options.workers);
            self->stage = STAGE_TRAIN;
        }
        return 0;
    case STAGE_TRAIN:
        rc = training_pump(self);
        return rc < 0 ? -1 : rc && training_committed(self) ? after_train(self) : 0;
    case STAGE_EVAL:
        return eval_pump(self) ? after_eval(self) : 0;
    case STAGE_EPOCH:
        return self->have_decision ? after_epoch(self) : 0;
    case STAGE_IDLE:
        break;
    }
    return 0;
}

int phases_start(loader_t *self)
{
    if (reducer_link_join(self) < 0)
        return -1;
    return self->options.train ? begin_train_epoch(self, (uint32_t)self->options.start_epoch)
                               : start_plan(self, 0, DDP_PHASE_EVAL);
}

int phases_advance(loader_t *self)
{
    loader_stage_t before;
    int rc;
    if (self->members_pending && training_on_members(self) < 0)
        return -1;
    do { /* follow transitions at once: no poll wait between them */
        before = self->stage;
        rc = advance(self);
    } while (rc == 0 && self->stage != before && !self->stopped);
    return rc;
}

bool phases_busy(const loader_t *self)
{
    if (self->stage == STAGE_EVAL)
        return eval_busy(self);
    return self->stage == STAGE_TRAIN && training_busy(self);
}
