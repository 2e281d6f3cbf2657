/* json — the JSON text of every file and stream ddpipe writes.
 *
 * Documents are read and built with jansson (Debian libjansson-dev) and its
 * own API: json_loadb, json_object_set_new, json_integer, ... This file
 * adds what jansson 2.14 lacks, so that every writer prints the same way:
 *   - reals in the shortest text that reads back as exactly the same double,
 *     as Python's repr: 0.1 is "0.1" (jansson prints "%.17g",
 *     "0.10000000000000001"); 15 to 17 significant digits;
 *   - the layouts below; keys always in insertion order;
 *   - NaN/inf as null and non-UTF-8 bytes as U+FFFD instead of a failure.
 * Strings are UTF-8 as is, with ", \ and control characters escaped.
 */
#ifndef DDP_JSON_H
#define DDP_JSON_H

#include <jansson.h>
#include <stdbool.h>

typedef enum {
    /* {"a":1,"b":[0.5,2]}: no spaces; a whole real prints as an integer
     * ("2") — the tap's --json lines, the safetensors header */
    JSON_STYLE_COMPACT,
    /* {"a": 1, "b": [0.5, 2.0]}: Python's json.dumps on one line (", " and
     * ": ", a whole real keeps ".0") */
    JSON_STYLE_SPACED,
    /* SPACED, but a top-level object has one key per line, indented by two,
     * and each of its arrays of objects one element per line; ends with a
     * newline (summary.json: a line per key to read, diff or strip) */
    JSON_STYLE_LINES,
} json_style_t;

/* The text of doc (an object, array or any other value); caller frees.
 * NULL when out of memory. */
char *json_to_text(const json_t *doc, json_style_t style);

/* Shortest "%.{15,16,17}g" text that reads back as exactly v. With point,
 * whole numbers get ".0" as in Python ("1.0", "-0.0"; but "1e+16"). NaN and
 * +-inf give "null" (JSON has no such numbers). */
#define JSON_NUMBER_TEXT_LEN 32
const char *json_number_text(double v, bool point, char buf[JSON_NUMBER_TEXT_LEN]);

/* v as a real, or null when it is NaN or +-inf. NULL when out of memory. */
json_t *json_number_or_null(double v);
/* s as a string with each byte that is not UTF-8 replaced by U+FFFD, or
 * null when s is NULL. NULL when out of memory. */
json_t *json_utf8_or_null(const char *s);

#endif
