/* tputhist — the whole job's progress samples for the dashboard's
 * throughput chart, so a page that opens late draws the curve from the
 * job's start, not from when it connected.
 *
 * A sample is (t, epoch, phase, done): t in seconds on one axis for the
 * whole job, the way tput.c places plot points — a plan's origin is its
 * first event's arrival here minus its elapsed_s, and an event sits at its
 * plan's origin plus its elapsed_s (reducerd's clock, so delivery delays do
 * not bend the curve); t = 0 is the first plan's origin. An event without
 * elapsed_s counts at its arrival; an elapsed_s smaller than the plan's
 * previous one (its clock restarted) sets a new origin the same way.
 *
 * Bound: at most TPUTHIST_MAX samples (128 KiB here, about 200 KiB as
 * JSON to a late page), however long the job, thinned as thinning.h says:
 * the samples stay evenly spread over the whole job, each plan keeps its
 * first and last while they fit, and `done` being a running count, the
 * rate between two kept samples is the exact average over the ones
 * dropped. At
 * reducerd's two events a second the first merge comes after 34 minutes;
 * a week-long job keeps a sample every 2.5 to 5 minutes. */
#ifndef DDP_TPUTHIST_H
#define DDP_TPUTHIST_H

#include <stddef.h>
#include <stdint.h>

#include "proto/event.h"
#include "reporterd/thinning.h"

#define TPUTHIST_MAX 4096

/* seq: the event's index in the job (0 = first progress event) */
typedef thin_sample_t tputhist_point_t;

typedef struct tputhist tputhist_t;

tputhist_t *tputhist_new(void);
void tputhist_destroy(tputhist_t **self_p);

/* One progress event seen at now_s (monotonic seconds): keeps its sample
 * (merging when full) and returns its t. */
double tputhist_add(tputhist_t *self, const ev_progress_t *p, double now_s);

size_t tputhist_size(const tputhist_t *self);
/* The kept samples, oldest first (tputhist_size of them). */
const tputhist_point_t *tputhist_points(const tputhist_t *self);

/* {"topic":"tput_history","window_s":W,"stride":S,"points":[[t,epoch,"phase",done],...]}
 * (t in ms precision; W = TPUT_WINDOW_S, the rate's window; S: one event
 * in S is kept now, so a page can go on thinning alike); NULL when out of
 * memory. The caller frees. */
char *tputhist_json(const tputhist_t *self);

#endif
