/* grad_exact — bitwise training's gradient sum (docs/TRAINING.md "Bitwise
 * training"): every chunk's parameter gradients, as backward hands them
 * over (the grad-ready hook, once per chunk), added exactly into an xsum
 * (common/xsum.h) with one segment per optimized gradient, then summed over
 * the ranks as int64 limbs (gpud/xsum_ring.h) and rounded once into the
 * grads arena. Any split of the chunks over ranks gives the same bytes.
 *
 *   grad_exact_t *e = grad_exact_new(flat, numel, n, err, len);
 *   grad_exact_use_arena(e, grads_arena, err, len);   (a device arena)
 *   per step: grad_exact_begin(e); ... grad_exact_add(e, i) per chunk ...
 *             grad_exact_reduce(e, ring, timeout_ms, err, len);
 *
 * The gradients lie one after the other in flat (the grads arena, host
 * memory, optimizer order, or a device arena's host mirror), gradient i at
 * the sum of numel[0, i). On a device arena whose ops make the sums there
 * (backend_arena.h xsum_*: cuda), each add is queued on the device over
 * the arena itself and the limbs come to the host once, in reduce: the
 * same limbs as the host's adds, bit for bit. */
#ifndef DDP_GPUD_GRAD_EXACT_H
#define DDP_GPUD_GRAD_EXACT_H

#include <stddef.h>
#include <stdint.h>

#include "gpud/backend_arena.h"
#include "gpud/ring.h"

typedef struct grad_exact grad_exact_t;

/* n >= 1 gradients; NULL with the reason in err. */
grad_exact_t *grad_exact_new(float *flat, const size_t *numel, int n, char *err,
                             size_t errlen);
void grad_exact_destroy(grad_exact_t **self);
/* The sums made on grads' memory (its ops' xsum_*; grads is the arena
 * flat mirrors, kept by the caller): 1 when they are, 0 when grads has no
 * such ops (the host adds from flat), -1 with the reason in err. */
int grad_exact_use_arena(grad_exact_t *self, const bk_arena_t *grads, char *err,
                         size_t errlen);
/* 1 when the adds run on the arena's device (flat needs no copy). */
int grad_exact_on_device(const grad_exact_t *self);
/* A new step: every sum zero. */
void grad_exact_begin(grad_exact_t *self);
/* Gradient i's current value (one chunk's; in the device arena, or in
 * flat) added to its sum. */
void grad_exact_add(grad_exact_t *self, int i);
/* The sums over every rank of ar (NULL: this rank's only) written into
 * flat. Collective (every rank calls it once per step). 0, or -1 with the
 * reason in err (a device add or read failed; the ring's failure:
 * allreduce_failure says which). Logs the step's bytes at debug level. */
int grad_exact_reduce(grad_exact_t *self, allreduce_t *ar, int timeout_ms, char *err,
                      size_t errlen);
/* The same sums over the ranks of coll (NCCL's), made on the device where
 * the adds were (grad_exact_on_device, and the arena's ops have
 * xsum_reduce), each rounded once into the arena itself: nothing through
 * the host, the bits grad_exact_reduce would write. Collective. 0, or -1
 * with the reason in err. */
int grad_exact_reduce_device(grad_exact_t *self, const bk_xsum_coll_t *coll, char *err,
                             size_t errlen);
/* 1 when grad_exact_reduce_device can run (the sums on a device whose
 * arena ops reduce them there). */
int grad_exact_device_reduce_ok(const grad_exact_t *self);
/* Bytes this rank sends per grad_exact_reduce over ar (headers included;
 * 0 for one rank): the --verbose step line's figure. */
uint64_t grad_exact_ring_bytes(const grad_exact_t *self, const allreduce_t *ar);

#endif
