#include "loaderd/train_files.h"

#include "common/errbuf.h"
#include "common/log.h"
#include "loaderd/reducer_link.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const loader_t *self;
    const uint64_t *ids;       /* the step's samples, rank after rank */
    uint8_t **files;
    size_t *sizes;
    int *ok;
    char (*reasons)[256];
} files_job_t;

static void read_one(void *ctx, int i)
{
    files_job_t *job = ctx;
    const dataset_t *ds = job->self->dataset;
    job->ok[i] = loader_read_file(ds, job->ids[i], &job->files[i], &job->sizes[i],
                                  job->reasons[i], sizeof job->reasons[i]);
}

/* The transform and augmentation gpud applies, on shard B. */
static void set_wire(const loader_t *self, ddp_batch_t *b)
{
    const transform_t *t = &self->transform;
    const augment_t *a = &self->augment;
    b->wire = DDP_WIRE_ENCODED;
    b->resize = (uint16_t)t->resize;
    b->crop = t->crop_h > 0;
    b->dct = t->dct_scaling != 0;
    b->aug_seed = (uint64_t)self->options.seed;
    b->aug_flags = (uint8_t)((a->crop ? DDP_AUG_CROP : 0) | (a->rotate ? DDP_AUG_ROTATE : 0));
    memcpy(b->aug_scale, a->scale, sizeof b->aug_scale);
    memcpy(b->aug_ratio, a->ratio, sizeof b->aug_ratio);
    b->aug_flip_p = a->flip_p;
    memcpy(b->aug_degrees, a->degrees, sizeof b->aug_degrees);
}

/* Shard B's readable files back to back in its data frame, with their
 * sizes; the unreadable ones reported and left out. JOB's rows from AT. */
static int pack_shard(loader_t *self, ddp_batch_t *b, const files_job_t *job, size_t at)
{
    size_t total = 0;
    uint32_t n = 0;
    b->sizes = calloc(b->n ? b->n : 1, sizeof *b->sizes);
    if (!b->sizes)
        return -1;
    for (uint32_t i = 0; i < b->n; i++) {
        size_t j = at + i;
        if (!job->ok[j]) {
            reducer_link_report_failed(self, self->dataset, self->epoch, DDP_PHASE_TRAIN,
                                       b->ids[i], job->reasons[j]);
            continue;
        }
        b->ids[n] = b->ids[i];
        b->labels[n] = b->labels[i];
        if (b->pos)   /* --chunk: the kept samples keep their places */
            b->pos[n] = b->pos[i];
        b->sizes[n++] = (uint32_t)job->sizes[j];
        total += job->sizes[j];
    }
    if (total > DDP_MAX_PIXELS) {
        log_error("the %u files of a train shard total %zu bytes, over a BATCH's 2 GiB: lower "
                  "--batch-size or use --wire uint8", n, total);
        return -1;
    }
    b->pixels = zframe_new(NULL, total);
    if (!b->pixels)
        return -1;
    uint8_t *dst = zframe_data(b->pixels);
    for (uint32_t i = 0; i < b->n; i++)
        if (job->ok[at + i]) {
            memcpy(dst, job->files[at + i], job->sizes[at + i]);
            dst += job->sizes[at + i];
        }
    b->n = n;
    set_wire(self, b);
    return 0;
}

int train_files_load(loader_t *self, step_t *st, uint64_t total)
{
    size_t slots = total ? total : 1;
    uint64_t *ids = calloc(slots, sizeof *ids);
    files_job_t job = {.self = self, .ids = ids, .files = calloc(slots, sizeof *job.files),
                       .sizes = calloc(slots, sizeof *job.sizes),
                       .ok = calloc(slots, sizeof *job.ok),
                       .reasons = calloc(slots, sizeof *job.reasons)};
    int rc = ids && job.files && job.sizes && job.ok && job.reasons ? 0 : -1;
    size_t i = 0;
    for (int r = 0; rc == 0 && r < self->world; r++)
        for (uint32_t s = 0; s < st->shard[r].n; s++)
            ids[i++] = st->shard[r].ids[s];
    if (rc == 0)
        pool_for(self->pool, (int)i, read_one, &job);
    st->global_count = 0;
    for (int r = 0, at = 0; rc == 0 && r < self->world; r++) {
        uint32_t planned = st->shard[r].n;
        rc = pack_shard(self, &st->shard[r], &job, (size_t)at);
        st->global_count += st->shard[r].n;
        at += (int)planned;
    }
    for (int r = 0; rc == 0 && r < self->world; r++)
        st->shard[r].global_count = st->global_count;
    for (size_t j = 0; job.files && j < i; j++)
        free(job.files[j]);
    free(ids), free(job.files), free(job.sizes), free(job.ok), free(job.reasons);
    if (rc < 0)
        log_error("cannot make step %llu's shards of %llu files (out of memory, or over 2 GiB); "
                  "lower the batch size or --prefetch", (unsigned long long)st->k,
                  (unsigned long long)total);
    return rc;
}
