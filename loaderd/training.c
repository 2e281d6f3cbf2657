#include "loaderd/training.h"

#include "common/errbuf.h"
#include "common/log.h"
#include "loaderd/reducer_link.h"
#include "loaderd/train_files.h"
#include "loaderd/train_sample.h"
#include "proto/wire.h"

#include <stdlib.h>
#include <string.h>

void training_begin_epoch(loader_t *self, uint64_t first_step)
{
    sampler_epoch(self->sampler, self->epoch);
    step_window_reset(self->window, first_step);
}

bool training_busy(const loader_t *self)
{
    const step_window_t *w = self->window;
    return w->count < w->depth && w->next_k < self->steps_per_epoch;
}

bool training_ranks_known(loader_t *self)
{
    for (int r = 0; r < self->world; r++) {
        zframe_t *id;
        bool alive;
        uint32_t credits;
        if (!dispatch_rank_worker(self->dispatch, r, &id, &alive, &credits))
            return false;
    }
    return true;
}

/* ---- loading a step ------------------------------------------------------ */

typedef struct {
    const loader_t *self;
    uint64_t *ids;             /* the step's samples, rank after rank */
    uint8_t **dst;             /* where each goes */
    int *ok;
    char (*reasons)[256];
} step_job_t;

static void load_one(void *ctx, int i)
{
    step_job_t *job = ctx;
    job->ok[i] = train_sample_load(job->self, job->self->epoch, job->ids[i], job->dst[i],
                                   job->reasons[i], sizeof job->reasons[i]) == 0;
}

/* Of rank r's list (count samples from permutation position first), the
 * samples of this loaderd's --shard: all without one. */
static uint64_t shard_count(const loader_t *self, uint64_t first, uint64_t count)
{
    uint32_t shards = self->options.shard_count;
    if (shards <= 1)
        return count;
    uint64_t mine = 0;
    for (uint64_t i = 0; i < count; i++)
        mine += sampler_id(self->sampler, first + i) % shards == self->options.shard_index;
    return mine;
}

/* Rank r's shard of step k: ids, labels, a pixel frame of count samples;
 * with --shard only this loaderd's samples, each with its index in r's
 * list (pos), so gpud merges the loaderds' parts in one loaderd's order.
 * --chunk sends pos too: r's list starts at a chunk boundary, so a
 * sample's chunk is pos / N, and one that fails to load leaves a hole in
 * its chunk at gpud (gpud/chunk_sizes.h) instead of moving the cut of the
 * later ones, which would make the weights depend on W. */
static int shard_alloc(loader_t *self, uint64_t k, int r, ddp_batch_t *b, uint64_t *first)
{
    uint64_t listed, count, chunk = (uint64_t)self->options.chunk;
    char err[256];
    /* --chunk: whole chunks per rank, the chunks the same for any W */
    int rc = chunk ? sampler_shard_chunked(self->sampler, k, self->global_batch, chunk,
                                           self->world, r, first, &listed, err, sizeof err)
                   : sampler_shard(self->sampler, k, self->global_batch, self->world, r, first,
                                   &listed, err, sizeof err);
    if (rc != 0) {
        log_error("cannot shard step %llu for rank %d: %s", (unsigned long long)k, r, err);
        return -1;
    }
    bool sharded = self->options.shard_count > 1, with_pos = sharded || chunk;
    count = shard_count(self, *first, listed);
    int c = self->augment.channels;
    size_t sb = (size_t)c * self->out_h * self->out_w;
    *b = (ddp_batch_t){.epoch = self->epoch, .phase = DDP_PHASE_TRAIN, .n = (uint32_t)count,
                       .c = (uint16_t)c, .h = (uint16_t)self->out_h, .w = (uint16_t)self->out_w,
                       .step = (uint64_t)self->epoch * self->steps_per_epoch + k,
                       .steps_per_epoch = self->steps_per_epoch, .gen = self->gen};
    b->ids = calloc(count ? count : 1, sizeof *b->ids);
    b->labels = calloc(count ? count : 1, sizeof *b->labels);
    /* --wire jpeg: the files' frame is made once they are read (train_files.c) */
    b->pixels = self->wire_encoded ? NULL : zframe_new(NULL, sb * count);
    if (with_pos)
        b->pos = calloc(count ? count : 1, sizeof *b->pos);
    if (!b->ids || !b->labels || (!b->pixels && !self->wire_encoded) || (with_pos && !b->pos)) {
        log_error("out of memory for rank %d's shard of %llu samples; lower the global batch or "
                  "--prefetch", r, (unsigned long long)count);
        return -1;
    }
    for (uint64_t i = 0, j = 0; i < listed && j < count; i++) {
        uint64_t id = sampler_id(self->sampler, *first + i);
        if (sharded && id % self->options.shard_count != self->options.shard_index)
            continue;
        b->ids[j] = id;
        b->labels[j] = dataset_label(self->dataset, id);
        if (with_pos)
            b->pos[j] = (uint32_t)i;
        j++;
    }
    return 0;
}

/* Leaves the samples that failed out of B (reported to reducerd). */
static void shard_compact(loader_t *self, ddp_batch_t *b, const int *ok, char (*reasons)[256])
{
    size_t sb = (size_t)b->c * b->h * b->w;
    uint8_t *px = zframe_data(b->pixels);
    uint32_t n = 0;
    for (uint32_t i = 0; i < b->n; i++) {
        if (!ok[i]) {
            reducer_link_report_failed(self, self->dataset, self->epoch, DDP_PHASE_TRAIN,
                                       b->ids[i], reasons[i]);
            continue;
        }
        if (n != i) {
            memmove(px + n * sb, px + i * sb, sb);
            b->ids[n] = b->ids[i];
            b->labels[n] = b->labels[i];
            if (b->pos)
                b->pos[n] = b->pos[i];
        }
        n++;
    }
    if (n < b->n) {
        zframe_t *small = zframe_new(px, sb * n);
        if (small) { /* else the frame stays larger; proto rejects it, logged there */
            zframe_destroy(&b->pixels);
            b->pixels = small;
        }
        b->n = n;
    }
}

/* Every shard's samples on the thread pool at once; then the failed ones
 * left out and the step's global_count set. */
static void load_shards(loader_t *self, step_t *st, step_job_t *job)
{
    int world = self->world;
    size_t sb = (size_t)self->augment.channels * self->out_h * self->out_w, i = 0;
    for (int r = 0; r < world; r++)
        for (uint32_t s = 0; s < st->shard[r].n; s++, i++) {
            job->ids[i] = st->shard[r].ids[s];
            job->dst[i] = (uint8_t *)zframe_data(st->shard[r].pixels) + s * sb;
        }
    pool_for(self->pool, (int)i, load_one, job);
    st->global_count = 0;
    size_t off = 0;
    for (int r = 0; r < world; r++) {
        uint32_t planned = st->shard[r].n;
        shard_compact(self, &st->shard[r], job->ok + off, job->reasons + off);
        st->global_count += st->shard[r].n;
        off += planned;
    }
    for (int r = 0; r < world; r++)
        st->shard[r].global_count = st->global_count;
}

/* Loads step k into ST: every rank's shard. */
static int load_step(loader_t *self, uint64_t k, step_t *st)
{
    uint64_t total = 0, first;
    st->k = k;
    for (int r = 0; r < self->world; r++) {
        if (shard_alloc(self, k, r, &st->shard[r], &first) < 0)
            return -1;
        total += st->shard[r].n;
    }
    size_t slots = total ? total : 1;
    step_job_t job = {.self = self, .ids = calloc(slots, sizeof *job.ids),
                      .dst = calloc(slots, sizeof *job.dst), .ok = calloc(slots, sizeof *job.ok),
                      .reasons = calloc(slots, sizeof *job.reasons)};
    int rc = -1;
    if (self->wire_encoded) {
        rc = train_files_load(self, st, total);
    } else if (job.ids && job.dst && job.ok && job.reasons) {
        load_shards(self, st, &job);
        rc = 0;
    } else {
        log_error("out of memory loading step %llu (%llu samples)", (unsigned long long)k,
                  (unsigned long long)total);
    }
    free(job.ids);
    free(job.dst);
    free(job.ok);
    free(job.reasons);
    if (rc == 0 && st->global_count < total)
        log_warn("epoch %u step %llu: %llu of %llu samples failed to load; global_count %u",
                 self->epoch, (unsigned long long)k,
                 (unsigned long long)(total - st->global_count), (unsigned long long)total,
                 st->global_count);
    return rc;
}

static int prepare_next(loader_t *self)
{
    step_window_t *w = self->window;
    if (!training_busy(self))
        return 0;
    step_t *st = step_window_next_slot(w);
    if (load_step(self, w->next_k, st) < 0) {
        step_clear(st, w->world);
        return -1;
    }
    step_window_push(w);
    return 0;
}

/* ---- sending --------------------------------------------------------------- */

static void send_shard(loader_t *self, const char *name, zframe_t *identity, step_t *st, int r)
{
    ddp_batch_t *b = &st->shard[r];
    b->seq = dispatch_sent_train(self->dispatch, name);
    uint32_t n = b->n;
    reducer_link_send_issued(self, b, name);
    zframe_t *id = zframe_dup(identity);
    self->sent_bytes += b->pixels ? zframe_size(b->pixels) : 0;
    if (proto_send_batch(zsock_resolve(self->router), id, b) < 0)
        log_error("sending step %llu to rank %d (%s) failed: %s; train shards are not re-sent",
                  (unsigned long long)b->step, r, name, zmq_strerror(zmq_errno()));
    zframe_destroy(&id);
    log_debug("train batch %llu: epoch %u step %llu (global %llu), rank %d, %u of %u samples -> %s",
              (unsigned long long)b->seq, self->epoch, (unsigned long long)st->k,
              (unsigned long long)b->step, r, n, st->global_count, name);
    self->sent_samples += n;
    free(b->ids);
    free(b->labels);
    free(b->sizes);
    free(b->pos);
    zframe_destroy(&b->pixels);
    memset(b, 0, sizeof *b);
    st->sent[r] = true;
}

/* Each rank gets the shards it has credit for, in step order. */
static void send_ready_shards(loader_t *self)
{
    step_window_t *w = self->window;
    if (w->count == 0)
        return;
    uint64_t head_k = w->steps[w->head].k;
    for (int r = 0; r < w->world; r++) {
        zframe_t *identity;
        bool alive;
        uint32_t credits;
        const char *name = dispatch_rank_worker(self->dispatch, r, &identity, &alive, &credits);
        while (name && alive && credits > 0 && w->next_send[r] < head_k + (uint64_t)w->count) {
            send_shard(self, name, identity, step_window_step(w, w->next_send[r]), r);
            w->next_send[r]++;
            name = dispatch_rank_worker(self->dispatch, r, &identity, &alive, &credits);
        }
    }
    step_window_release(w);
}

int training_pump(loader_t *self)
{
    if (self->train_paused)   /* too few ranks: nothing until reducerd says go */
        return 0;
    send_ready_shards(self);
    if (prepare_next(self) < 0)
        return -1;
    send_ready_shards(self);
    return self->window->count == 0 && self->window->next_k >= self->steps_per_epoch;
}

/* ---- membership (docs/ELASTIC.md) --------------------------------------- */

bool training_committed(const loader_t *self)
{
    return self->commit_next >= ((uint64_t)self->epoch + 1) * self->steps_per_epoch;
}

/* The window for WORLD ranks, empty; -1 when out of memory (logged). */
static int rebuild_window(loader_t *self, int world)
{
    if (world == self->window->world)
        return 0;
    step_window_t *w = step_window_new(world, self->window_depth);
    if (!w) {
        log_error("out of memory for the train step window of %d ranks", world);
        return -1;
    }
    step_window_destroy(&self->window);
    self->window = w;
    return 0;
}

int training_on_members(loader_t *self)
{
    ddp_members_t *m = &self->members;
    self->members_pending = false;
    uint64_t first = (uint64_t)self->epoch * self->steps_per_epoch;
    bool training = self->stage == STAGE_RANKS || self->stage == STAGE_TRAIN;
    if (m->step < self->commit_next || (training && m->step < first)) {
        log_error("MEMBERS of generation %u restarts at step %llu, before the last committed "
                  "one (%llu): loaderd and reducerd disagree", m->gen, (unsigned long long)m->step,
                  (unsigned long long)self->commit_next);
        return -1;
    }
    log_warn("membership generation %u: %d rank%s (%s); training goes on at step %llu", m->gen,
             m->world, m->world == 1 ? "" : "s", m->reason, (unsigned long long)m->step);
    self->gen = m->gen;
    self->train_paused = m->paused;
    if (m->paused)
        log_warn("training paused at step %llu until ranks join", (unsigned long long)m->step);
    self->commit_next = m->step;
    dispatch_set_gen(self->dispatch, m->gen);
    if (rebuild_window(self, m->world) < 0)
        return -1;
    self->world = m->world;
    if (training) {   /* re-load from the first step not committed, split over W' */
        uint64_t k = m->step - first;
        step_window_reset(self->window, k < self->steps_per_epoch ? k : self->steps_per_epoch);
        self->stage = STAGE_RANKS;
    }
    return 0;
}
