#include "reporterd/seed_csv.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/messages.h"
#include "common/atomic_file.h"

const char *seed_csv_round(double v, int digits, char buf[40])
{
    /* printf rounds the exact binary value to nearest, ties to even, as
     * Python's round() does; the rounded double's shortest repr has at
     * most `digits` decimals, so trimming zeros gives it. */
    if (!isfinite(v) || fabs(v) >= 1e15) {
        snprintf(buf, 40, "%.17g", v);
        return buf;
    }
    snprintf(buf, 40, "%.*f", digits, v);
    char *dot = strchr(buf, '.');
    if (!dot)
        return strcat(buf, ".0");
    char *end = buf + strlen(buf) - 1;
    while (end > dot + 1 && *end == '0')
        *end-- = '\0';
    return buf;
}

/* Index of the row of (epoch, phase), the last one when repeated; or -1. */
static long s_find(const metrics_row_t *rows, size_t n, uint32_t epoch, uint8_t phase)
{
    long at = -1;
    for (size_t i = 0; i < n; i++)
        if (rows[i].epoch == epoch && rows[i].phase == phase)
            at = (long)i;
    return at;
}

int seed_csv_write(const char *path, const metrics_row_t *rows, size_t n, char *err,
                   size_t errlen)
{
    uint32_t last = 0;
    for (size_t i = 0; i < n; i++)
        last = rows[i].epoch > last ? rows[i].epoch : last;
    atomic_file_t *f = atomic_file_new(path, err, errlen);
    if (!f)
        return -1;
    FILE *out = atomic_file_stream(f);
    fputs("time,val_accuracy\n0.0,0.0\n", out);
    double total = 0;
    char t[40], a[40];
    for (uint32_t e = 0; n && e <= last; e++) {
        long tr = s_find(rows, n, e, DDP_PHASE_TRAIN), va = s_find(rows, n, e, DDP_PHASE_EVAL);
        if (tr >= 0 && isfinite(rows[tr].epoch_seconds))
            total += rows[tr].epoch_seconds;
        if (va < 0)
            continue;
        double acc = isfinite(rows[va].top1) ? rows[va].top1 : 0.0;
        fprintf(out, "%s,%s\n", seed_csv_round(total, 1, t), seed_csv_round(acc, 4, a));
    }
    return atomic_file_commit(&f, err, errlen);
}
