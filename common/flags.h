/* flags — checked parsing of command-line values with operator-facing errors. */
#ifndef DDP_FLAGS_H
#define DDP_FLAGS_H
#include <stdint.h>

/* Each returns 0 on success; on failure prints "PROG: --NAME: why" to stderr
 * and returns -1. */
int flags_long(const char *name, const char *val, long lo, long hi, long *out);
int flags_double(const char *name, const char *val, double lo, double hi, double *out);
/* "a,b,c" -> up to max doubles; *n set to the count. */
int flags_doubles(const char *name, const char *val, double *out, int max, int *n);
int flags_ints(const char *name, const char *val, int *out, int max, int *n);
#endif
