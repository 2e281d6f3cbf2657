#include "reporterd/textfmt.h"
#include "common/utf8.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *textfmt_num(double v, char buf[TEXTFMT_NUM_LEN])
{
    return json_number_text(v, true, buf);
}

void textfmt_csv_field(FILE *out, const char *s)
{
    if (!s)
        return;
    if (!strpbrk(s, ",\"\r\n")) {
        fputs(s, out);
        return;
    }
    fputc('"', out);
    for (const char *p = s; *p; p++) {
        if (*p == '"')
            fputc('"', out);
        fputc(*p, out);
    }
    fputc('"', out);
}

void textfmt_csv_path(FILE *out, const char *s)
{
    if (!s || (utf8_is_valid(s) && !strchr(s, '%'))) {
        textfmt_csv_field(out, s);
        return;
    }
    char *enc = utf8_percent_escape(s);
    if (enc)   /* out of memory: an empty field beats invalid UTF-8 */
        textfmt_csv_field(out, enc);
    free(enc);
}

const char *textfmt_iso8601(double unix_s, char buf[32])
{
    double whole = floor(unix_s);
    time_t t = (time_t)whole;
    unsigned ms = (unsigned)((unix_s - whole) * 1000.0) % 1000u;
    struct tm tm;
    size_t len = 0;
    if (gmtime_r(&t, &tm))
        len = strftime(buf, 32, "%Y-%m-%dT%H:%M:%S", &tm);
    if (len == 0 || len > 20) /* out-of-range time: still a valid stamp */
        len = (size_t)snprintf(buf, 32, "1970-01-01T00:00:00");
    snprintf(buf + len, 32 - len, ".%03uZ", ms);
    return buf;
}
