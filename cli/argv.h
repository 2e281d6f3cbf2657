/* argv — build a child's argument vector one flag at a time. */
#ifndef DDP_CLI_ARGV_H
#define DDP_CLI_ARGV_H

#include "common/options.h"

typedef struct {
    char *v[128];
    int n;
} argv_t;
void argv_init(argv_t *a, const char *prog);
void argv_add(argv_t *a, const char *flag, const char *value); /* value NULL: bare flag */
void argv_addf(argv_t *a, const char *flag, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void argv_free(argv_t *a);
/* A daemon's options (its table, a filled struct) as flags: every option
 * whose value differs from the daemon's default (common/options.h). The
 * number of options added, or -1 (said on stderr: a bug in the table). */
int argv_add_options(argv_t *a, const option_table_t *table, const void *opts);
#endif
