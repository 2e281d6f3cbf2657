/* elastic — the decisions of elastic training (docs/ELASTIC.md) as plain
 * functions over plain arrays, without sockets: reducerd/membership.c feeds
 * them STEP reports and deaths and sends what they decide.
 *
 * A generation `gen` has `world` members in the ring's fixed order; rank r
 * is member[r], an id of the caller's (reducerd: a peer index). One step is
 * in flight at a time (a rank sends STEP(S) and waits for COMMIT(S) before
 * it starts S+1), so the reports are one per rank, for that step.
 *
 * Who is lost ("Who is lost"): never a rank on one report alone. A rank
 * declared dead (heartbeats) is lost at once. Otherwise, once every member
 * has reported or is suspected by a failed report, the lost are the
 * suspected ranks that did not report; when everyone reported, the suspect
 * of the first failed report (the rank nearest the break times out first).
 *
 * pending_t holds the train RESULTs (judged against their ISSUED, with the
 * issued labels) until their step commits: a step that is redone by a new
 * generation must not have been tallied by its first attempt.
 */
#ifndef DDP_REDUCERD_ELASTIC_H
#define DDP_REDUCERD_ELASTIC_H

#include "proto/messages.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum { ELASTIC_NONE = 0, ELASTIC_SUMMED = 1, ELASTIC_FAILED = 2 } elastic_report_t;

typedef struct {
    uint32_t gen;
    int32_t world;
    int32_t *member;            /* world ids, by rank */
    /* the step in flight: known from the first report, or the run's first step */
    uint64_t step;
    uint32_t step_epoch;
    bool step_known;            /* a report named it (or a commit implies it) */
    bool have_committed;
    uint64_t committed;         /* C: the last committed step */
    /* by rank, for the step in flight */
    uint8_t *report;            /* elastic_report_t */
    int32_t *suspect;           /* FAILED: the suspected rank of this generation, -1 none */
    uint32_t *order;            /* 1 for the first report of the step, 2 for the next ... */
    bool *dead;
    uint32_t reports;
} elastic_t;

typedef enum {
    ELASTIC_WAIT,               /* nothing to decide yet */
    ELASTIC_COMMIT,             /* every member summed the step in flight */
    ELASTIC_CHANGE,             /* lost[] ranks leave: a new generation */
    ELASTIC_STUCK,              /* every member reported, some failed, nobody to blame */
} elastic_verdict_t;

/* Generation 0 of world members (ids by rank); first_step: the run's first
 * optimizer step (0, or a resume's), until a report names the step. NULL
 * when out of memory or world is not 1..DDP_MAX_WORLD. */
elastic_t *elastic_new(int32_t world, const int32_t *member, uint64_t first_step);
void elastic_destroy(elastic_t **self_p);

/* The rank holding id, or -1. */
int32_t elastic_rank_of(const elastic_t *self, int32_t id);

/* A STEP of the current generation from rank: 0, or -1 with why (a rank
 * out of range, another step than the one in flight, a second report).
 * Before the first commit the first report names the step in flight. */
int elastic_report(elastic_t *self, int32_t rank, uint64_t step, uint32_t epoch, uint8_t status,
                   int32_t suspect, char *err, size_t errlen);
/* rank was declared dead (missed heartbeats, ...). */
void elastic_dead(elastic_t *self, int32_t rank);

/* What the reports and deaths decide now; with ELASTIC_CHANGE, lost[rank]
 * (world entries) marks the ranks to remove. */
elastic_verdict_t elastic_judge(const elastic_t *self, bool *lost);

/* The step in flight is committed (C = it); S + 1 is in flight, unreported. */
void elastic_commit(elastic_t *self);

/* The next generation without the lost ranks: gen + 1, the survivors
 * renumbered 0..W'-1 in their old order, reports and deaths cleared, the
 * same step in flight (C + 1: it is redone). map[old rank] = new rank, -1
 * for a lost one (world entries). Returns W' (0: nobody is left). */
int32_t elastic_change(elastic_t *self, const bool *lost, int32_t *map);

/* The next generation with id joined as the last rank: gen + 1, world + 1,
 * reports and deaths cleared, the same step in flight (C + 1: redone).
 * Returns the joiner's rank, or -1 (out of memory, DDP_MAX_WORLD reached:
 * nothing changed). */
int32_t elastic_grow(elastic_t *self, int32_t id);

/* The first step of the current generation's work: C + 1, or the step in
 * flight before any commit. */
uint64_t elastic_next_step(const elastic_t *self);
/* Whether train step `step` is committed (its RESULTs may be tallied). */
bool elastic_is_committed(const elastic_t *self, uint64_t step);

/* ---- train RESULTs held until their step commits ---- */

#define PENDING_MAX 65536

typedef struct {
    uint64_t step;
    int32_t id;                 /* the sender's id (reducerd: its peer index) */
    ddp_result_t res;           /* owned arrays */
    int32_t *labels;            /* the issued labels (owned) */
} pending_item_t;

typedef struct pending pending_t;

pending_t *pending_new(void);
void pending_destroy(pending_t **self_p);
/* Holds res (its arrays are taken: res is left without them) with its
 * issued labels (taken). -1 when PENDING_MAX are held or out of memory
 * (nothing is taken then). */
int pending_add(pending_t *self, int32_t id, ddp_result_t *res, int32_t **labels);
/* Pops a held RESULT of a step <= upto (oldest first); false when none.
 * The caller owns *out (pending_item_free). */
bool pending_pop(pending_t *self, uint64_t upto, pending_item_t *out);
/* Frees the RESULTs of the steps after C (every step with !have_c):
 * their step is redone. Returns how many were dropped. */
size_t pending_drop_after(pending_t *self, bool have_c, uint64_t c);
size_t pending_count(const pending_t *self);
void pending_item_free(pending_item_t *item);

#endif
