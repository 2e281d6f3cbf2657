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

#include "proto/event.h"

/* unix_time: the row's wall-clock time (seconds since 1970). */
int metrics_csv_append(const char *path, const ev_metric_t *m, double unix_time, char *why,
                       size_t whylen);

#endif
