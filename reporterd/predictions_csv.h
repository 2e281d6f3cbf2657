/* predictions_csv — predictions.csv, streamed chunk by chunk.
 *
 *   index,path,label,top1,top2,top3,top4,top5,loss
 *
 * One row per sample accounted for, sorted by index (chunks must arrive in
 * order, each starting where the previous ended). A result row has its
 * label, the top-k class ids (columns past k are empty when k < 5) and the
 * loss as "%.9g" of the float (reads back as the same float). A failed
 * sample (could not be loaded) has empty label-onwards fields except the
 * label when it is known (>= 0): "12,bad.jpg,,,,,,," . Samples with no
 * result and no failure (a job stopped early) get no row. path is empty
 * when the chunk carries no paths, and quoted per RFC 4180 when it holds a
 * comma, quote or newline. Written to a temporary file and renamed into
 * place by predcsv_commit(), so a partial file never appears.
 */
#ifndef DDP_PREDICTIONS_CSV_H
#define DDP_PREDICTIONS_CSV_H

#include <stddef.h>
#include <stdint.h>

#include "proto/event.h"

typedef struct predcsv predcsv_t;

/* Creates the temporary file and writes the header. */
predcsv_t *predcsv_new(const char *path, char *err, size_t errlen);
/* Append a chunk; its first must equal the rows so far (next index) and its
 * total the total of the first chunk. 0 or -1 with a reason. */
int predcsv_add(predcsv_t *self, const ev_predictions_t *chunk, char *err, size_t errlen);
/* Entries written so far (next expected index). */
uint64_t predcsv_next(const predcsv_t *self);
/* Publish the file; destroys *self_p. Fails if entries < total. */
int predcsv_commit(predcsv_t **self_p, char *err, size_t errlen);
/* Abandon (the temporary file is removed). NULL-safe. */
void predcsv_destroy(predcsv_t **self_p);

#endif
