#include "common/flags.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int flags_long(const char *name, const char *val, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(val ? val : "", &end, 10);
    if (!val || !*val || *end || errno) {
        fprintf(stderr, "--%s: '%s' is not an integer\n", name, val ? val : "");
        return -1;
    }
    if (v < lo || v > hi) {
        fprintf(stderr, "--%s: %ld is out of range [%ld, %ld]\n", name, v, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

int flags_double(const char *name, const char *val, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(val ? val : "", &end);
    if (!val || !*val || *end || errno) {
        fprintf(stderr, "--%s: '%s' is not a number\n", name, val ? val : "");
        return -1;
    }
    if (v < lo || v > hi) {
        fprintf(stderr, "--%s: %g is out of range [%g, %g]\n", name, v, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

int flags_doubles(const char *name, const char *val, double *out, int max, int *n)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s", val ? val : "");
    *n = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        if (*n >= max) {
            fprintf(stderr, "--%s: at most %d values\n", name, max);
            return -1;
        }
        if (flags_double(name, tok, -1e30, 1e30, &out[*n]) < 0)
            return -1;
        (*n)++;
    }
    if (*n == 0) {
        fprintf(stderr, "--%s: expected a comma-separated list\n", name);
        return -1;
    }
    return 0;
}

int flags_ints(const char *name, const char *val, int *out, int max, int *n)
{
    double tmp[64];
    if (max > 64)
        max = 64;
    if (flags_doubles(name, val, tmp, max, n) < 0)
        return -1;
    for (int i = 0; i < *n; i++) {
        if (tmp[i] != (double)(int)tmp[i] || tmp[i] < 0) {
            fprintf(stderr, "--%s: '%g' is not a non-negative integer\n", name, tmp[i]);
            return -1;
        }
        out[i] = (int)tmp[i];
    }
    return 0;
}
