/* The training epoch plan: every sample exactly once per epoch whatever the
 * worker count, no padding, uneven last step, empty shards, seeded and
 * reproducible permutations, checkpointable state, and the counter-based
 * RNG pinned to its documented algorithm. */
#include "common/image/sampler.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

/* The documented RNG, pinned: values from an independent Python
 * implementation of sampler.h's description (splitmix64 keyed by four
 * words). A change here silently breaks resumed runs. */
static void test_rng_pinned(void)
{
    rng_t r = rng_stream(1, 2, 3, 4);
    CHECK(rng_u64(&r) == 0xeafd38d3d5e96cb6ULL, "first draw of stream (1,2,3,4)");
    CHECK(rng_u64(&r) == 0x8939bc259d05d1f6ULL, "second draw");
    CHECK(rng_u64(&r) == 0xd21b2f925f77a03aULL, "third draw");
    static const uint64_t p0[10] = {0, 9, 7, 4, 8, 3, 6, 2, 5, 1};
    static const uint64_t p1[10] = {0, 9, 4, 5, 7, 1, 8, 2, 6, 3};
    sampler_t *s = sampler_new(10, 42, 1);
    CHECK(s != NULL, "sampler_new");
    if (!s)
        return;
    for (uint64_t i = 0; i < 10; i++)
        CHECK(sampler_id(s, i) == p0[i], "seed 42 epoch 0 position %llu: %llu, want %llu",
              (unsigned long long)i, (unsigned long long)sampler_id(s, i),
              (unsigned long long)p0[i]);
    sampler_epoch(s, 1);
    for (uint64_t i = 0; i < 10; i++)
        CHECK(sampler_id(s, i) == p1[i], "seed 42 epoch 1 position %llu", (unsigned long long)i);
    sampler_destroy(&s);
    CHECK(s == NULL, "destroy clears the pointer");
}

static void test_rng_ranges(void)
{
    rng_t r = rng_stream(7, 0, 0, 0);
    int bad = 0;
    uint64_t hist[6] = {0};
    for (int i = 0; i < 60000; i++) {
        double u = rng_unit(&r), v = rng_uniform(&r, -2.5, 4.0);
        uint64_t k = rng_below(&r, 6);
        bad += !(u >= 0 && u < 1) || !(v >= -2.5 && v < 4.0) || k >= 6;
        if (k < 6)
            hist[k]++;
    }
    CHECK(bad == 0, "%d draws out of range", bad);
    for (int k = 0; k < 6; k++) /* 10000 expected, sd ~91 */
        CHECK(hist[k] > 9500 && hist[k] < 10500, "rng_below(6) bucket %d: %llu of 60000", k,
              (unsigned long long)hist[k]);
    CHECK(rng_below(&r, 0) == 0 && rng_below(&r, 1) == 0, "rng_below of 0 and 1");
}

/* Walks an epoch as W ranks would and checks that the concatenation of
 * the shards, step by step in rank order, is exactly the permutation,
 * with every id once. Returns the ids in visiting order (malloc'd). */
static uint64_t *walk_epoch(const sampler_t *s, uint64_t g, int world)
{
    uint64_t n = sampler_size(s), steps = sampler_steps(s, g), seen_n = 0;
    uint64_t *order = malloc((n + 1) * sizeof *order);
    uint8_t *seen = calloc(n + 1, 1);
    int dup = 0, gaps = 0;
    for (uint64_t k = 0; order && seen && k < steps; k++) {
        uint64_t expect_pos = k * g, step_total = 0;
        for (int r = 0; r < world; r++) {
            uint64_t first, count;
            char err[256];
            int rc = sampler_shard(s, k, g, world, r, &first, &count, err, sizeof err);
            CHECK(rc == 0, "shard step %llu rank %d: %s", (unsigned long long)k, r, err);
            if (rc != 0)
                continue;
            gaps += first != expect_pos;
            expect_pos = first + count;
            step_total += count;
            for (uint64_t p = first; p < first + count && p < n; p++) {
                uint64_t id = sampler_id(s, p);
                dup += id >= n || seen[id];
                if (id < n)
                    seen[id] = 1;
                order[seen_n++] = id;
            }
        }
        uint64_t want = n - k * g < g ? n - k * g : g;
        CHECK(step_total == want, "n %llu G %llu W %d step %llu: %llu samples, want %llu",
              (unsigned long long)n, (unsigned long long)g, world, (unsigned long long)k,
              (unsigned long long)step_total, (unsigned long long)want);
    }
    CHECK(order && seen, "out of memory");
    CHECK(dup == 0 && gaps == 0 && seen_n == n,
          "n %llu G %llu W %d: %d duplicates, %d gaps, %llu of %llu samples",
          (unsigned long long)n, (unsigned long long)g, world, dup, gaps,
          (unsigned long long)seen_n, (unsigned long long)n);
    free(seen);
    return order;
}

static void test_union_is_permutation(void)
{
    static const uint64_t ns[] = {0, 1, 7, 10, 100, 1001};
    static const uint64_t gs[] = {1, 3, 8, 64, 1000, 2000};
    static const int ws[] = {1, 2, 3, 5, 8};
    for (size_t a = 0; a < sizeof ns / sizeof *ns; a++) {
        sampler_t *s = sampler_new(ns[a], 1234, 1);
        CHECK(s != NULL, "sampler_new(%llu)", (unsigned long long)ns[a]);
        if (!s)
            continue;
        for (uint32_t e = 0; e < 2; e++) {
            sampler_epoch(s, e);
            for (size_t b = 0; b < sizeof gs / sizeof *gs; b++) {
                uint64_t *ref = walk_epoch(s, gs[b], 1);
                for (size_t c = 1; c < sizeof ws / sizeof *ws; c++) {
                    uint64_t *o = walk_epoch(s, gs[b], ws[c]);
                    /* the same global order for any worker count */
                    CHECK(ref && o && (ns[a] == 0 || !memcmp(ref, o, ns[a] * sizeof *o)),
                          "n %llu G %llu: W %d visits samples in another order than W 1",
                          (unsigned long long)ns[a], (unsigned long long)gs[b], ws[c]);
                    free(o);
                }
                free(ref);
            }
        }
        sampler_destroy(&s);
    }
}

static void shard(const sampler_t *s, uint64_t step, uint64_t g, int w, int r, uint64_t *first,
                  uint64_t *count)
{
    char err[256];
    *first = *count = 999;
    CHECK(sampler_shard(s, step, g, w, r, first, count, err, sizeof err) == 0, "%s", err);
}

static void test_uneven_and_empty(void)
{
    sampler_t *s = sampler_new(10, 5, 1);
    CHECK(s != NULL, "sampler_new");
    if (!s)
        return;
    uint64_t f, c;
    /* 10 samples, G 4, W 3: steps of 4, 4, 2; 4 -> 2,1,1; 2 -> 1,1,0 */
    CHECK(sampler_steps(s, 4) == 3, "steps: %llu", (unsigned long long)sampler_steps(s, 4));
    shard(s, 0, 4, 3, 0, &f, &c);
    CHECK(f == 0 && c == 2, "step 0 rank 0: %llu+%llu", (unsigned long long)f,
          (unsigned long long)c);
    shard(s, 0, 4, 3, 2, &f, &c);
    CHECK(f == 3 && c == 1, "step 0 rank 2: %llu+%llu", (unsigned long long)f,
          (unsigned long long)c);
    shard(s, 2, 4, 3, 0, &f, &c);
    CHECK(f == 8 && c == 1, "last step rank 0: %llu+%llu", (unsigned long long)f,
          (unsigned long long)c);
    shard(s, 2, 4, 3, 1, &f, &c);
    CHECK(f == 9 && c == 1, "last step rank 1: %llu+%llu", (unsigned long long)f,
          (unsigned long long)c);
    shard(s, 2, 4, 3, 2, &f, &c);
    CHECK(c == 0 && f == 10, "last step rank 2 is empty: %llu+%llu", (unsigned long long)f,
          (unsigned long long)c);
    /* more ranks than samples in a step */
    shard(s, 0, 3, 8, 5, &f, &c);
    CHECK(c == 0, "G 3 over 8 ranks: rank 5 gets %llu", (unsigned long long)c);
    /* --batch-size 3 per worker with 2 workers: G 6, steps 6 + 4 */
    uint64_t g = sampler_global_batch(3, 2);
    CHECK(g == 6 && sampler_steps(s, g) == 2, "B 3 x W 2: G %llu", (unsigned long long)g);
    shard(s, 1, g, 2, 1, &f, &c);
    CHECK(f == 8 && c == 2, "B 3 W 2 last step rank 1: %llu+%llu", (unsigned long long)f,
          (unsigned long long)c);
    CHECK(sampler_global_batch(3, 0) == 0 && sampler_global_batch(UINT64_MAX, 2) == 0,
          "global batch of bad input is 0");
    /* errors name the problem */
    char err[256] = "";
    CHECK(sampler_shard(s, 3, 4, 3, 0, &f, &c, err, sizeof err) == -1 && strstr(err, "past"),
          "step past the end: %s", err);
    CHECK(sampler_shard(s, 0, 4, 3, 3, &f, &c, err, sizeof err) == -1, "rank 3 of 3");
    CHECK(sampler_shard(s, 0, 0, 3, 0, &f, &c, err, sizeof err) == -1, "G 0");
    CHECK(sampler_shard(s, 0, 4, 0, 0, &f, &c, err, sizeof err) == -1, "world 0");
    CHECK(sampler_steps(s, 0) == 0, "G 0 has no steps");
    sampler_destroy(&s);
}

static int same_perm(const sampler_t *a, const sampler_t *b)
{
    for (uint64_t i = 0; i < sampler_size(a); i++)
        if (sampler_id(a, i) != sampler_id(b, i))
            return 0;
    return 1;
}

static void test_seeds_and_epochs(void)
{
    const uint64_t n = 500;
    sampler_t *a = sampler_new(n, 99, 1), *b = sampler_new(n, 99, 1);
    sampler_t *c = sampler_new(n, 100, 1), *ev = sampler_new(n, 99, 0);
    CHECK(a && b && c && ev, "sampler_new");
    if (a && b && c && ev) {
        CHECK(same_perm(a, b), "same seed, same epoch: same permutation");
        CHECK(!same_perm(a, c), "other seed: other permutation");
        sampler_epoch(b, 1);
        CHECK(!same_perm(a, b), "epoch 1 differs from epoch 0");
        sampler_epoch(b, 7);
        sampler_epoch(b, 0); /* going back rebuilds epoch 0 exactly */
        CHECK(same_perm(a, b), "epoch 0 again after 7");
        int fixed = 0;
        for (uint64_t i = 0; i < n; i++)
            fixed += sampler_id(a, i) == i;
        CHECK(fixed < 10, "a shuffle of 500 leaves %d in place (expect ~1)", fixed);
        for (uint32_t e = 0; e < 3; e++) {
            sampler_epoch(ev, e);
            int id = 1;
            for (uint64_t i = 0; i < n; i++)
                id &= sampler_id(ev, i) == i;
            CHECK(id, "eval plan (no shuffle) is the identity in epoch %u", e);
        }
    }
    sampler_destroy(&a);
    sampler_destroy(&b);
    sampler_destroy(&c);
    sampler_destroy(&ev);
}

/* Each of 5 ids should come first in about 1/5 of the epochs. */
static void test_shuffle_uniform(void)
{
    sampler_t *s = sampler_new(5, 3, 1);
    CHECK(s != NULL, "sampler_new");
    if (!s)
        return;
    int first[5] = {0};
    for (uint32_t e = 0; e < 5000; e++) {
        sampler_epoch(s, e);
        first[sampler_id(s, 0)]++;
    }
    for (int k = 0; k < 5; k++) /* 1000 expected, sd ~28 */
        CHECK(first[k] > 880 && first[k] < 1120, "id %d first in %d of 5000 epochs", k,
              first[k]);
    sampler_destroy(&s);
}

static void test_state(void)
{
    sampler_t *s = sampler_new(1000, 77, 1);
    CHECK(s != NULL, "sampler_new");
    if (!s)
        return;
    sampler_epoch(s, 4);
    sampler_set_step(s, 12, 64);
    sampler_state_t st = sampler_state(s), back;
    CHECK(st.n == 1000 && st.seed == 77 && st.epoch == 4 && st.shuffle == 1 && st.step == 12 &&
          st.global_batch == 64, "state fields");
    uint8_t buf[SAMPLER_STATE_BYTES];
    char err[256] = "";
    sampler_state_pack(&st, buf);
    CHECK(sampler_state_unpack(buf, &back, err, sizeof err) == 0, "unpack: %s", err);
    CHECK(!memcmp(&st, &back, sizeof st), "pack/unpack round trip");
    sampler_t *r = sampler_restore(&back, err, sizeof err);
    CHECK(r != NULL, "restore: %s", err);
    if (r) {
        CHECK(same_perm(s, r) && sampler_current_epoch(r) == 4, "restored permutation");
        sampler_state_t rs = sampler_state(r);
        CHECK(rs.step == 12 && rs.global_batch == 64, "restored step");
    }
    sampler_destroy(&r);
    buf[0] = 'X';
    CHECK(sampler_state_unpack(buf, &back, err, sizeof err) == -1 && strstr(err, "magic"),
          "bad magic: %s", err);
    st.step = 1000;
    CHECK(sampler_restore(&st, err, sizeof err) == NULL && strstr(err, "past"),
          "restore past the end: %s", err);
    sampler_epoch(s, 4);
    CHECK(sampler_state(s).step == 0, "a new epoch starts at step 0");
    sampler_destroy(&s);
}

/* sampler_shard_chunked for W = 1..9 over every step of an epoch: the
 * shards in rank order are the step's positions in order, each shard is
 * whole chunks (cut at multiples of CHUNK from the step's start; only the
 * step's last chunk may be short), ranks past the chunk count get nothing,
 * and the set of chunks is the same for every W. */
static void check_chunked(uint64_t n, uint64_t g, uint64_t chunk)
{
    sampler_t *s = sampler_new(n, 11, 1);
    CHECK(s != NULL, "sampler_new");
    if (!s)
        return;
    char err[256];
    uint64_t steps = sampler_steps(s, g);
    for (uint64_t k = 0; k < steps; k++) {
        uint64_t lo = k * g, len = n - lo < g ? n - lo : g;
        uint64_t nch = (len + chunk - 1) / chunk;
        for (int w = 1; w <= 9; w++) {
            uint64_t next = lo, chunks = 0;
            for (int r = 0; r < w; r++) {
                uint64_t first = 999, count = 999;
                CHECK(sampler_shard_chunked(s, k, g, chunk, w, r, &first, &count, err,
                                            sizeof err) == 0, "%s", err);
                CHECK(first == next, "n %llu G %llu chunk %llu step %llu W %d rank %d starts "
                      "at %llu, want %llu", (unsigned long long)n, (unsigned long long)g,
                      (unsigned long long)chunk, (unsigned long long)k, w, r,
                      (unsigned long long)first, (unsigned long long)next);
                /* whole chunks: starts on a chunk boundary, ends on one or at the step's end */
                /* (an empty shard sits at the step's end, which may be mid-chunk) */
                CHECK(count == 0 || (first - lo) % chunk == 0, "n %llu G %llu chunk %llu W %d "
                      "rank %d: shard starts mid-chunk at %llu", (unsigned long long)n,
                      (unsigned long long)g, (unsigned long long)chunk, w, r,
                      (unsigned long long)first);
                CHECK(count % chunk == 0 || first + count == lo + len,
                      "W %d rank %d: shard of %llu ends mid-chunk", w, r,
                      (unsigned long long)count);
                CHECK(count <= sampler_chunked_max_shard(g, chunk, w),
                      "W %d rank %d: %llu over the bound %llu", w, r, (unsigned long long)count,
                      (unsigned long long)sampler_chunked_max_shard(g, chunk, w));
                uint64_t mine = (count + chunk - 1) / chunk;
                /* the first nch % W ranks one chunk more, as sampler_shard's samples */
                uint64_t want = nch / (uint64_t)w + ((uint64_t)r < nch % (uint64_t)w);
                CHECK(mine == want, "W %d rank %d: %llu chunks, want %llu", w, r,
                      (unsigned long long)mine, (unsigned long long)want);
                CHECK((uint64_t)r < nch || count == 0, "W %d rank %d past %llu chunks got %llu",
                      w, r, (unsigned long long)nch, (unsigned long long)count);
                next = first + count;
                chunks += mine;
            }
            CHECK(next == lo + len, "W %d: the shards end at %llu, the step at %llu", w,
                  (unsigned long long)next, (unsigned long long)(lo + len));
            CHECK(chunks == nch, "W %d: %llu chunks, the step has %llu", w,
                  (unsigned long long)chunks, (unsigned long long)nch);
        }
    }
    sampler_destroy(&s);
}

static void test_chunked(void)
{
    /* (n, G, chunk): even steps, a short last step (whole and short last
     * chunk), G = chunk, one chunk per step with more ranks than chunks,
     * chunk 1 (= the sample split), a step shorter than one chunk */
    static const uint64_t cases[][3] = {{96, 24, 8}, {100, 24, 8}, {103, 24, 8}, {50, 8, 8},
                                        {37, 12, 4}, {29, 7, 1},   {5, 16, 8},   {200, 96, 8},
                                        {61, 30, 6}, {9, 9, 3}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_chunked(cases[i][0], cases[i][1], cases[i][2]);
    /* chunk 1 is sampler_shard's split exactly */
    sampler_t *s = sampler_new(29, 3, 1);
    char err[256];
    for (int w = 1; s && w <= 9; w++)
        for (int r = 0; r < w; r++) {
            uint64_t f1, c1, f2, c2;
            CHECK(sampler_shard(s, 2, 7, w, r, &f1, &c1, err, sizeof err) == 0, "%s", err);
            CHECK(sampler_shard_chunked(s, 2, 7, 1, w, r, &f2, &c2, err, sizeof err) == 0, "%s",
                  err);
            CHECK(f1 == f2 && c1 == c2, "chunk 1, W %d rank %d: not sampler_shard's", w, r);
        }
    uint64_t f, c;
    CHECK(s && sampler_shard_chunked(s, 0, 7, 0, 1, 0, &f, &c, err, sizeof err) < 0,
          "chunk 0 refused");
    CHECK(s && sampler_shard_chunked(s, 5, 7, 2, 1, 0, &f, &c, err, sizeof err) < 0,
          "a step past the end refused");
    CHECK(s && sampler_shard_chunked(s, 0, 7, 2, 2, 2, &f, &c, err, sizeof err) < 0,
          "rank out of range refused");
    sampler_destroy(&s);
    CHECK(sampler_chunked_max_shard(96, 8, 5) == 24, "96/8 over 5: 12 chunks, 3 at most");
    CHECK(sampler_chunked_max_shard(96, 8, 1) == 96, "one rank: all");
    CHECK(sampler_chunked_max_shard(20, 8, 1) == 20, "clipped to G");
    CHECK(sampler_chunked_max_shard(96, 0, 2) == 0, "chunk 0");
}

int main(void)
{
    test_rng_pinned();
    test_rng_ranges();
    test_union_is_permutation();
    test_uneven_and_empty();
    test_seeds_and_epochs();
    test_shuffle_uniform();
    test_state();
    test_chunked();
    return tu_finish("sampler");
}
