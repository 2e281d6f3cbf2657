/* reporterd's option table: defaults and ranges, the required options, a
 * usage that names every option, and the argv a launcher emits from a
 * filled struct parsing back to the same struct. */
#include "reporterd/options.h"

#include "tests/common/emitted_argv.h"
#include "tests/proto/check.h"

#include <stdlib.h>
#include <string.h>

static int parse_words(const char *words, reporter_options_t *o)
{
    static char line[1024];
    char *argv[64];
    int argc = 0;
    snprintf(line, sizeof line, "%s", words);
    argv[argc++] = "reporterd";
    for (char *save = NULL, *w = strtok_r(line, " ", &save); w && argc < 63;
         w = strtok_r(NULL, " ", &save))
        argv[argc++] = w;
    argv[argc] = NULL;
    memset(o, 0, sizeof *o);
    return reporter_options_parse(o, argc, argv);
}

#define REQUIRED "--sub ipc://e --reducer ipc://r --out /tmp/run "

static void test_defaults(void)
{
    reporter_options_t o;
    CHECK(parse_words(REQUIRED, &o) == 0);
    CHECK_STR(o.sub, "ipc://e");
    CHECK_STR(o.reducer, "ipc://r");
    CHECK_STR(o.out, "/tmp/run");
    CHECK(o.tap == NULL && o.metrics_http == NULL && o.seed_csv == NULL);
    CHECK(o.tap_hwm == 1000 && o.linger_s == 0 && o.start_epoch == -1 && !o.verbose);
}

static void test_errors(void)
{
    reporter_options_t o;
    fprintf(stderr, "(the errors below are expected)\n");
    CHECK(parse_words("--sub a --reducer b", &o) == -1); /* --out is required */
    CHECK(parse_words(REQUIRED "--tap-hwm 0", &o) == -1);
    CHECK(parse_words(REQUIRED "--tap-hwm 1000000", &o) == 0);
    CHECK(parse_words(REQUIRED "--linger 86401", &o) == -1);
    CHECK(parse_words(REQUIRED "--start-epoch -1", &o) == -1);
    CHECK(parse_words(REQUIRED "--start-epoch 0", &o) == 0 && o.start_epoch == 0);
    CHECK(parse_words(REQUIRED "--bogus", &o) == -1);
    CHECK(parse_words("--help", &o) == 1);
}

static void test_usage_names_every_option(void)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    options_usage(&reporter_options_table, f);
    fclose(f);
    int options = 0;
    for (const option_t *opt = reporter_options_table.rows; opt->type != OPTION_TYPE_END; opt++) {
        if (opt->type == OPTION_TYPE_SECTION)
            continue;
        char flag[64];
        snprintf(flag, sizeof flag, "\n  --%s", opt->name);
        CHECK_MSG(strstr(text, flag) != NULL, "usage lacks --%s", opt->name);
        options++;
    }
    CHECK(options == 12); /* 10 of reporterd's own, --curve-dir and --insecure */
    free(text);
}

/* What ddpipe train starts reporterd with, emitted and parsed back. */
static void test_emit_round_trip(void)
{
    reporter_options_t o, back;
    CHECK(parse_words(REQUIRED "--tap ipc://t --tap-hwm 50 --metrics-http 127.0.0.1:9100 "
                      "--linger 3 --seed-csv 2ranks.csv --start-epoch 4 --verbose",
                      &o) == 0);
    emitted_argv_t a = {.argv = {"reporterd"}, .argc = 1};
    CHECK(options_emit(&reporter_options_table, &o, NULL, emitted_argv_add, &a) == 10);
    memset(&back, 0, sizeof back);
    CHECK(reporter_options_parse(&back, a.argc, a.argv) == 0);
    const char **o_str[] = {&o.sub, &o.reducer, &o.out, &o.tap, &o.metrics_http, &o.seed_csv};
    const char **b_str[] = {&back.sub, &back.reducer, &back.out, &back.tap, &back.metrics_http,
                            &back.seed_csv};
    for (size_t i = 0; i < sizeof o_str / sizeof *o_str; i++) {
        CHECK_STR(*b_str[i], *o_str[i]);
        *b_str[i] = *o_str[i];
    }
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
