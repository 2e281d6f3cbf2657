/* bucket_issue — a step's gradient buckets handed to a DEVICE collective
 * (NCCL) while backward runs: the buckets of gpud/buckets.h's layout, each
 * queued once its gradients are final, in bucket order (NCCL wants every
 * rank to make the same calls in the same order), by a function that only
 * queues the sum on the device and returns (the buckets' ring counterpart,
 * buckets.c, sums on a thread of its own instead).
 *
 *   bucket_issue_t *bi = bucket_issue_new(layout, err, len);
 *   per step:
 *       bucket_issue_begin(bi, grads_base, enqueue, ctx);
 *       ... gradient i final: bucket_issue_ready(bi, i, err, len) ...
 *           (or bucket_issue_mark, and bucket_issue_flush when it says 1)
 *       bucket_issue_finish(bi, err, len);   // the rest, in order
 *   bucket_issue_destroy(&bi);
 *
 * Every rank queues every bucket exactly once a step, in the order 0, 1,
 * ... (bucket 0 holds the last gradients, which backward makes first),
 * whatever order its gradients become final in and whether its shard was
 * empty (then finish queues them all). Single-threaded: the caller's. */
#ifndef DDP_GPUD_BUCKET_ISSUE_H
#define DDP_GPUD_BUCKET_ISSUE_H

#include <stddef.h>

#include "gpud/buckets.h"

/* Queue the sum of base[0, n) over the ranks; 0, or -1 with why. */
typedef int (*bucket_enqueue_fn)(void *ctx, float *base, size_t n, char *err, size_t errlen);

typedef struct bucket_issue bucket_issue_t;

/* Over layout (not owned; it must outlive this). NULL with err. */
bucket_issue_t *bucket_issue_new(const buckets_t *layout, char *err, size_t errlen);
void bucket_issue_destroy(bucket_issue_t **self);

/* A step over the flat gradients at base (buckets_floats(layout) floats). */
void bucket_issue_begin(bucket_issue_t *self, float *base, bucket_enqueue_fn fn, void *ctx);
/* Gradient i is final (again: ignored); queues every bucket now complete
 * whose predecessors are queued. 0, or -1 with the queueing's failure (no
 * further bucket is queued this step). bucket_issue_mark, then
 * bucket_issue_flush. */
int bucket_issue_ready(bucket_issue_t *self, int i, char *err, size_t errlen);
/* bucket_issue_ready in two halves, for a pass recorded as a CUDA graph
 * (gpud/tape_pass.c), where the gradient's kernels may be recorded, not run,
 * when it is marked: mark is bookkeeping only (no call of the queue
 * function) and says whether a bucket can be queued now (1), not yet (0),
 * or the step failed (-1); flush queues every such bucket, in order, and is
 * called once the gradients' kernels are queued on the device. 0 or -1. */
int bucket_issue_mark(bucket_issue_t *self, int i);
int bucket_issue_flush(bucket_issue_t *self, char *err, size_t errlen);
/* Every gradient final: queues the rest, in order; ends the step. 0 or -1. */
int bucket_issue_finish(bucket_issue_t *self, char *err, size_t errlen);
/* The step is given up (backward failed): nothing more is queued. */
void bucket_issue_abort(bucket_issue_t *self);
/* A step is open (begun, not finished). */
int bucket_issue_active(const bucket_issue_t *self);
/* Buckets queued in this step (or the last). */
int bucket_issue_queued(const bucket_issue_t *self);

#endif
