/* docs — the man pages and the bash completion of ddpipe and its daemons,
 * generated from the option tables the programs parse (common/options_doc.h),
 * so that a flag added to a table shows in both without another edit.
 *
 *   ddpipe completion bash       the completion script, on stdout
 *   ddpipe __docs DIR            (the build) every page into DIR/man1 and the
 *                                script into DIR/bash-completion/ddpipe
 *   ddpipe __docs --markdown F   every page as one Markdown file: the
 *                                repository's docs/USAGE.md (scripts/gen-usage.sh;
 *                                the test cli_usage_md says when it is stale)
 *   ddpipe __docs --usage        every table's usage, for that test
 */
#include "cli/commands.h"
#include "cli/eval_options.h"
#include "cli/train_options.h"
#include "common/atomic_file.h"
#include "common/options_doc.h"
#include "gpud/options.h"
#include "loaderd/options.h"
#include "reducerd/options.h"
#include "reporterd/options.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#define SEE_ALSO_CLI                                                                  \
    "ddpipe(1), ddpipe-eval(1), ddpipe-train(1), ddpipe-tap(1), ddpipe-keygen(1), " \
    "ddpipe-models(1)"
#define SEE_ALSO_DAEMONS "ddpipe(1), loaderd(1), gpud(1), reducerd(1), reporterd(1)"

typedef struct {
    const char *word;              /* the subcommand ("eval"); NULL for a daemon */
    const option_table_t *table;   /* NULL: the ddpipe page */
    options_page_t page;
} doc_t;

static const doc_t s_docs[] = {
    {NULL, NULL,
     {"ddpipe", "1", "ddpipe", "data-parallel evaluation and training of image classifiers",
      "COMMAND [options]\n--version | --help",
      "ddpipe runs a whole job on this machine: it starts reducerd, reporterd, loaderd and W "
      "gpud workers over ZeroMQ, supervises them, and prints the result; the run directory "
      "(--out) gets summary.json, CSV files, plots and the daemons' logs.\n\n"
      "Commands: eval (evaluate a classifier, exact metrics, ddpipe-eval(1)), train (train "
      "data-parallel, ddpipe-train(1)), tap (print a job's live events, ddpipe-tap(1)), keygen "
      "(the CURVE certificates of a cluster, ddpipe-keygen(1)), models (the architectures, "
      "their parameter counts and default transforms, ddpipe-models(1)), completion bash "
      "(this shell completion script).\n\n"
      "eval, train and tap take --curve-dir DIR (CURVE on every tcp:// socket; default "
      "$DDPIPE_CURVE_DIR) and --insecure. ddpipe finds the daemons next to itself, or in "
      "$DDPIPE_BIN.",
      SEE_ALSO_CLI ", " SEE_ALSO_DAEMONS}},
    {"eval", &eval_options_table,
     {"ddpipe-eval", "1", "ddpipe eval", "evaluate a classifier with W worker processes",
      NULL,
      "Evaluates --model with --weights (safetensors, PyTorch state_dict names) on --data, an "
      "ImageFolder directory or idx:PREFIX (MNIST/Fashion-MNIST IDX files), split over "
      "--workers gpud processes. Every sample is counted exactly once whatever the workers "
      "and batch size, also when a worker dies. Writes summary.json, per_class.csv, "
      "classification_report.txt, plots and logs/ into --out. Exit 0 when the job finished.",
      SEE_ALSO_CLI}},
    {"train", &train_options_table,
     {"ddpipe-train", "1", "ddpipe train", "train a classifier data-parallel over W workers",
      NULL,
      "Trains --model on --data over --workers gpud ranks (synchronous data parallelism, the "
      "gradients summed over a ring), validating on --val after each epoch. Writes "
      "metrics.csv, plots, checkpoint.safetensors (resume with --resume DIR) and "
      "model.safetensors into --out.",
      SEE_ALSO_CLI}},
    {"tap", &tap_options_table,
     {"ddpipe-tap", "1", "ddpipe tap", "print a job's live events",
      NULL,
      "Subscribes to ENDPOINT, a job's reporterd tap (or reducerd's --pub), and prints one "
      "line per event: metric, progress, log, worker, end, failed, membership, predictions. "
      "With --json each line is a JSON object (the fields are listed in docs/OPERATIONS.md). With "
      "--until-end it exits after the job's end event: 0 when the job succeeded, 1 when not.",
      SEE_ALSO_CLI}},
    {"keygen", &keygen_options_table,
     {"ddpipe-keygen", "1", "ddpipe keygen", "write the CURVE certificates of a cluster",
      NULL,
      "Writes into DIR (mode 700) server.cert(+_secret), client.cert(+_secret) and "
      "authorized/ with the client certificate the daemons let in. Copy DIR to every host, "
      "then give every daemon and ddpipe --curve-dir DIR (or set DDPIPE_CURVE_DIR).",
      SEE_ALSO_CLI}},
    {"models", &models_options_table,
     {"ddpipe-models", "1", "ddpipe models", "list the architectures eval and train accept",
      NULL,
      "Prints each architecture gpud implements: its name, its parameter count (counted by "
      "gpud from the network's description, as torchvision's sum(p.numel()) counts), its "
      "natural input (channels x height x width) and the transform eval and train give it "
      "by default. With --json one JSON object per line.",
      SEE_ALSO_CLI}},
    {NULL, &loader_options_table,
     {"loaderd", "1", "loaderd", "ddpipe's data loader daemon",
      NULL,
      "Scans the dataset, plans the epoch, decodes and transforms images on a thread pool and "
      "hands uint8 batches to whichever gpud has credit; a batch a dead worker never "
      "acknowledged is sent again. With --train it drives the epochs of a training job. "
      "Usually started by ddpipe(1); run it by hand (or under supervisord, "
      "/usr/share/ddpipe/compose) to spread a job over hosts.",
      SEE_ALSO_DAEMONS}},
    {NULL, &gpud_options_table,
     {"gpud", "1", "gpud", "ddpipe's compute worker",
      NULL,
      "Holds the model, asks loaderd for batches by credit, runs the forward pass and sends "
      "per-sample top-k and loss to reducerd. With --train it is one data-parallel rank: the "
      "gradients are summed over the ranks' ring and every rank takes the same optimizer "
      "step.",
      SEE_ALSO_DAEMONS}},
    {NULL, &reducer_options_table,
     {"reducerd", "1", "reducerd", "ddpipe's exact tally and job coordinator",
      NULL,
      "Counts every sample's result exactly once, publishes the job's events (metrics, "
      "progress, membership, end) on --pub, and coordinates training epochs with --train.",
      SEE_ALSO_DAEMONS}},
    {NULL, &reporter_options_table,
     {"reporterd", "1", "reporterd", "ddpipe's run directory writer and event tap",
      NULL,
      "Subscribes to reducerd's events, writes the run directory (summary.json, CSVs, "
      "classification report, plots), re-publishes every event on its tap for monitors such "
      "as ddpipe-tap(1) and serves Prometheus metrics on --metrics-http.",
      SEE_ALSO_DAEMONS}},
};
#define N_DOCS (sizeof s_docs / sizeof s_docs[0])

/* ---- bash -------------------------------------------------------------------- */

/* One shell function per program; _ddpipe dispatches on the subcommand. The
 * script needs bash alone (not the bash-completion package's helpers). */
static void bash_script(FILE *f)
{
    fputs("# bash completion for ddpipe and its daemons; generated by 'ddpipe completion bash'\n"
          "# from the option tables the programs parse (do not edit).\n"
          "_ddpipe_files() {\n"
          "    compopt -o filenames 2>/dev/null\n"
          "    COMPREPLY=($(compgen -f -- \"$cur\"))\n"
          "}\n"
          "\n"
          "# _ddpipe_table NAME: complete COMP_WORDS against the table of program NAME\n"
          "_ddpipe_table() {\n"
          "    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}\n"
          "    local flags\n"
          "    COMPREPLY=()\n"
          "    case $1 in\n", f);
    for (size_t i = 0; i < N_DOCS; i++) {
        const doc_t *d = &s_docs[i];
        if (!d->table)
            continue;
        fprintf(f, "    %s)\n        case $prev in\n", d->page.name);
        options_bash_value_arms(d->table, f, "            ");
        fputs("        esac\n        flags='", f);
        options_bash_flags(d->table, f);
        fputs("';;\n", f);
    }
    fputs("    esac\n"
          "    if [[ $cur == -* ]]; then\n"
          "        COMPREPLY=($(compgen -W \"$flags\" -- \"$cur\"))\n"
          "    else\n"
          "        _ddpipe_files\n"
          "    fi\n"
          "}\n"
          "\n"
          "_ddpipe() {\n"
          "    local cur=${COMP_WORDS[COMP_CWORD]}\n"
          "    if [[ $COMP_CWORD -eq 1 ]]; then\n"
          "        COMPREPLY=($(compgen -W '",
          f);
    for (size_t i = 0; i < N_DOCS; i++)
        if (s_docs[i].word)
            fprintf(f, "%s ", s_docs[i].word);
    fputs("completion --help --version' -- \"$cur\"))\n"
          "        return\n"
          "    fi\n"
          "    case ${COMP_WORDS[1]} in\n",
          f);
    for (size_t i = 0; i < N_DOCS; i++)
        if (s_docs[i].word)
            fprintf(f, "    %s) _ddpipe_table %s;;\n", s_docs[i].word, s_docs[i].page.name);
    fputs("    completion) COMPREPLY=($(compgen -W 'bash' -- \"$cur\"));;\n"
          "    *) COMPREPLY=();;\n"
          "    esac\n"
          "}\n"
          "complete -F _ddpipe ddpipe\n",
          f);
    for (size_t i = 0; i < N_DOCS; i++) {
        const doc_t *d = &s_docs[i];
        if (d->word || !d->table)
            continue;
        fprintf(f, "_%s() { _ddpipe_table %s; }\ncomplete -F _%s %s\n", d->page.name,
                d->page.name, d->page.name, d->page.name);
    }
}

int cmd_completion(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "bash") == 0) {
        bash_script(stdout);
        return fflush(stdout) == 0 ? 0 : 1;
    }
    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        printf("usage: ddpipe completion bash\n"
               "  prints the bash completion of ddpipe and its daemons; e.g.\n"
               "  source <(ddpipe completion bash)\n");
        return 0;
    }
    fprintf(stderr, "usage: ddpipe completion bash (the only shell there is a script for)\n");
    return 2;
}

/* ---- the build's files ---------------------------------------------------------- */

static int make_dir(const char *path)
{
    if (mkdir(path, 0755) < 0 && errno != EEXIST) {
        fprintf(stderr, "ddpipe __docs: cannot create %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* Writes path with fn; -1 (said) when it cannot be written whole. */
static int write_file(const char *path, void (*fn)(FILE *, const doc_t *), const doc_t *d)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "ddpipe __docs: cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    fn(f, d);
    if (ferror(f) | (fclose(f) != 0)) {
        fprintf(stderr, "ddpipe __docs: writing %s failed: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

static void man_page(FILE *f, const doc_t *d) { options_man(d->table, &d->page, f); }
static void bash_file(FILE *f, const doc_t *d) { (void)d; bash_script(f); }

/* ---- docs/USAGE.md ---------------------------------------------------------------- */

/* The file's head: how it is made, then what a reader needs before the
 * pages (the conventions every table shares). */
static void markdown_intro(FILE *f)
{
    fputs("<!-- Generated from the option tables the programs parse, by\n"
          "     `ddpipe __docs --markdown docs/USAGE.md` (cli/docs.c, common/options_doc.c).\n"
          "     Do not edit: change the tables, then run scripts/gen-usage.sh [BUILD_DIR]\n"
          "     (or `cmake --build BUILD_DIR --target usage_md`). The test cli_usage_md\n"
          "     fails while this file differs from what the tables give. -->\n"
          "# ddpipe command-line reference\n"
          "\n"
          "Every command of `ddpipe` and every daemon it starts, with every flag each takes:\n"
          "the same text as `PROGRAM --help` and the man pages, generated from the same tables.\n"
          "Most jobs need only `ddpipe eval` or `ddpipe train`: ddpipe starts the daemons\n"
          "itself. Run a daemon by hand to spread a job over hosts (docs/SCALE.md).\n"
          "\n"
          "How flags are read, everywhere:\n"
          "\n"
          "- `--name VALUE` and `--name=VALUE` are the same; a unique prefix of a name is\n"
          "  enough (`--batch` for `--batch-size`).\n"
          "- A value never begins with `--`: `--out --overwrite` is refused (\"--out needs a\n"
          "  value\") rather than taking `--overwrite` as the directory. A value that really\n"
          "  begins with `--` is written joined: `--out=--odd-name`. Negative numbers and `-`\n"
          "  are values as usual.\n"
          "- A flag shown as `--name [VALUE]` may be given alone; its entry says what it then\n"
          "  means.\n"
          "- A default is shown where there is one; an option without one is unset unless\n"
          "  its text says how it is derived.\n"
          "\n"
          "Contents:\n"
          "\n",
          f);
    for (size_t i = 0; i < N_DOCS; i++) {
        /* GitHub's heading anchors: lower case, spaces as '-' */
        char anchor[128];
        snprintf(anchor, sizeof anchor, "%s", s_docs[i].page.command);
        for (char *c = anchor; *c; c++)
            if (*c == ' ')
                *c = '-';
        fprintf(f, "- [%s](#%s): %s\n", s_docs[i].page.command, anchor,
                s_docs[i].page.summary);
    }
}

static void markdown_file(FILE *f)
{
    markdown_intro(f);
    for (size_t i = 0; i < N_DOCS; i++)
        options_markdown(s_docs[i].table, &s_docs[i].page, f);
}

/* The Markdown reference into path, whole or not at all (it replaces the
 * repository's docs/USAGE.md). */
static int write_markdown(const char *path)
{
    char err[512];
    atomic_file_t *af = atomic_file_new(path, err, sizeof err);
    if (!af) {
        fprintf(stderr, "ddpipe __docs: %s\n", err);
        return 1;
    }
    markdown_file(atomic_file_stream(af));
    if (atomic_file_commit(&af, err, sizeof err) != 0) {
        fprintf(stderr, "ddpipe __docs: %s\n", err);
        return 1;
    }
    return 0;
}

/* Every table's usage (what each program's --help prints), each after a
 * line "== PROGRAM": what tests/cli/usage_md.py checks docs/USAGE.md
 * against, the daemons' included without their binaries. */
static int print_usages(void)
{
    for (size_t i = 0; i < N_DOCS; i++) {
        if (!s_docs[i].table)
            continue;
        printf("== %s\n", s_docs[i].page.command);
        options_usage(s_docs[i].table, stdout);
    }
    return fflush(stdout) == 0 ? 0 : 1;
}

int cmd_docs(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--markdown") == 0)
        return write_markdown(argv[2]);
    if (argc == 2 && strcmp(argv[1], "--usage") == 0)
        return print_usages();
    if (argc != 2 || argv[1][0] == '-') {
        fprintf(stderr, "usage: ddpipe __docs DIR (the build's man pages and completion)\n"
                        "       ddpipe __docs --markdown FILE (docs/USAGE.md)\n"
                        "       ddpipe __docs --usage (every table's usage)\n");
        return 2;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/man1", argv[1]);
    if (make_dir(argv[1]) < 0 || make_dir(path) < 0)
        return 1;
    for (size_t i = 0; i < N_DOCS; i++) {
        snprintf(path, sizeof path, "%s/man%s/%s.%s", argv[1], s_docs[i].page.section,
                 s_docs[i].page.name, s_docs[i].page.section);
        if (write_file(path, man_page, &s_docs[i]) < 0)
            return 1;
    }
    snprintf(path, sizeof path, "%s/bash-completion", argv[1]);
    if (make_dir(path) < 0)
        return 1;
    snprintf(path, sizeof path, "%s/bash-completion/ddpipe", argv[1]);
    return write_file(path, bash_file, NULL) < 0 ? 1 : 0;
}
