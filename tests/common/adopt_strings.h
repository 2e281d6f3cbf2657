/* adopt_strings — for the option tables' emit round trips: a struct parsed
 * back from an emitted argv holds its strings in that argv, not in the
 * original's. Checks that every string (and repeatable string) row of the
 * table reads the same in both and points back's at the original's, so
 * memcmp can then compare the whole structs. Returns how many rows differ
 * (each said on stderr). */
#ifndef DDP_TEST_ADOPT_STRINGS_H
#define DDP_TEST_ADOPT_STRINGS_H

#include "common/options.h"

#include <stdio.h>
#include <string.h>

static inline int same_text(const char *a, const char *b)
{
    return (a == NULL) == (b == NULL) && (!a || strcmp(a, b) == 0);
}

/* One string row: 1 when back's text differs; back's pointer(s) become the
 * original's either way. Not inlined: GCC, seeing every row's offset into
 * one struct, would warn (-Warray-bounds) of the repeatable-string branch
 * for tables that have no such row. */
__attribute__((noinline)) static int adopt_row(const option_t *opt, char *to, const char *from)
{
    if (opt->type == OPTION_TYPE_STRING) {
        const char **b = (const char **)to;
        const char *const *o = (const char *const *)from;
        int differs = !same_text(*b, *o);
        *b = *o;
        return differs;
    }
    option_strings_t *b = (option_strings_t *)to;
    const option_strings_t *o = (const option_strings_t *)from;
    int differs = b->n != o->n;
    for (int i = 0; i < o->n && i < b->n; i++) {
        differs |= !same_text(b->v[i], o->v[i]);
        b->v[i] = o->v[i];
    }
    return differs;
}

static inline int adopt_strings(const option_table_t *table, void *back, const void *original)
{
    int differ = 0;
    for (const option_t *opt = table->rows; opt->type != OPTION_TYPE_END; opt++) {
        if (opt->offset == OPTION_NO_FIELD ||
            (opt->type != OPTION_TYPE_STRING && opt->type != OPTION_TYPE_STRINGS))
            continue;
        if (adopt_row(opt, (char *)back + opt->offset, (const char *)original + opt->offset)) {
            fprintf(stderr, "%s: --%s differs after the round trip\n", table->program,
                    opt->name);
            differ++;
        }
    }
    return differ;
}
#endif
