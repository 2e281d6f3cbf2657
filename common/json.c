#include "common/json.h"

#include "common/utf8.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *json_number_text(double v, bool point, char buf[JSON_NUMBER_TEXT_LEN])
{
    if (!isfinite(v)) {
        snprintf(buf, JSON_NUMBER_TEXT_LEN, "null");
        return buf;
    }
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, JSON_NUMBER_TEXT_LEN, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    if (point && !strpbrk(buf, ".e"))
        strcat(buf, ".0");
    return buf;
}

json_t *json_number_or_null(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

json_t *json_utf8_or_null(const char *s)
{
    if (!s)
        return json_null();
    json_t *j = json_string(s);
    if (j)
        return j;
    char *fixed = utf8_repair(s); /* json_string refuses what is not UTF-8 */
    j = fixed ? json_string(fixed) : NULL;
    free(fixed);
    return j;
}

/* Is the number token p[0..n) a real (jansson writes reals with a '.' or an
 * exponent, integers without)? */
static bool s_is_real(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] == '.' || p[i] == 'e' || p[i] == 'E')
            return true;
    return false;
}

/* jansson's text of v, with every real rewritten in its shortest form. */
static int s_put(FILE *out, const json_t *v, size_t flags, bool point)
{
    char *raw = json_dumps(v, flags | JSON_ENCODE_ANY | JSON_PRESERVE_ORDER);
    if (!raw)
        return -1;
    const char *p = raw;
    while (*p) {
        if (*p == '"') { /* a string: copy it through its closing quote */
            const char *q = p + 1;
            while (*q != '"')
                q += *q == '\\' ? 2 : 1;
            fwrite(p, 1, (size_t)(q + 1 - p), out);
            p = q + 1;
        } else if (*p == '-' || (*p >= '0' && *p <= '9')) {
            size_t n = strspn(p, "+-.0123456789eE");
            char num[JSON_NUMBER_TEXT_LEN];
            if (s_is_real(p, n)) /* "%.17g": exact, so strtod gives v back */
                fputs(json_number_text(strtod(p, NULL), point, num), out);
            else
                fwrite(p, 1, n, out);
            p += n;
        } else {
            fputc(*p++, out);
        }
    }
    free(raw);
    return 0;
}

/* JSON_STYLE_LINES: one key of the top-level object per line. */
static int s_put_lines(FILE *out, const json_t *doc)
{
    if (!json_is_object(doc))
        return s_put(out, doc, 0, true) != 0 || fputc('\n', out) == EOF ? -1 : 0;
    fputs("{\n", out);
    size_t left = json_object_size(doc);
    const char *key;
    const json_t *value;
    json_object_foreach((json_t *)doc, key, value) {
        json_t *name = json_string(key);
        int rc = name ? 0 : -1;
        fputs("  ", out);
        if (rc == 0)
            rc = s_put(out, name, 0, true);
        json_decref(name);
        fputs(": ", out);
        size_t n = json_is_array(value) ? json_array_size(value) : 0;
        if (n && json_is_object(json_array_get(value, 0))) {
            fputs("[\n", out);
            for (size_t i = 0; i < n && rc == 0; i++) {
                fputs("    ", out);
                rc = s_put(out, json_array_get(value, i), 0, true);
                fputs(i + 1 < n ? ",\n" : "\n", out);
            }
            fputs("  ]", out);
        } else if (rc == 0) {
            rc = s_put(out, value, 0, true);
        }
        fputs(--left ? ",\n" : "\n", out);
        if (rc != 0)
            return -1;
    }
    fputs("}\n", out);
    return 0;
}

char *json_to_text(const json_t *doc, json_style_t style)
{
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    if (!out)
        return NULL;
    int rc;
    switch (style) {
    case JSON_STYLE_COMPACT: rc = s_put(out, doc, JSON_COMPACT, false); break;
    case JSON_STYLE_SPACED: rc = s_put(out, doc, 0, true); break;
    default: rc = s_put_lines(out, doc); break;
    }
    if (ferror(out))
        rc = -1;
    if (fclose(out) != 0 || rc != 0) {
        free(text);
        return NULL;
    }
    return text;
}
