/* loaderd's dispatch: credits, acks, re-queueing a dead worker's batches,
 * and the ranks and credits of membership generations (training). */
#include "loaderd/dispatch.h"

#include "common/clock.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

#define CHECK(c)                                                                 \
    do {                                                                         \
        if (!(c)) {                                                              \
            fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #c); \
            return 1;                                                            \
        }                                                                        \
    } while (0)

static int test_ranges_cover_plan(void)
{
    dispatch_t *d = dispatch_new(23, 7, 1000);
    batch_range_t r;
    uint64_t next = 0;
    int n = 0;
    while (dispatch_pop(d, &r)) {
        CHECK(r.first == next);
        CHECK(r.count == (next + 7 <= 23 ? 7u : 23u - next));
        next += r.count;
        n++;
    }
    CHECK(next == 23 && n == 4);
    CHECK(dispatch_all_sent(d) && dispatch_all_acked(d));
    dispatch_destroy(&d);
    CHECK(d == NULL);
    return 0;
}

static int test_credits_and_acks(void)
{
    dispatch_t *d = dispatch_new(10, 5, 1000);
    zframe_t *a = zframe_new("A", 1), *b = zframe_new("B", 1), *id = NULL;
    CHECK(dispatch_ready_worker(d, &id) == NULL);
    dispatch_credit(d, a, "wa", 1, NULL, 0);
    dispatch_credit(d, b, "wb", 2, NULL, 0);
    const char *w = dispatch_ready_worker(d, &id);
    CHECK(w && strcmp(w, "wb") == 0 && zframe_eq(id, b)); /* most credits first */
    batch_range_t r;
    CHECK(dispatch_pop(d, &r));
    uint64_t s1 = dispatch_sent(d, w, r);
    CHECK(dispatch_pop(d, &r));
    w = dispatch_ready_worker(d, &id);
    uint64_t s2 = dispatch_sent(d, w, r);
    CHECK(s1 != s2 && dispatch_in_flight(d) == 2);
    CHECK(dispatch_all_sent(d) && !dispatch_all_acked(d));
    dispatch_credit(d, b, "wb", 1, &s1, 1);
    dispatch_credit(d, a, "wa", 1, &s2, 1); /* acks only count from their worker */
    CHECK(dispatch_in_flight(d) == 1 || dispatch_in_flight(d) == 0);
    uint64_t both[2] = {s1, s2};
    dispatch_credit(d, a, "wa", 0, both, 2);
    dispatch_credit(d, b, "wb", 0, both, 2);
    CHECK(dispatch_all_acked(d));
    zframe_destroy(&a);
    zframe_destroy(&b);
    dispatch_destroy(&d);
    return 0;
}

static int test_dead_worker_requeued(void)
{
    dispatch_t *d = dispatch_new(30, 10, 100);
    zframe_t *a = zframe_new("A", 1), *b = zframe_new("B", 1), *id = NULL;
    dispatch_credit(d, a, "wa", 2, NULL, 0);
    batch_range_t r0, r1;
    CHECK(dispatch_pop(d, &r0));
    uint64_t s0 = dispatch_sent(d, "wa", r0);
    CHECK(dispatch_pop(d, &r1));
    dispatch_sent(d, "wa", r1);
    dispatch_credit(d, a, "wa", 1, &s0, 1); /* wa answers the first, then dies */
    dispatch_credit(d, b, "wb", 1, NULL, 0);
    int64_t now = clock_mono_ms();
    dispatch_heartbeat(d, "wb");
    CHECK(dispatch_reap(d, now + 50) == 0);
    dispatch_heartbeat(d, "wb");
    CHECK(dispatch_reap(d, clock_mono_ms() + 101) >= 1);
    CHECK(dispatch_live_workers(d) <= 1);
    CHECK(dispatch_requeued(d) == 1);
    batch_range_t r;
    CHECK(dispatch_pop(d, &r)); /* the re-queued batch comes before fresh ones */
    CHECK(r.first == r1.first && r.count == r1.count);
    CHECK(dispatch_ready_worker(d, &id) == NULL || zframe_eq(id, b));
    zframe_destroy(&a);
    zframe_destroy(&b);
    dispatch_destroy(&d);
    return 0;
}

/* A worker that heart-beats but never answers its batch is dropped once
 * the batch is older than the timeout; heartbeats and bare credits do not
 * bring it back, an ack does. */
static int test_stuck_worker_dropped_despite_heartbeats(void)
{
    dispatch_t *d = dispatch_new(20, 10, 100);
    zframe_t *a = zframe_new("A", 1), *id = NULL;
    dispatch_credit(d, a, "wa", 2, NULL, 0);
    batch_range_t r0;
    CHECK(dispatch_pop(d, &r0));   /* a first batch answered at once: its deadline ~ timeout */
    uint64_t sw = dispatch_sent(d, "wa", r0);
    dispatch_credit(d, a, "wa", 1, &sw, 1);
    CHECK(dispatch_pop(d, &r0));
    uint64_t s0 = dispatch_sent(d, "wa", r0);
    int64_t t0 = clock_mono_ms();
    dispatch_heartbeat(d, "wa");
    CHECK(dispatch_reap(d, t0 + 50) == 0);
    dispatch_heartbeat(d, "wa");   /* alive... */
    CHECK(dispatch_reap(d, clock_mono_ms() + 150) == 1); /* ...but the batch is overdue */
    CHECK(dispatch_live_workers(d) == 0 && dispatch_requeued(d) == 1);
    dispatch_credit(d, a, "wa", 4, NULL, 0);  /* asking for more is not an answer */
    CHECK(dispatch_live_workers(d) == 0 && dispatch_ready_worker(d, &id) == NULL);
    dispatch_credit(d, a, "wa", 1, &s0, 1);   /* a (late) answer brings it back */
    CHECK(dispatch_live_workers(d) == 1);
    batch_range_t r;
    CHECK(dispatch_pop(d, &r) && r.first == r0.first && r.count == r0.count);
    zframe_destroy(&a);
    dispatch_destroy(&d);
    return 0;
}

/* The deadline of a worker's second batch runs from its last ack: a worker
 * computing its batches one after the other is not dropped for queueing. */
static int test_deadline_from_last_ack(void)
{
    dispatch_t *d = dispatch_new(30, 10, 200);
    zframe_t *a = zframe_new("A", 1);
    dispatch_credit(d, a, "wa", 2, NULL, 0);
    batch_range_t r;
    CHECK(dispatch_pop(d, &r));
    int64_t t_sent = clock_mono_ms();
    uint64_t s0 = dispatch_sent(d, "wa", r);
    CHECK(dispatch_pop(d, &r));
    dispatch_sent(d, "wa", r);
    /* the first answer comes after >= 150 ms: the second batch's clock
     * restarts, and its deadline grows by 4x the answer time (>= 150 ms;
     * at most what the clock says, however slow the machine) */
    int64_t t0 = clock_mono_ms();
    while (clock_mono_ms() < t0 + 150)
        zclock_sleep(10);
    dispatch_credit(d, a, "wa", 1, &s0, 1);
    int64_t t1 = clock_mono_ms(), answer_max = t1 - t_sent + 1;
    CHECK(dispatch_answer_deadline_ms(d, "wa") >= 200 + 4 * 150);
    CHECK(dispatch_answer_deadline_ms(d, "wa") <= 200 + 4 * answer_max);
    CHECK(dispatch_answer_deadline_ms(d, "nobody") == -1);
    CHECK(dispatch_reap(d, t1 + 100) == 0);
    CHECK(dispatch_reap(d, t1 + 200 + 4 * answer_max + 10) == 1);
    zframe_destroy(&a);
    dispatch_destroy(&d);
    return 0;
}

/* A worker slower than the timeout loses its first batch (declared dead,
 * re-queued), but its late answer counts as its answer time: its next
 * deadline fits its speed, so it is not dropped batch after batch (the
 * README's 4-worker ResNet-18 compose example on a loaded 2-core box made
 * no progress at all before). */
static int test_late_answer_sets_deadline(void)
{
    dispatch_t *d = dispatch_new(30, 10, 100);
    zframe_t *a = zframe_new("A", 1);
    dispatch_credit(d, a, "wa", 2, NULL, 0);
    batch_range_t r;
    CHECK(dispatch_pop(d, &r));
    int64_t t_sent = clock_mono_ms();
    uint64_t s0 = dispatch_sent(d, "wa", r);
    CHECK(dispatch_reap(d, t_sent + 1000) == 1);   /* overdue: dead, batch re-queued */
    CHECK(dispatch_requeued(d) == 1 && dispatch_live_workers(d) == 0);
    CHECK(dispatch_answer_deadline_ms(d, "wa") == 3 * 100);   /* cold: nobody answered */
    int64_t t0 = clock_mono_ms();
    while (clock_mono_ms() < t0 + 150)
        zclock_sleep(10);
    dispatch_credit(d, a, "wa", 1, &s0, 1);        /* the late answer */
    int64_t answer_max = clock_mono_ms() - t_sent + 1;
    CHECK(dispatch_live_workers(d) == 1);
    CHECK(dispatch_answer_deadline_ms(d, "wa") >= 100 + 4 * 150);
    CHECK(dispatch_answer_deadline_ms(d, "wa") <= 100 + 4 * answer_max);
    /* an unknown or another worker's seq changes nothing */
    uint64_t bogus = 999;
    int64_t before = dispatch_answer_deadline_ms(d, "wa");
    dispatch_credit(d, a, "wa", 0, &bogus, 1);
    CHECK(dispatch_answer_deadline_ms(d, "wa") == before);
    zframe_destroy(&a);
    dispatch_destroy(&d);
    return 0;
}

/* Before its first answer a worker's deadline borrows the slowest other
 * worker's answer time (same model, same batch size: a late joiner or a
 * second worker is not dropped for building its primitives); before
 * anyone's answer it is 3 timeouts. */
static int test_first_batch_deadline(void)
{
    dispatch_t *d = dispatch_new(30, 10, 100);
    zframe_t *a = zframe_new("A", 1), *b = zframe_new("B", 1);
    dispatch_credit(d, a, "wa", 1, NULL, 0);
    dispatch_credit(d, b, "wb", 1, NULL, 0);
    CHECK(dispatch_answer_deadline_ms(d, "wa") == 300 && dispatch_answer_deadline_ms(d, "wb") == 300);
    batch_range_t r;
    CHECK(dispatch_pop(d, &r));
    int64_t t_sent = clock_mono_ms();
    uint64_t s0 = dispatch_sent(d, "wa", r);
    int64_t t0 = clock_mono_ms();
    while (clock_mono_ms() < t0 + 60)
        zclock_sleep(10);
    dispatch_credit(d, a, "wa", 1, &s0, 1);
    int64_t answer_max = clock_mono_ms() - t_sent + 1;
    int64_t da = dispatch_answer_deadline_ms(d, "wa"), db = dispatch_answer_deadline_ms(d, "wb");
    CHECK(da >= 100 + 4 * 60 && da <= 100 + 4 * answer_max);
    CHECK(db == da);   /* wb has not answered: wa's time stands in */
    zframe_destroy(&a);
    zframe_destroy(&b);
    dispatch_destroy(&d);
    return 0;
}

/* REISSUE: an answered (acked) batch goes back in the queue and its worker
 * gets nothing more; its other batches are re-queued too. */
static int test_reissue_bans(void)
{
    dispatch_t *d = dispatch_new(30, 10, 100000);
    zframe_t *a = zframe_new("A", 1), *b = zframe_new("B", 1), *id = NULL;
    dispatch_credit(d, a, "wa", 2, NULL, 0);
    batch_range_t r0, r1;
    CHECK(dispatch_pop(d, &r0) && dispatch_pop(d, &r1));
    uint64_t s0 = dispatch_sent(d, "wa", r0);
    uint64_t s1 = dispatch_sent(d, "wa", r1);
    dispatch_credit(d, a, "wa", 1, &s0, 1);  /* acked: then its answer is refused */
    CHECK(dispatch_reissue(d, s0, true) == 0);
    CHECK(dispatch_reissue(d, s1, true) == -1);  /* already re-queued with its worker */
    CHECK(dispatch_reissue(d, 999, true) == -1);
    CHECK(dispatch_requeued(d) == 2 && dispatch_live_workers(d) == 0);
    uint64_t acks[1] = {s1};
    dispatch_credit(d, a, "wa", 5, acks, 1); /* a banned worker stays out, acks or not */
    CHECK(dispatch_ready_worker(d, &id) == NULL);
    dispatch_credit(d, b, "wb", 1, NULL, 0);
    CHECK(dispatch_ready_worker(d, &id) && zframe_eq(id, b));
    batch_range_t r;
    int got = 0;
    while (dispatch_pop(d, &r))
        got += (r.first == r0.first || r.first == r1.first) && r.count == 10;
    CHECK(got == 2);
    zframe_destroy(&a);
    zframe_destroy(&b);
    dispatch_destroy(&d);
    return 0;
}

/* Generations (docs/ELASTIC.md): a new one forgets every rank and credit
 * until a CREDIT of it comes; a CREDIT of an older one is ignored; one of a
 * newer one (before loaderd's MEMBERS) restarts that worker's credits but
 * gets it no shard until loaderd is in that generation too. */
static int test_generations(void)
{
    dispatch_t *d = dispatch_new(0, 1, 100000);
    zframe_t *a = zframe_new("A", 1), *b = zframe_new("B", 1), *c = zframe_new("C", 1), *id;
    bool alive;
    uint32_t credits;
    dispatch_credit(d, a, "wa", 2, NULL, 0);
    dispatch_credit(d, b, "wb", 2, NULL, 0);
    dispatch_credit(d, c, "wc", 2, NULL, 0);
    dispatch_set_rank(d, "wa", 0);
    dispatch_set_rank(d, "wb", 1);
    dispatch_set_rank(d, "wc", 2);
    uint64_t s = dispatch_sent_train(d, "wb");
    CHECK(dispatch_in_flight(d) == 1);
    /* wc of generation 1 (rank 1 there) speaks before loaderd's MEMBERS */
    dispatch_credit_gen(d, c, "wc", 2, NULL, 0, 1);
    dispatch_set_rank(d, "wc", 1);
    /* the lost wb's last CREDIT (generation 0, rank 1) arrives after wc's and
     * before loaderd's MEMBERS: rank 1 stays with wc (generation 1) */
    dispatch_credit_gen(d, b, "wb", 1, NULL, 0, 0);
    dispatch_set_rank(d, "wb", 1);
    CHECK(dispatch_worker_rank(d, "wc") == 1);
    CHECK(dispatch_rank_worker(d, 1, &id, &alive, &credits) == NULL);  /* wb lost rank 1 */
    CHECK(dispatch_rank_worker(d, 2, &id, &alive, &credits) == NULL);
    dispatch_set_gen(d, 1);
    CHECK(dispatch_gen(d) == 1 && dispatch_in_flight(d) == 0);   /* train shards dropped */
    CHECK(dispatch_rank_worker(d, 0, &id, &alive, &credits) == NULL);  /* wa: not yet */
    const char *w = dispatch_rank_worker(d, 1, &id, &alive, &credits);
    CHECK(w && strcmp(w, "wc") == 0 && credits == 2);
    dispatch_credit_gen(d, b, "wb", 1, &s, 1, 0);      /* removed: stale, ignored */
    dispatch_credit_gen(d, a, "wa", 1, NULL, 0, 0);    /* from before its MEMBERS */
    CHECK(dispatch_rank_worker(d, 0, &id, &alive, &credits) == NULL);
    dispatch_credit_gen(d, a, "wa", 2, NULL, 0, 1);
    dispatch_set_rank(d, "wa", 0);
    w = dispatch_rank_worker(d, 0, &id, &alive, &credits);
    CHECK(w && strcmp(w, "wa") == 0 && credits == 2 && alive);   /* 2, not 2 + 2 + 1 */
    dispatch_credit_gen(d, c, "wc", 1, NULL, 0, 0);    /* an old CREDIT arriving late */
    dispatch_rank_worker(d, 1, &id, &alive, &credits);
    CHECK(credits == 2);
    zframe_destroy(&a);
    zframe_destroy(&b);
    zframe_destroy(&c);
    dispatch_destroy(&d);
    return 0;
}

int main(void)
{
    int fails = test_ranges_cover_plan() + test_credits_and_acks() + test_dead_worker_requeued() +
                test_stuck_worker_dropped_despite_heartbeats() + test_deadline_from_last_ack() +
                test_reissue_bans() + test_late_answer_sets_deadline() + test_first_batch_deadline() +
                test_generations();
    printf("%d passed, %d failed\n", 8 - fails, fails);
    return fails != 0;
}
