/* common/utf8: the two escapes that keep file names from breaking what
 * ddpipe writes (issue 28 item 8): utf8_escape_line for log lines,
 * utf8_percent_escape for predictions.csv and summary.json paths. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/utf8.h"
#include "tests/gpud/tcheck.h"

static void line(const char *in, const char *want)
{
    char out[64];
    size_t n = utf8_escape_line(in, out, sizeof out);
    CHECK(strcmp(out, want) == 0 && n == strlen(want), "escape_line(%s): got '%s', want '%s'", in,
          out, want);
    CHECK(utf8_is_valid(out), "escape_line(%s) is not UTF-8", in);
}

static void pct(const char *in, const char *want)
{
    char *got = utf8_percent_escape(in);
    REQUIRE(got, "out of memory");
    CHECK(strcmp(got, want) == 0, "percent_escape: got '%s', want '%s'", got, want);
    CHECK(utf8_is_valid(got), "percent_escape(%s) is not UTF-8", want);
    free(got);
}

int main(void)
{
    line("plain p\xc3\xa2t\xc3\xa9.jpg", "plain p\xc3\xa2t\xc3\xa9.jpg");
    line("a\nb\rc\td", "a\\nb\\rc\\td");
    line("x\x01\x7fy", "x\\x01\\x7fy");
    line("bad\xff\xfe", "bad\\xff\\xfe");
    line("\xed\xa0\x80", "\\xed\\xa0\\x80");   /* a surrogate is not UTF-8 */
    {   /* cut before an escape that does not fit: never half of one */
        char out[4];
        size_t n = utf8_escape_line("ab\ncd", out, sizeof out);
        CHECK(n == 2 && strcmp(out, "ab") == 0, "escape_line into 4 bytes gave '%s' (%zu)", out, n);
    }
    pct("c/p\xc3\xa2t\xc3\xa9 1.jpg", "c/p\xc3\xa2t\xc3\xa9 1.jpg");
    pct("c/50%.jpg", "c/50%25.jpg");
    pct("c/\xff\xfe-raw.jpg", "c/%FF%FE-raw.jpg");
    pct("c/\xc3(\xed\xa0\x80", "c/%C3(%ED%A0%80");   /* a cut character, a surrogate */
    pct("", "");
    return tc_done("test_utf8");
}
