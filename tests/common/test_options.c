/* common/options: defaults, parsing of every type, ranges and errors, the
 * generated usage, emit (differences and named lists) and its round trip
 * through options_parse, the table walk; a flag where a value belongs
 * refused, rows with a bare value. */
#include "common/options.h"

#include "tests/common/emitted_argv.h"
#include "tests/proto/check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    const char *bind;
    const char *job;
    long workers;
    long timeout_s;
    double target;
    int train;
    int verbose;
    option_doubles_t mean;
    option_ints_t channels;
} test_options_t;

#define T test_options_t
static const option_t s_rows[] = {
    OPTION_STRING(T, bind, "bind", "EP", NULL, "ROUTER for joins"),
    OPTION_STRING(T, job, "job", "NAME", "ddpipe", "job name handed to joiners"),
    OPTION_LONG(T, workers, "workers", "N", 1, 1, 4096, "ranks expected"),
    OPTION_LONG(T, timeout_s, "stall-timeout", "S", 600, 0, 86400,
                "fail the job after S seconds without progress: no accepted result, failure, plan "
                "or new worker; 0 off"),
    OPTION_SECTION("training:"),
    OPTION_FLAG(T, train, "train", "coordinate a training job"),
    OPTION_DOUBLE(T, target, "target-accuracy", "A", 0, 0, 1, "stop at A"),
    OPTION_DOUBLES(T, mean, "mean", "a,b,c", "0.485,0.456,0.406", 1, 3, -10, 10, "normalisation"),
    OPTION_INTS(T, channels, "channels", "a,b,c,d", NULL, 4, 4, 1, 4096, "widths"),
    OPTION_ELSEWHERE(OPTION_TYPE_STRING, "curve-dir", "DIR", "CURVE certificates"),
    OPTION_FLAG(T, verbose, "verbose", NULL),
    OPTION_END};
#undef T
static const option_table_t s_table = {"prog", "--bind EP [options]", s_rows};

/* argv from a string of words (kept in a static buffer). */
static int split(char *line, char **argv, int max)
{
    int n = 0;
    argv[n++] = "prog";
    for (char *save = NULL, *w = strtok_r(line, " ", &save); w && n < max - 1;
         w = strtok_r(NULL, " ", &save))
        argv[n++] = w;
    argv[n] = NULL;
    return n;
}

static int parse_line(const char *words, test_options_t *o)
{
    static char line[1024];
    char *argv[64];
    snprintf(line, sizeof line, "%s", words);
    int argc = split(line, argv, 64);
    return options_parse(&s_table, argc, argv, o, NULL);
}

static void test_defaults(void)
{
    test_options_t o;
    memset(&o, 0x55, sizeof o);
    CHECK(options_defaults(&s_table, &o) == 0);
    CHECK(o.bind == NULL);
    CHECK_STR(o.job, "ddpipe");
    CHECK(o.workers == 1 && o.timeout_s == 600 && o.target == 0);
    CHECK(o.train == 0 && o.verbose == 0);
    CHECK(o.mean.n == 3 && o.mean.v[0] == 0.485 && o.mean.v[2] == 0.406);
    CHECK(o.channels.n == 0);
    test_options_t p;
    memset(&p, 0x55, sizeof p); /* the same padding */
    CHECK(parse_line("", &p) == 0);
    CHECK(memcmp(&o, &p, sizeof o) == 0);
}

static void test_values(void)
{
    test_options_t o;
    CHECK(parse_line("--bind tcp://a:1 --workers=3 --train --target-accuracy 0.5 --mean 1,2 "
                     "--channels 16,32,64,128 --verbose --stall-time 0",
                     &o) == 0);
    CHECK_STR(o.bind, "tcp://a:1");
    CHECK(o.workers == 3 && o.train == 1 && o.verbose == 1 && o.target == 0.5);
    CHECK(o.timeout_s == 0); /* a unique prefix, as getopt_long allows */
    CHECK(o.mean.n == 2 && o.mean.v[0] == 1 && o.mean.v[1] == 2);
    CHECK(o.channels.n == 4 && o.channels.v[3] == 128);
    int next = 0;
    char *argv[] = {"prog", "--workers", "2", "operand", NULL};
    CHECK(options_parse(&s_table, 4, argv, &o, &next) == 0);
    CHECK(o.workers == 2 && next == 3 && strcmp(argv[next], "operand") == 0);
}

static void test_errors(void)
{
    test_options_t o;
    fprintf(stderr, "(the errors below are expected)\n");
    CHECK(parse_line("--workers 0", &o) == -1);          /* below the range */
    CHECK(parse_line("--workers 4097", &o) == -1);       /* above it */
    CHECK(parse_line("--workers two", &o) == -1);        /* not an integer */
    CHECK(parse_line("--target-accuracy 1.5", &o) == -1);
    CHECK(parse_line("--target-accuracy x", &o) == -1);
    CHECK(parse_line("--mean 1,2,3,4", &o) == -1);       /* too many */
    CHECK(parse_line("--mean 1,99", &o) == -1);          /* out of range */
    CHECK(parse_line("--channels 1,2,3", &o) == -1);     /* too few */
    CHECK(parse_line("--channels 1,2,3,0", &o) == -1);   /* below the range */
    CHECK(parse_line("--channels 1,2,3,1.5", &o) == -1); /* not an integer */
    CHECK(parse_line("--no-such-option", &o) == -1);
    CHECK(parse_line("--workers", &o) == -1);            /* missing value */
    CHECK(parse_line("--curve-dir /tmp", &o) == -1);     /* taken out before parsing */
    CHECK(parse_line("--help", &o) == 1);
}

static char *usage_text(void)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    options_usage(&s_table, f);
    fclose(f);
    return text;
}

static void test_usage(void)
{
    char *u = usage_text();
    CHECK(strncmp(u, "usage: prog --bind EP [options]\n", 32) == 0);
    /* help beside the longest "--name META" plus two spaces */
    CHECK(strstr(u, "\n  --bind EP" "            " "ROUTER for joins\n") != NULL);
    CHECK(strstr(u, "\n  --target-accuracy A  stop at A (default 0)\n") != NULL);
    CHECK(strstr(u, "job name handed to joiners (default ddpipe)\n") != NULL);
    CHECK(strstr(u, "normalisation (default 0.485,0.456,0.406)\n") != NULL);
    CHECK(strstr(u, "\ntraining:\n  --train") != NULL);
    CHECK(strstr(u, "\n  --curve-dir DIR      CURVE certificates\n") != NULL);
    CHECK(strstr(u, "\n  --verbose\n") != NULL);
    /* a long help wraps onto lines indented to the help column */
    CHECK(strstr(u, "result,\n                       failure, plan") != NULL);
    for (char *line = u, *end; *line; line = end + 1) {
        end = strchr(line, '\n');
        CHECK_MSG(end - line <= 90, "usage line too long: %.*s", (int)(end - line), line);
    }
    free(u);
}

static void test_emit(void)
{
    test_options_t o, back;
    memset(&o, 0, sizeof o); /* padding compares equal */
    memset(&back, 0, sizeof back);
    options_defaults(&s_table, &o);
    emitted_argv_t a = {.argv = {"prog"}, .argc = 1};
    CHECK(options_emit(&s_table, &o, NULL, emitted_argv_add, &a) == 0); /* all defaults: nothing */
    CHECK(parse_line("--bind ipc://x --workers 7 --train --target-accuracy 0.1 --channels 1,2,3,4 "
                     "--job ddpipe",
                     &o) == 0);
    CHECK(options_emit(&s_table, &o, NULL, emitted_argv_add, &a) == 5); /* not --job: its default */
    CHECK(a.argc == 10);
    CHECK_STR(a.argv[1], "--bind");
    CHECK_STR(a.argv[2], "ipc://x");
    CHECK_STR(a.argv[5], "--train");
    CHECK_STR(a.argv[6], "--target-accuracy");
    CHECK_STR(a.argv[9], "1,2,3,4");
    CHECK(options_parse(&s_table, a.argc, a.argv, &back, NULL) == 0);
    CHECK(strcmp(back.bind, o.bind) == 0);
    CHECK(strcmp(back.job, o.job) == 0);
    back.bind = o.bind; /* the same text at other addresses */
    back.job = o.job;
    CHECK(memcmp(&back, &o, sizeof o) == 0);
    emitted_argv_free(&a);

    /* a double that needs all 17 digits comes back the same */
    o.target = 0.1 + 0.2;
    o.mean.n = 1;
    o.mean.v[0] = 1.0 / 3.0;
    CHECK(options_emit(&s_table, &o, NULL, emitted_argv_add, &a) == 6);
    CHECK(options_parse(&s_table, a.argc, a.argv, &back, NULL) == 0);
    CHECK(back.target == o.target && back.mean.n == 1 && back.mean.v[0] == o.mean.v[0]);
    emitted_argv_free(&a);

    /* a named list: exactly those, defaults included, unset flags left out */
    options_defaults(&s_table, &o);
    const char *only[] = {"workers", "job", "train", NULL};
    CHECK(options_emit(&s_table, &o, only, emitted_argv_add, &a) == 2);
    CHECK(a.argc == 5);
    CHECK_STR(a.argv[1], "--job");
    CHECK_STR(a.argv[3], "--workers");
    CHECK_STR(a.argv[4], "1");
    emitted_argv_free(&a);
    const char *bad[] = {"no-such", NULL};
    const char *elsewhere[] = {"curve-dir", NULL};
    fprintf(stderr, "(the errors below are expected)\n");
    CHECK(options_emit(&s_table, &o, bad, emitted_argv_add, &a) == -1);
    CHECK(options_emit(&s_table, &o, elsewhere, emitted_argv_add, &a) == -1);
}

static void count_row(void *arg, const option_t *opt, const char *section)
{
    int *counts = arg;
    counts[0]++;
    if (section && strcmp(section, "training:") == 0)
        counts[1]++;
    if (opt->type == OPTION_TYPE_SECTION)
        counts[2]++;
}

static void test_walk(void)
{
    int counts[3] = {0};
    options_foreach(&s_table, count_row, counts);
    CHECK(counts[0] == 11 && counts[1] == 7 && counts[2] == 1);
    const option_t *opt = options_find(&s_table, "stall-timeout");
    CHECK(opt && opt->type == OPTION_TYPE_LONG && opt->long_hi == 86400);
    CHECK(options_find(&s_table, "training:") == NULL);
    CHECK(options_find(&s_table, "stall") == NULL);
    char def[64];
    options_default_text(options_find(&s_table, "workers"), def, sizeof def);
    CHECK_STR(def, "1");
    options_default_text(options_find(&s_table, "train"), def, sizeof def);
    CHECK_STR(def, "");
}

/* Defaults outside the range: "derived" - no default in the usage, and
 * emitted only when set (NAN equals NAN). */
typedef struct {
    double lr;
    long seed;
} sentinel_options_t;

static void test_sentinels(void)
{
    static const option_t rows[] = {
        OPTION_DOUBLE(sentinel_options_t, lr, "lr", "X", NAN, 0, 1e6,
                      "learning rate: the optimizer's"),
        OPTION_LONG(sentinel_options_t, seed, "seed", "S", -1, 0, 1000, "seed: the checkpoint's"),
        OPTION_END};
    const option_table_t table = {"prog", "[options]", rows};
    sentinel_options_t o;
    CHECK(options_defaults(&table, &o) == 0 && isnan(o.lr) && o.seed == -1);
    char def[64];
    options_default_text(&rows[0], def, sizeof def);
    CHECK_STR(def, "");
    options_default_text(&rows[1], def, sizeof def);
    CHECK_STR(def, "");
    emitted_argv_t a = {.argv = {"prog"}, .argc = 1};
    CHECK(options_emit(&table, &o, NULL, emitted_argv_add, &a) == 0);
    o.lr = 0.5;
    o.seed = 7;
    CHECK(options_emit(&table, &o, NULL, emitted_argv_add, &a) == 2);
    CHECK(a.argc == 5 && strcmp(a.argv[2], "0.5") == 0 && strcmp(a.argv[4], "7") == 0);
    emitted_argv_free(&a);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    options_usage(&table, f);
    fclose(f);
    CHECK(strstr(text, "(default") == NULL);
    free(text);
}

/* ---- values that are flags, and rows with a bare value ---------------------- */

typedef struct {
    const char *out, *wire, *predictions;
    long offset;
    int overwrite;
    option_strings_t tags;
} value_options_t;

#define V value_options_t
static const option_t s_value_rows[] = {
    OPTION_STRING(V, out, "out", "DIR", NULL, "run directory"),
    OPTION_STRING(V, wire, "wire", "uint8|jpeg", "uint8", "what is sent"),
    OPTION_STRING_BARE(V, predictions, "predictions", "topk|probs|all", NULL, "topk",
                       "write predictions"),
    OPTION_LONG(V, offset, "offset", "N", 0, -10, 10, "a signed number"),
    OPTION_FLAG(V, overwrite, "overwrite", "replace"),
    OPTION_STRINGS(V, tags, "tag", "T", 4, "repeatable"),
    OPTION_END};
#undef V
static const option_table_t s_value_table = {"prog", "[options]", s_value_rows};

/* options_parse of words on s_value_table; *err (may be NULL) gets what it
 * said on stderr (static; the next call overwrites it). */
static int parse_values(const char *words, value_options_t *o, const char **err, int *next)
{
    static char line[1024], said[1024];
    char *argv[64];
    snprintf(line, sizeof line, "%s", words);
    int argc = split(line, argv, 64);
    fflush(stderr);
    int saved = dup(2);
    FILE *tmp = tmpfile();
    CHECK(saved >= 0 && tmp != NULL);
    CHECK(dup2(fileno(tmp), 2) == 2);
    int rc = options_parse(&s_value_table, argc, argv, o, next);
    fflush(stderr);
    CHECK(dup2(saved, 2) == 2);
    close(saved);
    rewind(tmp);
    size_t n = fread(said, 1, sizeof said - 1, tmp);
    said[n] = '\0';
    fclose(tmp);
    if (err)
        *err = said;
    if (n)
        fprintf(stderr, "(expected) %s", said);
    return rc;
}

static void test_flag_as_value(void)
{
    value_options_t o;
    const char *err;
    /* a string, a long, a string with choices: the next flag is no value */
    CHECK(parse_values("--out --overwrite", &o, &err, NULL) == -1);
    CHECK_STR(err, "prog: --out needs a value (DIR), got the flag --overwrite\n");
    CHECK(parse_values("--offset --out x", &o, &err, NULL) == -1);
    CHECK_STR(err, "prog: --offset needs a value (N), got the flag --out\n");
    CHECK(parse_values("--wire --out x", &o, &err, NULL) == -1);
    CHECK_STR(err, "prog: --wire needs a value (uint8 or jpeg), got the flag --out\n");
    CHECK(parse_values("--tag --tag", &o, &err, NULL) == -1);
    CHECK(strstr(err, "--tag needs a value (T), got the flag --tag") != NULL);
    CHECK(parse_values("--out --", &o, &err, NULL) == -1);   /* the end of the options */
    CHECK(parse_values("--ou --overwrite", &o, &err, NULL) == -1);   /* by a prefix */
    CHECK(strstr(err, "--out needs a value") != NULL);
    /* values that merely begin with '-' stay values */
    CHECK(parse_values("--offset -1 --out - --tag -x", &o, &err, NULL) == 0);
    CHECK(o.offset == -1 && strcmp(o.out, "-") == 0 && o.tags.n == 1);
    CHECK_STR(o.tags.v[0], "-x");
    /* a value that really begins with "--" goes joined */
    CHECK(parse_values("--out=--odd --tag=--t --overwrite", &o, &err, NULL) == 0);
    CHECK_STR(o.out, "--odd");
    CHECK_STR(o.tags.v[0], "--t");
    CHECK(o.overwrite == 1);
    /* and options_emit passes it so: the round trip holds */
    emitted_argv_t a = {.argv = {"prog"}, .argc = 1};
    CHECK(options_emit(&s_value_table, &o, NULL, emitted_argv_add, &a) == 3);
    CHECK(a.argc == 4);
    CHECK_STR(a.argv[1], "--out=--odd");
    CHECK_STR(a.argv[2], "--overwrite");
    CHECK_STR(a.argv[3], "--tag=--t");
    value_options_t back;
    CHECK(options_parse(&s_value_table, a.argc, a.argv, &back, NULL) == 0);
    CHECK(strcmp(back.out, "--odd") == 0 && back.tags.n == 1 && back.overwrite == 1);
    CHECK_STR(back.tags.v[0], "--t");
    emitted_argv_free(&a);
}

/* What getopt_long refuses is said in one line, never the whole usage */
static void test_refused_words(void)
{
    value_options_t o;
    const char *err;
    CHECK(parse_values("--out x --offest 3", &o, &err, NULL) == -1);   /* a typo: the nearest */
    CHECK_STR(err, "prog: unknown option --offest; did you mean --offset? (prog --help lists "
                   "them all)\n");
    CHECK(parse_values("--bogus", &o, &err, NULL) == -1);   /* nothing near */
    CHECK_STR(err, "prog: unknown option --bogus (prog --help lists them all)\n");
    CHECK(parse_values("--over=1", &o, &err, NULL) == -1);   /* a flag's abbreviation with a value */
    CHECK_STR(err, "prog: --overwrite takes no value (given --over=1)\n");
    CHECK(parse_values("--o x", &o, &err, NULL) == -1);   /* --out, --offset, --overwrite */
    CHECK_STR(err, "prog: --o is the start of 3 options; write the whole name (prog --help)\n");
    CHECK(parse_values("--offset", &o, &err, NULL) == -1);   /* the last word, no value */
    CHECK_STR(err, "prog: --offset needs a value (N)\n");
    CHECK(strchr(err, '\n') == err + strlen(err) - 1);
}

static void test_bare_value(void)
{
    value_options_t o;
    int next = 0;
    CHECK(parse_values("", &o, NULL, NULL) == 0 && o.predictions == NULL);
    CHECK(parse_values("--predictions", &o, NULL, NULL) == 0);   /* alone, last */
    CHECK_STR(o.predictions, "topk");
    CHECK(parse_values("--predictions probs", &o, NULL, NULL) == 0);
    CHECK_STR(o.predictions, "probs");
    CHECK(parse_values("--predictions=all", &o, NULL, NULL) == 0);
    CHECK_STR(o.predictions, "all");
    CHECK(parse_values("--pred all", &o, NULL, NULL) == 0);   /* a prefix, a separate value */
    CHECK_STR(o.predictions, "all");
    /* followed by a flag: the bare value, and the flag is itself */
    CHECK(parse_values("--predictions --out X", &o, NULL, &next) == 0);
    CHECK_STR(o.predictions, "topk");
    CHECK_STR(o.out, "X");
    CHECK(next == 4);
    CHECK(parse_values("--predictions --overwrite", &o, NULL, NULL) == 0);
    CHECK(strcmp(o.predictions, "topk") == 0 && o.overwrite == 1);
    CHECK(parse_values("--predictions -- op", &o, NULL, &next) == 0);
    CHECK_STR(o.predictions, "topk");
    CHECK(next == 3);
    /* operands are still permuted to the end, a separate value kept with its flag */
    char w0[] = "prog", w1[] = "op", w2[] = "--predictions", w3[] = "probs", w4[] = "--out",
         w5[] = "d";
    char *argv[] = {w0, w1, w2, w3, w4, w5, NULL};
    CHECK(options_parse(&s_value_table, 6, argv, &o, &next) == 0);
    CHECK(strcmp(o.predictions, "probs") == 0 && strcmp(o.out, "d") == 0);
    CHECK(next == 5 && strcmp(argv[next], "op") == 0);
    /* what is emitted parses back */
    emitted_argv_t a = {.argv = {"prog"}, .argc = 1};
    CHECK(options_emit(&s_value_table, &o, NULL, emitted_argv_add, &a) == 2);
    value_options_t back;
    CHECK(options_parse(&s_value_table, a.argc, a.argv, &back, NULL) == 0);
    CHECK(strcmp(back.predictions, "probs") == 0 && strcmp(back.out, "d") == 0);
    emitted_argv_free(&a);
    /* the usage says it */
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    options_usage(&s_value_table, f);
    fclose(f);
    CHECK(strstr(text, "\n  --predictions [topk|probs|all]") != NULL);
    CHECK(strstr(text, "write predictions (--predictions alone: topk)\n") != NULL);
    free(text);
}

static void test_value_words(void)
{
    char w[128];
    options_value_words(options_find(&s_value_table, "predictions"), w, sizeof w);
    CHECK_STR(w, "topk, probs or all");
    options_value_words(options_find(&s_value_table, "wire"), w, sizeof w);
    CHECK_STR(w, "uint8 or jpeg");
    options_value_words(options_find(&s_value_table, "out"), w, sizeof w);
    CHECK_STR(w, "DIR");
    const option_t mixed = {.name = "classes", .type = OPTION_TYPE_STRING,
                            .metavar = "FILE|numeric"};
    options_value_words(&mixed, w, sizeof w);
    CHECK_STR(w, "FILE|numeric");
}

int main(void)
{
    test_flag_as_value();
    test_bare_value();
    test_refused_words();
    test_value_words();
    test_sentinels();
    test_defaults();
    test_values();
    test_errors();
    test_usage();
    test_emit();
    test_walk();
    return check_exit("test_options");
}
