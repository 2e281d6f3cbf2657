/* train_epoch — see train_epoch.h. */
#include "gpud/train_epoch.h"

#include "common/log.h"
#include "gpud/rank_report.h"
#include "gpud/train_ring.h"
#include "gpud/train_save.h"

#include <stdio.h>

/* After EPOCH(e) the steps done are (e + 1) * spe: what loaderd planned,
 * or (a plan never received) the count to keep. A mismatch is logged and
 * counted; the plan stays (loaderd numbers the steps by it). */
static void check_epoch_steps(gpud_t *self, uint32_t epoch)
{
    train_state_t *ts = self->train;
    if (ts->next_step % (epoch + 1) != 0)
        return;
    uint64_t seen = ts->next_step / (epoch + 1);
    if (!ts->steps_per_epoch) {
        ts->steps_per_epoch = seen;
    } else if (seen != ts->steps_per_epoch) {
        self->stats.rejected++;
        log_error("epoch %u ended at step %llu: %llu steps per epoch, but loaderd planned %llu; "
                  "the checkpoints keep the plan", epoch, (unsigned long long)ts->next_step,
                  (unsigned long long)seen, (unsigned long long)ts->steps_per_epoch);
    }
}

/* The end of training: rank 0 writes the final weights, then tells
 * reducerd the outcome of both writes (DONE 0, or 4 with the first
 * failure, in reason already when the checkpoint failed); reducerd ends
 * the job only then (docs/TRAINING.md "Failure"). */
static void final_writes(gpud_t *self, char *reason, size_t cap)
{
    const char *weights = self->options.save_weights;
    if (self->rank != 0)
        return;
    char err[1024];
    if (weights && trainer_save_weights(self->train->trainer, weights, err, sizeof err) < 0) {
        char why[DDP_MAX_STR];
        rank_report_write_failed(self, "final weights", "end of training", err, why, sizeof why);
        if (!reason[0])
            snprintf(reason, cap, "%s", why);
    } else if (weights) {
        log_info("weights %s written", weights);
    }
    rank_report_done(self, reason[0] ? DDP_STOP_CHECKPOINT_FAILED : 0,
                     reason[0] ? reason : "the final checkpoint and weights are written");
}

/* EPOCH(e): remember the decision; rank 0 checkpoints (step 7). */
void train_epoch_handle(gpud_t *self, const ddp_epoch_t *ep)
{
    train_state_t *ts = self->train;
    if ((int64_t)ep->epoch <= ts->epoch_done)
        return;   /* a duplicate */
    /* the test hook: a rank slow to hear EPOCH(e) */
    if (self->options.fault_hold_epoch == (long)ep->epoch && self->gen == 0) {
        if (!ts->pending.epoch || ts->pending_epoch.epoch != ep->epoch)   /* once */
            log_warn("test hook: EPOCH(%u) held until a new membership generation", ep->epoch);
        ts->pending_epoch = *ep;
        ts->pending.epoch = true;
        return;
    }
    ts->epoch_done = ep->epoch;
    ts->epoch = (int64_t)ep->epoch + 1;
    ts->streak = ep->streak;
    check_epoch_steps(self, ep->epoch);
    bool stop = ep->decision == DDP_DECISION_STOP;
    log_info("epoch %u done: %s (streak %u, val top-1 %.4f)%s%s", ep->epoch,
             stop ? "stop" : "continue", ep->streak, ep->val_top1, ep->reason[0] ? ": " : "",
             ep->reason);
    char reason[DDP_MAX_STR] = "";
    if ((stop || (ep->epoch + 1) % (uint64_t)self->options.checkpoint_every == 0) &&
        train_save_checkpoint(self, stop ? "final" : "end of epoch", reason, sizeof reason) < 0 &&
        !stop)
        rank_report_done(self, DDP_STOP_CHECKPOINT_FAILED, reason);
    if (stop)
        final_writes(self, reason, sizeof reason);
}

void train_epoch_on_message(gpud_t *self, const ddp_epoch_t *ep)
{
    train_state_t *ts = self->train;
    if ((int64_t)ep->epoch <= ts->train_end_done) {
        train_epoch_handle(self, ep);
    } else {
        ts->pending_epoch = *ep;
        ts->pending.epoch = true;
    }
}

void train_epoch_flush(gpud_t *self, int64_t upto)
{
    train_state_t *ts = self->train;
    if (!ts->pending.epoch || (int64_t)ts->pending_epoch.epoch > upto)
        return;
    ddp_epoch_t ep = ts->pending_epoch;
    train_epoch_handle(self, &ep);
    if (ts->epoch_done >= (int64_t)ep.epoch)   /* else held (--fault-hold-epoch): it stays */
        ts->pending.epoch = false;
}

/* Rank 0's BatchNorm buffers to every rank (as DDP's broadcast_buffers),
 * the inference network refolded for validation. */
int train_epoch_sync_bn(gpud_t *self, uint32_t epoch)
{
    if (train_ring_broadcast(self, TRAINER_BN_BUFFERS, "BatchNorm buffers", epoch) < 0)
        return -1;
    self->train->pending.bn_redo = false;
    return gpud_sync_eval(self);
}

/* END(e, TRAIN): the broadcast, then an EPOCH(e) that came first. */
int train_epoch_end(gpud_t *self, uint32_t epoch)
{
    if (train_epoch_sync_bn(self, epoch) < 0)
        return -1;
    self->train->train_end_done = epoch;
    train_epoch_flush(self, self->train->train_end_done);   /* an EPOCH that came first */
    gpud_end_handled(self);   /* a STOP(0) that waited for this END */
    return 0;
}
