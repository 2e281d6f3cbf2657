/* textfmt — the few text encodings the run directory needs: numbers that
 * print the same bytes for the same value, JSON strings, CSV fields, and the
 * display width of UTF-8 names (for column layouts). */
#ifndef DDP_TEXTFMT_H
#define DDP_TEXTFMT_H

#include <stddef.h>
#include <stdio.h>

/* Shortest "%.{15,16,17}g" text that reads back as exactly v (like Python's
 * repr, so 0.85 prints "0.85", not "0.84999999999999998"; whole numbers get
 * ".0" so JSON readers see a float: "1.0", "1e+16"). NaN and +-inf
 * give "null" (JSON has no such numbers). buf needs 32 bytes. */
#define TEXTFMT_NUM_LEN 32
const char *textfmt_num(double v, char buf[TEXTFMT_NUM_LEN]);

/* Write s as a quoted JSON string: ", \ and control characters escaped;
 * bytes that are not valid UTF-8 become U+FFFD so the file stays valid JSON.
 * NULL writes null. */
void textfmt_json_string(FILE *out, const char *s);

/* Write s as one CSV field (RFC 4180): quoted, with "" for ", when it holds
 * a comma, quote, CR or LF; as is otherwise. NULL writes an empty field. */
void textfmt_csv_field(FILE *out, const char *s);

/* Code points in a UTF-8 string (what Python's len() counts); each invalid
 * byte counts as one. */
size_t textfmt_utf8_len(const char *s);

/* ISO-8601 UTC time with milliseconds, "2024-05-01T12:00:00.123Z".
 * buf needs 32 bytes. */
const char *textfmt_iso8601(double unix_s, char buf[32]);

#endif
