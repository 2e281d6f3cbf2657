/* issued — the batches loaderd said it handed out (ISSUED), so reducerd
 * counts a RESULT only when it answers one of them: the right seq, sent to
 * that rank, for that epoch and phase, with the same ids, and only once.
 *
 * A RESULT may overtake its ISSUED (they travel on different connections),
 * so one whose seq is above every ISSUED seen from its loaderd (the shard
 * in the seq's high bits, DDP_SEQ_SHARD) is held back (bounded per rank)
 * and checked when ISSUED catches up; each loaderd sends ISSUED in seq
 * order, so once it issued a higher seq the held RESULT is decided.
 * Entries are freed when answered or when their (epoch, phase) ends; their
 * number is bounded by what loaderd has in flight (ISSUED_MAX_ENTRIES as a
 * hard cap).
 */
#ifndef DDP_REDUCERD_ISSUED_H
#define DDP_REDUCERD_ISSUED_H

#include "proto/messages.h"

#include <stdbool.h>
#include <stdint.h>

#define ISSUED_MAX_ENTRIES 16384
#define ISSUED_MAX_HELD_PER_RANK 64

typedef struct issued issued_t;

typedef enum {
    ISSUED_MATCH,    /* counts: *labels now owned by the caller (free()) */
    ISSUED_LATER,    /* seq not issued yet: hold it (issued_hold) */
    ISSUED_FOREIGN,  /* not an answer to anything issued to this rank: reject */
    ISSUED_WRONG,    /* the rank's own batch answered wrongly: reject, batch withdrawn */
} issued_verdict_t;

issued_t *issued_new(void);
void issued_destroy(issued_t **self_p);

/* Several loaderds (docs/SCALE.md): an ISSUED of the loaderd of SHARD (of
 * SHARDS) must carry that shard in its seq's high bits and only ids with
 * id % shards == shard. -1 (with why) otherwise. */
int issued_check_shard(const ddp_issued_t *m, uint32_t shard, uint32_t shards, char *err,
                       size_t errlen);
/* Records m (takes its ids/labels). -1 (with why) on a duplicate seq or a
 * full table. */
int issued_add(issued_t *self, ddp_issued_t *m, char *err, size_t errlen);

/* Judges res against what was issued. ISSUED_MATCH removes the entry and
 * hands its labels to *labels (the ids are equal to res's). ISSUED_WRONG
 * removes the entry too (the batch must be handed out again). why explains
 * the verdicts that reject. */
issued_verdict_t issued_judge(issued_t *self, const ddp_result_t *res, int32_t **labels,
                              char *err, size_t errlen);

/* Holds res (takes its arrays) until an ISSUED decides it; -1 when its
 * rank already holds ISSUED_MAX_HELD_PER_RANK. */
int issued_hold(issued_t *self, ddp_result_t *res);
/* Pops a held RESULT whose seq is now at or below the highest issued seq
 * (decidable); false when none. The caller owns *out (ddp_msg_clear). */
bool issued_pop_decidable(issued_t *self, ddp_result_t *out);

/* (epoch, phase) is over: its entries are freed; returns how many held
 * RESULTs of it were dropped (they were never issued: rejected). */
uint64_t issued_end(issued_t *self, uint32_t epoch, uint8_t phase);
/* A new loader (restart): seqs start again; everything is forgotten.
 * Returns the held RESULTs dropped. */
uint64_t issued_reset(issued_t *self);

/* A new membership generation renumbered the ranks (docs/ELASTIC.md):
 * map[old rank] = new rank, or -1 for a removed one (old_world entries).
 * Batches issued to, and RESULTs held from, a removed rank are dropped;
 * the others follow their rank. Returns the held RESULTs dropped. */
uint64_t issued_renumber(issued_t *self, const int32_t *map, int32_t old_world);

size_t issued_count(const issued_t *self);
#endif
