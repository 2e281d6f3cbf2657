/* reporterd's option table: defaults and ranges, the required options, a
 * usage that names every option, and the argv a launcher emits from a
 * filled struct parsing back to the same struct. */
#include "reporterd/options.h"

#include "tests/common/adopt_strings.h"
#include "tests/common/argv_words.h"
#include "tests/common/emitted_argv.h"
#include "tests/common/usage_text.h"
#include "tests/proto/check.h"

#include <stdlib.h>
#include <string.h>

static int parse_words(const char *words, reporter_options_t *o)
{
    char *argv[64];
    int argc = argv_words("reporterd", words, argv, 64);
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
    CHECK(o.http_max_connections == 128 && o.http_max_per_address == 64);
}

static void test_errors(void)
{
    reporter_options_t o;
    fprintf(stderr, "(the errors below are expected)\n");
    CHECK(parse_words("--sub a --reducer b", &o) == -1); /* --out is required */
    CHECK(parse_words(REQUIRED "--tap-hwm 0", &o) == -1);
    CHECK(parse_words(REQUIRED "--tap-hwm 1000000", &o) == 0);
    CHECK(parse_words(REQUIRED "--linger 86401", &o) == -1);
    /* fewer than the 16 streams plus room for scrapes; more threads than sensible */
    CHECK(parse_words(REQUIRED "--http-max-per-address 23", &o) == -1);
    CHECK(parse_words(REQUIRED "--http-max-connections 4097", &o) == -1);
    CHECK(parse_words(REQUIRED "--start-epoch -1", &o) == -1);
    CHECK(parse_words(REQUIRED "--start-epoch 0", &o) == 0 && o.start_epoch == 0);
    CHECK(parse_words(REQUIRED "--bogus", &o) == -1);
    CHECK(parse_words("--help", &o) == 1);
}

static void test_usage_names_every_option(void)
{
    int options, unnamed;
    char *text = usage_text(&reporter_options_table, &options, &unnamed);
    CHECK(unnamed == 0);
    CHECK(options == 15); /* 12 of reporterd's own, --curve-dir and --insecure */
    free(text);
}

/* What ddpipe train starts reporterd with, emitted and parsed back. */
static void test_emit_round_trip(void)
{
    reporter_options_t o, back;
    CHECK(parse_words(REQUIRED "--tap ipc://t --tap-hwm 50 --metrics-http 127.0.0.1:9100 "
                      "--linger 3 --seed-csv 2ranks.csv --start-epoch 4 --verbose "
                      "--http-max-connections 256",
                      &o) == 0);
    emitted_argv_t a = {.argv = {"reporterd"}, .argc = 1};
    CHECK(options_emit(&reporter_options_table, &o, NULL, emitted_argv_add, &a) == 11);
    memset(&back, 0, sizeof back);
    CHECK(reporter_options_parse(&back, a.argc, a.argv) == 0);
    CHECK(adopt_strings(&reporter_options_table, &back, &o) == 0);
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
