/* The flags of `ddpipe eval`. */
#include "cli/eval_options.h"

#include "cli/child_defaults.h"
#include "cli/classes.h"
#include "cli/job_options.h"
#include "cli/launcher.h"
#include "reducerd/curves.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define T eval_options_t
static const option_t s_rows[] = {
    OPTION_STRING(T, data, "data", "PATH",
                  NULL, "ImageFolder directory or idx:PREFIX (MNIST/Fashion-MNIST IDX)"),
    OPTION_STRING(T, model, "model", "resnet18|resnet34|resnet50|densenet121|wideresnet", NULL,
                  "the architecture (ddpipe models lists them)"),
    OPTION_STRING(T, weights, "weights", "FILE", NULL,
                  "safetensors with PyTorch state_dict names"),
    OPTION_STRING(T, out, "out", "DIR", NULL,
                  "run directory (summary.json, CSVs, report, plots, logs/)"),
    OPTION_FLAG(T, overwrite, "overwrite",
                "remove a previous run's outputs from --out first (else refused)"),
    OPTION_LONG(T, batch_size, "batch-size", "N", 64, 1, 65536,
                "samples per batch, per worker as in DDP"),
    /* alone it means topk (the usage says so): --predictions was a flag
     * before it took a mode */
    OPTION_STRING_BARE(T, predictions, "predictions", "topk|probs|all", NULL, "topk",
                       "write predictions.csv (one row per sample): topk (class ids and loss), "
                       "probs (also the top-k softmax probabilities, and ECE, ROC-AUC and AP "
                       "in summary.json with their plots) or all (probabilities of every "
                       "class)"),
    OPTION_LONG(T, limit, "limit", "N", -1, 0, 1L << 40, "evaluate only the first N samples"),
    OPTION_FLAG(T, no_dct, "no-dct-scaling",
                "full-size JPEG decode before resize (bit-exact PIL path)"),
    OPTION_STRING(T, wire, "wire", "uint8|jpeg", "uint8",
                  "what loaderd sends: decoded uint8 pixels, or jpeg: each sample's original "
                  "file, decoded and transformed by gpud (the same pixels; ~10x fewer bytes "
                  "for a 224x224 JPEG: choose it when gpuds are on other hosts over tcp)"),
    OPTION_LONG(T, decode_threads, "decode-threads", "N", 0, 1, 1024,
                "--wire jpeg: decode threads per gpud (default: --threads)"),
    OPTION_STRING(T, decode, "decode", "cpu|gpu", "cpu",
                  "--wire jpeg: where gpud decodes the files: cpu (PIL's pixels) or gpu "
                  "(--device cuda: nvJPEG and the resize on the GPU, not bit-identical to cpu; "
                  "docs/CUDA.md \"Decoding on the GPU\")"),
    OPTION_STRING(T, classes, "classes", "FILE|numeric", NULL,
                  "map class folders to model outputs: 'folder index [label]' lines, or the "
                  "folders in model order one a line with their label (ImageNet's "
                  "LOC_synset_mapping.txt), or numeric (folders named 0, 1, ...: ImageNetV2); "
                  "a dataset may then hold any subset of the model's classes"),
    OPTION_SECTION("model input:"),
    JOB_MODEL_OPTIONS(T),
    OPTION_SECTION("run:"),
    JOB_RUN_OPTIONS(T),
    OPTION_LONG(T, loaders, "loaders", "N", 1, 1, EVAL_MAX_LOADERS,
                "loaderd processes, each decoding a shard of the dataset (ids % N; loaderd "
                "--shard i/N); every gpud takes batches from all of them"),
    JOB_LAUNCH_OPTIONS(T),
    OPTION_SECTION("test hooks:"),
    OPTION_STRING(T, fault, "fault", "RANK:N", NULL, "gpud RANK exits after N batches"),
    OPTION_END};
#undef T

const option_table_t eval_options_table = {
    "ddpipe eval", "--data PATH --model ARCH --weights FILE --out DIR [options]", s_rows};

static int check(eval_options_t *o)
{
    if (!o->data || !o->model || !o->weights || !o->out) {
        /* name what is missing, not the whole --help */
        fprintf(stderr, "ddpipe eval: missing%s%s%s%s\nusage: ddpipe eval %s\n(ddpipe eval --help "
                "lists every option)\n", o->data ? "" : " --data", o->model ? "" : " --model",
                o->weights ? "" : " --weights", o->out ? "" : " --out",
                eval_options_table.synopsis);
        return -1;
    }
    if (dd_check_model("ddpipe eval", o->model) < 0)
        return -1;
    if (o->predictions && strcmp(o->predictions, "topk") != 0 &&
        strcmp(o->predictions, "probs") != 0 && strcmp(o->predictions, "all") != 0) {
        fprintf(stderr, "ddpipe eval: --predictions %s is not known; choose topk, probs or all\n",
                o->predictions);
        return -1;
    }
    if (gpud_check_precision("ddpipe eval", o->precision) < 0)
        return -1;
    if (strcmp(o->wire, "uint8") != 0 && strcmp(o->wire, "jpeg") != 0) {
        fprintf(stderr, "ddpipe eval: --wire %s: choose uint8 or jpeg\n", o->wire);
        return -1;
    }
    if (gpud_check_device("ddpipe eval", "--device", o->device, o->precision, 0) < 0 ||
        gpud_check_decode("ddpipe eval", o->decode, o->device, o->wire, 0) < 0)
        return -1;
    if (access(o->weights, R_OK) != 0) {
        fprintf(stderr, "ddpipe eval: --weights %s: %s\n", o->weights, strerror(errno));
        return -1;
    }
    dd_classes_t c = {.cmd = "ddpipe eval", .data = o->data, .model = o->model,
                      .weights = o->weights, .num_classes = o->num_classes,
                      .classes = o->classes, .strict = true};
    if (dd_check_classes(&c, &o->outputs) < 0)
        return -1;
    /* reducerd's probability histograms take 80 KiB a class (reducerd/curves.h):
     * refuse now rather than after the whole eval */
    if (o->predictions && strcmp(o->predictions, "topk") != 0 &&
        o->outputs > (long)CURVES_MAX_CLASSES) {
        fprintf(stderr, "ddpipe eval: --predictions %s computes probability metrics for at most "
                "%u classes, and the model has %ld outputs: use --predictions topk, or leave "
                "--predictions out\n", o->predictions, CURVES_MAX_CLASSES, o->outputs);
        return -1;
    }
    return 0;
}

int eval_options_parse(eval_options_t *o, int argc, char **argv)
{
    int next = 0;
    int rc = options_parse(&eval_options_table, argc, argv, o, &next);
    if (rc != 0)
        return rc;
    if (next < argc) {
        fprintf(stderr, "ddpipe eval: unexpected argument '%s'\n", argv[next]);
        return -1;
    }
    if (check(o) < 0 || dd_launcher_check("ddpipe eval", o->launcher, &o->workers) < 0)
        return -1;
    if (o->fault && dd_launcher_is_slurm(o->launcher)) {
        fprintf(stderr, "ddpipe eval: --fault is a test hook of the local launcher\n");
        return -1;
    }
    dd_default_threads(o->workers, &o->threads, &o->loader_threads);
    return 0;
}
