/* allreduce — sum of a float array across the gpud ranks of a CPU job: a ring
 * (reduce-scatter, then all-gather) over ZeroMQ, as NCCL does on GPUs.
 *
 * Each rank binds a PULL socket and connects a PUSH to the next rank's, so
 * the ring needs no broker. The order of the additions is fixed by the ring
 * (chunk c is summed x[c] + x[c+1] + ... around the ring), so a result is
 * deterministic for a given world size and every rank ends with the same
 * bytes. Every chunk travels with (op, step, chunk, count) and is checked on
 * receipt; a peer silent for longer than the timeout fails the operation with
 * a message naming it, so a dead rank never hangs the job.
 */
#ifndef DDP_GPUD_ALLREDUCE_H
#define DDP_GPUD_ALLREDUCE_H
#include <stddef.h>

typedef struct allreduce allreduce_t;

/* bind_ep: this rank's PULL endpoint; next_ep: rank (rank+1)%world's. */
allreduce_t *allreduce_new(int rank, int world, const char *bind_ep, const char *next_ep,
                           char *err, size_t errlen);
void allreduce_destroy(allreduce_t **self);
/* In place: data becomes the element-wise sum over all ranks. 0, or -1 with
 * a reason (timeout, malformed chunk, socket error). */
int allreduce_sum(allreduce_t *self, float *data, size_t n, int timeout_ms, char *err, size_t errlen);
/* Chunk boundaries of an n-element array over world ranks: [off(c), off(c+1)). */
size_t allreduce_chunk_offset(size_t n, int world, int c);
#endif
