/* ring — allreduce_t, the sum of a float array across the gpud ranks of a
 * CPU job: a ring (reduce-scatter, then all-gather) over ZeroMQ, as NCCL
 * does on GPUs.
 *
 * Each rank binds a PULL socket and connects a PUSH to the next rank's, so
 * the ring needs no broker. The order of the additions is fixed by the ring
 * (chunk c is summed x[c] + x[c+1] + ... around the ring), so a result is
 * deterministic for a given world size and every rank ends with the same
 * bytes. Every chunk travels with (op, step, chunk, count) and is checked on
 * receipt, sizes before anything is read: a frame that is not exactly the
 * chunk expected (garbage, a foreign or stale frame) is logged (rate-limited),
 * counted and dropped, and the wait goes on until the real chunk comes or the
 * timeout, which junk never extends. tcp endpoints follow zsecurity (CURVE
 * with --curve-dir, the loopback rule without). A peer silent for longer
 * than the timeout fails the operation with a message naming it, so a dead
 * rank never hangs the job.
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
/* next_ep: the PULL endpoint of rank (rank+1)%world. world 1 needs no ring:
 * the PULL socket is closed and allreduce_sum returns at once. 0, or -1 with
 * the reason in err (then only allreduce_destroy is valid). */
int allreduce_connect(allreduce_t *self, int rank, int world, const char *next_ep, char *err,
                      size_t errlen);
/* allreduce_bind + allreduce_connect, for callers that know everything up
 * front (tests, benchmarks with fixed endpoints). */
allreduce_t *allreduce_new(int rank, int world, const char *bind_ep, const char *next_ep,
                           char *err, size_t errlen);
void allreduce_destroy(allreduce_t **self);
/* A callback polled (every 100 ms at most) while allreduce_sum waits for a
 * peer: when it returns non-zero the operation fails at once with
 * "interrupted" (gpud passes zs_interrupted, so SIGTERM/SIGINT never wait out
 * the ring timeout). NULL: only the timeout ends a wait. */
void allreduce_set_cancel(allreduce_t *self, int (*cancelled)(void));
/* In place: data becomes the element-wise sum over all ranks. 0, or -1 with
 * a reason (timeout, interrupted, socket error). A failed
 * operation leaves the ring out of step: the job cannot continue with it. */
int allreduce_sum(allreduce_t *self, float *data, size_t n, int timeout_ms, char *err, size_t errlen);
/* Frames dropped so far because they were not the chunk expected. */
uint64_t allreduce_dropped(const allreduce_t *self);
/* This rank's ring position: allreduce_rank is -1 before allreduce_connect. */
int allreduce_rank(const allreduce_t *self);
int allreduce_world(const allreduce_t *self);
/* Chunk boundaries of an n-element array over world ranks: [off(c), off(c+1)). */
size_t allreduce_chunk_offset(size_t n, int world, int c);
#endif
