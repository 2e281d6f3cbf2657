/* The train phase of loaderd (docs/TRAINING.md, step 3): each global step
 * is loaded whole — every rank's shard, augmented per (seed, epoch, id) —
 * so that global_count (the gradient's divisor) is known before any shard
 * leaves; then rank r gets its shard when it has credit. Ranks get their
 * shards in step order, independently of each other; a step's memory is
 * freed once every rank has its shard, and at most `depth` steps are held. */
#include "common/log.h"
#include "loaderd/daemon_loader.h"
#include "proto/wire.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    uint64_t k;                /* step within the epoch */
    uint32_t global_count;
    ddp_batch_t *shard;        /* world batches */
    bool *sent;                /* world flags */
} step_t;

struct train_window {
    int world, depth;
    step_t *steps;             /* ring of depth */
    int head, count;           /* steps[head]: the oldest held */
    uint64_t next_k;           /* next step to prepare */
    uint64_t *next_send;       /* per rank: the step whose shard it gets next */
};

static void step_clear(step_t *st, int world)
{
    for (int r = 0; r < world; r++) {
        free(st->shard[r].ids);
        free(st->shard[r].labels);
        zframe_destroy(&st->shard[r].pixels);
        memset(&st->shard[r], 0, sizeof st->shard[r]);
        st->sent[r] = false;
    }
    st->k = 0;
    st->global_count = 0;
}

train_window_t *train_window_new(int world, int depth)
{
    if (world < 1 || depth < 1)
        return NULL;
    train_window_t *self = calloc(1, sizeof *self);
    if (!self)
        return NULL;
    self->world = world;
    self->depth = depth;
    self->steps = calloc((size_t)depth, sizeof *self->steps);
    self->next_send = calloc((size_t)world, sizeof *self->next_send);
    bool ok = self->steps && self->next_send;
    for (int i = 0; ok && i < depth; i++) {
        self->steps[i].shard = calloc((size_t)world, sizeof *self->steps[i].shard);
        self->steps[i].sent = calloc((size_t)world, sizeof *self->steps[i].sent);
        ok = self->steps[i].shard && self->steps[i].sent;
    }
    if (!ok)
        train_window_destroy(&self);
    return self;
}

void train_window_destroy(train_window_t **self)
{
    if (!self || !*self)
        return;
    train_window_t *w = *self;
    for (int i = 0; w->steps && i < w->depth; i++) {
        if (w->steps[i].shard && w->steps[i].sent)
            step_clear(&w->steps[i], w->world);
        free(w->steps[i].shard);
        free(w->steps[i].sent);
    }
    free(w->steps);
    free(w->next_send);
    free(w);
    *self = NULL;
}

static void window_reset(train_window_t *w, uint64_t first_step)
{
    while (w->count > 0) {
        step_clear(&w->steps[w->head], w->world);
        w->head = (w->head + 1) % w->depth;
        w->count--;
    }
    w->head = 0;
    w->next_k = first_step;
    for (int r = 0; r < w->world; r++)
        w->next_send[r] = first_step;
}

void train_begin_epoch(loader_t *L, uint64_t first_step)
{
    sampler_epoch(L->sampler, L->epoch);
    window_reset(L->window, first_step);
}

bool train_busy(const loader_t *L)
{
    const train_window_t *w = L->window;
    return w->count < w->depth && w->next_k < L->spe;
}

bool train_ranks_known(loader_t *L)
{
    for (int r = 0; r < (int)L->o.workers; r++) {
        zframe_t *id;
        bool alive;
        uint32_t credits;
        if (!dispatch_rank_worker(L->dispatch, r, &id, &alive, &credits))
            return false;
    }
    return true;
}

/* ---- loading a step ------------------------------------------------------ */

int train_load(const loader_t *L, uint32_t epoch, uint64_t id, uint8_t *out, char *why,
               size_t whylen)
{
    uint64_t seed = (uint64_t)L->o.seed;
    if (L->aug.crop)
        return augment_load(L->ds, id, &L->aug, seed, epoch, out, L->out_h, L->out_w, why, whylen);
    /* no random crop: the eval transform (resize, center crop) makes the
     * output size, then flip / rotation — Compose([Resize, CenterCrop,
     * RandomHorizontalFlip, RandomRotation]); for a source already of the
     * output size (idx) this is augment_load's result exactly */
    if (sample_load(L->ds, id, &L->o.t, out, L->out_h, L->out_w, why, whylen) != 0)
        return -1;
    augment_params_t p = augment_draw(&L->aug, seed, epoch, id, L->out_w, L->out_h);
    int c = L->aug.channels;
    if (p.flip)
        augment_flip_planes(out, c, L->out_h, L->out_w);
    if (p.rotate) {
        size_t n = (size_t)c * L->out_h * L->out_w;
        uint8_t *tmp = malloc(n);
        if (!tmp) {
            snprintf(why, whylen, "out of memory rotating a %dx%d image", L->out_w, L->out_h);
            return -1;
        }
        memcpy(tmp, out, n);
        augment_rotate_planes(tmp, out, c, L->out_h, L->out_w, p.angle);
        free(tmp);
    }
    return 0;
}

typedef struct {
    const loader_t *L;
    uint64_t *ids;             /* the step's samples, rank after rank */
    uint8_t **dst;             /* where each goes */
    int *ok;
    char (*why)[256];
} step_job_t;

static void load_one(void *ctx, int i)
{
    step_job_t *job = ctx;
    job->ok[i] = train_load(job->L, job->L->epoch, job->ids[i], job->dst[i], job->why[i],
                            sizeof job->why[i]) == 0;
}

/* Rank r's shard of step k: ids, labels, a pixel frame of count samples. */
static int shard_alloc(loader_t *L, uint64_t k, int r, ddp_batch_t *b, uint64_t *first)
{
    uint64_t count;
    char err[256];
    if (sampler_shard(L->sampler, k, L->global_batch, (int)L->o.workers, r, first, &count, err,
                      sizeof err) != 0) {
        log_error("cannot shard step %llu for rank %d: %s", (unsigned long long)k, r, err);
        return -1;
    }
    size_t sb = (size_t)L->aug.channels * L->out_h * L->out_w;
    *b = (ddp_batch_t){.epoch = L->epoch, .phase = DDP_PHASE_TRAIN, .n = (uint32_t)count,
                       .c = (uint16_t)L->aug.channels, .h = (uint16_t)L->out_h,
                       .w = (uint16_t)L->out_w, .step = (uint64_t)L->epoch * L->spe + k};
    b->ids = calloc(count ? count : 1, sizeof *b->ids);
    b->labels = calloc(count ? count : 1, sizeof *b->labels);
    b->pixels = zframe_new(NULL, sb * count);
    if (!b->ids || !b->labels || !b->pixels) {
        log_error("out of memory for rank %d's shard of %llu samples; lower the global batch or "
                  "--prefetch", r, (unsigned long long)count);
        return -1;
    }
    for (uint64_t i = 0; i < count; i++) {
        b->ids[i] = sampler_id(L->sampler, *first + i);
        b->labels[i] = dataset_label(L->ds, b->ids[i]);
    }
    return 0;
}

/* Leaves the samples that failed out of B (reported to reducerd). */
static void shard_compact(loader_t *L, ddp_batch_t *b, const int *ok, char (*why)[256])
{
    size_t sb = (size_t)b->c * b->h * b->w;
    uint8_t *px = zframe_data(b->pixels);
    uint32_t n = 0;
    for (uint32_t i = 0; i < b->n; i++) {
        if (!ok[i]) {
            loader_report_failed(L, L->ds, L->epoch, DDP_PHASE_TRAIN, b->ids[i], why[i]);
            continue;
        }
        if (n != i) {
            memmove(px + n * sb, px + i * sb, sb);
            b->ids[n] = b->ids[i];
            b->labels[n] = b->labels[i];
        }
        n++;
    }
    if (n < b->n) {
        zframe_t *small = zframe_new(px, sb * n);
        if (small) {   /* else the frame stays larger; proto rejects it, logged there */
            zframe_destroy(&b->pixels);
            b->pixels = small;
        }
        b->n = n;
    }
}

/* Loads step k into ST: every rank's shard on the thread pool at once. */
static int load_step(loader_t *L, uint64_t k, step_t *st)
{
    int W = (int)L->o.workers;
    uint64_t total = 0, first;
    st->k = k;
    for (int r = 0; r < W; r++) {
        if (shard_alloc(L, k, r, &st->shard[r], &first) < 0)
            return -1;
        total += st->shard[r].n;
    }
    step_job_t job = {.L = L};
    job.ids = calloc(total ? total : 1, sizeof *job.ids);
    job.dst = calloc(total ? total : 1, sizeof *job.dst);
    job.ok = calloc(total ? total : 1, sizeof *job.ok);
    job.why = calloc(total ? total : 1, sizeof *job.why);
    int rc = -1;
    if (job.ids && job.dst && job.ok && job.why) {
        size_t sb = (size_t)L->aug.channels * L->out_h * L->out_w, i = 0;
        for (int r = 0; r < W; r++)
            for (uint32_t s = 0; s < st->shard[r].n; s++, i++) {
                job.ids[i] = st->shard[r].ids[s];
                job.dst[i] = (uint8_t *)zframe_data(st->shard[r].pixels) + s * sb;
            }
        pool_for(L->pool, (int)total, load_one, &job);
        st->global_count = 0;
        size_t off = 0;
        for (int r = 0; r < W; r++) {
            uint32_t planned = st->shard[r].n;
            shard_compact(L, &st->shard[r], job.ok + off, job.why + off);
            st->global_count += st->shard[r].n;
            off += planned;
        }
        for (int r = 0; r < W; r++)
            st->shard[r].global_count = st->global_count;
        rc = 0;
    } else {
        log_error("out of memory loading step %llu (%llu samples)", (unsigned long long)k,
                  (unsigned long long)total);
    }
    free(job.ids);
    free(job.dst);
    free(job.ok);
    free(job.why);
    if (rc == 0 && st->global_count < total)
        log_warn("epoch %u step %llu: %llu of %llu samples failed to load; global_count %u",
                 L->epoch, (unsigned long long)k, (unsigned long long)(total - st->global_count),
                 (unsigned long long)total, st->global_count);
    return rc;
}

static int prepare_next(loader_t *L)
{
    train_window_t *w = L->window;
    if (!train_busy(L))
        return 0;
    step_t *st = &w->steps[(w->head + w->count) % w->depth];
    if (load_step(L, w->next_k, st) < 0) {
        step_clear(st, w->world);
        return -1;
    }
    w->count++;
    w->next_k++;
    return 0;
}

/* ---- sending --------------------------------------------------------------- */

static void send_shard(loader_t *L, const char *name, zframe_t *identity, step_t *st, int r)
{
    ddp_batch_t *b = &st->shard[r];
    b->seq = dispatch_sent_train(L->dispatch, name);
    uint32_t n = b->n;
    loader_send_issued(L, b, name);
    zframe_t *id = zframe_dup(identity);
    if (proto_send_batch(zsock_resolve(L->router), id, b) < 0)
        log_error("sending step %llu to rank %d (%s) failed: %s; train shards are not re-sent",
                  (unsigned long long)b->step, r, name, zmq_strerror(zmq_errno()));
    zframe_destroy(&id);
    log_debug("train batch %llu: epoch %u step %llu (global %llu), rank %d, %u of %u samples -> %s",
              (unsigned long long)b->seq, L->epoch, (unsigned long long)st->k,
              (unsigned long long)b->step, r, n, st->global_count, name);
    L->sent_samples += n;
    free(b->ids);
    free(b->labels);
    zframe_destroy(&b->pixels);
    memset(b, 0, sizeof *b);
    st->sent[r] = true;
}

/* Each rank gets the shards it has credit for, in step order. */
static void send_ready_shards(loader_t *L)
{
    train_window_t *w = L->window;
    if (w->count == 0)
        return;
    uint64_t head_k = w->steps[w->head].k;
    for (int r = 0; r < w->world; r++) {
        zframe_t *identity;
        bool alive;
        uint32_t credits;
        const char *name = dispatch_rank_worker(L->dispatch, r, &identity, &alive, &credits);
        while (name && alive && credits > 0 && w->next_send[r] < head_k + (uint64_t)w->count) {
            step_t *st = &w->steps[(w->head + (int)(w->next_send[r] - head_k)) % w->depth];
            send_shard(L, name, identity, st, r);
            w->next_send[r]++;
            name = dispatch_rank_worker(L->dispatch, r, &identity, &alive, &credits);
        }
    }
    /* free the steps every rank has */
    while (w->count > 0) {
        step_t *st = &w->steps[w->head];
        for (int r = 0; r < w->world; r++)
            if (!st->sent[r])
                return;
        step_clear(st, w->world);
        w->head = (w->head + 1) % w->depth;
        w->count--;
    }
}

int train_pump(loader_t *L)
{
    send_ready_shards(L);
    if (prepare_next(L) < 0)
        return -1;
    send_ready_shards(L);
    return L->window->count == 0 && L->window->next_k >= L->spe;
}
