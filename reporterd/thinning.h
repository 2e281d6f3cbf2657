/* thinning — which progress samples a bounded series keeps over a whole
 * job, for the dashboard's throughput history (tputhist.c) and the run
 * directory's throughput plot (tput.c), so both thin alike.
 *
 * A series holds at most `max` samples. When full, every other sample is
 * dropped; the first and the newest always stay, and each plan's (epoch,
 * phase) first and last while that still frees a quarter of the room (so
 * every plan keeps a rate; past that, plain halving for good). From then
 * on one event in `stride` (doubling at each halving) is kept for good,
 * and the newest always shows in the place of the previous newest. The
 * counts a caller keeps are running totals, so a rate between two kept
 * samples is the exact average over the ones dropped between them. */
#ifndef DDP_THINNING_H
#define DDP_THINNING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The start of every sample of a thinned series. */
typedef struct {
    double t;
    uint64_t done;
    uint64_t seq;  /* the event's index in the series (0 = first) */
    uint32_t epoch;
    uint8_t phase;
} thin_sample_t;

typedef struct {
    size_t max;         /* samples at most */
    size_t n;           /* samples held */
    bool tail;          /* sample n-1 is only the newest: the next replaces it */
    bool plans_fit;     /* each plan's first and last samples are kept */
    uint64_t seq;       /* events seen */
    uint64_t last_seq;  /* seq of the newest sample kept for good */
    uint64_t stride;    /* keep one event in stride */
} thinning_t;

void thinning_init(thinning_t *th, size_t max);

/* Makes room for the next event's sample in pts (room for th->n + 1, at
 * most th->max, elements of `size` bytes, each beginning with a
 * thin_sample_t): drops the previous newest when it was only that, halves
 * when full. Returns the index of the new sample, whose seq, epoch and
 * phase are set (the caller fills the rest); *new_plan: whether it starts
 * a plan (another epoch or phase than the previous sample's). */
size_t thinning_next(thinning_t *th, void *pts, size_t size, uint32_t epoch, uint8_t phase,
                     bool *new_plan);

#endif
