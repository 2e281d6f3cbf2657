#include "reporterd/textfmt.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *textfmt_num(double v, char buf[TEXTFMT_NUM_LEN])
{
    if (!isfinite(v)) {
        snprintf(buf, TEXTFMT_NUM_LEN, "null");
        return buf;
    }
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, TEXTFMT_NUM_LEN, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    /* like Python's repr, a float always looks like one: "1.0", not "1" */
    if (!strpbrk(buf, ".en"))
        strcat(buf, ".0");
    return buf;
}

/* Length of the valid UTF-8 sequence at s (1..4), or 0 when invalid.
 * Rejects overlong forms, surrogates and code points above U+10FFFF. */
static int s_utf8_seq(const unsigned char *s)
{
    unsigned char c = s[0];
    if (c < 0x80)
        return 1;
    int len;
    uint32_t cp;
    if ((c & 0xe0) == 0xc0) {
        len = 2;
        cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
        len = 3;
        cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
        len = 4;
        cp = c & 0x07;
    } else
        return 0;
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) /* also stops at the terminating NUL */
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

void textfmt_json_string(FILE *out, const char *s)
{
    if (!s) {
        fputs("null", out);
        return;
    }
    const unsigned char *p = (const unsigned char *)s;
    fputc('"', out);
    while (*p) {
        int len = s_utf8_seq(p);
        if (len == 0) {
            fputs("\\ufffd", out);
            p++;
            continue;
        }
        if (len > 1) {
            fwrite(p, 1, (size_t)len, out);
            p += len;
            continue;
        }
        unsigned char c = *p++;
        switch (c) {
        case '"': fputs("\\\"", out); break;
        case '\\': fputs("\\\\", out); break;
        case '\b': fputs("\\b", out); break;
        case '\f': fputs("\\f", out); break;
        case '\n': fputs("\\n", out); break;
        case '\r': fputs("\\r", out); break;
        case '\t': fputs("\\t", out); break;
        default:
            if (c < 0x20 || c == 0x7f)
                fprintf(out, "\\u%04x", c);
            else
                fputc(c, out);
        }
    }
    fputc('"', out);
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

size_t textfmt_utf8_len(const char *s)
{
    size_t n = 0;
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        int len = s_utf8_seq(p);
        p += len ? len : 1;
        n++;
    }
    return n;
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
