/* elastic: the blame rules of docs/ELASTIC.md ("Who is lost") and the
 * commit bookkeeping, on plain arrays: a COMMIT only when every member
 * summed; a dead rank at once; otherwise never one report alone: the
 * suspected ranks that did not report once everyone reported or is
 * suspected, the first failed report's suspect when all reported; the
 * renumbering of a new generation; RESULTs held until their step commits
 * and dropped when it is redone. */
#include <stdlib.h>
#include <string.h>

#include "reducerd/elastic.h"
#include "tests/reporterd/check.h" /* CHECK and check_done, shared by the C tests */

static const int32_t ids[] = {10, 11, 12, 13};

static elastic_t *gang(int32_t world) { return elastic_new(world, ids, 0); }

static int report(elastic_t *e, int32_t rank, uint64_t step, int failed, int32_t suspect)
{
    char err[256];
    return elastic_report(e, rank, step, 0, failed ? DDP_STEP_RING_FAILED : DDP_STEP_SUMMED,
                          failed ? suspect : -1, err, sizeof err);
}

static void commit_when_all_summed(void)
{
    elastic_t *e = gang(3);
    bool lost[3];
    CHECK(elastic_judge(e, lost) == ELASTIC_WAIT);
    CHECK(report(e, 0, 5, 0, -1) == 0); /* the first report names the run's first step */
    CHECK(report(e, 2, 5, 0, -1) == 0);
    CHECK(elastic_judge(e, lost) == ELASTIC_WAIT);
    CHECK(!elastic_is_committed(e, 5));
    CHECK(report(e, 1, 5, 0, -1) == 0);
    CHECK(elastic_judge(e, lost) == ELASTIC_COMMIT);
    elastic_commit(e);
    CHECK(e->committed == 5 && e->step == 6 && elastic_next_step(e) == 6);
    CHECK(elastic_is_committed(e, 5) && elastic_is_committed(e, 4) && !elastic_is_committed(e, 6));
    CHECK(elastic_judge(e, lost) == ELASTIC_WAIT);
    /* after a commit only S + 1; one report per rank; members only */
    CHECK(report(e, 0, 5, 0, -1) == -1);
    CHECK(report(e, 0, 7, 0, -1) == -1);
    CHECK(report(e, 0, 6, 0, -1) == 0);
    CHECK(report(e, 0, 6, 0, -1) == -1);
    CHECK(report(e, 3, 6, 0, -1) == -1);
    elastic_destroy(&e);
    CHECK(e == NULL);
}

/* kill -9 of rank 1 of 3: rank 2 times out on it, rank 0 on rank 2 (alive
 * but stuck): only once both reported is rank 1 (suspected, silent) lost. */
static void kill_9_of_a_middle_rank(void)
{
    elastic_t *e = gang(3);
    bool lost[3];
    CHECK(report(e, 2, 0, 1, 1) == 0);
    CHECK(elastic_judge(e, lost) == ELASTIC_WAIT); /* rank 0 has not spoken, nobody suspects it */
    CHECK(report(e, 0, 0, 1, 2) == 0);
    CHECK(elastic_judge(e, lost) == ELASTIC_CHANGE);
    CHECK(!lost[0] && lost[1] && !lost[2]);
    int32_t map[3];
    CHECK(elastic_change(e, lost, map) == 2);
    CHECK(map[0] == 0 && map[1] == -1 && map[2] == 1);
    CHECK(e->gen == 1 && e->world == 2 && e->member[0] == 10 && e->member[1] == 12);
    CHECK(elastic_rank_of(e, 12) == 1 && elastic_rank_of(e, 11) == -1);
    CHECK(e->step == 0 && elastic_next_step(e) == 0); /* no commit yet: step 0 is redone */
    CHECK(elastic_judge(e, lost) == ELASTIC_WAIT);    /* the reports were of generation 0 */
    CHECK(report(e, 0, 0, 0, -1) == 0 && report(e, 1, 0, 0, -1) == 0);
    CHECK(elastic_judge(e, lost) == ELASTIC_COMMIT);
    elastic_destroy(&e);
}

/* A cut link or a cycle of suspicion: everyone reported; the suspect of the
 * first failed report (nearest the break) goes, not all of them. */
static void everyone_reported(void)
{
    elastic_t *e = gang(3);
    bool lost[3];
    CHECK(report(e, 1, 0, 1, 0) == 0);
    CHECK(elastic_judge(e, lost) == ELASTIC_WAIT); /* rank 2: neither reported nor suspected */
    CHECK(report(e, 2, 0, 1, 1) == 0);
    /* rank 1 is suspected but reported itself: rank 0 (suspected, silent) goes */
    CHECK(elastic_judge(e, lost) == ELASTIC_CHANGE);
    CHECK(lost[0] && !lost[1] && !lost[2]);
    elastic_destroy(&e);

    /* a rank that summed is still the suspect of the first failure */
    e = gang(3);
    CHECK(report(e, 0, 0, 1, 2) == 0);
    CHECK(report(e, 2, 0, 0, -1) == 0);
    CHECK(elastic_judge(e, lost) == ELASTIC_WAIT);
    CHECK(report(e, 1, 0, 1, 0) == 0);
    CHECK(elastic_judge(e, lost) == ELASTIC_CHANGE && lost[2] && !lost[0] && !lost[1]);
    elastic_destroy(&e);

    /* failures that name nobody: nothing to decide on */
    e = gang(2);
    CHECK(report(e, 0, 0, 1, -1) == 0);
    CHECK(elastic_judge(e, lost) == ELASTIC_WAIT);
    CHECK(report(e, 1, 0, 1, 7) == 0); /* outside the generation: names nobody */
    CHECK(elastic_judge(e, lost) == ELASTIC_STUCK);
    elastic_destroy(&e);
}

/* Heartbeats: a dead rank is lost at once, without reports; two at once;
 * a commit first when every member summed before one died. */
static void dead_ranks(void)
{
    elastic_t *e = gang(4);
    bool lost[4];
    elastic_dead(e, 2);
    CHECK(elastic_judge(e, lost) == ELASTIC_CHANGE && lost[2] && !lost[0] && !lost[1] && !lost[3]);
    elastic_dead(e, 0);
    CHECK(elastic_judge(e, lost) == ELASTIC_CHANGE && lost[0] && lost[2]);
    int32_t map[4];
    CHECK(elastic_change(e, lost, map) == 2);
    CHECK(map[1] == 0 && map[3] == 1 && e->member[0] == 11 && e->member[1] == 13);
    CHECK(elastic_judge(e, lost) == ELASTIC_WAIT); /* deaths were of the old generation */
    elastic_destroy(&e);

    e = gang(2);
    CHECK(report(e, 0, 3, 0, -1) == 0 && report(e, 1, 3, 0, -1) == 0);
    elastic_dead(e, 1);
    CHECK(elastic_judge(e, lost) == ELASTIC_COMMIT);
    elastic_commit(e);
    CHECK(elastic_judge(e, lost) == ELASTIC_CHANGE && lost[1] && !lost[0]);
    CHECK(elastic_change(e, lost, map) == 1);
    CHECK(elastic_next_step(e) == 4 && e->have_committed && e->committed == 3);
    elastic_destroy(&e);

    e = gang(2);
    elastic_dead(e, 0);
    elastic_dead(e, 1);
    CHECK(elastic_judge(e, lost) == ELASTIC_CHANGE && lost[0] && lost[1]);
    CHECK(elastic_change(e, lost, map) == 0);
    elastic_destroy(&e);
    CHECK(elastic_new(0, ids, 0) == NULL);
}

static ddp_result_t a_result(uint64_t step)
{
    ddp_result_t r = {.rank = 0, .phase = DDP_PHASE_TRAIN, .n = 1, .k = 1, .step = step};
    r.ids = calloc(1, 8);
    r.labels = calloc(1, 4);
    r.topk = calloc(1, 4);
    r.loss = calloc(1, 4);
    return r;
}

static void held_until_commit(void)
{
    pending_t *p = pending_new();
    uint64_t steps[] = {4, 5, 4, 6, 3};
    for (int i = 0; i < 5; i++) {
        ddp_result_t r = a_result(steps[i]);
        int32_t *labels = calloc(1, 4);
        CHECK(pending_add(p, i, &r, &labels) == 0);
        CHECK(r.ids == NULL && r.loss == NULL && labels == NULL); /* taken */
    }
    CHECK(pending_count(p) == 5);
    pending_item_t it;
    int order[5], n = 0;
    while (pending_pop(p, 4, &it)) {
        order[n++] = it.id;
        CHECK(it.step <= 4 && it.labels && it.res.ids);
        pending_item_free(&it);
    }
    CHECK(n == 3 && order[0] == 0 && order[1] == 2 && order[2] == 4); /* arrival order */
    CHECK(pending_drop_after(p, true, 5) == 1 && pending_count(p) == 1); /* step 6 is redone */
    CHECK(pending_pop(p, 5, &it) && it.id == 1);
    pending_item_free(&it);
    ddp_result_t r = a_result(0);
    int32_t *labels = calloc(1, 4);
    CHECK(pending_add(p, 9, &r, &labels) == 0);
    CHECK(pending_drop_after(p, false, 0) == 1 && pending_count(p) == 0); /* nothing committed */
    pending_destroy(&p);
    CHECK(p == NULL);
}

int main(void)
{
    commit_when_all_summed();
    kill_9_of_a_middle_rank();
    everyone_reported();
    dead_ranks();
    held_until_commit();
    return check_done("test_elastic");
}
