/* ring — allreduce_t, the sum of a float (or double) array across the gpud ranks of a
 * CPU job: a ring (reduce-scatter, then all-gather) over ZeroMQ, as NCCL
 * does on GPUs.
 *
 * Each rank binds a PULL socket and connects a PUSH to the next rank's, so
 * the ring needs no broker. The order of the additions is fixed by the ring
 * (chunk c is summed x[c] + x[c+1] + ... around the ring), so a result is
 * deterministic for a given world size and every rank ends with the same
 * bytes. Every chunk travels with (gen, op, step, chunk, count, kind) and is
 * checked on receipt, sizes before anything is read: a frame that is not
 * exactly the chunk expected (garbage, a foreign frame) is logged
 * (rate-limited), counted and dropped, and the wait goes on until the real
 * chunk comes or the timeout, which junk never extends. tcp endpoints follow
 * zsecurity (CURVE with --curve-dir, the loopback rule without). A peer
 * silent for longer than the timeout fails the operation with a message
 * naming it, so a dead rank never hangs the job.
 *
 * Generations (docs/ELASTIC.md): the ring of a membership generation is
 * re-formed by allreduce_reform when a rank is lost. A chunk of an older
 * generation is stale (a rank that was fenced, or the abandoned step of
 * the survivors): dropped and counted, never summed. A chunk of a newer
 * one comes from a peer that re-formed first: it is held until this rank
 * re-forms too (bounded), then used.
 */
#ifndef DDP_GPUD_RING_H
#define DDP_GPUD_RING_H
#include <stddef.h>
#include <stdint.h>

typedef struct allreduce allreduce_t;

/* Two phases, because a gpud must publish its endpoint (JOIN.ring) before
 * it learns its rank and its neighbour's endpoint (WELCOME.next_ring):
 *
 *   char ep[256];
 *   allreduce_t *ar = allreduce_bind("tcp://127.0.0.1:0", ep, sizeof ep, err, len);
 *   ... send ep, learn rank, world, next ...
 *   allreduce_connect(ar, rank, world, next, err, len);
 *   allreduce_sum(ar, grads, n, 60000, err, len);
 *
 * bind_ep: this rank's PULL endpoint; a tcp port 0 (or "*") is chosen by the
 * system and `resolved` receives the endpoint peers must connect to
 * (ZMQ_LAST_ENDPOINT, e.g. "tcp://127.0.0.1:41234"). NULL with the reason in
 * err when the bind fails. */
allreduce_t *allreduce_bind(const char *bind_ep, char *resolved, size_t resolved_len, char *err,
                            size_t errlen);
/* next_ep: the PULL endpoint of rank (rank+1)%world; generation 0. world 1
 * needs no ring: the PULL socket is closed and allreduce_sum returns at once. 0, or -1 with
 * the reason in err (then only allreduce_destroy is valid). */
int allreduce_connect(allreduce_t *self, int rank, int world, const char *next_ep, char *err,
                      size_t errlen);
/* allreduce_bind + allreduce_connect, for callers that know everything up
 * front (tests, benchmarks with fixed endpoints). */
allreduce_t *allreduce_new(int rank, int world, const char *bind_ep, const char *next_ep,
                           char *err, size_t errlen);
void allreduce_destroy(allreduce_t **self);
/* A callback polled (every 100 ms at most, and before each wait) while
 * allreduce_sum waits for a peer, with the ctx given here: NULL lets the
 * wait go on; a reason (a static string, e.g. "interrupted", "membership
 * changed") fails the operation at once with it (ALLREDUCE_CANCELLED).
 * gpud cancels on a signal and when reducerd's MEMBERS arrives, so neither
 * waits out the ring timeout. fn NULL: only the timeout ends a wait. */
typedef const char *(*allreduce_cancel_fn)(void *ctx);
void allreduce_set_cancel(allreduce_t *self, allreduce_cancel_fn fn, void *ctx);
/* In place: data becomes the element-wise sum over all ranks. 0, or -1 with
 * a reason (timeout, cancelled, socket error; allreduce_failure says which).
 * A failed operation leaves the ring out of step: only a re-form
 * (allreduce_reform, a new generation) makes it usable again. */
int allreduce_sum(allreduce_t *self, float *data, size_t n, int timeout_ms, char *err, size_t errlen);
/* The same for data[lo, hi) only, data being the whole n-float array: each
 * element is summed in exactly the order allreduce_sum(data, n) would sum
 * it (the chunks are the full array's, cut to the range), so all-reducing
 * the ranges of a partition of [0, n) one by one (gradient buckets) gives
 * the bytes of one allreduce_sum. Every rank must call it with the same
 * n, lo, hi. */
int allreduce_sum_range(allreduce_t *self, float *data, size_t n, size_t lo, size_t hi,
                        int timeout_ms, char *err, size_t errlen);

/* allreduce_sum of doubles (SyncBatchNorm's statistics: W ranks' sums then
 * differ from one rank's only by double rounding). Chunks carry their
 * width: a float chunk is never taken for a double one. */
int allreduce_sum_f64(allreduce_t *self, double *data, size_t n, int timeout_ms, char *err,
                      size_t errlen);

/* Integer operations for exact sums (gpud/xsum_ring.h): the element-wise
 * sum of int64s (wrapping modulo 2^64, hence exact and independent of the
 * order whenever the true sum fits) and the element-wise max of int32s.
 * Same ring, same checks; each chunk carries its operation's kind, so a
 * chunk of one kind is never taken for another of the same width (an int32
 * max chunk for a float sum chunk). world 1: data is left as is. */
int allreduce_sum_i64(allreduce_t *self, int64_t *data, size_t n, int timeout_ms, char *err,
                      size_t errlen);
int allreduce_max_i32(allreduce_t *self, int32_t *data, size_t n, int timeout_ms, char *err,
                      size_t errlen);

/* Why the last allreduce_sum failed (ALLREDUCE_OK after a success), so a
 * caller that got -1 through layers (trainer, SyncBatchNorm in the model)
 * can tell a silent peer from a cancel. */
typedef enum {
    ALLREDUCE_OK = 0,
    ALLREDUCE_ERROR = 1,       /* a socket error, out of memory, not connected */
    ALLREDUCE_TIMEOUT = 2,     /* the predecessor sent nothing valid in time */
    ALLREDUCE_CANCELLED = 3    /* the cancel callback gave a reason */
} allreduce_failure_t;
allreduce_failure_t allreduce_failure(const allreduce_t *self);
/* The rank the last operation waited for in vain (ALLREDUCE_TIMEOUT: the
 * ring predecessor, in the generation of that operation), else -1. */
int allreduce_suspect(const allreduce_t *self);

/* A new membership generation: rank of world, the PUSH re-pointed at
 * next_ep (the ring of rank (rank+1)%world; unused when world is 1; kept
 * when unchanged), the operation count restarted. Frames already queued of
 * an older generation are drained and dropped (stale), those of gen kept
 * for the next operation. gen must be newer than the current one. 0, or -1
 * with the reason (then the ring cannot be used). */
int allreduce_reform(allreduce_t *self, uint32_t gen, int rank, int world, const char *next_ep,
                     char *err, size_t errlen);
/* The current generation: 0 after allreduce_connect. */
uint32_t allreduce_gen(const allreduce_t *self);
/* Frames dropped so far because they were not the chunk expected (garbage,
 * a foreign frame; stale ones are not counted here). */
uint64_t allreduce_dropped(const allreduce_t *self);
/* Frames of an older generation dropped so far. */
uint64_t allreduce_stale(const allreduce_t *self);
/* This rank's ring position: allreduce_rank is -1 before allreduce_connect. */
int allreduce_rank(const allreduce_t *self);
int allreduce_world(const allreduce_t *self);
/* Chunk boundaries of an n-element array over world ranks: [off(c), off(c+1)). */
size_t allreduce_chunk_offset(size_t n, int world, int c);
#endif
