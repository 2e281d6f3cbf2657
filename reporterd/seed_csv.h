/* seed_csv — the training log of the seed course (NVIDIA DLI "data
 * parallelism", fashion_mnist.py): `{W}ranks-{bs}bs-{lr}lr-{m}m-{w}w.csv`
 * (w: warm-up epochs), written by rank 0 as
 *
 *   time,val_accuracy
 *   0.0,0.0                       on_train_begin
 *   round(total_time, 1),round(v_accuracy, 4)   on_epoch_end, every epoch
 *
 * where total_time is the cumulative *training* time: each epoch's t0 is
 * taken before train() and epoch_time after the barrier that ends it,
 * before test() — validation time is not in it. v_accuracy is a fraction.
 * Numbers print as Python's csv module prints a float (repr: "12.3",
 * "0.85", "3.0").
 *
 * ddpipe writes the same file from metrics.csv rows: a row per validated
 * epoch, time = the sum of the train rows' epoch_seconds up to that epoch
 * (a resumed run's earlier epochs included), val_accuracy = its exact
 * top-1.
 */
#ifndef DDP_SEED_CSV_H
#define DDP_SEED_CSV_H

#include <stddef.h>

#include "reporterd/metrics_csv.h"

/* Python's repr(round(v, digits)) for finite v >= 0 and digits 0..9 (the
 * shortest text of the rounded double: "0.85", "12.0"). buf needs 40 bytes. */
const char *seed_csv_round(double v, int digits, char buf[40]);

/* The whole file from the rows (any order). 0, or -1 with a reason. */
int seed_csv_write(const char *path, const metrics_row_t *rows, size_t n, char *err,
                   size_t errlen);

#endif
