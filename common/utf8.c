#include "common/utf8.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int utf8_char_len(const char *str)
{
    const unsigned char *s = (const unsigned char *)str;
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

bool utf8_is_valid(const char *s)
{
    for (int len; *s; s += len)
        if ((len = utf8_char_len(s)) == 0)
            return false;
    return true;
}

size_t utf8_length(const char *s)
{
    size_t n = 0;
    while (*s) {
        int len = utf8_char_len(s);
        s += len ? len : 1;
        n++;
    }
    return n;
}

char *utf8_repair(const char *s)
{
    static const char replacement[] = "\xef\xbf\xbd"; /* U+FFFD */
    size_t len = strlen(s);
    char *out = malloc(3 * len + 1); /* each invalid byte grows to three */
    if (!out)
        return NULL;
    size_t n = 0;
    while (*s) {
        int k = utf8_char_len(s);
        if (k == 0) {
            memcpy(out + n, replacement, 3);
            n += 3;
            s++;
        } else {
            memcpy(out + n, s, (size_t)k);
            n += (size_t)k;
            s += k;
        }
    }
    out[n] = '\0';
    return out;
}

size_t utf8_escape_line(const char *s, char *out, size_t cap)
{
    size_t n = 0;
    if (cap == 0)
        return 0;
    for (int k; *s; s += k) {
        unsigned char c = (unsigned char)*s;
        char esc[5];
        const char *piece = s;
        k = utf8_char_len(s);
        size_t len = (size_t)k;
        if (k == 0 || c < 0x20 || c == 0x7f) {
            k = 1;
            piece = esc;
            len = c == '\n' || c == '\r' || c == '\t' ? 2 : 4;
            if (len == 2)
                esc[0] = '\\', esc[1] = c == '\n' ? 'n' : c == '\r' ? 'r' : 't';
            else
                snprintf(esc, sizeof esc, "\\x%02x", c);
        }
        if (n + len >= cap)
            break;
        memcpy(out + n, piece, len);
        n += len;
    }
    out[n] = '\0';
    return n;
}

char *utf8_percent_escape(const char *s)
{
    char *enc = malloc(3 * strlen(s) + 1);
    if (!enc)
        return NULL;
    size_t n = 0;
    for (int k; *s; s += k) {
        k = utf8_char_len(s);
        if (k == 0 || *s == '%') {
            k = 1;
            n += (size_t)snprintf(enc + n, 4, "%%%02X", (unsigned char)*s);
        } else {
            memcpy(enc + n, s, (size_t)k);
            n += (size_t)k;
        }
    }
    enc[n] = '\0';
    return enc;
}
