/* dispatch — which batch goes to which gpud: credits, in-flight batches,
 * and re-queueing the batches of a worker declared dead.
 *
 * Training (docs/TRAINING.md) adds ranks: a worker's CREDIT names its rank
 * and train shards go to that rank only. Train batches share the credits
 * and the seq counter with eval batches but are never re-queued one by
 * one: when a rank dies reducerd decides (docs/ELASTIC.md), and a new
 * membership generation makes loaderd re-send the whole interrupted step
 * to the survivors. Each worker's credits belong to the generation of its
 * CREDITs; a new generation (dispatch_set_gen) forgets every rank and
 * credit until a CREDIT of that generation comes.
 *
 * A batch is a contiguous range of plan positions [first, first+count).
 * Pending batches wait in a FIFO (re-queued ones go to the front so the
 * epoch finishes in order as far as possible); each batch sent gets a new
 * seq and stays "in flight" until its worker acks it.
 */
#ifndef DDP_LOADERD_DISPATCH_H
#define DDP_LOADERD_DISPATCH_H

#include <czmq.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct {
    uint64_t first;            /* plan position of the batch's first sample */
    uint32_t count;            /* samples in the range */
} batch_range_t;

typedef struct dispatch dispatch_t;

dispatch_t *dispatch_new(uint64_t n, uint32_t batch_size, int64_t worker_timeout_ms);
/* Seqs from here on start at FIRST (a loaderd of shard i: i in the high
 * bits, DDP_SEQ_SHARD_SHIFT, so seqs stay unique over the job's loaderds). */
void dispatch_set_seq_base(dispatch_t *self, uint64_t first);
void dispatch_destroy(dispatch_t **self);

/* Workers: identified by name (their DEALER identity). */
void dispatch_credit(dispatch_t *self, zframe_t *identity, const char *name, uint32_t credits,
                     const uint64_t *acks, uint32_t n_acks);
/* The same, from a worker in membership generation GEN: older than the
 * worker's last one, it is stale and ignored; newer, its credits start
 * again from these. (dispatch_credit: the current generation.) */
void dispatch_credit_gen(dispatch_t *self, zframe_t *identity, const char *name,
                         uint32_t credits, const uint64_t *acks, uint32_t n_acks, uint32_t gen);
void dispatch_heartbeat(dispatch_t *self, const char *name);
/* Declare dead the workers silent for longer than the timeout, and those
 * holding an eval batch unanswered (no ack) past their answer deadline
 * (below), heartbeats or not; their eval batches are re-queued. A worker dropped with batches
 * comes back only with an ack. Returns how many died now. */
int dispatch_reap(dispatch_t *self, int64_t now_ms);
/* How long worker NAME may take to answer a batch: the timeout plus 4x its
 * moving-average answer time (acks only; heartbeats never extend it), so a
 * model slower than the timeout per batch is not dropped batch after batch.
 * -1: no such worker. */
int64_t dispatch_answer_deadline_ms(dispatch_t *self, const char *name);

/* Take the next pending range (re-queued ones first); false: none pending. */
bool dispatch_pop(dispatch_t *self, batch_range_t *out);
/* A worker with a free credit, or NULL. */
const char *dispatch_ready_worker(dispatch_t *self, zframe_t **identity);
/* Record that range r went to worker `name`; returns its new seq. */
uint64_t dispatch_sent(dispatch_t *self, const char *name, batch_range_t r);

bool dispatch_all_sent(const dispatch_t *self);   /* nothing pending */
bool dispatch_all_acked(const dispatch_t *self);  /* no eval batch pending nor in flight */
size_t dispatch_in_flight(const dispatch_t *self); /* eval + train batches */
int dispatch_live_workers(const dispatch_t *self);
uint64_t dispatch_requeued(const dispatch_t *self);
/* Starts the next eval plan (the validation of another epoch) over N
 * samples: workers, credits and seqs carry on, so seqs stay unique over a
 * run. -1 when eval batches of the previous plan are pending or in flight. */
int dispatch_replan(dispatch_t *self, uint64_t n, uint32_t batch_size);

/* reducerd refused the answer to eval batch SEQ (in flight or acked in
 * this plan): its range is re-queued; with ban its worker gets no more
 * batches (its other eval batches are re-queued too). -1: unknown seq. */
int dispatch_reissue(dispatch_t *self, uint64_t seq, bool ban);
/* The rank a worker's CREDITs name (-1: none, unknown worker). */
int32_t dispatch_worker_rank(dispatch_t *self, const char *name);

/* Training. Worker NAME (known from a CREDIT) holds RANK; a newer claimant
 * of a rank takes it over (logged). */
void dispatch_set_rank(dispatch_t *self, const char *name, int32_t rank);
/* The worker holding RANK in the current generation (NULL: none); *alive
 * and *credits describe it. */
const char *dispatch_rank_worker(dispatch_t *self, int32_t rank, zframe_t **identity,
                                 bool *alive, uint32_t *credits);
/* A train shard went to NAME: takes one of its credits, returns a new seq.
 * It stays in flight until acked but is never re-queued. */
uint64_t dispatch_sent_train(dispatch_t *self, const char *name);
/* Train shards that were in flight at a worker declared dead. */
uint64_t dispatch_lost_train(const dispatch_t *self);
/* A new membership generation (training): ranks and credits of workers of
 * older ones are forgotten, train shards in flight dropped (their step is
 * sent again whole). GEN must not be older than the current one. */
void dispatch_set_gen(dispatch_t *self, uint32_t gen);
uint32_t dispatch_gen(const dispatch_t *self);

/* Every live worker, for END/broadcast: iterate i = 0.. until NULL. */
zframe_t *dispatch_worker_identity(dispatch_t *self, int i, bool *alive);
#endif
