/* ddpipe eval — run a whole evaluation job on this machine: reducerd,
 * reporterd, loaderd and W gpud processes (the same binaries compose files
 * start), a progress line, the final metrics, and nothing left behind. */
#include "cli/commands.h"
#include "cli/child_defaults.h"
#include "cli/children.h"
#include "cli/eval_options.h"
#include "cli/job.h"
#include "cli/launcher.h"
#include "cli/slurm.h"
#include "common/clock.h"
#include "common/json.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* reducerd's --probs for --predictions: probs keeps the top-k's
 * probabilities, all every class's; NULL: no probabilities at all. */
static const char *eval_probs_mode(const eval_options_t *o)
{
    if (!o->predictions || strcmp(o->predictions, "topk") == 0)
        return NULL;
    return strcmp(o->predictions, "all") == 0 ? "all" : "topk";
}

static int fill_gpud(job_t *j, const eval_options_t *o, long rank, gpud_options_t *g);

/* reducerd: the exact tally of this eval; it knows the model its gpuds
 * prove in JOIN, so no other process can fix another by joining first. */
static int start_reducerd(job_t *j, const eval_options_t *o)
{
    reducer_options_t r;
    gpud_options_t g;
    char model[DDP_MAX_STR], err[512];
    if (children_reducer(j, &r, o->workers, o->worker_timeout_s, o->timeout_s, o->verbose) < 0 ||
        fill_gpud(j, o, 0, &g) < 0)
        return -1;
    if (gpud_options_eval_identity(&g, model, sizeof model, err, sizeof err) < 0) {
        fprintf(stderr, "ddpipe eval: %s\n", err);
        return -1;
    }
    r.predictions = o->predictions != NULL;
    r.probs = eval_probs_mode(o);
    r.model_config = model;
    /* all --workers share the batches from the first: a gpud ready first
     * would otherwise take a short job's every batch before the others
     * joined (the summary's "workers" then says how many did) */
    r.start_workers = o->workers;
    return children_spawn(j, "reducerd", "reducerd", &reducer_options_table, &r);
}

/* reporterd: the run directory, the tap and /metrics. */
static int start_reporterd(job_t *j, const eval_options_t *o)
{
    reporter_options_t r;
    if (children_reporter(j, &r, o->out, o->metrics_http) < 0)
        return -1;
    r.tensorboard = o->tensorboard;
    return children_spawn(j, "reporterd", "reporterd", &reporter_options_table, &r);
}

/* loaderd (shard I of --loaders): the images, decoded and transformed, to
 * whichever gpud has credit. */
static int start_loaderd(job_t *j, const eval_options_t *o, long shard)
{
    loader_options_t l;
    /* the decode threads are shared out among the loaderds of this host */
    long threads = o->loader_threads / o->loaders;
    if (children_loader(j, &l, o->data, threads > 0 ? threads : 1, o->worker_timeout_s,
                        dd_prefetch(o->workers, o->window), o->verbose) < 0)
        return -1;
    char bind[600], spec[32], name[32];
    if (job_loader_endpoint(j, shard, bind, sizeof bind) < 0)
        return -1;
    l.bind = bind;
    snprintf(spec, sizeof spec, "%ld/%ld", shard, o->loaders);
    l.shard = o->loaders > 1 ? spec : NULL;
    l.batch_size = o->batch_size;
    dd_loader_transform(&l, o->model, o->in_channels, o->resize, o->crop);
    l.no_dct_scaling = o->no_dct;
    l.wire = strcmp(o->wire, "uint8") != 0 ? o->wire : NULL; /* the default stays off argv */
    l.limit = o->limit;
    l.predictions = o->predictions != NULL;
    l.classes = o->classes;
    l.outputs = o->classes ? o->outputs : 0;
    if (o->loaders > 1)
        snprintf(name, sizeof name, "loaderd.%ld", shard);
    else
        snprintf(name, sizeof name, "loaderd");
    return children_spawn(j, name, "loaderd", &loader_options_table, &l);
}

/* gpud's options of this job (rank's, for the local launcher). */
static int fill_gpud(job_t *j, const eval_options_t *o, long rank, gpud_options_t *g)
{
    if (children_gpud(j, g, o->device, o->threads, rank, o->window, o->verbose) < 0)
        return -1;
    g->model = o->model;
    g->weights = o->weights;
    g->in_channels = dd_in_channels(o->model, o->in_channels);
    g->channels = o->channels;
    g->num_classes = o->num_classes;
    g->mean = o->mean;
    g->std = o->std;
    g->normalize = o->normalize;
    g->precision = o->precision;
    g->probs = eval_probs_mode(o) != NULL;
    /* --wire jpeg: files decode on the compute threads, before each forward */
    g->decode_threads = o->decode_threads ? o->decode_threads : o->threads;
    g->decode = o->decode;
    return 0;
}

/* gpud rank r: the model on this rank's batches. */
static int start_gpud(job_t *j, const eval_options_t *o, long rank, const char *loaders)
{
    gpud_options_t g;
    if (fill_gpud(j, o, rank, &g) < 0)
        return -1;
    g.loader = loaders;
    long fault_rank, fault_batches;
    if (o->fault && sscanf(o->fault, "%ld:%ld", &fault_rank, &fault_batches) == 2 &&
        fault_rank == rank)
        g.fault_after = fault_batches;
    char name[32];
    snprintf(name, sizeof name, "gpud.%ld", rank);
    return children_spawn(j, name, "gpud", &gpud_options_table, &g);
}

static int start_daemons(job_t *j, const eval_options_t *o, const slurm_t *slurm)
{
    if (start_reducerd(j, o) < 0 || start_reporterd(j, o) < 0)
        return -1;
    /* every gpud connects to every loaderd: "EP0,EP1,..." */
    char loaders[EVAL_MAX_LOADERS * 128] = "";
    size_t off = 0;
    for (long i = 0; i < o->loaders; i++) {
        char ep[600];
        if (start_loaderd(j, o, i) < 0 || job_loader_endpoint(j, i, ep, sizeof ep) < 0)
            return -1;
        int w = snprintf(loaders + off, sizeof loaders - off, "%s%s", i ? "," : "", ep);
        if (w < 0 || (size_t)w >= sizeof loaders - off) {
            fprintf(stderr, "ddpipe eval: the loaderd endpoints do not fit gpud's --loader\n");
            return -1;
        }
        off += (size_t)w;
    }
    gpud_options_t g;
    if (slurm)   /* one srun step: a task per worker on the allocated nodes */
        return fill_gpud(j, o, -1, &g) < 0 ? -1 : slurm_spawn_gpuds(j, slurm, o->workers, &g);
    for (long rank = 0; rank < o->workers; rank++)
        if (start_gpud(j, o, rank, loaders) < 0)
            return -1;
    return 0;
}

/* Prints the headline numbers of summary.json, as the file spells them. */
static int print_summary(const char *out)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/summary.json", out);
    json_error_t error;
    json_t *summary = json_load_file(path, JSON_REJECT_DUPLICATES, &error);
    if (!summary) {
        fprintf(stderr, "ddpipe: the job ended but %s cannot be read: %s\n", path, error.text);
        return -1;
    }
    const char *keys[] = {"samples", "failed", "correct_top1", "correct_top5", "top1", "top5",
                          "loss", "nonfinite_loss", "rejected_messages", "macro_f1", "workers",
                          "images_per_sec", "wall_seconds", "first_result_seconds",
                          "steady_images_per_sec"};
    printf("ddpipe eval: %s\n", out);
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        json_t *value = json_object_get(summary, keys[i]);
        char *text = value ? json_to_text(value, JSON_STYLE_SPACED) : NULL;
        if (text)
            printf("  %-21s %s\n", keys[i], text);
        free(text);
    }
    json_int_t nonfinite = json_integer_value(json_object_get(summary, "nonfinite_loss"));
    if (nonfinite > 0)
        fprintf(stderr, "ddpipe: warning: %lld samples have a non-finite loss (NaN/inf logits): "
                "the model diverged or its weights hold NaN/inf; they are counted, the mean loss "
                "is null in summary.json\n", (long long)nonfinite);
    json_decref(summary);
    return 0;
}

int cmd_eval(int argc, char **argv)
{
    eval_options_t o;
    int rc = eval_options_parse(&o, argc, argv);
    if (rc != 0)
        return rc > 0 ? 0 : 2;
    if (strcmp(o.device, "cuda") != 0)   /* the note is about this CPU */
        gpud_precision_note(o.precision, stderr);
    /* Tuning chooses engines by each process's own timings: two workers
     * could run different engines and give one sample different bits, and
     * the job identity cannot see it (the plans file is written at the
     * end). One worker tunes; a job runs on the file it wrote. */
    const char *tune = getenv("DDPIPE_CUDNN_TUNE");
    if (tune && strcmp(tune, "1") == 0 && o.workers > 1) {
        fprintf(stderr, "ddpipe eval: DDPIPE_CUDNN_TUNE=1 with --workers %ld would let each "
                "worker pick its own cuDNN engines (predictions could differ by worker): tune "
                "with --workers 1 and DDPIPE_CUDNN_PLANS=FILE, then run this job with that "
                "DDPIPE_CUDNN_PLANS and without DDPIPE_CUDNN_TUNE (docs/CUDA.md \"Tuned "
                "engines\")\n", o.workers);
        return 2;
    }
    const char *keep[] = {o.weights};
    job_cfg_t cfg = {.cmd = "eval", .out = o.out, .timeout_s = o.max_time_s, .quiet = o.quiet,
                     .overwrite = o.overwrite, .keep = keep, .nkeep = 1, .tap = o.tap};
    slurm_t slurm;
    slurm_request_t req = {"eval", o.launcher, o.host, o.port, o.workers, o.start_timeout_s,
                           o.loaders};
    int src = slurm_configure(&slurm, &cfg, &req);
    if (src != 0)
        return src;
    job_t *j = job_new(&cfg);
    if (!j)
        return 1;
    double t0 = clock_mono_s();
    rc = start_daemons(j, &o, cfg.step ? &slurm : NULL) < 0 ? 1 : job_supervise(j);
    if (rc == 0 && !job_wait(j, NULL, 15000))
        fprintf(stderr, "ddpipe: some daemons did not exit after the job; stopping them\n");
    job_destroy(&j);
    if (rc == 0) {
        if (print_summary(o.out) < 0)
            rc = 1;
        else if (!o.quiet)
            printf("  (%.1fs in all; logs in %s/logs)\n", clock_mono_s() - t0, o.out);
    } else if (rc != 130) {
        fprintf(stderr, "ddpipe eval failed; daemon logs are in %s/logs\n", o.out);
    }
    return rc;
}
