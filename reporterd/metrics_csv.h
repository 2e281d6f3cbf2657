/* metrics_csv — metrics.csv, one row per (epoch, phase):
 *
 *   time,epoch,phase,samples,loss,top1,top5,images_per_sec,lr
 *
 * time: ISO-8601 UTC wall clock of the row ("2024-05-01T12:00:00.123Z");
 * phase: eval|train; loss/top1/top5 as in summary.json (mean over samples
 * with a result; empty when samples is 0); numbers in the shortest text that
 * reads back exactly. The file is created with its header when absent and
 * otherwise appended to (a resumed run keeps its history); each append
 * rewrites the file through a temporary + rename, so it is never torn.
 */
#ifndef DDP_METRICS_CSV_H
#define DDP_METRICS_CSV_H

#include <stddef.h>

#include <stdint.h>

#include "proto/event.h"

/* unix_time: the row's wall-clock time (seconds since 1970). */
int metrics_csv_append(const char *path, const ev_metric_t *m, double unix_time, char *err,
                       size_t errlen);

/* A training run's metrics.csv appends two kinds of columns:
 *
 *   time,epoch,phase,samples,loss,top1,top5,images_per_sec,lr,
 *   epoch_seconds,images_per_sec_rank0,...,images_per_sec_rank{W-1}
 *
 * phase: train|val; epoch_seconds: the phase's time in that epoch
 * (metric wall_s); images_per_sec: samples / epoch_seconds (all ranks);
 * images_per_sec_rankR: rank R's samples / its compute seconds. W is the
 * most ranks of any row; a row with fewer (or none: rows of an older file)
 * leaves the rest empty. The whole file is rewritten from the rows each
 * time (a resumed run's earlier rows are read back first). */
typedef struct {
    char time[32];          /* as written (ISO-8601) */
    uint32_t epoch;
    uint8_t phase;          /* ddp_phase_t */
    uint64_t samples;
    double loss, top1, top5; /* NaN: empty (no samples) */
    double images_per_sec;
    double lr;
    double epoch_seconds;   /* NaN: unknown (a row of an eval-layout file) */
    uint32_t nranks;
    double *rank_ips;       /* nranks, owned by the row (metrics_csv_row_clear) */
} metrics_row_t;

/* The row of a metric at unix_time; copies the per-rank array. 0 or -1 (OOM). */
int metrics_csv_row(const ev_metric_t *m, double unix_time, metrics_row_t *out);
void metrics_csv_row_clear(metrics_row_t *row);

/* Atomically write the training layout with these rows in order. */
int metrics_csv_write_rows(const char *path, const metrics_row_t *rows, size_t n, char *err,
                           size_t errlen);

/* Read back a metrics.csv of either layout: *rows (malloc'ed; free each
 * with metrics_csv_row_clear, then the array) and *n; an absent file gives
 * 0 rows. Lines that do not parse are skipped and counted in *skipped.
 * 0, or -1 with a reason (unreadable file, no known header, OOM). */
int metrics_csv_read(const char *path, metrics_row_t **rows, size_t *n, size_t *skipped,
                     char *err, size_t errlen);

#endif
