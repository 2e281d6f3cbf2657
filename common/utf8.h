/* utf8 — UTF-8 as RFC 3629 defines it: no overlong forms, no surrogates,
 * nothing past U+10FFFF. For text that leaves ddpipe (JSON, reports) and
 * for column widths. */
#ifndef DDP_UTF8_H
#define DDP_UTF8_H

#include <stdbool.h>
#include <stddef.h>

/* Bytes (1..4) of the valid character that starts at s, or 0 when the bytes
 * there are not valid UTF-8. An ASCII byte, NUL included, is 1. */
int utf8_char_len(const char *s);

/* Is all of s valid UTF-8? */
bool utf8_is_valid(const char *s);

/* Code points in s (what Python's len() counts); each invalid byte counts
 * as one. */
size_t utf8_length(const char *s);

/* A copy of s with each invalid byte replaced by U+FFFD (caller frees);
 * NULL when out of memory. */
char *utf8_repair(const char *s);

/* s as one line of valid UTF-8 for a log or the console: valid characters
 * as they are, \n \r \t for those controls, \xNN for any other control
 * byte (below 0x20, 0x7f) and for each byte that is not valid UTF-8 (so a
 * file name with a newline never splits a log line). Written to out (cap
 * bytes, NUL-terminated; cut before a character that does not fit).
 * Returns the bytes written, NUL excluded. */
size_t utf8_escape_line(const char *s, char *out, size_t cap);

/* A file name as valid UTF-8 that gives its bytes back: valid characters
 * as they are, '%' and each byte that is not valid UTF-8 as %XX (upper
 * case), so Python's urllib.parse.unquote_to_bytes() returns the name's
 * bytes. A copy (caller frees); NULL when out of memory. predictions.csv
 * and summary.json's failed_files write paths this way. */
char *utf8_percent_escape(const char *s);

#endif
