/* textfmt: numbers, CSV fields, timestamps; and common/json.h strings and
 * common/utf8.h lengths, which the run directory's files rely on. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "common/json.h"
#include "common/utf8.h"
#include "reporterd/textfmt.h"

static char *s_capture(void (*fn)(FILE *, const char *), const char *s)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return NULL;
    fn(f, s);
    fclose(f);
    return text;
}

static void s_expect(void (*fn)(FILE *, const char *), const char *in, const char *want)
{
    char *got = s_capture(fn, in);
    if (!got || strcmp(got, want) != 0) {
        fprintf(stderr, "input [%s]: got [%s] want [%s]\n", in ? in : "(null)",
                got ? got : "(null)", want);
        g_failures++;
    }
    free(got);
}

static void test_num(void)
{
    char b[TEXTFMT_NUM_LEN];
    CHECK(strcmp(textfmt_num(0.85, b), "0.85") == 0);
    CHECK(strcmp(textfmt_num(0.1 + 0.2, b), "0.30000000000000004") == 0);
    CHECK(strcmp(textfmt_num(1.0 / 3.0, b), "0.3333333333333333") == 0);
    CHECK(strcmp(textfmt_num(0.0, b), "0.0") == 0);
    CHECK(strcmp(textfmt_num(1e16, b), "1e+16") == 0);
    CHECK(strcmp(textfmt_num(-2.0, b), "-2.0") == 0);
    CHECK(strcmp(textfmt_num(12345.0, b), "12345.0") == 0);
    CHECK(strcmp(textfmt_num(1e-7, b), "9.9999999999999995e-08") == 0 ||
          strcmp(b, "1e-07") == 0);
    CHECK(strcmp(textfmt_num(NAN, b), "null") == 0);
    CHECK(strcmp(textfmt_num(INFINITY, b), "null") == 0);
    /* round trip over awkward values */
    double vals[] = {0.7, 2.0 / 3.0, 1e300, 5e-324, 123456.789, 0.1234567890123456789};
    for (size_t i = 0; i < sizeof vals / sizeof *vals; i++)
        CHECK(strtod(textfmt_num(vals[i], b), NULL) == vals[i]);
}

/* Strings in JSON (common/json.h): escaped by jansson, and bytes that are
 * not UTF-8 become U+FFFD rather than an error. */
static void s_expect_json(const char *in, const char *want)
{
    json_t *j = json_utf8_or_null(in);
    char *got = j ? json_to_text(j, JSON_STYLE_COMPACT) : NULL;
    if (!got || strcmp(got, want) != 0) {
        fprintf(stderr, "input [%s]: got [%s] want [%s]\n", in ? in : "(null)",
                got ? got : "(null)", want);
        g_failures++;
    }
    free(got);
    json_decref(j);
}

static void test_json(void)
{
    s_expect_json("plain", "\"plain\"");
    s_expect_json("a\"b\\c", "\"a\\\"b\\\\c\"");
    s_expect_json("t\tn\nr\r\x01", "\"t\\tn\\nr\\r\\u0001\"");
    s_expect_json("p\xc3\xa2t\xc3\xa9", "\"p\xc3\xa2t\xc3\xa9\"");
    s_expect_json("bad\xff\xc3", "\"bad\xef\xbf\xbd\xef\xbf\xbd\"");
    s_expect_json("\xed\xa0\x80", "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\""); /* surrogate */
    s_expect_json("\xc0\xaf", "\"\xef\xbf\xbd\xef\xbf\xbd\"");                   /* overlong */
    s_expect_json(NULL, "null");
}

static void test_csv(void)
{
    s_expect(textfmt_csv_field, "a/b.jpg", "a/b.jpg");
    s_expect(textfmt_csv_field, "a,b.jpg", "\"a,b.jpg\"");
    s_expect(textfmt_csv_field, "say \"hi\".jpg", "\"say \"\"hi\"\".jpg\"");
    s_expect(textfmt_csv_field, "two\nlines", "\"two\nlines\"");
    s_expect(textfmt_csv_field, NULL, "");
    /* paths: valid UTF-8 without '%' unchanged; '%' and bad bytes %XX */
    s_expect(textfmt_csv_path, "c/p\xc3\xa2t\xc3\xa9 1.jpg", "c/p\xc3\xa2t\xc3\xa9 1.jpg");
    s_expect(textfmt_csv_path, "c/\xff\xfe,x.jpg", "\"c/%FF%FE,x.jpg\"");
    s_expect(textfmt_csv_path, "c/50%.jpg", "c/50%25.jpg");
    s_expect(textfmt_csv_path, "c/\xc3(\xed\xa0\x80.jpg", "c/%C3(%ED%A0%80.jpg"); /* cut, surrogate */
    s_expect(textfmt_csv_path, "c/a\nb.jpg", "\"c/a\nb.jpg\"");
    s_expect(textfmt_csv_path, NULL, "");
}

static void test_escape_line(void)
{
    char out[64];
    CHECK(utf8_escape_line("plain p\xc3\xa2t\xc3\xa9", out, sizeof out) == 12);
    CHECK(strcmp(out, "plain p\xc3\xa2t\xc3\xa9") == 0);
    utf8_escape_line("a\nb\rc\td\x01" "e\x7f\xff\xfe", out, sizeof out);
    CHECK(strcmp(out, "a\\nb\\rc\\td\\x01e\\x7f\\xff\\xfe") == 0);
    char small[5];
    CHECK(utf8_escape_line("ab\ncd", small, sizeof small) == 4 && strcmp(small, "ab\\n") == 0);
    CHECK(utf8_escape_line("abc\xff", small, sizeof small) == 3 && strcmp(small, "abc") == 0);
}

static void test_utf8_and_time(void)
{
    CHECK(utf8_length("") == 0);
    CHECK(utf8_length("weighted avg") == 12);
    CHECK(utf8_length("p\xc3\xa2t\xc3\xa9") == 4);
    CHECK(utf8_length("\xe7\x8c\xab\xf0\x9f\x90\x88") == 2);
    CHECK(utf8_length("a\xff") == 2);
    char t[32];
    CHECK(strcmp(textfmt_iso8601(0.0, t), "1970-01-01T00:00:00.000Z") == 0);
    CHECK(strcmp(textfmt_iso8601(1714564800.25, t), "2024-05-01T12:00:00.250Z") == 0);
}

int main(void)
{
    test_num();
    test_json();
    test_csv();
    test_escape_line();
    test_utf8_and_time();
    return check_done("test_textfmt");
}
