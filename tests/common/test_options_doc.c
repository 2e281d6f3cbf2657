/* common/options_doc: the Markdown page of a table (docs/USAGE.md's
 * sections): every option listed under its section, defaults and bare
 * values said, markup in help text escaped, lines wrapped without a
 * continuation that Markdown would read as a new list item. */
#include "common/options_doc.h"

#include "tests/proto/check.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *out, *predictions;
    long batch;
    int quiet;
    option_strings_t tags;
} doc_options_t;

#define D doc_options_t
static const option_t s_rows[] = {
    OPTION_STRING(D, out, "out", "DIR", NULL, "run directory"),
    OPTION_LONG(D, batch, "batch-size", "B", 64, 1, 4096,
                "per worker: global batch B*W, as state_dict <names> [x] and _private_ say; "
                "then words a wrap must not put first on a line: a - bb - ccc - dddd - "
                "a - bb - ccc - dddd - a - bb - ccc - 1. a 2. bb 3. ccc 4. dddd 5. a 6. bb "
                "7. ccc 8. dddd # a # bb # ccc # dddd # a # bb # ccc # dddd # a # bb # end"),
    OPTION_SECTION("run:"),
    OPTION_STRING_BARE(D, predictions, "predictions", "topk|probs|all", NULL, "topk",
                       "write predictions"),
    OPTION_FLAG(D, quiet, "quiet", NULL),
    OPTION_STRINGS(D, tags, "tag", "T", 4, "a tag"),
    OPTION_ELSEWHERE(OPTION_TYPE_FLAG, "insecure", NULL, "taken out before parsing"),
    OPTION_END};
#undef D
static const option_table_t s_table = {"prog run", "--out DIR [options]\nprog run --list",
                                       s_rows};
static const options_page_t s_page = {"prog-run", "1", "prog run", "run the thing", NULL,
                                      "First paragraph.\n\nSecond paragraph.", NULL};

/* open_memstream's buffer and size live in statics: with locals, GCC 12
 * at -O2 (the TSan build) warns of a dangling pointer to them */
static char *s_text;
static size_t s_len;

static char *markdown(void)
{
    FILE *f = open_memstream(&s_text, &s_len);
    CHECK(f != NULL);
    options_markdown(&s_table, &s_page, f);
    fclose(f);
    return s_text;
}

int main(void)
{
    char *md = markdown();
    const char *head = "\n## prog run\n\nRun the thing.\n\n```\nprog run --out DIR [options]\n"
                       "prog run --list\n```\n\nFirst paragraph.\n\nSecond paragraph.\n";
    CHECK(strncmp(md, head, strlen(head)) == 0);
    /* every option, in its section */
    char *run = strstr(md, "\n### Run\n\n");
    CHECK(strstr(md, "\n### Options\n\n- `--out DIR`: run directory.\n") != NULL);
    CHECK(run != NULL);
    for (const option_t *opt = s_rows; opt->type != OPTION_TYPE_END; opt++) {
        if (opt->type == OPTION_TYPE_SECTION)
            continue;
        char item[64];
        snprintf(item, sizeof item, "\n- `--%s", opt->name);
        char *at = strstr(md, item);
        CHECK_MSG(at != NULL, "--%s is not listed", opt->name);
        CHECK_MSG(!at || (at > run) == (opt > &s_rows[2]), "--%s under the wrong heading",
                  opt->name);
    }
    CHECK(strstr(md, "\n- `--predictions [topk|probs|all]`: write predictions. `--predictions` "
                     "alone means `topk`.\n") != NULL);
    CHECK(strstr(md, "\n- `--quiet`\n") != NULL);
    CHECK(strstr(md, "\n- `--tag T`: a tag. May be given more than once.\n") != NULL);
    /* markup escaped, an underscore inside a word kept */
    CHECK(strstr(md, "B\\*W, as state_dict \\<names> \\[x]") != NULL);
    CHECK(strstr(md, "\\_private\\_ say;") != NULL);
    CHECK(strstr(md, "Default: `64`.") != NULL);
    /* wrapped at 90 columns, no continuation line read as a list item */
    for (char *line = md, *end; *line; line = end + 1) {
        end = strchr(line, '\n');
        int n = (int)(end - line);
        CHECK_MSG(n <= 90, "line too long: %.*s", n, line);
        if (strncmp(line, "  ", 2) == 0)
            CHECK_MSG(line[2] != '-' && line[2] != '#' &&
                          !(line[2] >= '0' && line[2] <= '9' && line[3] == '.'),
                      "a continuation reads as a list item: %.*s", n, line);
    }
    if (check_failures)
        fprintf(stderr, "the page:\n%s", md);
    free(md);
    return check_exit("test_options_doc");
}
