/* gpud/buckets: DDP-style gradient buckets.
 *
 *   plan:    buckets formed from the last gradient back, each closed at cap
 *            floats (the first gradients' bucket may be smaller), ranges
 *            contiguous and covering the buffer;
 *   bits:    W = 2 and 3 ranks in threads over a real ring (ipc): the
 *            bucketed all-reduce, run after "backward" or overlapped on the
 *            thread with gradients marked ready in any order, gives the
 *            bytes of one allreduce_sum of the whole buffer on every rank —
 *            while all-reducing each bucket as an array of its own would
 *            not (the data is chosen so that the order of additions shows);
 *   abort:   a step given up before any bucket was ready ends at once;
 *   order:   buckets_order numbers the buckets as backward completes them
 *            (and the ring's thread takes them so, the same bytes);
 *   issue:   bucket_issue (the buckets handed to a device collective, NCCL)
 *            queues every bucket exactly once a step, in bucket order,
 *            each when its gradients are final and its predecessors are
 *            queued, whatever order the gradients come in; finish queues
 *            the rest (an empty shard: all); a failing queue stops it.
 */
#include "gpud/buckets.h"
#include "gpud/bucket_issue.h"

#include <czmq.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tcheck.h"

#define MAXW 3
#define NG 9

/* gradient sizes: small and large, so buckets hold one or several */
static const size_t NUMEL[NG] = {27, 16, 16, 4608, 32, 32, 9216, 128, 10};
#define CAP 5000

static char s_dir[128];

/* Values of mixed magnitudes: their sum depends on the order of additions. */
static float value(int rank, size_t i)
{
    return sinf((float)i * 0.37f + (float)rank) * powf(10.0f, (float)((i + 3 * rank) % 7) - 3.0f);
}

typedef struct {
    int rank, world, rc;
    size_t n;
    float *ref, *sync, *ovl, *naive, *ord;
    char err[512];
} rank_t;

static void ep(char *buf, size_t len, int rank)
{
    snprintf(buf, len, "ipc://%s/r%d", s_dir, rank);
}

static void fill(float *x, size_t n, int rank)
{
    for (size_t i = 0; i < n; i++)
        x[i] = value(rank, i);
}

/* The step's gradients marked ready: in backward order (last first) on
 * rank 0, first to last elsewhere (the thread must still go in bucket
 * order). */
static void mark_all(buckets_t *b, int rank)
{
    for (int k = 0; k < NG; k++)
        buckets_ready(b, rank == 0 ? NG - 1 - k : k);
}

static int bucketed(rank_t *r, allreduce_t *ar, buckets_t *b, float *x, int overlap)
{
    fill(x, r->n, r->rank);
    if (buckets_begin(b, x, ar, 20000, overlap, r->err, sizeof r->err) < 0)
        return -1;
    mark_all(b, r->rank);
    return buckets_end(b, r->err, sizeof r->err);
}

static void *rank_main(void *arg)
{
    rank_t *r = arg;
    char mine[300], next[300];
    ep(mine, sizeof mine, r->rank);
    ep(next, sizeof next, (r->rank + 1) % r->world);
    r->rc = -1;
    allreduce_t *ar = allreduce_new(r->rank, r->world, mine, next, r->err, sizeof r->err);
    buckets_t *b = ar ? buckets_new(NUMEL, NG, CAP, r->err, sizeof r->err) : NULL;
    if (!b)
        goto out;
    fill(r->ref, r->n, r->rank);
    if (allreduce_sum(ar, r->ref, r->n, 20000, r->err, sizeof r->err) < 0)
        goto out;
    /* each bucket as an array of its own: other chunks, other orders */
    fill(r->naive, r->n, r->rank);
    for (int k = 0; k < buckets_count(b); k++) {
        size_t lo, hi;
        buckets_range(b, k, &lo, &hi);
        if (allreduce_sum(ar, r->naive + lo, hi - lo, 20000, r->err, sizeof r->err) < 0)
            goto out;
    }
    if (bucketed(r, ar, b, r->sync, 0) < 0 || bucketed(r, ar, b, r->ovl, 1) < 0)
        goto out;
    /* numbered in forward's order (buckets_order): the thread takes them
     * in that order on every rank, the same bytes */
    buckets_destroy(&b);
    int pos[NG];
    for (int i = 0; i < NG; i++)
        pos[i] = i;
    b = buckets_new(NUMEL, NG, 1, r->err, sizeof r->err);
    if (!b || buckets_order(b, pos) < 0 || bucketed(r, ar, b, r->ord, 1) < 0)
        goto out;
    r->rc = 0;
out:
    buckets_destroy(&b);
    allreduce_destroy(&ar);
    return NULL;
}

static void test_plan(void)
{
    char err[256];
    buckets_t *b = buckets_new(NUMEL, NG, CAP, err, sizeof err);
    REQUIRE(b, "buckets_new: %s", err);
    /* from the back: {10, 128, 9216} = 9354 >= 5000; {32, 32, 4608, ...}:
     * 32 + 32 + 4608 = 4672 < 5000, + 16 = 4688, + 16 = 4704, + 27 = 4731:
     * the first gradients' bucket, smaller */
    size_t total = 0;
    for (int i = 0; i < NG; i++)
        total += NUMEL[i];
    CHECK(buckets_floats(b) == total, "%zu floats, want %zu", buckets_floats(b), total);
    CHECK(buckets_count(b) == 2, "%d buckets, want 2", buckets_count(b));
    size_t lo, hi;
    buckets_range(b, 0, &lo, &hi);
    CHECK(lo == total - 9354 && hi == total, "bucket 0 is [%zu, %zu)", lo, hi);
    buckets_range(b, 1, &lo, &hi);
    CHECK(lo == 0 && hi == total - 9354, "bucket 1 is [%zu, %zu)", lo, hi);
    for (int i = 0; i < NG; i++)
        CHECK(buckets_of(b, i) == (i >= 6 ? 0 : 1), "gradient %d in bucket %d", i,
              buckets_of(b, i));
    buckets_destroy(&b);

    /* cap 1: one bucket per gradient, the last gradient first */
    b = buckets_new(NUMEL, NG, 1, err, sizeof err);
    REQUIRE(b, "buckets_new: %s", err);
    CHECK(buckets_count(b) == NG, "%d buckets, want %d", buckets_count(b), NG);
    size_t end = total;
    for (int k = 0; k < buckets_count(b); k++) {
        buckets_range(b, k, &lo, &hi);
        CHECK(hi == end && hi - lo == NUMEL[NG - 1 - k], "bucket %d is [%zu, %zu)", k, lo, hi);
        CHECK(buckets_of(b, NG - 1 - k) == k, "gradient %d in bucket %d", NG - 1 - k,
              buckets_of(b, NG - 1 - k));
        end = lo;
    }
    buckets_destroy(&b);

    /* a cap above the total: one bucket */
    b = buckets_new(NUMEL, NG, total + 1, err, sizeof err);
    REQUIRE(b, "buckets_new: %s", err);
    CHECK(buckets_count(b) == 1, "%d buckets, want 1", buckets_count(b));
    buckets_destroy(&b);

    CHECK(!buckets_new(NUMEL, 0, CAP, err, sizeof err) && strstr(err, "0 gradients"),
          "no gradients accepted: %s", err);
    CHECK(!buckets_new(NUMEL, NG, 0, err, sizeof err), "cap 0 accepted");
}

static void test_bits(int world)
{
    size_t n = 0;
    for (int i = 0; i < NG; i++)
        n += NUMEL[i];
    rank_t r[MAXW];
    pthread_t th[MAXW];
    for (int k = 0; k < world; k++) {
        r[k] = (rank_t){.rank = k, .world = world, .n = n, .ref = malloc(n * sizeof(float)),
                        .sync = malloc(n * sizeof(float)), .ovl = malloc(n * sizeof(float)),
                        .naive = malloc(n * sizeof(float)), .ord = malloc(n * sizeof(float))};
        REQUIRE(r[k].ref && r[k].sync && r[k].ovl && r[k].naive && r[k].ord, "out of memory");
        REQUIRE(pthread_create(&th[k], NULL, rank_main, &r[k]) == 0, "pthread_create");
    }
    for (int k = 0; k < world; k++)
        pthread_join(th[k], NULL);
    for (int k = 0; k < world; k++)
        REQUIRE(r[k].rc == 0, "W=%d rank %d: %s", world, k, r[k].err);
    /* the sums are right, to float rounding */
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double want = 0, mag = 0;
        for (int k = 0; k < world; k++) {
            want += value(k, i);
            mag += fabs(value(k, i));
        }
        double e = fabs(r[0].ref[i] - want) / (mag > 0 ? mag : 1);
        worst = e > worst ? e : worst;
    }
    CHECK(worst < 1e-6, "W=%d: allreduce_sum off by %.3g relative", world, worst);
    for (int k = 0; k < world; k++) {
        CHECK(memcmp(r[k].ref, r[0].ref, n * sizeof(float)) == 0,
              "W=%d: rank %d's sum differs from rank 0's", world, k);
        CHECK(memcmp(r[k].sync, r[k].ref, n * sizeof(float)) == 0,
              "W=%d rank %d: buckets after backward differ from one allreduce_sum", world, k);
        CHECK(memcmp(r[k].ovl, r[k].ref, n * sizeof(float)) == 0,
              "W=%d rank %d: overlapped buckets differ from one allreduce_sum", world, k);
        CHECK(memcmp(r[k].ord, r[k].ref, n * sizeof(float)) == 0,
              "W=%d rank %d: buckets in forward's order differ from one allreduce_sum", world,
              k);
    }
    /* with 3 ranks the order shows: the test could fail */
    if (world == 3) {
        size_t differ = 0;
        for (size_t i = 0; i < n; i++)
            differ += memcmp(&r[0].naive[i], &r[0].ref[i], sizeof(float)) != 0;
        CHECK(differ > 0, "W=3: per-bucket arrays summed every float as the whole buffer does "
              "(the data does not show the order)");
        printf("W=3: %zu of %zu floats differ when each bucket is all-reduced as its own "
               "array; none with buckets_*\n", differ, n);
    }
    for (int k = 0; k < world; k++) {
        free(r[k].ref);
        free(r[k].sync);
        free(r[k].ovl);
        free(r[k].naive);
        free(r[k].ord);
    }
}

/* buckets_order: the buckets numbered in the order backward completes
 * them. A model whose flat order puts its first layer last (the arena is in
 * name order: a WideResNet's input_block after its blocks): one bucket a
 * gradient, gradient 8 final last, the rest from 7 down to 0: bucket 0 is
 * gradient 7's, ..., bucket 8 gradient 8's. Backward's own order changes
 * nothing; forward's reverses the two buckets of CAP. */
static void test_order(void)
{
    char err[256];
    buckets_t *b = buckets_new(NUMEL, NG, 1, err, sizeof err);
    REQUIRE(b, "buckets_new: %s", err);
    int pos[NG];
    for (int i = 0; i < NG - 1; i++)
        pos[i] = NG - 2 - i;
    pos[NG - 1] = NG - 1;
    REQUIRE(buckets_order(b, pos) == 0, "buckets_order");
    size_t off[NG + 1] = {0};
    for (int i = 0; i < NG; i++)
        off[i + 1] = off[i] + NUMEL[i];
    for (int k = 0; k < NG; k++) {
        int g = k < NG - 1 ? NG - 2 - k : NG - 1;
        size_t lo, hi;
        buckets_range(b, k, &lo, &hi);
        CHECK(lo == off[g] && hi == off[g + 1] && buckets_of(b, g) == k,
              "bucket %d is [%zu, %zu) holding gradient %d's bucket %d; want gradient %d", k, lo,
              hi, g, buckets_of(b, g), g);
    }
    buckets_destroy(&b);
    /* the same from forward's binding order (model_param_t.walk): gradient
     * 8 bound first, the others after it in their order */
    b = buckets_new(NUMEL, NG, 1, err, sizeof err);
    REQUIRE(b, "buckets_new: %s", err);
    int walk[NG];
    for (int i = 0; i < NG - 1; i++)
        walk[i] = i + 1;
    walk[NG - 1] = 0;
    REQUIRE(buckets_order_walk(b, walk) == 0, "buckets_order_walk");
    for (int k = 0; k < NG; k++) {
        int g = k < NG - 1 ? NG - 2 - k : NG - 1;
        CHECK(buckets_of(b, g) == k, "walk: gradient %d in bucket %d, want %d", g,
              buckets_of(b, g), k);
    }
    buckets_destroy(&b);
    /* DDPIPE_BUCKET_KB: KiB as floats; out of range or not a number: the default */
    static const struct {
        const char *v;
        size_t want;
    } env[] = {{"16", 4096}, {"3", 77}, {"16x", 77}, {"", 77}, {"1048577", 77}};
    for (size_t i = 0; i < sizeof env / sizeof *env; i++) {
        setenv("DDPIPE_BUCKET_KB", env[i].v, 1);
        CHECK(buckets_cap_env(77) == env[i].want, "DDPIPE_BUCKET_KB=%s: %zu floats, want %zu",
              env[i].v, buckets_cap_env(77), env[i].want);
    }
    unsetenv("DDPIPE_BUCKET_KB");
    CHECK(buckets_cap_env(77) == 77, "DDPIPE_BUCKET_KB unset: not the default");

    b = buckets_new(NUMEL, NG, CAP, err, sizeof err);
    REQUIRE(b, "buckets_new: %s", err);
    for (int i = 0; i < NG; i++)
        pos[i] = NG - 1 - i;   /* backward's: the default numbering stays */
    REQUIRE(buckets_order(b, pos) == 0, "buckets_order");
    CHECK(buckets_of(b, 8) == 0 && buckets_of(b, 0) == 1, "backward's order renumbered: "
          "gradient 8 in %d, 0 in %d", buckets_of(b, 8), buckets_of(b, 0));
    for (int i = 0; i < NG; i++)
        pos[i] = i;   /* forward's: the front bucket completes first */
    REQUIRE(buckets_order(b, pos) == 0, "buckets_order");
    size_t lo, hi;
    buckets_range(b, 0, &lo, &hi);
    CHECK(buckets_of(b, 0) == 0 && buckets_of(b, 8) == 1 && lo == 0 && hi == off[6],
          "forward's order: gradient 0 in bucket %d, 8 in %d, bucket 0 [%zu, %zu)",
          buckets_of(b, 0), buckets_of(b, 8), lo, hi);
    buckets_destroy(&b);
}

/* A step given up before anything was ready: the thread ends without a
 * ring operation (a ring of one rank would not send anything anyway). */
static void test_abort(void)
{
    char err[256];
    allreduce_t *ar = allreduce_new(0, 1, NULL, NULL, err, sizeof err);
    REQUIRE(ar, "allreduce_new: %s", err);
    buckets_t *b = buckets_new(NUMEL, NG, CAP, err, sizeof err);
    REQUIRE(b, "buckets_new: %s", err);
    float *x = calloc(buckets_floats(b), sizeof *x);
    REQUIRE(x, "out of memory");
    CHECK(buckets_end(b, err, sizeof err) == -1 && strstr(err, "no step open"),
          "buckets_end without a step: %s", err);
    REQUIRE(buckets_begin(b, x, ar, 1000, 1, err, sizeof err) == 0, "begin: %s", err);
    CHECK(buckets_active(b), "not active after begin");
    CHECK(buckets_begin(b, x, ar, 1000, 1, err, sizeof err) == -1, "a second begin accepted");
    buckets_ready(b, 8);
    CHECK(buckets_is_ready(b, 8) && !buckets_is_ready(b, 0), "readiness not recorded");
    /* a range (a bucket copied at once): the gradients lying whole in it */
    size_t lo, hi, glo, ghi;
    buckets_grad_range(b, 6, &lo, &hi);
    buckets_grad_range(b, 7, &glo, &ghi);
    buckets_ready_range(b, lo, ghi - 1);   /* 6 whole, 7 cut short */
    CHECK(buckets_is_ready(b, 6) && !buckets_is_ready(b, 7) && !buckets_is_ready(b, 5),
          "buckets_ready_range [%zu, %zu): 5 %d, 6 %d, 7 %d", lo, ghi - 1,
          buckets_is_ready(b, 5), buckets_is_ready(b, 6), buckets_is_ready(b, 7));
    buckets_abort(b);
    CHECK(!buckets_active(b), "active after abort");
    /* usable again after the abort */
    REQUIRE(buckets_begin(b, x, ar, 1000, 1, err, sizeof err) == 0, "begin: %s", err);
    CHECK(buckets_end(b, err, sizeof err) == 0, "end: %s", err);
    free(x);
    buckets_destroy(&b);
    allreduce_destroy(&ar);
}

/* what the fake device collective was asked: the buckets' ranges in order */
typedef struct {
    float *base;
    size_t lo[16], n[16];
    int count, fail_at;
} issued_t;

static int record(void *ctx, float *base, size_t n, char *err, size_t errlen)
{
    issued_t *q = ctx;
    if (q->count == q->fail_at) {
        snprintf(err, errlen, "queue %d refused", q->count);
        return -1;
    }
    q->lo[q->count] = (size_t)(base - q->base);
    q->n[q->count++] = n;
    return 0;
}

static void test_issue(void)
{
    char err[256];
    /* cap 200: from the back {10, 128, 9216}, {4608, 32, 32}, {16, 16, 27} */
    buckets_t *b = buckets_new(NUMEL, NG, 200, err, sizeof err);
    REQUIRE(b, "buckets_new: %s", err);
    bucket_issue_t *bi = bucket_issue_new(b, err, sizeof err);
    REQUIRE(bi, "bucket_issue_new: %s", err);
    int nb = buckets_count(b);
    REQUIRE(nb >= 3 && nb <= 16, "%d buckets", nb);
    static float flat[20000];
    /* backward's order (last gradient first), a shuffled one, and none */
    static const int orders[3][NG] = {{8, 7, 6, 5, 4, 3, 2, 1, 0},
                                      {3, 8, 0, 6, 1, 7, 5, 2, 4},
                                      {-1}};
    for (int o = 0; o < 3; o++) {
        issued_t q = {.base = flat, .fail_at = -1};
        bucket_issue_begin(bi, flat, record, &q);
        for (int j = 0; j < NG && orders[o][j] >= 0; j++) {
            int i = orders[o][j];
            CHECK(bucket_issue_ready(bi, i, err, sizeof err) == 0, "ready: %s", err);
            /* every bucket queued so far is complete and its predecessors too */
            for (int k = 0; k < q.count; k++)
                for (int g = 0; g < NG; g++)
                    if (buckets_of(b, g) == k) {
                        int seen = 0;
                        for (int jj = 0; jj <= j; jj++)
                            seen |= orders[o][jj] == g;
                        CHECK(seen, "order %d: bucket %d queued before gradient %d", o, k, g);
                    }
            CHECK(bucket_issue_ready(bi, i, err, sizeof err) == 0, "ready twice: %s", err);
        }
        if (o == 0)
            CHECK(q.count == nb, "backward's order: %d of %d buckets queued before finish",
                  q.count, nb);
        CHECK(bucket_issue_finish(bi, err, sizeof err) == 0 && !bucket_issue_active(bi),
              "finish: %s", err);
        CHECK(q.count == nb && bucket_issue_queued(bi) == nb, "order %d: %d of %d buckets", o,
              q.count, nb);
        for (int k = 0; k < q.count; k++) {
            size_t lo, hi;
            buckets_range(b, k, &lo, &hi);
            CHECK(q.lo[k] == lo && q.n[k] == hi - lo, "order %d: call %d was [%zu, +%zu), "
                  "bucket %d is [%zu, %zu)", o, k, q.lo[k], q.n[k], k, lo, hi);
        }
    }
    /* mark, then flush (a recorded pass: gpud/tape_pass.c): a mark queues
     * nothing and says 1 exactly when the next bucket is complete; a flush
     * queues what is complete, in order: backward's order gives the same
     * calls as bucket_issue_ready */
    {
        issued_t q = {.base = flat, .fail_at = -1};
        bucket_issue_begin(bi, flat, record, &q);
        int flushes = 0;
        for (int j = 0; j < NG; j++) {
            int i = orders[0][j], before = q.count;
            int want = bucket_issue_mark(bi, i);
            CHECK(q.count == before, "a mark queued a bucket");
            int complete = 1;   /* bucket `queued` has every gradient marked */
            for (int g = 0; g < NG; g++)
                if (buckets_of(b, g) == q.count) {
                    int seen = 0;
                    for (int jj = 0; jj <= j; jj++)
                        seen |= orders[0][jj] == g;
                    complete &= seen;
                }
            CHECK(want == (q.count < nb && complete), "mark of gradient %d says %d", i, want);
            CHECK(bucket_issue_mark(bi, i) == want, "a second mark of gradient %d differs", i);
            if (want == 1) {
                CHECK(bucket_issue_flush(bi, err, sizeof err) == 0 && q.count > before,
                      "flush: %s, %d queued", err, q.count);
                CHECK(bucket_issue_mark(bi, i) == 0, "a mark after the flush still says 1");
                flushes++;
            }
        }
        CHECK(q.count == nb && flushes >= 1 && flushes <= nb, "mark/flush: %d of %d buckets in "
              "%d flushes", q.count, nb, flushes);
        for (int k = 0; k < q.count; k++) {
            size_t lo, hi;
            buckets_range(b, k, &lo, &hi);
            CHECK(q.lo[k] == lo && q.n[k] == hi - lo, "mark/flush: call %d was [%zu, +%zu), "
                  "bucket %d is [%zu, %zu)", k, q.lo[k], q.n[k], k, lo, hi);
        }
        CHECK(bucket_issue_finish(bi, err, sizeof err) == 0 && q.count == nb, "finish: %s", err);
    }
    /* the second queueing fails: nothing after it, the failure reported */
    issued_t q = {.base = flat, .fail_at = 1};
    bucket_issue_begin(bi, flat, record, &q);
    int rc = 0;
    for (int i = NG - 1; i >= 0; i--)
        rc |= bucket_issue_ready(bi, i, err, sizeof err);
    CHECK(rc < 0 && strstr(err, "refused") && q.count == 1, "a failed queue: rc %d, %d queued",
          rc, q.count);
    CHECK(bucket_issue_finish(bi, err, sizeof err) < 0 && q.count == 1,
          "finish after a failed queue");
    bucket_issue_destroy(&bi);
    buckets_destroy(&b);
    printf("bucket_issue: %d buckets queued in order\n", nb);
}

int main(void)
{
    /* czmq's first socket initialises it; several rank threads doing that
     * at once race in zsys_init (an assertion in zsys_set_thread_name_prefix) */
    zsys_init();
    REQUIRE(mkdtemp(strcpy(s_dir, "/tmp/ddp-buckets-XXXXXX")) != NULL, "mkdtemp");
    test_plan();
    test_bits(2);
    test_bits(3);
    test_abort();
    test_issue();
    test_order();
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", s_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", s_dir);
    printf("%s\n", tc_failures ? "FAILED" : "ok");
    return tc_failures ? 1 : 0;
}
