/* buckets — the gradient all-reduce of a step in buckets, started while
 * backward still runs, as PyTorch DDP does (docs/TRAINING.md "Gradient
 * buckets").
 *
 * The gradients lie one after the other in a flat buffer (the model's
 * gradient arena, in the trainer's optimizer order, summed in place). Buckets are formed from the LAST gradient back (backward
 * finishes the last layers first), each of at least `cap` floats (the one
 * formed last, holding the first gradients, may be smaller). Bucket 0 is
 * all-reduced first. Each bucket is one allreduce_sum_range over the whole
 * buffer's chunks, so the sum is the bytes a single allreduce_sum of the
 * buffer would give, whatever the bucketing and whichever rank overlaps.
 *
 *   buckets_t *b = buckets_new(numel, n, cap, err, len);
 *   per step:
 *       buckets_begin(b, flat, ar, timeout_ms, overlap, err, len);
 *       ... gradient i final in its place in flat: buckets_ready(b, i) ...
 *       buckets_end(b, err, len);     // the rest ready; every bucket summed
 *   (or buckets_abort(b) when the step failed before its end)
 *
 * overlap 1: a thread all-reduces bucket k as soon as its gradients are
 * ready, in bucket order (every rank makes the same ring operations in the
 * same order). The ring is the thread's until buckets_end / buckets_abort
 * return: the caller must not touch it (nor anything its cancel callback
 * reads) in between. overlap 0: buckets_end does every bucket itself.
 */
#ifndef DDP_GPUD_BUCKETS_H
#define DDP_GPUD_BUCKETS_H

#include <stddef.h>

#include "gpud/ring.h"

typedef struct buckets buckets_t;

/* n gradients of numel[i] floats (n >= 1); cap >= 1 floats. NULL with the
 * reason in err. */
buckets_t *buckets_new(const size_t *numel, int n, size_t cap, char *err, size_t errlen);
void buckets_destroy(buckets_t **self);

/* Number the buckets in the order backward completes them: pos[i] is
 * gradient i's place in the order backward makes the gradients final (the
 * same on every rank: a property of the model, not of a step), a bucket's
 * completion its gradients' last place, and bucket 0 becomes the first
 * complete (ties: the earlier number first). Where the flat order follows
 * backward's (the default numbering) nothing moves; where it does not (a
 * model whose names sort its first layer last, as the arena's order is the
 * names') the first buckets no longer wait for the last layer. Before
 * buckets_begin. 0, or -1 (out of memory: the numbering is kept). */
int buckets_order(buckets_t *self, const int *pos);
/* buckets_order with backward's order predicted from forward's: walk[i] is
 * the order gradient i's layer binds it in the model (model_param_t.walk;
 * backward runs the layers in reverse, so the last bound is final first;
 * -1, never bound: last). 0 or -1 (out of memory). */
int buckets_order_walk(buckets_t *self, const int *walk);
/* The bucket size in floats: DDPIPE_BUCKET_KB (4 to 1048576 KiB, as DDP's
 * bucket_cap_mb) in the environment, else dflt (a bad value is logged).
 * The sums are the same bytes whatever the size; it moves where the
 * overlap cuts backward (and a recorded cuda pass's segments). */
size_t buckets_cap_env(size_t dflt);
int buckets_count(const buckets_t *self);
/* The gradients (buckets_new's n). */
int buckets_grads(const buckets_t *self);
/* Bucket k is flat[*lo, *hi). */
void buckets_range(const buckets_t *self, int k, size_t *lo, size_t *hi);
/* The bucket holding gradient i. */
int buckets_of(const buckets_t *self, int i);
/* Floats of all gradients (the flat buffer's size). */
size_t buckets_floats(const buckets_t *self);
/* Gradient i's place in the flat array: [*lo, *hi). */
void buckets_grad_range(const buckets_t *self, int i, size_t *lo, size_t *hi);

/* A step's all-reduce of flat over ar. 0, or -1 with the reason in err
 * (out of memory, a thread that could not start). */
int buckets_begin(buckets_t *self, float *flat, allreduce_t *ar, int timeout_ms, int overlap,
                  char *err, size_t errlen);
/* Gradient i is in place (again: ignored). The caller's thread. */
void buckets_ready(buckets_t *self, int i);
/* Every gradient lying whole in flat[lo, hi) is in place (a bucket's range,
 * copied to the host at once). The caller's thread. */
void buckets_ready_range(buckets_t *self, size_t lo, size_t hi);
/* Whether gradient i was marked ready this step. */
int buckets_is_ready(const buckets_t *self, int i);
/* Every gradient ready; returns once every bucket is summed. 0, or -1 with
 * the first failure's reason (allreduce_failure(ar) says which kind). */
int buckets_end(buckets_t *self, char *err, size_t errlen);
/* The step is given up: no further bucket starts; waits for the one in
 * flight. */
void buckets_abort(buckets_t *self);
/* Whether a step is open (begun, not ended or aborted). */
int buckets_active(const buckets_t *self);

#endif
