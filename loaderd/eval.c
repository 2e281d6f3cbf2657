#include "loaderd/eval.h"

#include "common/log.h"
#include "loaderd/reducer_link.h"
#include "proto/wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    loader_t *self;
    batch_range_t range;
    uint8_t *pixels;
    size_t sample_bytes;
    int *ok;
    char (*reasons)[256];
} decode_job_t;

static void decode_one(void *ctx, int i)
{
    decode_job_t *job = ctx;
    const loader_t *self = job->self;
    uint64_t id = loader_shard_id(self, job->range.first + (uint64_t)i);
    job->ok[i] = sample_load(self->eval_set, id, &self->transform,
                             job->pixels + (size_t)i * job->sample_bytes, self->eval_h,
                             self->eval_w, job->reasons[i], sizeof job->reasons[i]) == 0;
}

/* The samples that decoded, moved to the front; the others reported. */
static uint32_t keep_decoded(loader_t *self, decode_job_t *job, uint64_t *ids, int32_t *labels)
{
    size_t sb = job->sample_bytes;
    uint32_t n = 0;
    for (uint32_t i = 0; i < job->range.count; i++) {
        uint64_t id = loader_shard_id(self, job->range.first + i);
        if (!job->ok[i]) {
            reducer_link_report_failed(self, self->eval_set, self->epoch, DDP_PHASE_EVAL, id,
                                       job->reasons[i]);
            continue;
        }
        if (n != i)
            memmove(job->pixels + n * sb, job->pixels + i * sb, sb);
        ids[n] = id;
        labels[n] = dataset_label(self->eval_set, id);
        n++;
    }
    return n;
}

/* --wire jpeg: the files of range r, read on the threads (not decoded). */
typedef struct {
    const loader_t *self;
    batch_range_t range;
    uint8_t **files;
    size_t *sizes;
    int *ok;
    char (*reasons)[256];
} read_job_t;

static void read_one(void *ctx, int i)
{
    read_job_t *job = ctx;
    const dataset_t *ds = job->self->eval_set;
    uint64_t id = loader_shard_id(job->self, job->range.first + (uint64_t)i);
    job->ok[i] = loader_read_file(ds, id, &job->files[i], &job->sizes[i], job->reasons[i],
                                  sizeof job->reasons[i]);
}

/* The files that were read, back to back in one frame; the others reported. */
static zframe_t *pack_files(loader_t *self, read_job_t *job, uint64_t *ids, int32_t *labels,
                            uint32_t *sizes, uint32_t *n_out)
{
    size_t total = 0;
    uint32_t n = 0;
    for (uint32_t i = 0; i < job->range.count; i++) {
        uint64_t id = loader_shard_id(self, job->range.first + i);
        if (!job->ok[i]) {
            reducer_link_report_failed(self, self->eval_set, self->epoch, DDP_PHASE_EVAL, id,
                                       job->reasons[i]);
            continue;
        }
        ids[n] = id;
        labels[n] = dataset_label(self->eval_set, id);
        sizes[n++] = (uint32_t)job->sizes[i];
        total += job->sizes[i];
    }
    *n_out = n;
    if (total > DDP_MAX_PIXELS) { /* one BATCH frame's limit */
        log_error("the %u files of a batch total %zu bytes, over a BATCH's 2 GiB: lower "
                  "--batch-size or use --wire uint8", n, total);
        return NULL;
    }
    zframe_t *frame = n ? zframe_new(NULL, total) : NULL;
    for (uint32_t i = 0, at = 0; frame && i < job->range.count; i++) {
        if (!job->ok[i])
            continue;
        memcpy(zframe_data(frame) + at, job->files[i], job->sizes[i]);
        at += (uint32_t)job->sizes[i];
    }
    return frame;
}

/* Range r as a ready wire-1 batch: the files and the transform gpud applies
 * (PROTOCOL.md BATCH 'wire'); unreadable files are reported and left out. */
static int read_batch(loader_t *self, batch_range_t r, ready_batch_t *out)
{
    uint8_t **files = calloc(r.count, sizeof *files);
    size_t *fsizes = calloc(r.count, sizeof *fsizes);
    int *ok = calloc(r.count, sizeof *ok);
    char(*reasons)[256] = calloc(r.count, sizeof *reasons);
    uint64_t *ids = calloc(r.count, sizeof *ids);
    int32_t *labels = calloc(r.count, sizeof *labels);
    uint32_t *sizes = calloc(r.count, sizeof *sizes);
    int rc = -1;
    if (files && fsizes && ok && reasons && ids && labels && sizes) {
        read_job_t job = {.self = self, .range = r, .files = files, .sizes = fsizes, .ok = ok,
                          .reasons = reasons};
        pool_for(self->pool, (int)r.count, read_one, &job);
        uint32_t n = 0;
        zframe_t *frame = pack_files(self, &job, ids, labels, sizes, &n);
        if (frame || n == 0) {
            const transform_t *t = &self->transform;
            out->range = r;
            out->batch = (ddp_batch_t){.epoch = self->epoch, .phase = DDP_PHASE_EVAL, .n = n,
                                       .c = (uint16_t)t->channels, .h = (uint16_t)self->eval_h,
                                       .w = (uint16_t)self->eval_w, .ids = ids, .labels = labels,
                                       .pixels = frame, .wire = DDP_WIRE_ENCODED,
                                       .sizes = sizes, .resize = (uint16_t)t->resize,
                                       .crop = t->crop_h > 0, .dct = t->dct_scaling != 0};
            ids = NULL, labels = NULL, sizes = NULL; /* the batch's now */
            rc = 0;
        }
    }
    for (uint32_t i = 0; files && i < r.count; i++)
        free(files[i]);
    free(files), free(fsizes), free(ok), free(reasons), free(ids), free(labels), free(sizes);
    if (rc < 0)
        log_error("cannot make a batch of %u files (out of memory, or over 2 GiB); lower "
                  "--batch-size or --prefetch", r.count);
    return rc;
}

/* Decode range r into a ready batch; failed samples are reported and left out. */
static int decode_batch(loader_t *self, batch_range_t r, ready_batch_t *out)
{
    if (self->wire_encoded)
        return read_batch(self, r, out);
    int c = self->transform.channels;
    size_t sb = (size_t)c * self->eval_h * self->eval_w;
    zframe_t *frame = zframe_new(NULL, sb * r.count);
    int *ok = calloc(r.count, sizeof *ok);
    char(*reasons)[256] = calloc(r.count, sizeof *reasons);
    uint64_t *ids = calloc(r.count, sizeof *ids);
    int32_t *labels = calloc(r.count, sizeof *labels);
    if (!frame || !ok || !reasons || !ids || !labels) {
        zframe_destroy(&frame);
        free(ok), free(reasons), free(ids), free(labels);
        log_error("out of memory for a batch of %u samples; lower --batch-size or --prefetch",
                  r.count);
        return -1;
    }
    decode_job_t job = {.self = self, .range = r, .pixels = zframe_data(frame),
                        .sample_bytes = sb, .ok = ok, .reasons = reasons};
    pool_for(self->pool, (int)r.count, decode_one, &job);
    uint32_t n = keep_decoded(self, &job, ids, labels);
    free(ok);
    free(reasons);
    out->range = r;
    out->batch = (ddp_batch_t){.epoch = self->epoch, .phase = DDP_PHASE_EVAL, .n = n,
                               .c = (uint16_t)c, .h = (uint16_t)self->eval_h,
                               .w = (uint16_t)self->eval_w, .ids = ids, .labels = labels};
    if (n < r.count) {
        /* shrink the frame to the samples that decoded */
        zframe_t *small = n ? zframe_new(zframe_data(frame), sb * n) : NULL;
        zframe_destroy(&frame);
        frame = small;
    }
    out->batch.pixels = frame;
    return 0;
}

static void decode_ahead(loader_t *self)
{
    batch_range_t r;
    if (self->n_ready >= self->options.prefetch || !dispatch_pop(self->dispatch, &r))
        return;
    ready_batch_t *slot = &self->ready[self->n_ready];
    if (decode_batch(self, r, slot) < 0) {
        self->exit_code = 1;
        self->stopped = true;
        return;
    }
    if (slot->batch.n == 0) {
        ready_batch_clear(slot); /* every sample failed: nothing to send */
        return;
    }
    self->n_ready++;
}

static void send_ready(loader_t *self)
{
    while (self->n_ready > 0) {
        zframe_t *identity = NULL;
        const char *name = dispatch_ready_worker(self->dispatch, &identity);
        if (!name)
            return;
        ready_batch_t *r = &self->ready[0];
        r->batch.seq = dispatch_sent(self->dispatch, name, r->range);
        uint32_t n = r->batch.n;
        reducer_link_send_issued(self, &r->batch, name);
        zframe_t *id = zframe_dup(identity);
        self->sent_bytes += r->batch.pixels ? zframe_size(r->batch.pixels) : 0;
        if (proto_send_batch(zsock_resolve(self->router), id, &r->batch) < 0)
            log_warn("sending batch %llu to %s failed: %s (it will be re-sent if %s is dead)",
                     (unsigned long long)r->batch.seq, name, zmq_strerror(zmq_errno()), name);
        zframe_destroy(&id);
        log_debug("batch %llu (%u samples from %llu) -> %s", (unsigned long long)r->batch.seq, n,
                  (unsigned long long)loader_shard_id(self, r->range.first), name);
        self->sent_samples += n;
        ready_batch_clear(r);
        memmove(&self->ready[0], &self->ready[1],
                (size_t)(self->n_ready - 1) * sizeof self->ready[0]);
        self->n_ready--;
        memset(&self->ready[self->n_ready], 0, sizeof self->ready[0]);
    }
}

int eval_pump(loader_t *self)
{
    send_ready(self);
    decode_ahead(self);
    send_ready(self);
    return self->n_ready == 0 && dispatch_all_acked(self->dispatch);
}

bool eval_busy(const loader_t *self)
{
    return self->n_ready < self->options.prefetch && !dispatch_all_sent(self->dispatch);
}
