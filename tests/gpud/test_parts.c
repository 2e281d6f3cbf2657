/* gpud/parts: the parts of a train step from several loaderds are kept
 * until every loaderd's is in, then merged in pos order (the order one
 * loaderd sends) with global_count summed, each part told where its
 * samples went; empty parts count; a second part from a loaderd, a
 * position twice and parts of other image sizes are refused; older
 * generations and steps are pruned. The merged batch keeps each sample's
 * pos (bitwise training cuts its chunks by it, gpud/chunk_sizes.h). */
#include "gpud/parts.h"
#include "tests/proto/check.h"

#include <stdlib.h>
#include <string.h>

/* A part of step STEP: samples at the given positions, pixel byte = pos,
 * id = 100 + pos, label = pos % 10. */
static ddp_batch_t part(uint64_t seq, uint64_t step, uint32_t gen, const uint32_t *pos,
                        uint32_t n, uint32_t global_count)
{
    ddp_batch_t b = {.seq = seq, .epoch = 0, .phase = DDP_PHASE_TRAIN, .n = n, .c = 1, .h = 1,
                     .w = 2, .step = step, .global_count = global_count, .gen = gen};
    b.ids = calloc(n ? n : 1, sizeof *b.ids);
    b.labels = calloc(n ? n : 1, sizeof *b.labels);
    b.pos = n ? calloc(n, sizeof *b.pos) : NULL;
    b.pixels = zframe_new(NULL, 2 * n);
    uint8_t *px = zframe_data(b.pixels);
    for (uint32_t i = 0; i < n; i++) {
        b.pos[i] = pos[i];
        b.ids[i] = 100 + pos[i];
        b.labels[i] = (int32_t)(pos[i] % 10);
        px[2 * i] = px[2 * i + 1] = (uint8_t)pos[i];
    }
    return b;
}

static void test_merge(void)
{
    char err[256];
    parts_t *p = parts_new(3);
    const uint32_t a[] = {1, 4}, b[] = {0, 2, 5}, c[] = {3};
    ddp_batch_t x = part(11, 7, 0, a, 2, 2), y = part(21, 7, 0, b, 3, 4), z = part(31, 7, 0, c, 1, 1);
    ddp_batch_t early = part(12, 8, 0, a, 2, 2);  /* the next step, from loaderd 0 */
    CHECK(parts_add(p, &x, 0, err, sizeof err) == 0 && x.ids == NULL); /* taken */
    CHECK(parts_add(p, &early, 0, err, sizeof err) == 0);
    ddp_batch_t dup = part(13, 7, 0, a, 2, 2);
    CHECK(parts_add(p, &dup, 0, err, sizeof err) == -1 && strstr(err, "a second part of step 7"));
    ddp_msg_t m = {.type = DDP_BATCH, .u.batch = dup};
    ddp_msg_clear(&m);
    ddp_batch_t merged;
    part_t *taken;
    int n;
    CHECK(parts_add(p, &y, 1, err, sizeof err) == 0);
    CHECK(parts_take(p, 0, 7, &merged, &taken, &n, err, sizeof err) == 0); /* loaderd 2 missing */
    CHECK(parts_add(p, &z, 2, err, sizeof err) == 0);
    CHECK(parts_take(p, 0, 7, &merged, &taken, &n, err, sizeof err) == 1 && n == 3);
    CHECK(merged.n == 6 && merged.global_count == 7 && merged.step == 7);
    const uint8_t *px = zframe_data(merged.pixels);
    for (uint32_t j = 0; j < 6; j++)
        CHECK(merged.ids[j] == 100 + j && merged.labels[j] == (int32_t)j && px[2 * j] == j &&
              px[2 * j + 1] == j && merged.pos[j] == j);   /* pos kept: --chunk's chunks */
    for (int i = 0; i < n; i++)
        for (uint32_t s = 0; s < taken[i].b.n; s++)
            CHECK(taken[i].at[s] == taken[i].b.pos[s]);   /* where each sample went */
    parts_free_taken(&merged, taken, n);
    CHECK(parts_count(p) == 1);            /* step 8's part waits */
    parts_prune(p, 0, 9);                  /* a step already run */
    CHECK(parts_count(p) == 0);
    parts_destroy(&p);
}

static void test_empty_and_refused(void)
{
    char err[256];
    parts_t *p = parts_new(2);
    const uint32_t a[] = {0, 1}, clash[] = {1};
    ddp_batch_t x = part(1, 3, 2, a, 2, 2), none = part(2, 3, 2, NULL, 0, 0);
    CHECK(parts_add(p, &x, 0, err, sizeof err) == 0 && parts_add(p, &none, 1, err, sizeof err) == 0);
    ddp_batch_t merged;
    part_t *taken;
    int n;
    CHECK(parts_take(p, 1, 3, &merged, &taken, &n, err, sizeof err) == 0); /* other generation */
    CHECK(parts_take(p, 2, 3, &merged, &taken, &n, err, sizeof err) == 1);
    CHECK(merged.n == 2 && merged.global_count == 2);
    parts_free_taken(&merged, taken, n);
    /* the same position from two loaderds: two of them hold one shard */
    ddp_batch_t y = part(3, 4, 2, a, 2, 2), w = part(4, 4, 2, clash, 1, 1);
    CHECK(parts_add(p, &y, 0, err, sizeof err) == 0 && parts_add(p, &w, 1, err, sizeof err) == 0);
    CHECK(parts_take(p, 2, 4, &merged, &taken, &n, err, sizeof err) == -1);
    CHECK(strstr(err, "two loaderds sent position 1") != NULL);
    /* other image sizes */
    ddp_batch_t u = part(5, 5, 2, a, 2, 2), v = part(6, 5, 2, clash, 1, 1);
    v.w = 1;
    zframe_destroy(&v.pixels);
    v.pixels = zframe_new(NULL, 1);
    CHECK(parts_add(p, &u, 0, err, sizeof err) == 0 && parts_add(p, &v, 1, err, sizeof err) == 0);
    CHECK(parts_take(p, 2, 5, &merged, &taken, &n, err, sizeof err) == -1);
    CHECK(strstr(err, "differ in image size") != NULL);
    /* a part without positions */
    ddp_batch_t bare = part(7, 6, 2, a, 2, 2);
    free(bare.pos);
    bare.pos = NULL;
    CHECK(parts_add(p, &bare, 0, err, sizeof err) == -1 && strstr(err, "carries no 'pos'"));
    ddp_msg_t m = {.type = DDP_BATCH, .u.batch = bare};
    ddp_msg_clear(&m);
    /* an older generation goes */
    ddp_batch_t old = part(8, 9, 1, a, 2, 2);
    CHECK(parts_add(p, &old, 0, err, sizeof err) == 0 && parts_count(p) == 1);
    parts_prune(p, 2, 0);
    CHECK(parts_count(p) == 0);
    parts_destroy(&p);
}

int main(void)
{
    test_merge();
    test_empty_and_refused();
    return check_exit("test_parts");
}
