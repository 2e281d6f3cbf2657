/* str_suffix — whether a name ends with a suffix: parameter names'
 * ".weight" / ".running_mean", log files' ".log". One definition for the
 * daemons and the CLI (each had its own copy). */
#ifndef DDP_COMMON_STR_SUFFIX_H
#define DDP_COMMON_STR_SUFFIX_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

/* True when s ends with suffix and something comes before it (a name that
 * is only the suffix, ".bias" or ".log", is no parameter's and no log's);
 * then *stem (when not NULL) is the length of what comes before. */
static inline bool str_suffix(const char *s, const char *suffix, size_t *stem)
{
    size_t a = strlen(s), b = strlen(suffix);
    if (a <= b || strcmp(s + a - b, suffix) != 0)
        return false;
    if (stem)
        *stem = a - b;
    return true;
}

#endif
