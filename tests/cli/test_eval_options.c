/* Unit test of cli/eval_options' table: --predictions alone means topk
 * (it was a bare flag before it took a mode) and never takes the next flag
 * as its value; a flag where any value belongs is refused. */
#include "cli/eval_options.h"

#include "tests/proto/check.h"

#include <stdlib.h>
#include <string.h>

/* options_parse of eval's table on words (argv[0] "eval"). */
static int parse(const char *words, eval_options_t *o, int *next)
{
    static char line[1024];
    char *argv[64];
    int argc = 0;
    argv[argc++] = "eval";
    snprintf(line, sizeof line, "%s", words);
    for (char *save = NULL, *w = strtok_r(line, " ", &save); w && argc < 63;
         w = strtok_r(NULL, " ", &save))
        argv[argc++] = w;
    argv[argc] = NULL;
    int n = 0;
    int rc = options_parse(&eval_options_table, argc, argv, o, &n);
    CHECK_MSG(rc != 0 || n == argc, "an operand left: %s", argv[n]);
    if (next)
        *next = n;
    return rc;
}

int main(void)
{
    eval_options_t o;
    CHECK(parse("--out X", &o, NULL) == 0 && o.predictions == NULL);
    CHECK(parse("--out X --predictions", &o, NULL) == 0);
    CHECK_STR(o.predictions, "topk");
    CHECK(parse("--predictions --out X", &o, NULL) == 0);
    CHECK_STR(o.predictions, "topk");
    CHECK_STR(o.out, "X");
    CHECK(parse("--predictions --overwrite --batch-size 8", &o, NULL) == 0);
    CHECK(strcmp(o.predictions, "topk") == 0 && o.overwrite && o.batch_size == 8);
    CHECK(parse("--predictions probs --out X", &o, NULL) == 0);
    CHECK_STR(o.predictions, "probs");
    CHECK(parse("--predictions=all", &o, NULL) == 0);
    CHECK_STR(o.predictions, "all");
    fprintf(stderr, "(the errors below are expected)\n");
    CHECK(parse("--out --predictions", &o, NULL) == -1);
    CHECK(parse("--wire --out X", &o, NULL) == -1);
    CHECK(parse("--batch-size --out X", &o, NULL) == -1);
    /* the usage says what alone means */
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    options_usage(&eval_options_table, f);
    fclose(f);
    CHECK(strstr(text, "\n  --predictions [topk|probs|all]") != NULL);
    CHECK(strstr(text, "(--predictions alone: topk)") != NULL);
    free(text);
    return check_exit("test_cli_eval_options");
}
