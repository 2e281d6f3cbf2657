/* rundir — the reporter's state across events and the run directory it
 * writes (docs/JOBS.md "The run directory"):
 *
 *   metrics.csv                 one row per (epoch, phase), on each metric
 *                               (training: train/val rows, epoch seconds and
 *                               per-rank images/s; a resumed run's earlier rows)
 *   SEED.csv                    training with --seed-csv: time,val_accuracy
 *   predictions.csv             when predictions are sent, as they stream
 *   summary.json                at finish: the last eval-phase metric (the
 *   classification_report.txt   validation of the last epoch when training),
 *                               or the last metric when there was no eval
 *   loss.png/svg, accuracy.png/svg, throughput.png/svg   after every
 *                               epoch's metric and at finish
 *   confusion.png/svg, f1.png/svg  at finish, for the summary's metric (no
 *                                  confusion.png/svg past CHART_CONFUSION_MAX classes)
 *   membership.csv              training: on every membership event
 *                               (membership_csv.h)
 *
 * Every file is written to a temporary name and renamed into place.
 * Events are borrowed: the rundir copies what it keeps.
 */
#ifndef DDP_RUNDIR_H
#define DDP_RUNDIR_H

#include <stddef.h>

#include "proto/event.h"

typedef struct rundir rundir_t;

/* Creates out_dir (mkdir -p). NULL with a reason in why. */
rundir_t *rundir_new(const char *out_dir, char *err, size_t errlen);
void rundir_destroy(rundir_t **self_p);
const char *rundir_dir(const rundir_t *self);

/* A training run (reporterd --start-epoch / --seed-csv): rows of an
 * existing metrics.csv are read back and kept, those of epochs >=
 * start_epoch dropped (start_epoch < 0: none dropped; they are redone) and
 * metrics.csv rewritten at once; seed_csv (a file name in the run
 * directory, or NULL) gets the seed course's time,val_accuracy log
 * (seed_csv.h) after every metric. 0, or -1 with a reason. */
int rundir_train_setup(rundir_t *self, long start_epoch, const char *seed_csv, char *err,
                       size_t errlen);

/* Appends the metrics.csv row (a repeated (epoch, phase) replaces the kept
 * metric but adds no second row) and keeps the metric for summary/plots.
 * The first train metric switches to the training layout (metrics_csv.h:
 * the file is rewritten whole from the rows, an existing file's rows
 * kept), and the seed CSV is refreshed.
 * 0, or -1 with a reason (the state is updated even when the file write
 * failed, so finish() can still try). */
int rundir_on_metric(rundir_t *self, const ev_metric_t *m, char *err, size_t errlen);

/* A progress event seen at now_s (monotonic seconds): a point of the
 * throughput-over-time plot (whole job and per rank). 0 or -1 (OOM). */
int rundir_on_progress(rundir_t *self, const ev_progress_t *p, double now_s, char *err,
                       size_t errlen);

/* Streams predictions.csv: a chunk with first == 0 starts the file (again:
 * a later epoch replaces an earlier one), the chunk that reaches total
 * publishes it. Failed entries (status 2) are remembered for failed_files.
 * 0, or -1 with a reason (an out-of-order chunk abandons the file). */
int rundir_on_predictions(rundir_t *self, const ev_predictions_t *p, char *err, size_t errlen);

/* A membership change of a training run: membership.csv rewritten, the
 * counts kept for summary.json. 0, or -1 with a reason. */
int rundir_on_membership(rundir_t *self, const ev_membership_t *m, char *err, size_t errlen);

/* A sample that could not be loaded; listed in summary.json's
 * failed_files when its (epoch, phase) is the summary's. 0 or -1 (OOM). */
int rundir_on_failed(rundir_t *self, const ev_failed_t *f);

/* The training job was stopped with code DDP_STOP_CHECKPOINT_FAILED (rank
 * 0 could not write a checkpoint or the final weights) or
 * DDP_STOP_NONFINITE (a non-finite step): code and reason go to
 * summary.json's training object. */
void rundir_job_stopped(rundir_t *self, int code, const char *reason);

/* Writes summary.json, classification_report.txt and the plots. Tries all
 * of them; 0, or -1 with the first failure in why. Without any metric it
 * writes only the (empty) plots and returns -1 saying so. */
int rundir_finish(rundir_t *self, char *err, size_t errlen);

#endif
