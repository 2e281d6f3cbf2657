/* ddpipe train — run a whole data-parallel training job on this machine:
 * reducerd (coordinator, exact tallies, early stop), reporterd (run
 * directory), loaderd (sharded, augmented global steps) and W gpud ranks
 * joined by a ring all-reduce (docs/TRAINING.md). One line per epoch, a
 * final summary, non-zero with the coordinator's reason on failure, a
 * checkpoint on Ctrl-C, and nothing left behind. */
#include "cli/commands.h"
#include "cli/child_defaults.h"
#include "cli/children.h"
#include "cli/job.h"
#include "cli/launcher.h"
#include "cli/slurm.h"
#include "cli/train_options.h"
#include "common/clock.h"
#include "proto/event.h"
#include "proto/messages.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* What the per-epoch lines and the final summary need, from the tap. */
typedef struct {
    const train_options_t *o;
    double t0;
    long printed;               /* epochs with a line printed */
    long last_epoch;            /* last epoch reported, -1 none */
    long train_epoch;           /* epoch of the last train row */
    bool have_train;
    double train_loss, train_top1, val_loss, val_top1, val_top5, lr, img_s;
    bool have_val;
    double rank_img_s[64];      /* per-rank compute images/s of the last train row */
    uint32_t nranks;
    long streak;                /* reducerd's early-stop streak after the last epoch */
} train_view_t;

static double ratio(uint64_t a, uint64_t b) { return b ? (double)a / (double)b : 0; }

static void path_in_out(const train_options_t *o, const char *name, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s", o->out, name);
}

/* reducerd: the coordinator (epochs, early stop) and the exact tallies. */
static int start_reducerd(job_t *j, const train_options_t *o)
{
    reducer_options_t r;
    if (children_reducer(j, &r, o->workers, o->worker_timeout_s, o->timeout_s, o->verbose) < 0)
        return -1;
    r.train = 1;
    r.epochs = o->epochs;
    r.target_accuracy = o->target_accuracy;
    r.patience = o->patience;
    r.resume_dir = o->out;
    r.no_val = !o->val;
    r.min_workers = o->min_workers;
    r.max_workers = o->max_workers;
    r.rejoin_timeout_s = o->rejoin_timeout_s;
    r.pause_at_step = o->pause_at_step;
    if (o->resuming) {
        r.start_epoch = o->resume.epoch;
        r.streak = o->resume.streak;
        r.start_step = o->resume.step;
    }
    return children_spawn(j, "reducerd", "reducerd", &reducer_options_table, &r);
}

/* reporterd: the run directory, the seed course's CSV, the tap, /metrics. */
static int start_reporterd(job_t *j, const train_options_t *o)
{
    char csv[256];
    train_seed_csv_name(o, csv, sizeof csv);
    reporter_options_t r;
    if (children_reporter(j, &r, o->out, o->metrics_http) < 0)
        return -1;
    r.seed_csv = csv;
    r.tensorboard = o->tensorboard;
    if (o->resuming) /* its metrics.csv rows of the epochs before E stay */
        r.start_epoch = o->resume.epoch;
    return children_spawn(j, "reporterd", "reporterd", &reporter_options_table, &r);
}

/* loaderd (shard I of --loaders): the global steps sharded over the ranks,
 * then validation. */
static int start_loaderd(job_t *j, const train_options_t *o, long shard)
{
    loader_options_t l;
    long threads = o->loader_threads / o->loaders; /* this host's cores, shared out */
    if (children_loader(j, &l, o->data, threads > 0 ? threads : 1, o->worker_timeout_s,
                        dd_prefetch(o->workers, o->window), o->verbose) < 0)
        return -1;
    char bind[600], spec[32], name[32];
    if (job_loader_endpoint(j, shard, bind, sizeof bind) < 0)
        return -1;
    l.bind = bind;
    snprintf(spec, sizeof spec, "%ld/%ld", shard, o->loaders);
    l.shard = o->loaders > 1 ? spec : NULL;
    l.train = 1;
    l.classes = o->classes;
    l.outputs = o->classes ? o->outputs : 0;
    l.val = o->val;
    l.workers = o->workers;
    l.global_batch = o->global_batch;
    l.chunk = o->chunk;
    l.batch_size = o->val_batch;
    l.epochs = o->epochs;
    l.seed = o->seed;
    dd_loader_transform(&l, o->model, o->in_channels, o->resize, o->crop);
    l.augment = o->augment;
    l.rotate = o->rotate;
    l.cache = o->cache;
    l.cache_size_mb = o->cache_size_mb;
    l.wire = strcmp(o->wire, "uint8") != 0 ? o->wire : NULL; /* the default stays off argv */
    if (o->limit)
        l.limit = o->limit;
    l.val_limit = o->val_limit;
    if (o->resuming) {
        l.start_epoch = o->resume.epoch;
        l.start_step = o->resume.start_step;
    }
    if (o->loaders > 1)
        snprintf(name, sizeof name, "loaderd.%ld", shard);
    else
        snprintf(name, sizeof name, "loaderd");
    return children_spawn(j, name, "loaderd", &loader_options_table, &l);
}

/* A single --freeze/--freeze-bn PREFIX as gpud's repeatable option. */
static option_strings_t one_prefix(const char *prefix)
{
    option_strings_t list = {0};
    if (prefix)
        list.v[list.n++] = prefix;
    return list;
}

/* The model, its input and what trains. */
static void fill_model(gpud_options_t *g, const train_options_t *o)
{
    g->model = o->model;
    g->weights = o->weights;
    g->in_channels = dd_in_channels(o->model, o->in_channels);
    g->channels = o->channels;
    g->num_classes = o->num_classes;
    g->mean = o->mean;
    g->std = o->std;
    g->normalize = o->normalize;
    g->precision = o->precision;
    g->freeze = one_prefix(o->freeze);
    g->freeze_bn = one_prefix(o->freeze_bn);
    g->sync_bn = o->sync_bn;
    g->chunk = o->chunk;
    /* --wire jpeg: files decode on the compute threads, before each step */
    g->decode_threads = o->decode_threads ? o->decode_threads : o->threads;
    g->decode = o->decode;
}

/* Optimizer and schedule: only what applies to the chosen optimizer, so a
 * flag the daemon would reject for it is never sent by default. */
static void fill_optimizer(gpud_options_t *g, const train_options_t *o)
{
    bool sgd = strcmp(o->optimizer, "sgd") == 0;
    g->optimizer = o->optimizer;
    g->lr = o->lr;
    if (sgd || o->set_momentum)
        g->momentum = o->momentum;
    g->weight_decay = o->weight_decay;
    g->nesterov = o->nesterov;
    if (o->set_dampening)
        g->dampening = o->dampening;
    g->betas = o->betas;
    g->eps = o->eps;
    g->grad_averaging = o->grad_averaging;
    g->lr_schedule = o->lr_schedule;
    g->step_size = o->step_size;
    if (o->set_gamma)
        g->gamma = o->gamma;
    g->t_max = o->t_max;
    if (o->set_eta_min)
        g->eta_min = o->eta_min;
    g->warmup_epochs = o->warmup_epochs;
    if (o->set_warmup_sf)
        g->warmup_start_factor = o->warmup_start_factor;
    g->label_smoothing = o->label_smoothing;
    g->loss_scale = o->loss_scale;
    g->loss_scale_growth = o->loss_scale_growth;
}

/* The settings every rank of the job shares; checkpoint and weights are
 * buffers of 1100 that must outlive g. */
static int fill_rank(job_t *j, const train_options_t *o, long rank, gpud_options_t *g,
                     char *checkpoint, char *weights)
{
    if (children_gpud(j, g, o->device, o->threads, rank, o->window, o->verbose) < 0)
        return -1;
    g->train = 1;
    g->seed = o->seed;
    g->global_batch = o->global_batch;
    fill_model(g, o);
    fill_optimizer(g, o);
    path_in_out(o, "checkpoint.safetensors", checkpoint, 1100);
    path_in_out(o, "model.safetensors", weights, 1100);
    g->checkpoint = checkpoint;
    g->checkpoint_every = o->checkpoint_every;
    g->save_weights = weights;
    if (o->resuming)
        g->resume = o->resume.file;
    g->ring_timeout_s = o->ring_timeout_s;
    /* reducerd answers a step after a lost rank once heartbeats declare it dead */
    g->commit_timeout_s = o->ring_timeout_s + o->worker_timeout_s;
    return 0;
}

/* --launcher slurm: the W ranks as one srun step (each task's rank, name
 * and ring on its node come from the task: cli/slurm.h). */
static int start_slurm_ranks(job_t *j, const train_options_t *o, const slurm_t *slurm)
{
    gpud_options_t g;
    char checkpoint[1100], weights[1100];
    if (fill_rank(j, o, -1, &g, checkpoint, weights) < 0)
        return -1;
    return slurm_spawn_gpuds(j, slurm, o->workers, &g);
}

/* gpud rank `rank`: one data-parallel rank with its own ring endpoint. */
static int start_gpud(job_t *j, const train_options_t *o, long rank, const char *loaders)
{
    gpud_options_t g;
    char checkpoint[1100], weights[1100], ring[700], name[32];
    if (fill_rank(j, o, rank, &g, checkpoint, weights) < 0)
        return -1;
    g.loader = loaders;
    snprintf(name, sizeof name, "ring-%ld", rank);
    if (job_ipc(j, name, ring, sizeof ring) < 0)
        return -1;
    g.ring_bind = ring;
    long fault_step;
    if (o->fault && train_fault_step(o->fault, rank, o->workers, &fault_step) == 0)
        g.fault_at_step = fault_step;
    g.fault_in_checkpoint = o->fault_in_checkpoint == rank;
    long hold;
    if (o->fault_hold_epoch && train_fault_step(o->fault_hold_epoch, rank, o->workers, &hold) == 0)
        g.fault_hold_epoch = hold;
    snprintf(name, sizeof name, "gpud.%ld", rank);
    return children_spawn(j, name, "gpud", &gpud_options_table, &g);
}

static int start_daemons(job_t *j, const train_options_t *o, const slurm_t *slurm)
{
    if (start_reducerd(j, o) < 0 || start_reporterd(j, o) < 0)
        return -1;
    /* every gpud connects to every loaderd: "EP0,EP1,..." */
    char loaders[256 * 128] = "";
    size_t off = 0;
    for (long i = 0; i < o->loaders; i++) {
        char ep[600];
        if (start_loaderd(j, o, i) < 0 || job_loader_endpoint(j, i, ep, sizeof ep) < 0)
            return -1;
        int w = snprintf(loaders + off, sizeof loaders - off, "%s%s", i ? "," : "", ep);
        if (w < 0 || (size_t)w >= sizeof loaders - off) {
            fprintf(stderr, "ddpipe train: the loaderd endpoints do not fit gpud's --loader\n");
            return -1;
        }
        off += (size_t)w;
    }
    if (slurm)
        return start_slurm_ranks(j, o, slurm);
    for (long r = 0; r < o->workers; r++)
        if (start_gpud(j, o, r, loaders) < 0)
            return -1;
    return 0;
}

/* "epoch 3/10  train loss 0.4123 top-1 0.8512  val top-1 0.8650  lr 0.1  812 img/s  ETA 1:23" */
static void print_epoch(train_view_t *v, bool tty)
{
    const train_options_t *o = v->o;
    v->printed++;
    if (o->quiet)
        return;
    double per_epoch = (clock_mono_s() - v->t0) / (double)v->printed;
    char eta[32], val[128] = "";
    job_fmt_eta(per_epoch * (double)(o->epochs - v->last_epoch - 1), eta, sizeof eta);
    if (v->have_val)
        snprintf(val, sizeof val, "  val loss %.4f top-1 %.4f", v->val_loss, v->val_top1);
    if (v->have_val && o->target_accuracy > 0)
        snprintf(val + strlen(val), sizeof val - strlen(val), " (streak %ld/%ld)", v->streak, o->patience);
    fprintf(stderr, "%sepoch %ld/%ld  train loss %.4f top-1 %.4f%s  lr %.6g  %.1f img/s  %.1fs  ETA %s\n",
            tty ? "\r\033[K" : "", v->last_epoch + 1, o->epochs, v->train_loss, v->train_top1, val,
            v->lr, v->img_s, per_epoch, eta);
    if (o->verbose && v->nranks) {
        fprintf(stderr, "  compute img/s per rank:");
        for (uint32_t r = 0; r < v->nranks; r++)
            fprintf(stderr, "%s rank %u %.1f", r ? "," : "", r, v->rank_img_s[r]);
        fputc('\n', stderr);
    }
    fflush(stderr);
}

/* Metric events: a train row then (with --val) a val row per epoch; the
 * line goes out when the epoch's last row is in. Final repeats are ignored. */
static void on_metric(train_view_t *v, const ev_metric_t *m, bool tty)
{
    if (m->has_decision) /* the reason comes as a log event too (--verbose) */
        v->streak = m->streak;
    if ((long)m->epoch <= v->last_epoch)
        return;
    if (m->phase == DDP_PHASE_TRAIN && m->samples == 0)
        return;   /* a job stopped before its first step (a non-finite one) */
    if (m->phase == DDP_PHASE_TRAIN) {
        v->train_loss = m->samples ? m->loss_sum / (double)m->samples : 0;
        v->train_top1 = ratio(m->correct_top1, m->samples);
        v->lr = m->lr;
        v->img_s = m->images_per_sec;
        v->have_train = true;
        v->train_epoch = m->epoch;
        v->nranks = m->nranks < 64 ? m->nranks : 64;
        for (uint32_t r = 0; r < v->nranks; r++)
            v->rank_img_s[r] = m->rank_images_per_sec[r];
        if (v->o->val)
            return;
    } else {
        if (!v->have_train || v->train_epoch != (long)m->epoch)
            return;
        v->val_loss = m->samples ? m->loss_sum / (double)m->samples : 0;
        v->val_top1 = ratio(m->correct_top1, m->samples);
        v->val_top5 = ratio(m->correct_top5, m->samples);
        v->have_val = true;
    }
    v->last_epoch = m->epoch;
    print_epoch(v, tty);
}

static void on_event(void *arg, const ddp_event_t *ev, bool tty)
{
    train_view_t *v = arg;
    if (ev->topic == EV_METRIC)
        on_metric(v, &ev->u.metric, tty);
    else if (ev->topic == EV_LOG && v->o->verbose)
        fprintf(stderr, "%s%s: %s\n", tty ? "\r\033[K" : "", ev->u.log.daemon, ev->u.log.msg);
}

static bool file_exists(const char *path) { return access(path, F_OK) == 0; }

/* --resume DIR --out DIR: the run goes on in its own directory, so its
 * files stay (cli/outdir.h is not asked). */
static bool resumes_in_place(const train_options_t *o)
{
    char a[PATH_MAX], b[PATH_MAX];
    return o->resuming && realpath(o->resume_dir, a) && realpath(o->out, b) && strcmp(a, b) == 0;
}

/* The last line: how the run ended and where the weights are. */
static int print_final(const train_view_t *v)
{
    const train_options_t *o = v->o;
    char weights[1100];
    path_in_out(o, "model.safetensors", weights, sizeof weights);
    if (!file_exists(weights)) {
        fprintf(stderr, "ddpipe train: the job ended but %s is missing (rank 0 writes it; see %s/logs/gpud.0.log)\n",
                weights, o->out);
        return 1;
    }
    long done = v->last_epoch + 1;
    char how[256];
    if (v->printed == 0)
        snprintf(how, sizeof how, "finished");
    else if (done < o->epochs) /* reducerd's reason counts epochs from 0; these lines from 1 */
        snprintf(how, sizeof how, "stopped early after epoch %ld of %ld: val top-1 >= %g for %ld epoch%s "
                 "in a row (--patience %ld)", done, o->epochs, o->target_accuracy, v->streak,
                 v->streak == 1 ? "" : "s", o->patience);
    else
        snprintf(how, sizeof how, "completed %ld epoch%s", done, done == 1 ? "" : "s");
    printf("ddpipe train: %s: %s", o->out, how);
    if (v->have_train)
        printf("; train loss %.4f top-1 %.4f", v->train_loss, v->train_top1);
    if (v->have_val)
        printf("; val loss %.4f top-1 %.4f top-5 %.4f", v->val_loss, v->val_top1, v->val_top5);
    printf("; %.1fs; weights %s\n", clock_mono_s() - v->t0, weights);
    return 0;
}

/* Training ranks hold state worth keeping. When reducerd failed the job it
 * told the ranks to stop and rank 0 is writing its checkpoint: give them
 * time. Otherwise (signal, --timeout, a daemon crash) SIGTERM the ranks
 * before the rest, so rank 0 still has a coordinator while it checkpoints. */
static void shut_down(job_t *j, int rc)
{
    if (rc == 0) {
        if (!job_wait(j, NULL, 60000))
            fprintf(stderr, "ddpipe: some daemons did not exit after the job; stopping them\n");
    } else {
        if (job_fail_reason(j)[0])
            job_wait(j, "gpud", 10000);
        job_stop(j, "gpud", 30000);
    }
    job_stop(j, NULL, 3000);
}

static void print_failure(const train_options_t *o, job_t *j, int rc)
{
    char ckpt[1100];
    path_in_out(o, "checkpoint.safetensors", ckpt, sizeof ckpt);
    if (rc == 130)
        fprintf(stderr, "ddpipe train: interrupted by signal %d\n", job_signal(j));
    else if (job_fail_reason(j)[0])
        fprintf(stderr, "ddpipe train failed: %s\n", job_fail_reason(j));
    else
        fprintf(stderr, "ddpipe train failed; daemon logs are in %s/logs\n", o->out);
    if (file_exists(ckpt))
        fprintf(stderr, "ddpipe train: checkpoint %s; continue with --resume %s\n", ckpt, o->out);
}

int cmd_train(int argc, char **argv)
{
    train_options_t o;
    int prc = train_options_parse(argc, argv, &o);
    if (prc != 0)
        return prc > 0 ? 0 : 2;
    if (strcmp(o.device, "cuda") != 0)   /* the note is about this CPU */
        gpud_precision_note(o.precision, stderr);
    train_view_t v = {.o = &o, .t0 = clock_mono_s(), .last_epoch = -1};
    if (o.resuming) {
        v.last_epoch = o.resume.epoch - 1;
        if (!o.quiet && o.resume.steps_per_epoch == 0) /* train_resume_read: first epoch */
            fprintf(stderr, "ddpipe train: resuming from %s: epoch 1, %ld step%s done\n",
                    o.resume.file, o.resume.start_step, o.resume.start_step == 1 ? "" : "s");
        else if (!o.quiet)
            fprintf(stderr, "ddpipe train: resuming from %s: epoch %ld, %ld of its %ld step%s done "
                    "(%ld optimizer step%s in all)\n", o.resume.file, o.resume.epoch + 1,
                    o.resume.start_step, o.resume.steps_per_epoch,
                    o.resume.steps_per_epoch == 1 ? "" : "s", o.resume.step,
                    o.resume.step == 1 ? "" : "s");
    }
    const char *keep[] = {o.weights, o.resuming ? o.resume.file : NULL};
    job_cfg_t cfg = {.cmd = "train", .out = o.out, .timeout_s = o.max_time_s, .quiet = o.quiet,
                     .train = true, .verdict_s = o.worker_timeout_s + 15,
                     .min_workers = o.min_workers,
                     .rejoin_timeout_s = o.rejoin_timeout_s, .on_event = on_event,
                     .arg = &v, .overwrite = o.overwrite, .resume = resumes_in_place(&o),
                     .keep = keep, .nkeep = 2, .tap = o.tap, .workers = o.workers};
    slurm_t slurm;
    slurm_request_t req = {"train", o.launcher, o.host, o.port, o.workers, o.start_timeout_s,
                           o.loaders};
    int src = slurm_configure(&slurm, &cfg, &req);
    if (src != 0)
        return src;
    job_t *j = job_new(&cfg);
    if (!j)
        return 1;
    int rc = start_daemons(j, &o, cfg.step ? &slurm : NULL) < 0 ? 1 : job_supervise(j);
    shut_down(j, rc);
    if (rc == 0)
        rc = print_final(&v);
    else
        print_failure(&o, j, rc);
    job_destroy(&j);
    return rc;
}
