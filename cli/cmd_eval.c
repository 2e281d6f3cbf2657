/* ddpipe eval — run a whole evaluation job on this machine: reducerd,
 * reporterd, loaderd and W gpud processes (the same binaries compose files
 * start), a progress line, the final metrics, and nothing left behind. */
#include "cli/argv.h"
#include "cli/commands.h"
#include "cli/daemon_defaults.h"
#include "cli/job.h"
#include "common/clock.h"
#include "common/flags.h"
#include "common/json.h"
#include "reducerd/options.h"
#include "reporterd/options.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    const char *data, *model, *weights, *out, *device;
    const char *channels, *mean, *std, *normalize, *crop, *fault, *metrics_http, *tap;
    long workers, batch_size, threads, loader_threads, resize, in_channels, num_classes, limit;
    long timeout_s, max_time_s, worker_timeout_s, window;
    int predictions, no_dct, verbose, quiet, overwrite;
} eval_opts_t;

static void eval_usage(FILE *f)
{
    fprintf(f,
        "usage: ddpipe eval --data PATH --model ARCH --weights FILE --out DIR [options]\n"
        "  --data PATH           ImageFolder directory or idx:PREFIX (MNIST/Fashion-MNIST IDX)\n"
        "  --model ARCH          resnet18 | wideresnet\n"
        "  --weights FILE        safetensors with PyTorch state_dict names\n"
        "  --out DIR             run directory (summary.json, CSVs, report, plots, logs/)\n"
        "  --overwrite           remove a previous run's outputs from --out first (else refused)\n"
        "  --tap ENDPOINT        publish the live event tap there (default: the job's private\n"
        "                        ipc folder)\n"
        "  --curve-dir DIR       CURVE on every tcp:// socket of the job ('ddpipe keygen DIR';\n"
        "                        default $DDPIPE_CURVE_DIR), passed on to every daemon\n"
        "  --insecure            allow a non-loopback tcp:// listen without CURVE (warned)\n"
        "  --workers N           gpud processes (default 1)\n"
        "  --batch-size N        samples per batch, per worker as in DDP (default 64)\n"
        "  --device cpu          compute backend (default cpu)\n"
        "  --threads N           compute threads per worker (default: cores / workers)\n"
        "  --loader-threads N    JPEG decode threads (default: cores)\n"
        "  --predictions         write predictions.csv (one row per sample)\n"
        "  --resize N --crop N   eval transform (default: the model's; resnet18 256/224)\n"
        "  --mean a,b,c --std a,b,c | --normalize none|imagenet\n"
        "  --channels a,b,c,d    WideResNet widths (default 16,160,320,640)\n"
        "  --in-channels N --num-classes N\n"
        "  --limit N             evaluate only the first N samples\n"
        "  --no-dct-scaling      full-size JPEG decode before resize (bit-exact PIL path)\n"
        "  --timeout S           fail the job when no sample is accounted for in S seconds,\n"
        "                        naming what is missing; heartbeats do not count (default 600,\n"
        "                        0 off)\n"
        "  --max-time S          stop the job after S seconds of wall time (default: none)\n"
        "  --metrics-http H:P    Prometheus metrics at http://H:P/metrics while the job runs\n"
        "  --worker-timeout S    declare a silent worker dead after S seconds (default 10)\n"
        "  --quiet | --verbose\n");
}

static int eval_parse(int argc, char **argv, eval_opts_t *o)
{
    static struct option lo[] = {
        {"data", 1, 0, 'D'}, {"model", 1, 0, 'm'}, {"weights", 1, 0, 'W'}, {"out", 1, 0, 'o'},
        {"workers", 1, 0, 'w'}, {"batch-size", 1, 0, 'B'}, {"device", 1, 0, 'd'},
        {"threads", 1, 0, 'T'}, {"loader-threads", 1, 0, 'L'}, {"predictions", 0, 0, 'P'},
        {"resize", 1, 0, 'R'}, {"crop", 1, 0, 'C'}, {"mean", 1, 0, 'M'}, {"std", 1, 0, 'S'},
        {"normalize", 1, 0, 'N'}, {"channels", 1, 0, 'c'}, {"in-channels", 1, 0, 'i'},
        {"num-classes", 1, 0, 'n'}, {"limit", 1, 0, 'l'}, {"no-dct-scaling", 0, 0, 'x'},
        {"timeout", 1, 0, 't'}, {"max-time", 1, 0, 'X'}, {"worker-timeout", 1, 0, 'k'}, {"window", 1, 0, 'u'},
        {"fault", 1, 0, 'F'}, {"metrics-http", 1, 0, 'H'}, {"overwrite", 0, 0, 'O'}, {"tap", 1, 0, 'a'}, {"quiet", 0, 0, 'q'}, {"verbose", 0, 0, 'v'}, {"help", 0, 0, 'h'},
        {0, 0, 0, 0}};
    *o = (eval_opts_t){.workers = 1, .batch_size = 64, .device = "cpu", .limit = -1,
                       .timeout_s = 600, .worker_timeout_s = 10, .window = 2};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        int rc = 0;
        switch (c) {
        case 'D': o->data = optarg; break;
        case 'm': o->model = optarg; break;
        case 'W': o->weights = optarg; break;
        case 'o': o->out = optarg; break;
        case 'd': o->device = optarg; break;
        case 'C': o->crop = optarg; break;
        case 'M': o->mean = optarg; break;
        case 'S': o->std = optarg; break;
        case 'N': o->normalize = optarg; break;
        case 'c': o->channels = optarg; break;
        case 'F': o->fault = optarg; break;
        case 'H': o->metrics_http = optarg; break;
        case 'P': o->predictions = 1; break;
        case 'O': o->overwrite = 1; break;
        case 'a': o->tap = optarg; break;
        case 'x': o->no_dct = 1; break;
        case 'q': o->quiet = 1; break;
        case 'v': o->verbose = 1; break;
        case 'w': rc = flags_long("workers", optarg, 1, 1024, &o->workers); break;
        case 'B': rc = flags_long("batch-size", optarg, 1, 65536, &o->batch_size); break;
        case 'T': rc = flags_long("threads", optarg, 1, 1024, &o->threads); break;
        case 'L': rc = flags_long("loader-threads", optarg, 1, 1024, &o->loader_threads); break;
        case 'R': rc = flags_long("resize", optarg, 1, 16384, &o->resize); break;
        case 'i': rc = flags_long("in-channels", optarg, 1, 3, &o->in_channels); break;
        case 'n': rc = flags_long("num-classes", optarg, 1, 100000, &o->num_classes); break;
        case 'l': rc = flags_long("limit", optarg, 0, 1L << 40, &o->limit); break;
        case 't': rc = flags_long("timeout", optarg, 0, 86400 * 30, &o->timeout_s); break;
        case 'X': rc = flags_long("max-time", optarg, 1, 86400 * 365, &o->max_time_s); break;
        case 'k': rc = flags_long("worker-timeout", optarg, 1, 86400, &o->worker_timeout_s); break;
        case 'u': rc = flags_long("window", optarg, 1, 64, &o->window); break;
        case 'h': eval_usage(stdout); exit(0);
        default: eval_usage(stderr); return -1;
        }
        if (rc < 0)
            return -1;
    }
    if (!o->data || !o->model || !o->weights || !o->out) {
        fprintf(stderr, "ddpipe eval: --data, --model, --weights and --out are required\n");
        eval_usage(stderr);
        return -1;
    }
    if (strcmp(o->model, "resnet18") != 0 && strcmp(o->model, "wideresnet") != 0) {
        fprintf(stderr, "ddpipe eval: --model %s is not known; choose resnet18 or wideresnet\n", o->model);
        return -1;
    }
    if (strcmp(o->device, "cpu") != 0) {
        fprintf(stderr, "ddpipe eval: --device %s: this build has only the cpu backend\n", o->device);
        return -1;
    }
    if (access(o->weights, R_OK) != 0) {
        fprintf(stderr, "ddpipe eval: --weights %s: %s\n", o->weights, strerror(errno));
        return -1;
    }
    dd_default_threads(o->workers, &o->threads, &o->loader_threads);
    return 0;
}

/* reducerd: the exact tally of this eval. */
static int start_reducerd(job_t *j, const eval_opts_t *o)
{
    const job_endpoints_t *e = job_endpoints(j);
    reducer_options_t r;
    if (options_defaults(&reducer_options_table, &r) < 0)
        return -1;
    r.bind = e->reducer;
    r.pub = e->pub;
    r.workers = o->workers;
    r.worker_timeout_s = o->worker_timeout_s;
    r.stall_timeout_s = o->timeout_s;
    r.predictions = o->predictions;
    r.verbose = o->verbose;
    argv_t a;
    argv_init(&a, "reducerd");
    if (argv_add_options(&a, &reducer_options_table, &r) < 0) {
        argv_free(&a);
        return -1;
    }
    return job_spawn(j, "reducerd", "reducerd", &a);
}

/* reporterd: the run directory, the tap and /metrics. */
static int start_reporterd(job_t *j, const eval_opts_t *o)
{
    const job_endpoints_t *e = job_endpoints(j);
    reporter_options_t r;
    if (options_defaults(&reporter_options_table, &r) < 0)
        return -1;
    r.sub = e->pub;
    r.reducer = e->reducer;
    r.out = o->out;
    r.tap = e->tap;
    r.metrics_http = o->metrics_http;
    argv_t a;
    argv_init(&a, "reporterd");
    if (argv_add_options(&a, &reporter_options_table, &r) < 0) {
        argv_free(&a);
        return -1;
    }
    return job_spawn(j, "reporterd", "reporterd", &a);
}

static int start_daemons(job_t *j, const eval_opts_t *o)
{
    const job_endpoints_t *e = job_endpoints(j);
    if (start_reducerd(j, o) < 0 || start_reporterd(j, o) < 0)
        return -1;
    argv_t a;
    argv_init(&a, "loaderd");
    argv_add(&a, "--data", o->data);
    argv_add(&a, "--bind", e->loader);
    argv_add(&a, "--reducer", e->reducer);
    argv_addf(&a, "--batch-size", "%ld", o->batch_size);
    argv_addf(&a, "--threads", "%ld", o->loader_threads);
    argv_addf(&a, "--worker-timeout", "%ld", o->worker_timeout_s);
    argv_addf(&a, "--prefetch", "%ld", dd_prefetch(o->workers, o->window));
    dd_add_transform(&a, o->model, o->in_channels, o->resize, o->crop);
    if (o->no_dct)
        argv_add(&a, "--no-dct-scaling", NULL);
    if (o->limit >= 0)
        argv_addf(&a, "--limit", "%ld", o->limit);
    if (o->predictions)
        argv_add(&a, "--predictions", NULL);
    if (o->verbose)
        argv_add(&a, "--verbose", NULL);
    if (job_spawn(j, "loaderd", "loaderd", &a) < 0)
        return -1;

    for (long r = 0; r < o->workers; r++) {
        argv_init(&a, "gpud");
        argv_add(&a, "--loader", e->loader);
        argv_add(&a, "--reducer", e->reducer);
        argv_add(&a, "--model", o->model);
        argv_add(&a, "--weights", o->weights);
        argv_add(&a, "--backend", o->device);
        argv_addf(&a, "--threads", "%ld", o->threads);
        argv_addf(&a, "--rank", "%ld", r);
        argv_addf(&a, "--window", "%ld", o->window);
        argv_addf(&a, "--in-channels", "%ld", dd_in_channels(o->model, o->in_channels));
        if (o->channels)
            argv_add(&a, "--channels", o->channels);
        if (o->num_classes)
            argv_addf(&a, "--num-classes", "%ld", o->num_classes);
        if (o->mean)
            argv_add(&a, "--mean", o->mean);
        if (o->std)
            argv_add(&a, "--std", o->std);
        if (o->normalize)
            argv_add(&a, "--normalize", o->normalize);
        long fr, fn;
        if (o->fault && sscanf(o->fault, "%ld:%ld", &fr, &fn) == 2 && fr == r)
            argv_addf(&a, "--fault-after", "%ld", fn);
        if (o->verbose)
            argv_add(&a, "--verbose", NULL);
        char name[32];
        snprintf(name, sizeof name, "gpud.%ld", r);
        if (job_spawn(j, name, "gpud", &a) < 0)
            return -1;
    }
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
                          "images_per_sec", "wall_seconds"};
    printf("ddpipe eval: %s\n", out);
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        json_t *value = json_object_get(summary, keys[i]);
        char *text = value ? json_to_text(value, JSON_STYLE_SPACED) : NULL;
        if (text)
            printf("  %-17s %s\n", keys[i], text);
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
    eval_opts_t o;
    if (eval_parse(argc, argv, &o) < 0)
        return 2;
    const char *keep[] = {o.weights};
    job_cfg_t cfg = {.cmd = "eval", .out = o.out, .timeout_s = o.max_time_s, .quiet = o.quiet,
                     .overwrite = o.overwrite, .keep = keep, .nkeep = 1, .tap = o.tap};
    job_t *j = job_new(&cfg);
    if (!j)
        return 1;
    double t0 = clock_mono_s();
    int rc = start_daemons(j, &o) < 0 ? 1 : job_supervise(j);
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
