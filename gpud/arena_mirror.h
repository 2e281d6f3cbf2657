/* arena_mirror — the host's copy of an arena it must read or write as
 * plain floats: the ring's gradient buckets (until NCCL), checkpoints, the
 * parameter broadcast. On a host arena the mirror IS the arena (no copy,
 * pull and push do nothing); on a device arena it is host memory of the
 * arena's size, filled by pull and written back by push, each copy counted
 * in the arena's traffic (params).
 *
 *   arena_mirror_t m;
 *   arena_mirror_init(&m, grads, err, len);
 *   float *g = arena_mirror_pull(&m, lo, n);   // host floats of [lo, lo + n)
 *   ... the ring sums g in place ...
 *   arena_mirror_push(&m, lo, n);              // back into the arena
 *   arena_mirror_fini(&m);
 */
#ifndef DDP_GPUD_ARENA_MIRROR_H
#define DDP_GPUD_ARENA_MIRROR_H

#include <stddef.h>

#include "gpud/backend_arena.h"

typedef struct {
    const bk_arena_t *arena;
    float *host;            /* the arena's floats on the host (its view on a host arena) */
    int copy;               /* 1: host is a copy (a device arena) */
} arena_mirror_t;

/* 0, or -1 with the reason in err (out of memory). */
int arena_mirror_init(arena_mirror_t *m, const bk_arena_t *a, char *err, size_t errlen);
void arena_mirror_fini(arena_mirror_t *m);
/* The host floats of [off, off + n), read from the arena first when a
 * copy; NULL when the read failed or the range is out of the arena. */
float *arena_mirror_pull(arena_mirror_t *m, size_t off, size_t n);
/* The mirror's [off, off + n) written back to the arena (when a copy). 0 or -1. */
int arena_mirror_push(arena_mirror_t *m, size_t off, size_t n);
/* The host floats at off, as they are (no copy). */
float *arena_mirror_at(const arena_mirror_t *m, size_t off);

#endif
