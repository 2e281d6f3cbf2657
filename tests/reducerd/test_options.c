/* reducerd's option table: the defaults and ranges of every flag, the
 * checks across options, a usage that names every option, and the argv a
 * launcher emits from a filled struct parsing back to the same struct. */
#include "reducerd/options.h"

#include "tests/common/adopt_strings.h"
#include "tests/common/argv_words.h"
#include "tests/common/emitted_argv.h"
#include "tests/common/usage_text.h"
#include "tests/proto/check.h"

#include <stdlib.h>
#include <string.h>

static int parse_words(const char *words, reducer_options_t *o)
{
    char *argv[64];
    int argc = argv_words("reducerd", words, argv, 64);
    memset(o, 0, sizeof *o);
    return reducer_options_parse(o, argc, argv);
}

static void test_defaults(void)
{
    reducer_options_t o;
    CHECK(parse_words("--bind ipc://a --pub ipc://b", &o) == 0);
    CHECK_STR(o.bind, "ipc://a");
    CHECK_STR(o.pub, "ipc://b");
    CHECK(o.job == NULL);   /* $DDPIPE_JOB or drawn at start: never shared by default */
    CHECK(o.workers == 1 && o.reporters == 1);
    CHECK(o.worker_timeout_s == 10 && o.stall_timeout_s == 600 && o.done_timeout_s == 60);
    CHECK(o.epochs == 1 && o.patience == 1 && o.target_accuracy == 0);
    CHECK(o.start_epoch == 0 && o.streak == 0 && o.resume_dir == NULL);
    CHECK(o.min_workers == 1 && o.start_step == 0);
    CHECK(!o.predictions && !o.verbose && !o.train && !o.no_val);
}

static void test_errors(void)
{
    reducer_options_t o;
    fprintf(stderr, "(the errors below are expected)\n");
    CHECK(parse_words("--bind ipc://a", &o) == -1); /* --pub is required */
    CHECK(parse_words("--bind a --pub b --workers 4097", &o) == -1);
    CHECK(parse_words("--bind a --pub b --reporters 17", &o) == -1);
    CHECK(parse_words("--bind a --pub b --reporters 0", &o) == 0);
    CHECK(parse_words("--bind a --pub b --stall-timeout 604801", &o) == -1);
    CHECK(parse_words("--bind a --pub b --stall-timeout 604800", &o) == 0);
    CHECK(parse_words("--bind a --pub b --worker-timeout 0", &o) == -1);
    CHECK(parse_words("--bind a --pub b --target-accuracy 1.01", &o) == -1);
    CHECK(parse_words("--bind a --pub b --train --epochs 2 --start-epoch 2", &o) == -1);
    CHECK(parse_words("--bind a --pub b --epochs 2 --start-epoch 2", &o) == 0); /* eval */
    CHECK(parse_words("--bind a --pub b --train --no-val --target-accuracy 0.5", &o) == -1);
    CHECK(parse_words("--bind a --pub b --train --workers 2 --min-workers 3", &o) == -1);
    CHECK(parse_words("--bind a --pub b --train --workers 3 --min-workers 3", &o) == 0);
    CHECK(parse_words("--bind a --pub b --min-workers 0", &o) == -1);
    CHECK(parse_words("--help", &o) == 1);
    CHECK(parse_words("--bind a --pub b --train --workers 3 --max-workers 2", &o) == -1);
    CHECK(parse_words("--bind a --pub b --probs all", &o) == 0 && strcmp(o.probs, "all") == 0);
    CHECK(parse_words("--bind a --pub b --probs some", &o) == -1);
    CHECK(parse_words("--bind a --pub b --job bad/id", &o) == -1);   /* one word of a log line */
    CHECK(parse_words("--bind a --pub b --job run-7.a", &o) == 0 && strcmp(o.job, "run-7.a") == 0);
    /* eval's start: every gpud at once by default; not more than the world */
    CHECK(parse_words("--bind a --pub b", &o) == 0 && o.start_workers == 1 &&
          o.start_timeout_s == 30);
    CHECK(parse_words("--bind a --pub b --workers 3 --start-workers 3", &o) == 0 &&
          o.start_workers == 3);
    CHECK(parse_words("--bind a --pub b --workers 2 --start-workers 3", &o) == -1);
}

static void test_usage_names_every_option(void)
{
    int options, unnamed;
    char *text = usage_text(&reducer_options_table, &options, &unnamed);
    CHECK(unnamed == 0);
    CHECK(options == 29); /* 27 of reducerd's own, --curve-dir and --insecure */
    free(text);
}

/* What ddpipe train starts reducerd with, emitted and parsed back. */
static void test_emit_round_trip(void)
{
    reducer_options_t o, back;
    CHECK(parse_words("--bind ipc://r --pub ipc://e --train --workers 3 --epochs 10 "
                      "--target-accuracy 0.85 --patience 2 --resume-dir runs/x --start-epoch 4 "
                      "--streak 1 --predictions --verbose --min-workers 2 --start-step 57 "
                      "--max-workers 4 --rejoin-timeout 9",
                      &o) == 0);
    emitted_argv_t a = {.argv = {"reducerd"}, .argc = 1};
    CHECK(options_emit(&reducer_options_table, &o, NULL, emitted_argv_add, &a) == 16);
    memset(&back, 0, sizeof back);
    CHECK(reducer_options_parse(&back, a.argc, a.argv) == 0);
    CHECK(adopt_strings(&reducer_options_table, &back, &o) == 0);
    CHECK(memcmp(&back, &o, sizeof o) == 0);
    emitted_argv_free(&a);
}

int main(void)
{
    test_defaults();
    test_errors();
    test_usage_names_every_option();
    test_emit_round_trip();
    return check_exit("test_options");
}
