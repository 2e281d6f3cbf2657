#include "reducerd/results.h"

#include "common/clock.h"
#include "common/errbuf.h"
#include "common/log.h"
#include "reducerd/publish.h"
#include "reducerd/trust.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The slot counting (epoch, phase), or NULL (logged, counted as rejected). */
static slot_t *slot_for(reducer_t *self, const char *peer, uint32_t epoch, uint8_t phase,
                        const char *what)
{
    slot_t *slot = phase <= DDP_PHASE_TRAIN ? self->slot[phase] : NULL;
    if (slot && slot_plan(slot)->epoch == epoch)
        return slot;
    if (!self->slot[0] && !self->slot[1])
        trust_reject(self, peer, what, "before any plan (the loader must send PLAN first)");
    else
        trust_reject(self, peer, what, "for epoch %u phase %u: no such plan is being counted",
                     epoch, phase);
    return NULL;
}

/* Asks the loader to hand an eval batch out again: its answer was refused,
 * and waiting for it would hang the epoch. Train shards cannot be redone
 * alone (the step's gradient is summed): the stall rule names them. */
static void ask_reissue(reducer_t *self, const ddp_result_t *res, const char *why)
{
    /* the seq names the loaderd that issued it (its shard) */
    uint32_t shard = DDP_SEQ_SHARD(res->seq);
    if (res->phase != DDP_PHASE_EVAL || shard >= DDP_MAX_LOADERS ||
        !self->loaders[shard].identity)
        return;
    ddp_msg_t m = {.type = DDP_REISSUE};
    m.u.reissue = (ddp_reissue_t){.seq = res->seq, .epoch = res->epoch, .phase = res->phase,
                                  .rank = res->rank};
    snprintf(m.u.reissue.reason, sizeof m.u.reissue.reason, "%s", why);
    reducer_send(self, self->loaders[shard].identity, &m);
}

static void refuse_result(reducer_t *self, const char *peer, const ddp_result_t *res,
                          const char *why)
{
    if (!self->first_rejected_result[0])
        snprintf(self->first_rejected_result, sizeof self->first_rejected_result, "rank %d: %s",
                 res->rank, why);
    self->rejected_results++;
    snprintf(self->last_rejected_result, sizeof self->last_rejected_result, "rank %d: %s",
             res->rank, why);
    trust_reject(self, peer, "RESULT", "seq %llu: %s", (unsigned long long)res->seq, why);
}

/* Every class id within the plan's classes; else why. */
static bool classes_fit(const slot_t *slot, const ddp_result_t *res, char *err, size_t errlen)
{
    uint32_t nc = slot_plan(slot)->num_classes;
    for (uint64_t i = 0; i < (uint64_t)res->n * res->k; i++) {
        if (res->topk[i] >= (int32_t)nc) {
            err_set(err, errlen, "rank %d predicts class %d but the dataset has %u classes: "
                     "--num-classes (the weights' fc) and --classes must match the dataset",
                     res->rank, res->topk[i], nc);
            return false;
        }
    }
    return true;
}

/* Keeps the run's highest train step (RESULT step) for the failure message. */
static void note_step(reducer_t *self, const ddp_result_t *res)
{
    if (res->phase != DDP_PHASE_TRAIN)
        return;
    if (!self->have_step || res->step > self->last_step)
        self->last_step = res->step;
    self->have_step = true;
}

/* The rows of RES that gpud could not decode (--wire jpeg): counted failed
 * as loaderd's FAILED are, with the issued label. The ids are the issued
 * ones (ISSUED_MATCH), so a gpud can fail only samples handed to it. */
static void count_failed_rows(reducer_t *self, slot_t *slot, const ddp_result_t *res,
                              const int32_t *labels)
{
    const ddp_plan_t *plan = slot_plan(slot);
    for (uint32_t i = 0, j = 0; i < res->n; i++) {
        if (!res->failed[i])
            continue;
        ddp_failed_t f = {.epoch = res->epoch, .phase = res->phase, .id = res->ids[i],
                          .label = labels[i]};
        if (plan->paths && res->ids[i] < plan->n)
            snprintf(f.path, sizeof f.path, "%s", plan->paths[res->ids[i]]);
        else
            snprintf(f.path, sizeof f.path, "sample %llu", (unsigned long long)res->ids[i]);
        snprintf(f.reason, sizeof f.reason, "%s (decoded at gpud rank %d)", res->why[j++],
                 res->rank);
        if (slot_add_failed(slot, &f, clock_mono_s()) == 0) {
            self->last_activity_ms = clock_mono_ms();
            /* here too: a train epoch's failed files are in no summary */
            log_warn("epoch %u %s: failed %s: %s", f.epoch,
                     f.phase == DDP_PHASE_TRAIN ? "train" : "eval", f.path, f.reason);
            publish_log(self, "warn", "failed %s: %s", f.path, f.reason);
        }
    }
}

/* RES without its failed rows, in VIEW (arrays malloc'd into KEEP, the
 * caller frees them); the ids stay the issued ones, LABELS the issued labels. */
typedef struct {
    uint64_t *ids;
    int32_t *labels, *topk;
    float *loss;
    uint16_t *probs;
} kept_rows_t;

static int keep_decoded_rows(const ddp_result_t *res, const int32_t *labels, ddp_result_t *view,
                             kept_rows_t *keep)
{
    size_t n = res->n, k = res->k, np = res->nprob;
    *keep = (kept_rows_t){malloc(n * 8), malloc(n * 4), malloc(n * k * 4), malloc(n * 4),
                          np ? malloc(n * np * 2) : NULL};
    if (!keep->ids || !keep->labels || !keep->topk || !keep->loss || (np && !keep->probs))
        return -1;
    uint32_t m = 0;
    for (uint32_t i = 0; i < res->n; i++) {
        if (res->failed[i])
            continue;
        keep->ids[m] = res->ids[i];
        keep->labels[m] = labels[i];
        memcpy(keep->topk + m * k, res->topk + i * k, k * 4);
        keep->loss[m] = res->loss[i];
        if (np)
            memcpy(keep->probs + m * np, res->probs + i * np, np * 2);
        m++;
    }
    *view = *res;
    view->n = m;
    view->ids = keep->ids, view->labels = keep->labels, view->topk = keep->topk;
    view->loss = keep->loss, view->probs = keep->probs;
    return 0;
}

static void kept_rows_free(kept_rows_t *keep)
{
    free(keep->ids), free(keep->labels), free(keep->topk), free(keep->loss), free(keep->probs);
}

static void count_result_rows(reducer_t *self, slot_t *slot, peer_t *p, const ddp_result_t *res,
                              int32_t *labels);

/* Counts a RESULT that answers its issued batch, with the issued labels. */
static void count_result(reducer_t *self, slot_t *slot, peer_t *p, const ddp_result_t *res,
                         int32_t *labels)
{
    if (!res->failed) {
        count_result_rows(self, slot, p, res, labels);
        return;
    }
    count_failed_rows(self, slot, res, labels);
    ddp_result_t view;
    kept_rows_t keep;
    if (keep_decoded_rows(res, labels, &view, &keep) < 0)
        log_error("out of memory counting RESULT seq %llu: its decoded rows are lost",
                  (unsigned long long)res->seq);
    else if (view.n)
        count_result_rows(self, slot, p, &view, view.labels);
    kept_rows_free(&keep);
}

/* count_result for the rows that hold predictions. */
static void count_result_rows(reducer_t *self, slot_t *slot, peer_t *p, const ddp_result_t *res,
                              int32_t *labels)
{
    ddp_result_t view = *res;
    view.labels = labels;   /* a worker cannot change the labels */
    uint64_t invalid, dup;
    slot_add_result(slot, &view, clock_mono_s(), &invalid, &dup);
    if (self->options.train)
        note_step(self, res);
    uint64_t counted = res->n - invalid - dup;
    p->results += counted;
    if (counted)
        self->last_activity_ms = clock_mono_ms();
    if (invalid) {
        self->stats.rejected++;
        log_warn("RESULT seq %llu from rank %d: %llu of %u samples invalid (id out of the plan "
                 "or bad loss), ignored", (unsigned long long)res->seq, res->rank,
                 (unsigned long long)invalid, res->n);
    }
    if (dup)
        log_debug("RESULT seq %llu: %llu duplicates ignored (re-sent batch)",
                  (unsigned long long)res->seq, (unsigned long long)dup);
}

void results_count_committed(reducer_t *self, peer_t *p, const ddp_result_t *res,
                             int32_t *labels)
{
    slot_t *slot = slot_for(self, p->name, res->epoch, res->phase, "RESULT");
    if (slot)
        count_result(self, slot, p, res, labels);
    else
        self->rejected_results++;
}

/* A train RESULT of a step not yet committed is held until its COMMIT
 * (docs/ELASTIC.md): a step a new generation redoes must not count twice.
 * True when held (or refused); the labels are taken. */
static bool hold_uncommitted(reducer_t *self, peer_t *p, ddp_result_t *res, int32_t **labels)
{
    if (res->phase != DDP_PHASE_TRAIN || !self->elastic ||
        elastic_is_committed(self->elastic, res->step))
        return false;
    note_step(self, res);
    if (pending_add(self->pending, peers_index_of(self->peers, p), res, labels) < 0)
        refuse_result(self, p->name, res, "too many RESULTs waiting for their step's COMMIT");
    return true;
}

/* A RESULT from a trusted rank, judged against what was issued. held: it
 * was held back before (its ISSUED has now arrived). */
static void judge_result(reducer_t *self, peer_t *p, ddp_result_t *res)
{
    char err[512] = "";
    /* held for its ISSUED across a membership change: its step is redone */
    if (res->phase == DDP_PHASE_TRAIN && reducer_stale_gen(self, res->gen, p->name, "RESULT"))
        return;
    slot_t *slot = slot_for(self, p->name, res->epoch, res->phase, "RESULT");
    if (!slot) {
        self->rejected_results++;
        return;
    }
    int32_t *labels = NULL;
    switch (issued_judge(self->issued, res, &labels, err, sizeof err)) {
    case ISSUED_LATER:
        if (issued_hold(self->issued, res) < 0)
            refuse_result(self, p->name, res, "too many RESULTs ahead of their ISSUED");
        return;
    case ISSUED_FOREIGN:
        refuse_result(self, p->name, res, err);
        return;
    case ISSUED_WRONG:
        refuse_result(self, p->name, res, err);
        ask_reissue(self, res, err);
        return;
    case ISSUED_MATCH: break;
    }
    if (!classes_fit(slot, res, err, sizeof err)) {
        refuse_result(self, p->name, res, err);
        if (!p->told_classes)   /* once per peer: the hint, not a flood */
            publish_log(self, "error", "%s", err);
        p->told_classes = true;
        snprintf(self->class_mismatch_hint, sizeof self->class_mismatch_hint, "%s", err);
        ask_reissue(self, res, err);
    } else if (!hold_uncommitted(self, p, res, &labels)) {
        count_result(self, slot, p, res, labels);
    }
    free(labels);
}

/* The rank res names is p's: the one it holds, or (an eval RESULT sent
 * before its MEMBERS arrived) the one it held in the previous generation;
 * a train RESULT must be of the current generation. */
static bool holds_rank(const reducer_t *self, const peer_t *p, const ddp_result_t *res)
{
    if (res->phase == DDP_PHASE_TRAIN && self->elastic && res->gen != self->elastic->gen)
        return false;
    return p->rank == res->rank ||
           (res->phase == DDP_PHASE_EVAL && p->prev_rank >= 0 && p->prev_rank == res->rank);
}

void results_on_result(reducer_t *self, zframe_t *route, ddp_result_t *res)
{
    /* the sender: the socket that joined as this rank, with its token */
    peer_t *p = peers_by_identity(self->peers, route);
    char who[64]; /* the label of a reject only: made on the hot path it cost a second lookup */
    /* a train RESULT of an older generation carries its old rank: stale */
    if (p && p->role == DDP_ROLE_GPUD && res->phase == DDP_PHASE_TRAIN &&
        reducer_stale_gen(self, res->gen, p->name, "RESULT"))
        return;
    if (!p || p->role != DDP_ROLE_GPUD || !holds_rank(self, p, res)) {
        self->rejected_results++;
        trust_peer_label(self, route, who, sizeof who);
        trust_reject(self, who, "RESULT",
                     "claims rank %d but this socket did not join as rank %d", res->rank,
                     res->rank);
        return;
    }
    if (!trust_auth_ok(self, &res->auth, DDP_ROLE_GPUD, res->rank, p->name)) {
        self->rejected_results++;
        trust_peer_label(self, route, who, sizeof who);
        trust_reject(self, who, "RESULT", "missing or wrong job/session token");
        return;
    }
    p->last_seen_ms = clock_mono_ms();
    res->rank = p->rank; /* the batches issued to its old rank were renumbered with it */
    judge_result(self, p, res);
}

void results_on_failed(reducer_t *self, zframe_t *route, const ddp_failed_t *f)
{
    int shard = trust_from_loader(self, route, &f->auth, true, "FAILED");
    if (shard < 0)
        return;
    const char *name = self->loaders[shard].name;
    slot_t *slot = slot_for(self, name, f->epoch, f->phase, "FAILED");
    if (!slot)
        return;
    if (self->loader_shards > 1 && f->id % self->loader_shards != (uint64_t)shard) {
        trust_reject(self, name, "FAILED", "id %llu is not in its shard %d/%u",
                     (unsigned long long)f->id, shard, self->loader_shards);
        return;
    }
    int rc = slot_add_failed(slot, f, clock_mono_s());
    if (rc < 0) {
        trust_reject(self, name, "FAILED", "id %llu is outside the plan",
                     (unsigned long long)f->id);
        return;
    }
    if (rc == 0) {
        self->last_activity_ms = clock_mono_ms();
        publish_log(self, "warn", "failed %s: %s", f->path, f->reason);
    }
}

/* RESULTs held back for an ISSUED that has now come are judged. */
static void judge_held(reducer_t *self)
{
    ddp_result_t res;
    while (issued_pop_decidable(self->issued, &res)) {
        peer_t *p = peers_by_rank(self->peers, res.rank);
        if (p)
            judge_result(self, p, &res);
        ddp_msg_t m = {.type = DDP_RESULT};
        m.u.result = res;
        ddp_msg_clear(&m);
    }
}

void results_on_issued(reducer_t *self, zframe_t *route, ddp_issued_t *is)
{
    int shard = trust_from_loader(self, route, &is->auth, true, "ISSUED");
    if (shard < 0)
        return;
    loader_role_t *l = &self->loaders[shard];
    if (is->rejected > l->rejected)
        l->rejected = is->rejected;
    char err[256];
    if (issued_check_shard(is, (uint32_t)shard, self->loader_shards, err, sizeof err) < 0 ||
        issued_add(self->issued, is, err, sizeof err) < 0) {
        trust_reject(self, l->name, "ISSUED", "%s", err);
        return;
    }
    judge_held(self);
}

void results_end_phase(reducer_t *self, uint32_t epoch, uint8_t phase)
{
    uint64_t dropped = issued_end(self->issued, epoch, phase);
    if (dropped) {
        self->rejected_results += dropped;
        trust_reject(self, "ranks", "RESULT", "%llu RESULTs of epoch %u phase %u never matched an "
                     "issued batch", (unsigned long long)dropped, epoch, phase);
        self->stats.rejected += dropped - 1;
    }
}
