#include "loaderd/loader.h"

#include "common/log.h"
#include "common/image/decode.h"
#include "common/zsockopt.h"
#include "loaderd/scan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The train set (eval mode: the dataset), its sample size and channels. */
static int open_dataset(loader_t *self)
{
    const loader_options_t *o = &self->options;
    char err[512];
    if (!(self->dataset = scan_open(o->data, o->limit, o->classes, o->outputs, &self->samples)))
        return -1;
    if (!self->transform.channels)
        self->transform.channels = dataset_is_idx(self->dataset) ? 1 : 3;
    if (transform_output_hw(&self->transform, self->dataset, &self->out_h, &self->out_w, err,
                            sizeof err) < 0) {
        log_error("cannot decide the batch image size: %s", err);
        return -1;
    }
    if (o->train)
        log_info("train set %s: %llu samples, %u classes; samples of %dx%dx%d", o->data,
                 (unsigned long long)self->samples, dataset_num_classes(self->dataset),
                 self->transform.channels, self->out_h, self->out_w);
    else
        log_info("dataset %s: %llu samples, %u classes; batches of %ld x %dx%dx%d", o->data,
                 (unsigned long long)self->samples, dataset_num_classes(self->dataset),
                 o->batch_size, self->transform.channels, self->out_h, self->out_w);
    return 0;
}

/* --augment and --rotate as the train transforms of augment.c. */
static int decide_augment(loader_t *self)
{
    const loader_options_t *o = &self->options;
    loader_augment_t mode = o->augment_mode;
    if (mode == LOADER_AUGMENT_DEFAULT)
        mode = dataset_is_idx(self->dataset) ? LOADER_AUGMENT_NONE : LOADER_AUGMENT_CROP_FLIP;
    int channels = self->transform.channels;
    self->augment = mode == LOADER_AUGMENT_CROP_FLIP ? augment_default(channels)
                                                     : (augment_t){.channels = channels};
    if (mode == LOADER_AUGMENT_FLIP)
        self->augment.flip_p = 0.5;
    if (o->rotate > 0) {
        self->augment.rotate = 1;
        self->augment.degrees[0] = -o->rotate;
        self->augment.degrees[1] = o->rotate;
    }
    char err[256];
    if (augment_check(&self->augment, err, sizeof err) < 0) {
        log_error("%s", err);
        return -1;
    }
    static const char *names[] = {"none", "flip", "crop-flip"};
    log_info("train augmentation: %s%s, rotation %g degrees, seed %ld", names[mode],
             o->augment_mode == LOADER_AUGMENT_DEFAULT ? " (default)" : "",
             self->augment.rotate ? o->rotate : 0.0, o->seed);
    return 0;
}

/* The --val set: same classes as the train set, eval transform. */
static int open_val_set(loader_t *self)
{
    const loader_options_t *o = &self->options;
    long limit = o->val_limit < 0 ? o->limit : o->val_limit > 0 ? o->val_limit : -1;
    self->val_set = scan_open(o->val, limit, o->classes, o->outputs, &self->eval_samples);
    if (!self->val_set ||
        scan_check_val_classes(self->dataset, o->data, self->val_set, o->val) < 0)
        return -1;
    char err[512];
    if (transform_output_hw(&self->transform, self->val_set, &self->eval_h, &self->eval_w, err,
                            sizeof err) < 0) {
        log_error("cannot decide the validation image size: %s", err);
        return -1;
    }
    self->eval_set = self->val_set;
    return 0;
}

/* --cache: what an entry holds decides its key — the whole decoded image
 * before RandomResizedCrop, else the eval transform's output (resize,
 * center crop) before flip and rotation. */
static int open_cache(loader_t *self)
{
    const loader_options_t *o = &self->options;
    if (!o->cache)
        return 0;
    if (dataset_is_idx(self->dataset)) {
        log_info("--cache: %s holds decoded pixels already; nothing to cache", o->data);
        return 0;
    }
    const transform_t *t = &self->transform;
    char key[2048], err[512];
    if (self->augment.crop)
        snprintf(key, sizeof key, "v1 %s n=%llu whole-decode", dataset_root(self->dataset),
                 (unsigned long long)self->samples);
    else
        snprintf(key, sizeof key, "v1 %s n=%llu resize=%d crop=%dx%d out=%dx%d c=%d dct=%d",
                 dataset_root(self->dataset), (unsigned long long)self->samples, t->resize,
                 t->crop_h, t->crop_w, self->out_h, self->out_w, t->channels, t->dct_scaling);
    self->cache = sample_cache_new(o->cache, self->samples, (uint64_t)o->cache_size_mb << 20, key,
                                   err, sizeof err);
    if (!self->cache) {
        log_error("%s", err);
        return -1;
    }
    sample_cache_stats_t s = sample_cache_stats(self->cache);
    log_info("--cache %s: up to %ld MiB of decoded train samples%s", o->cache, o->cache_size_mb,
             s.reused ? "; an earlier run's samples are taken up" : "");
    if (s.reused)
        log_info("--cache: %llu samples (%.1f MiB) from an earlier run",
                 (unsigned long long)s.entries, s.bytes / 1048576.0);
    return 0;
}

/* The epoch permutation, the steps held ahead, the validation set. */
/* --wire jpeg ships files: an idx: dataset has none, so it keeps uint8
 * (training: when the train or the --val set is one, both keep it). */
static void decide_wire(loader_t *self)
{
    if (!self->options.wire_encoded)
        return;
    const dataset_t *idx = dataset_is_idx(self->dataset)                    ? self->dataset
                           : self->eval_set && dataset_is_idx(self->eval_set) ? self->eval_set
                                                                              : NULL;
    if (idx) {
        log_info("--wire jpeg: %s is an idx: dataset (pixels, no files): batches carry uint8 "
                 "pixels", idx == self->dataset ? self->options.data : self->options.val);
        return;
    }
    self->wire_encoded = true;
    log_info("--wire jpeg: batches carry the original files; gpud decodes and transforms them");
}

static int prepare_training(loader_t *self)
{
    const loader_options_t *o = &self->options;
    if (decide_augment(self) < 0 || open_cache(self) < 0)
        return -1;
    self->global_batch = (uint64_t)o->global_batch;
    self->sampler = sampler_new(self->samples, (uint64_t)o->seed, 1);
    if (!self->sampler) {
        log_error("out of memory for the epoch permutation of %llu samples",
                  (unsigned long long)self->samples);
        return -1;
    }
    self->steps_per_epoch = sampler_steps(self->sampler, self->global_batch);
    if ((uint64_t)o->start_step >= self->steps_per_epoch && o->start_step > 0) {
        log_error("--start-step %ld is past the epoch's end: an epoch has %llu steps of %llu",
                  o->start_step, (unsigned long long)self->steps_per_epoch,
                  (unsigned long long)self->global_batch);
        return -1;
    }
    /* steps held ahead: about --prefetch per-worker batches' worth */
    long depth = o->prefetch / o->workers;
    self->world = (int)o->workers;
    self->window_depth = depth < 1 ? 1 : (int)depth;
    self->commit_next = (uint64_t)o->start_epoch * self->steps_per_epoch + (uint64_t)o->start_step;
    self->window = step_window_new(self->world, self->window_depth);
    if (!self->window) {
        log_error("out of memory for the train step window");
        return -1;
    }
    if (o->val && open_val_set(self) < 0)
        return -1;
    decide_wire(self);
    if (o->chunk)
        log_info("bitwise training: shards of whole chunks of %ld samples (%llu a step)",
                 o->chunk, (unsigned long long)(self->global_batch / (uint64_t)o->chunk));
    log_info("training: %ld rank%s, global batch %llu, %llu steps per epoch, epochs %ld..%ld; "
             "validation %s (%llu samples, %dx%d, batches of %ld)", o->workers, o->workers == 1 ? "" : "s",
             (unsigned long long)self->global_batch, (unsigned long long)self->steps_per_epoch,
             o->start_epoch, o->epochs - 1, o->val ? o->val : "none",
             (unsigned long long)self->eval_samples, self->eval_w, self->eval_h, o->batch_size);
    return 0;
}

static int prepare(loader_t *self)
{
    const loader_options_t *o = &self->options;
    if (open_dataset(self) < 0)
        return -1;
    if (!o->train) {
        self->eval_set = self->dataset;
        self->eval_samples = self->samples;
        self->eval_h = self->out_h;
        self->eval_w = self->out_w;
        decide_wire(self);
    } else if (prepare_training(self) < 0) {
        return -1;
    }
    self->eval_positions = loader_shard_size(self, self->eval_samples);
    if (o->shard_count > 1)
        log_info("shard %u/%u: %llu of the %llu samples (ids %% %u == %u)", o->shard_index,
                 o->shard_count, (unsigned long long)self->eval_positions,
                 (unsigned long long)self->eval_samples, o->shard_count, o->shard_index);
    self->pool = pool_new((int)o->threads);
    self->dispatch = dispatch_new(o->train ? 0 : self->eval_positions, (uint32_t)o->batch_size,
                                  o->worker_timeout_s * 1000);
    if (self->dispatch) /* seqs name the shard: RESULTs are told apart per loaderd */
        dispatch_set_seq_base(self->dispatch,
                              ((uint64_t)o->shard_index << DDP_SEQ_SHARD_SHIFT) + 1);
    self->router = zs_bind(ZMQ_ROUTER, o->bind, "worker");
    self->reducer = zs_connect(ZMQ_DEALER, o->reducer, "reducer", NULL);
    return self->pool && self->dispatch && self->router && self->reducer ? 0 : -1;
}

loader_t *loader_new(const loader_options_t *options)
{
    loader_t *self = calloc(1, sizeof *self);
    if (!self) {
        log_error("out of memory");
        return NULL;
    }
    self->options = *options;
    self->transform = (transform_t){.resize = (int)options->resize,
                                    .crop_h = options->crop_h,
                                    .crop_w = options->crop_w,
                                    .channels = (int)options->channels,
                                    .dct_scaling = !options->no_dct_scaling};
    if (prepare(self) < 0)
        loader_destroy(&self);
    return self;
}

void loader_destroy(loader_t **self_p)
{
    loader_t *self = self_p ? *self_p : NULL;
    if (!self)
        return;
    for (int i = 0; i < self->n_held; i++) {
        free(self->held_credits[i].acks);
        zframe_destroy(&self->held_routes[i]);
    }
    free(self->held_credits);
    free(self->held_routes);
    for (int i = 0; i < self->n_ready; i++)
        ready_batch_clear(&self->ready[i]);
    if (self->sent_samples)
        log_info("sent %llu samples in %llu bytes of batch data (%.0f bytes per sample, %s)",
                 (unsigned long long)self->sent_samples, (unsigned long long)self->sent_bytes,
                 (double)self->sent_bytes / (double)self->sent_samples,
                 self->wire_encoded ? "--wire jpeg" : "uint8 pixels");
    step_window_destroy(&self->window);
    if (self->cache) {
        sample_cache_stats_t s = sample_cache_stats(self->cache);
        log_info("--cache: %llu hits, %llu misses; %llu samples, %.1f of %.1f MiB kept",
                 (unsigned long long)s.hits, (unsigned long long)s.misses,
                 (unsigned long long)s.entries, s.bytes / 1048576.0, s.budget / 1048576.0);
    }
    sample_cache_destroy(&self->cache);
    sampler_destroy(&self->sampler);
    dispatch_destroy(&self->dispatch);
    zsock_destroy(&self->router);
    zsock_destroy(&self->reducer);
    pool_destroy(&self->pool);
    dataset_destroy(&self->val_set);
    dataset_destroy(&self->dataset);
    free(self);
    *self_p = NULL;
}

uint64_t loader_shard_size(const loader_t *self, uint64_t n)
{
    uint64_t i = self->options.shard_index, k = self->options.shard_count;
    return k <= 1 ? n : n > i ? (n - i + k - 1) / k : 0;
}

uint64_t loader_shard_id(const loader_t *self, uint64_t pos)
{
    uint64_t k = self->options.shard_count;
    return k <= 1 ? pos : pos * k + self->options.shard_index;
}

int loader_read_file(const dataset_t *ds, uint64_t id, uint8_t **buf, size_t *len, char *reason,
                     size_t cap)
{
    char path[4096];
    int n = snprintf(path, sizeof path, "%s/%s", dataset_root(ds), dataset_path(ds, id));
    if (n < 0 || (size_t)n >= sizeof path) {
        snprintf(reason, cap, "path too long");
        return 0;
    }
    if (decode_read_file(path, buf, len, reason, cap) != 0)
        return 0;
    if (*len == 0) {
        snprintf(reason, cap, "empty file");
        return 0;
    }
    return 1;
}

void ready_batch_clear(ready_batch_t *ready)
{
    free(ready->batch.ids);
    free(ready->batch.labels);
    free(ready->batch.sizes);
    zframe_destroy(&ready->batch.pixels);
    memset(ready, 0, sizeof *ready);
}
