/* loaderd's option table: the defaults and ranges of every flag, the
 * values read beside the table (--crop, --channels, --augment), the
 * training options refused without --train, a usage that names every
 * option, and the argv a launcher emits from a filled struct parsing back
 * to the same struct. */
#include "loaderd/options.h"

#include "tests/common/adopt_strings.h"
#include "tests/common/argv_words.h"
#include "tests/common/emitted_argv.h"
#include "tests/common/usage_text.h"
#include "tests/proto/check.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int parse_words(const char *words, loader_options_t *o)
{
    char *argv[64];
    int argc = argv_words("loaderd", words, argv, 64);
    memset(o, 0, sizeof *o);
    return loader_options_parse(o, argc, argv);
}

/* What the last parse_said wrote on stderr. */
static char s_said[8192];

static int parse_said(const char *words, loader_options_t *o)
{
    fflush(stderr);
    FILE *tmp = tmpfile();
    int saved = dup(2);
    if (!tmp || saved < 0) {
        fprintf(stderr, "cannot capture stderr\n");
        exit(1);
    }
    dup2(fileno(tmp), 2);
    int rc = parse_words(words, o);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    rewind(tmp);
    size_t n = fread(s_said, 1, sizeof s_said - 1, tmp);
    s_said[n] = '\0';
    fclose(tmp);
    return rc;
}

#define REFUSED(words, why)                                                                  \
    do {                                                                                     \
        loader_options_t o_;                                                                 \
        CHECK_MSG(parse_said(words, &o_) == -1, "accepted: %s", words);                      \
        CHECK_MSG(strstr(s_said, why) != NULL, "%s: said '%s', not '%s'", words, s_said, why); \
    } while (0)

#define BASE "--data idx:d --bind ipc://l --reducer ipc://r "

static void test_defaults(void)
{
    loader_options_t o;
    CHECK(parse_words(BASE, &o) == 0);
    CHECK_STR(o.data, "idx:d");
    CHECK_STR(o.bind, "ipc://l");
    CHECK_STR(o.reducer, "ipc://r");
    CHECK(o.batch_size == 64 && o.prefetch == 4 && o.worker_timeout_s == 10 && o.limit == -1);
    CHECK(o.threads >= 1); /* all cores */
    CHECK(o.resize == 0 && o.channels == 0 && o.crop == NULL && o.crop_h == 0 && o.crop_w == 0);
    CHECK(!o.no_dct_scaling && !o.predictions && !o.verbose && !o.train);
    CHECK(o.val == NULL && o.workers == 1 && o.global_batch == 0 && o.epochs == 1);
    CHECK(o.seed == 0 && o.augment == NULL && o.augment_mode == LOADER_AUGMENT_DEFAULT);
    CHECK(o.rotate == 0 && o.start_epoch == 0 && o.start_step == 0);
    CHECK(parse_words(BASE "--threads 3 --crop 32x48 --channels 1", &o) == 0);
    CHECK(o.threads == 3 && o.crop_h == 32 && o.crop_w == 48 && o.channels == 1);
    CHECK(parse_words(BASE "--crop 224 --train --workers 3 --batch-size 10 --augment flip", &o) == 0);
    CHECK(o.crop_h == 224 && o.crop_w == 224);
    CHECK(o.global_batch == 30 && o.augment_mode == LOADER_AUGMENT_FLIP);
    CHECK(o.shard == NULL && o.shard_index == 0 && o.shard_count == 1);
    CHECK(parse_words(BASE "--shard 2/3", &o) == 0 && o.shard_index == 2 && o.shard_count == 3);
    CHECK(parse_words(BASE "--shard 0/1", &o) == 0 && o.shard_index == 0 && o.shard_count == 1);
}

static void test_errors(void)
{
    loader_options_t o;
    fprintf(stderr, "(the errors below are expected)\n");
    REFUSED("--data d --bind b", "--data, --bind and --reducer are required");
    REFUSED(BASE "--batch-size 65537", "--batch-size: 65537 is out of range [1, 65536]");
    REFUSED(BASE "--prefetch 65", "--prefetch: 65 is out of range [1, 64]");
    REFUSED(BASE "--worker-timeout 0", "--worker-timeout: 0 is out of range [1, 86400]");
    REFUSED(BASE "--threads 1025", "--threads: 1025 is out of range [1, 1024]");
    /* the sentinel defaults are not values one can give */
    REFUSED(BASE "--threads 0", "--threads: 0 is out of range [1, 1024]");
    REFUSED(BASE "--limit -1", "--limit: -1 is out of range [0, 1099511627776]");
    REFUSED(BASE "--channels 0", "--channels: 0 is out of range [1, 3]");
    REFUSED(BASE "--train --global-batch-size 0", "--global-batch-size: 0 is out of range");
    REFUSED(BASE "--resize x", "--resize: 'x' is not an integer");
    REFUSED(BASE "--channels 2", "--channels: 1 or 3");
    REFUSED(BASE "--crop 0", "--crop: 0 is out of range [1, 16384]");
    REFUSED(BASE "--crop 3x", "--crop: '3x' is not an integer");
    REFUSED(BASE "--train --rotate 361", "--rotate: 361 is out of range [0, 360]");
    REFUSED(BASE "--train --augment all", "--augment: 'all' is not one of none, flip, crop-flip");
    REFUSED(BASE "--train --epochs 2 --start-epoch 2", "--start-epoch 2 is not below --epochs 2");
    REFUSED(BASE "--train --global-batch-size 65537", "gives shards over 65536 samples");
    REFUSED(BASE "--shard 3/3", "--shard 3/3 is out of range: want 0 <= I < N <= 256");
    REFUSED(BASE "--shard 0/0", "--shard 0/0 is out of range");
    REFUSED(BASE "--shard -1/2", "--shard -1/2 is out of range");
    REFUSED(BASE "--shard 0/257", "--shard 0/257 is out of range");
    REFUSED(BASE "--shard 1", "--shard '1': want I/N, e.g. 0/3");
    REFUSED(BASE "--shard 1/2x", "--shard '1/2x': want I/N");
    CHECK(parse_words(BASE "--train --shard 1/2", &o) == 0 && o.shard_index == 1);
    CHECK(parse_words(BASE "--train --global-batch-size 131072 --workers 2", &o) == 0);
    /* --chunk: G a multiple of it; shards are whole chunks, so the largest
     * is ceil(G / N / W) chunks: 3 chunks of 32768 over 2 ranks is 2 chunks, 65536 */
    CHECK(parse_words(BASE "--train --global-batch-size 96 --workers 5 --chunk 8", &o) == 0 &&
          o.chunk == 8);
    REFUSED(BASE "--train --global-batch-size 100 --chunk 8", "--chunk 8: the global batch 100");
    REFUSED(BASE "--train --batch-size 10 --workers 3 --chunk 8", "is not a multiple of it");
    CHECK(parse_words(BASE "--train --global-batch-size 98304 --workers 2 --chunk 32768", &o) == 0);
    /* 120000 over 2 is 60000 samples, but 3 chunks of 40000 give a rank 80000 */
    CHECK(parse_words(BASE "--train --global-batch-size 120000 --workers 2", &o) == 0);
    REFUSED(BASE "--train --global-batch-size 120000 --workers 2 --chunk 40000",
            "gives shards over 65536 samples");
    REFUSED(BASE "--chunk 8", "need --train");
    CHECK(parse_words(BASE "--limit 0 --resize 1", &o) == 0 && o.limit == 0 && o.resize == 1);
    /* given without --train, whatever the value, however spelled */
    REFUSED(BASE "--seed 0", "need --train");
    REFUSED(BASE "--epo 2", "need --train");
    REFUSED(BASE "--val=v", "need --train");
    REFUSED(BASE "--start-step 0", "need --train");
    /* a flag is no value (common/options.h); joined, a value is no option */
    REFUSED("--bind b --reducer r --data --seed",
            "--data needs a value (PATH), got the flag --seed");
    CHECK(parse_words("--bind b --reducer r --data=--seed", &o) == 0);
    CHECK_STR(o.data, "--seed");
    CHECK(parse_words("--help", &o) == 1);
}

static void test_usage_names_every_option(void)
{
    int options, unnamed;
    char *text = usage_text(&loader_options_table, &options, &unnamed);
    CHECK(unnamed == 0);
    CHECK(options == 34); /* 32 of loaderd's own (--shard, --wire, --val-limit among them), --curve-dir and --insecure */
    /* a sentinel default is said in words, never as its number */
    CHECK(strstr(text, "decode threads (default: every CPU it may use)\n") != NULL);
    CHECK(strstr(text, "(default 0)\n  --prefetch") == NULL);
    free(text);
}

/* What ddpipe train starts loaderd with, emitted and parsed back. */
static void test_emit_round_trip(void)
{
    loader_options_t o, back;
    CHECK(parse_words(BASE "--train --val v --workers 2 --global-batch-size 64 --batch-size 32 "
                           "--epochs 3 --seed 7 --threads 2 --worker-timeout 20 --prefetch 8 "
                           "--resize 36 --crop 32 --channels 3 --limit 100 --start-epoch 1 "
                           "--start-step 2 --augment flip --rotate 15 --chunk 8 --verbose",
                      &o) == 0);
    emitted_argv_t a = {.argv = {"loaderd"}, .argc = 1};
    CHECK(options_emit(&loader_options_table, &o, NULL, emitted_argv_add, &a) == 23);
    memset(&back, 0, sizeof back);
    CHECK(loader_options_parse(&back, a.argc, a.argv) == 0);
    CHECK(adopt_strings(&loader_options_table, &back, &o) == 0);
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
