/* reducerd/issued: a RESULT counts only as the answer to an ISSUED batch of
 * its rank (same ids, once); early RESULTs are held (bounded) and decided
 * when ISSUED catches up; the end of a phase drops what was never issued. */
#include "reducerd/issued.h"
#include "tests/reporterd/check.h"

#include <stdlib.h>
#include <string.h>

static void *dup_mem(const void *p, size_t n)
{
    void *q = malloc(n);
    memcpy(q, p, n);
    return q;
}

static const uint64_t IDS[3] = {4, 5, 6};
static const int32_t LABELS[3] = {1, 2, 0};

static ddp_issued_t issued(uint64_t seq, int32_t rank)
{
    return (ddp_issued_t){.seq = seq, .epoch = 0, .phase = DDP_PHASE_EVAL, .rank = rank, .n = 3,
                          .ids = dup_mem(IDS, sizeof IDS), .labels = dup_mem(LABELS, sizeof LABELS)};
}

/* A RESULT with malloc'ed arrays (issued_hold takes them). */
static ddp_result_t result(uint64_t seq, int32_t rank, uint64_t first_id)
{
    uint64_t ids[3] = {first_id, first_id + 1, first_id + 2};
    int32_t topk[3] = {0, 0, 0}, labels[3] = {9, 9, 9};
    float loss[3] = {0, 0, 0};
    return (ddp_result_t){.rank = rank, .epoch = 0, .phase = DDP_PHASE_EVAL, .seq = seq, .n = 3,
                          .k = 1, .ids = dup_mem(ids, sizeof ids),
                          .labels = dup_mem(labels, sizeof labels), .topk = dup_mem(topk, sizeof topk),
                          .loss = dup_mem(loss, sizeof loss)};
}

static void clear(ddp_result_t *r)
{
    ddp_msg_t m = {.type = DDP_RESULT};
    m.u.result = *r;
    ddp_msg_clear(&m);
}

static void test_match_once(void)
{
    issued_t *t = issued_new();
    char err[256];
    ddp_issued_t is = issued(1, 0);
    CHECK(issued_add(t, &is, err, sizeof err) == 0 && is.ids == NULL);
    ddp_issued_t again = issued(1, 0);
    CHECK(issued_add(t, &again, err, sizeof err) == -1); /* a seq is issued once */
    free(again.ids), free(again.labels);
    int32_t *labels;
    ddp_result_t r = result(1, 1, 4);
    CHECK(issued_judge(t, &r, &labels, err, sizeof err) == ISSUED_FOREIGN); /* other rank */
    CHECK(strstr(err, "issued to rank 0, not 1") != NULL);
    clear(&r);
    r = result(1, 0, 4);
    CHECK(issued_judge(t, &r, &labels, err, sizeof err) == ISSUED_MATCH);
    CHECK(labels && memcmp(labels, LABELS, sizeof LABELS) == 0); /* the issued labels */
    free(labels);
    CHECK(issued_judge(t, &r, &labels, err, sizeof err) == ISSUED_FOREIGN); /* a replay */
    CHECK(strstr(err, "not an unanswered batch") != NULL);
    clear(&r);
    CHECK(issued_count(t) == 0);
    issued_destroy(&t);
}

static void test_wrong_ids_withdraws(void)
{
    issued_t *t = issued_new();
    char err[256];
    int32_t *labels;
    ddp_issued_t is = issued(3, 2);
    issued_add(t, &is, err, sizeof err);
    ddp_result_t r = result(3, 2, 100);
    CHECK(issued_judge(t, &r, &labels, err, sizeof err) == ISSUED_WRONG && labels == NULL);
    CHECK(issued_count(t) == 0); /* withdrawn: the caller has it re-issued */
    clear(&r);
    issued_destroy(&t);
}

static void test_held_until_issued(void)
{
    issued_t *t = issued_new();
    char err[256];
    int32_t *labels;
    ddp_issued_t first = issued(1, 0);
    issued_add(t, &first, err, sizeof err);
    ddp_result_t early = result(2, 0, 4);
    CHECK(issued_judge(t, &early, &labels, err, sizeof err) == ISSUED_LATER);
    CHECK(issued_hold(t, &early) == 0 && early.ids == NULL);
    ddp_result_t out;
    CHECK(!issued_pop_decidable(t, &out)); /* seq 2 not issued yet */
    ddp_issued_t second = issued(2, 0);
    issued_add(t, &second, err, sizeof err);
    CHECK(issued_pop_decidable(t, &out) && out.seq == 2);
    CHECK(issued_judge(t, &out, &labels, err, sizeof err) == ISSUED_MATCH);
    free(labels);
    clear(&out);
    /* bounded per rank */
    int held = 0;
    for (int i = 0; i < ISSUED_MAX_HELD_PER_RANK + 5; i++) {
        ddp_result_t r = result(1000 + (uint64_t)i, 1, 4);
        if (issued_hold(t, &r) == 0)
            held++;
        else
            clear(&r);
    }
    CHECK(held == ISSUED_MAX_HELD_PER_RANK);
    /* never issued: dropped (rejected) when the phase ends */
    CHECK(issued_end(t, 0, DDP_PHASE_EVAL) == (uint64_t)ISSUED_MAX_HELD_PER_RANK);
    CHECK(issued_count(t) == 0); /* seq 1, never answered, is freed with its phase */
    issued_destroy(&t);
}

/* A new membership generation (docs/ELASTIC.md): batches issued to, and
 * RESULTs held from, a removed rank go; the others follow their rank. */
static void test_renumber(void)
{
    issued_t *t = issued_new();
    char err[256];
    for (int32_t rank = 0; rank < 3; rank++) {
        ddp_issued_t is = issued(1 + (uint64_t)rank, rank);
        CHECK(issued_add(t, &is, err, sizeof err) == 0);
    }
    ddp_result_t early = result(9, 1, 4), early2 = result(10, 2, 4);
    CHECK(issued_hold(t, &early) == 0 && issued_hold(t, &early2) == 0);
    const int32_t map[3] = {0, -1, 1}; /* rank 1 lost, rank 2 is rank 1 now */
    CHECK(issued_renumber(t, map, 3) == 1);
    CHECK(issued_count(t) == 2);
    int32_t *labels;
    ddp_result_t r = result(3, 1, 4);   /* old rank 2's batch, answered as rank 1 */
    CHECK(issued_judge(t, &r, &labels, err, sizeof err) == ISSUED_MATCH);
    free(labels);
    clear(&r);
    r = result(2, 1, 4);                /* the lost rank's batch is gone */
    CHECK(issued_judge(t, &r, &labels, err, sizeof err) == ISSUED_FOREIGN);
    clear(&r);
    ddp_issued_t later = issued(10, 1);
    CHECK(issued_add(t, &later, err, sizeof err) == 0);
    ddp_result_t held;
    CHECK(issued_pop_decidable(t, &held) && held.seq == 10 && held.rank == 1);
    clear(&held);
    CHECK(!issued_pop_decidable(t, &held));
    issued_destroy(&t);
}

/* Several loaderds (docs/SCALE.md): each ISSUED carries its shard in the
 * seq's high bits and only its ids; a RESULT is held until *its* loaderd
 * has issued that far, whatever the others issued. */
static void test_shards(void)
{
    issued_t *t = issued_new();
    char err[256];
    const uint64_t s1 = (uint64_t)1 << DDP_SEQ_SHARD_SHIFT, s2 = (uint64_t)2 << DDP_SEQ_SHARD_SHIFT;
    ddp_issued_t is = issued(s1 + 1, 0); /* ids 4, 5, 6 */
    CHECK(issued_check_shard(&is, 1, 1, err, sizeof err) == 0);
    CHECK(issued_check_shard(&is, 0, 1, err, sizeof err) == -1);
    CHECK(strstr(err, "names shard 1, not the sender's 0") != NULL);
    CHECK(issued_check_shard(&is, 1, 3, err, sizeof err) == -1); /* 5 % 3 == 2 */
    CHECK(strstr(err, "id 5 is not in shard 1/3") != NULL);
    uint64_t ids3[3] = {1, 4, 7}; /* all % 3 == 1 */
    memcpy(is.ids, ids3, sizeof ids3);
    CHECK(issued_check_shard(&is, 1, 3, err, sizeof err) == 0);
    CHECK(issued_add(t, &is, err, sizeof err) == 0);
    /* shard 2 issued nothing yet: its seq is held, though shard 1 went far */
    int32_t *labels;
    ddp_result_t r = result(s2 + 1, 0, 2);
    r.ids[1] = 5, r.ids[2] = 8;
    CHECK(issued_judge(t, &r, &labels, err, sizeof err) == ISSUED_LATER);
    CHECK(issued_hold(t, &r) == 0);
    ddp_result_t out;
    CHECK(!issued_pop_decidable(t, &out));
    /* shard 1's own later seq and a replay below its highest are judged */
    ddp_result_t r1 = result(s1 + 2, 0, 1);
    CHECK(issued_judge(t, &r1, &labels, err, sizeof err) == ISSUED_LATER);
    r1.seq = s1 + 1;
    r1.ids[0] = 1, r1.ids[1] = 4, r1.ids[2] = 7;
    CHECK(issued_judge(t, &r1, &labels, err, sizeof err) == ISSUED_MATCH);
    free(labels);
    clear(&r1);
    /* shard 2 issues: its held RESULT becomes decidable */
    ddp_issued_t is2 = issued(s2 + 1, 0);
    uint64_t ids2[3] = {2, 5, 8};
    memcpy(is2.ids, ids2, sizeof ids2);
    CHECK(issued_check_shard(&is2, 2, 3, err, sizeof err) == 0);
    CHECK(issued_add(t, &is2, err, sizeof err) == 0);
    CHECK(issued_pop_decidable(t, &out) && out.seq == s2 + 1);
    CHECK(issued_judge(t, &out, &labels, err, sizeof err) == ISSUED_MATCH);
    free(labels);
    clear(&out);
    CHECK(issued_count(t) == 0);
    issued_destroy(&t);
}

int main(void)
{
    test_match_once();
    test_renumber();
    test_shards();
    test_wrong_ids_withdraws();
    test_held_until_issued();
    return check_done("test_issued");
}
