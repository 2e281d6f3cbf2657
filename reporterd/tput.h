/* tput — throughput over time from reducerd's progress events: the whole
 * job's images/s and each rank's, as series for the throughput plot.
 *
 * Each progress event is one point: its time on reducerd's clock, the
 * (epoch, phase) it belongs to, samples done and the per-rank result
 * counts. The time is the plan's arrival (the plan's first event's arrival
 * here minus its elapsed_s) plus the event's elapsed_s, so the points are
 * as far apart as reducerd sent them — every half second (PROTOCOL.md) —
 * whatever the delivery delays; an event without elapsed_s counts at its
 * arrival. A job shorter than half a second has fewer points. The first
 * event's elapsed_s adds the plan's arrival as an origin point (nothing
 * done), so any job has a curve. A rate at point i is (count_i - count_j) / (t_i - t_j)
 * with j the point TPUT_WINDOW_S seconds earlier (or the first point of
 * the same epoch and phase), so a slow run with few batches per second
 * does not saw-tooth between 0 and a burst.
 *
 * Bound: at most TPUT_MAX_POINTS points (about 1.5 MiB), however long the
 * job, thinned as the dashboard's history is (thinning.h): the counts are
 * running totals, so a rate over a dropped stretch is its exact average;
 * a week at two events a second keeps a point every 1-2 minutes. */
#ifndef DDP_TPUT_H
#define DDP_TPUT_H

#include <stddef.h>

#include "proto/event.h"
#include "reporterd/plot.h"
#include "reporterd/thinning.h"

#define TPUT_WINDOW_S 2.0
#define TPUT_MAX_POINTS 16384
/* Per-rank series drawn (the plot holds PLOT_MAX_SERIES, one is "all"). */
#define TPUT_MAX_RANKS (PLOT_MAX_SERIES - 1)

typedef struct tput tput_t;

tput_t *tput_new(void);
void tput_destroy(tput_t **self_p);

/* One progress event seen at now_s (monotonic seconds). 0, or -1 when out
 * of memory (the point is dropped). */
int tput_add(tput_t *self, const ev_progress_t *p, double now_s);
size_t tput_points(const tput_t *self);

/* The rate series of rank (< 0: all workers) into x and y, which have room
 * for tput_points() values; how many were written (0 with < 2 points). */
size_t tput_series(const tput_t *self, int rank, double *x, double *y);

/* Adds "all workers" and "rank r" series (x: seconds since the first
 * progress event, y: images/s) to p. Nothing when there are fewer than two
 * points. 0 or -1 (out of memory). */
int tput_plot(const tput_t *self, plot_t *p);

#endif
