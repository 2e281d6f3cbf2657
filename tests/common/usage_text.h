/* usage_text — an option table's usage as text, and the options it fails
 * to name, for the option-table tests of every program. */
#ifndef DDP_TEST_USAGE_TEXT_H
#define DDP_TEST_USAGE_TEXT_H

#include "common/options.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The usage text (free it). *options gets the table's options (sections
 * aside), *unnamed how many of them the text lacks as "\n  --NAME" (each
 * said on stderr). */
static inline char *usage_text(const option_table_t *table, int *options, int *unnamed)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    options_usage(table, f);
    fclose(f);
    *options = *unnamed = 0;
    for (const option_t *opt = table->rows; opt->type != OPTION_TYPE_END; opt++) {
        if (opt->type == OPTION_TYPE_SECTION)
            continue;
        char flag[64];
        snprintf(flag, sizeof flag, "\n  --%s", opt->name);
        (*options)++;
        if (!strstr(text, flag)) {
            fprintf(stderr, "%s's usage lacks --%s\n", table->program, opt->name);
            (*unnamed)++;
        }
    }
    return text;
}
#endif
