/* textfmt — the few text encodings the run directory's text files need:
 * numbers that print the same bytes for the same value (as summary.json's),
 * CSV fields and timestamps. */
#ifndef DDP_TEXTFMT_H
#define DDP_TEXTFMT_H

#include <stddef.h>
#include <stdio.h>

#include "common/json.h"

/* Shortest "%.{15,16,17}g" text that reads back as exactly v (like Python's
 * repr, so 0.85 prints "0.85", not "0.84999999999999998"; whole numbers get
 * ".0" so JSON readers see a float: "1.0", "1e+16"). NaN and +-inf
 * give "null" (JSON has no such numbers). The same text as summary.json's
 * numbers (json_number_text in common/json.h). */
#define TEXTFMT_NUM_LEN JSON_NUMBER_TEXT_LEN
const char *textfmt_num(double v, char buf[TEXTFMT_NUM_LEN]);

/* Write s as one CSV field (RFC 4180): quoted, with "" for ", when it holds
 * a comma, quote, CR or LF; as is otherwise. NULL writes an empty field. */
void textfmt_csv_field(FILE *out, const char *s);

/* A file path as one CSV field of valid UTF-8: '%' and every byte that is
 * not part of valid UTF-8 percent-encoded (%25, %FF; RFC 3986's form, so
 * Python's urllib.parse.unquote_to_bytes gives the name's bytes back), the
 * rest as it is; then textfmt_csv_field. A name without '%' that is valid
 * UTF-8 is written unchanged. */
void textfmt_csv_path(FILE *out, const char *s);

/* ISO-8601 UTC time with milliseconds, "2024-05-01T12:00:00.123Z".
 * buf needs 32 bytes. */
const char *textfmt_iso8601(double unix_s, char buf[32]);

#endif
