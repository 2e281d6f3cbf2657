/* gpud/chunk_sizes: bitwise training's chunks of a rank's shard from its
 * samples' places in the step (pos / N). Failed samples, left out by
 * loaderd or flagged by gpud's decode (--wire jpeg), leave holes in their
 * own chunks; chunks whose samples all failed are not listed; a bad pos
 * (not increasing, past the list) is refused. And the property bitwise
 * training needs: the step's chunks, gathered over the ranks of
 * sampler_shard_chunked's split, are the same for W = 1..6 whichever
 * samples failed. */
#include "gpud/chunk_sizes.h"
#include "tests/proto/check.h"

#include <stdint.h>
#include <stdlib.h>

static void test_basic(void)
{
    char err[256];
    int sz[16];
    /* chunk 4: pos 0..9, every sample there: 4, 4, 2 */
    uint32_t all[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    CHECK(chunk_sizes_from_pos(all, NULL, 10, 4, 16, sz, err, sizeof err) == 3);
    CHECK(sz[0] == 4 && sz[1] == 4 && sz[2] == 2);
    /* pos 2 failed at loaderd (absent): 3, 4, 2, not 4, 4, 1 */
    uint32_t gap[9] = {0, 1, 3, 4, 5, 6, 7, 8, 9};
    CHECK(chunk_sizes_from_pos(gap, NULL, 9, 4, 16, sz, err, sizeof err) == 3);
    CHECK(sz[0] == 3 && sz[1] == 4 && sz[2] == 2);
    /* chunk 1 (pos 4..7) all failed: not listed */
    uint32_t hole[6] = {0, 1, 2, 3, 8, 9};
    CHECK(chunk_sizes_from_pos(hole, NULL, 6, 4, 16, sz, err, sizeof err) == 2);
    CHECK(sz[0] == 4 && sz[1] == 2);
    /* the same by gpud's flags (--wire jpeg): rows 5 and 9 did not decode */
    uint8_t failed[10] = {0, 0, 0, 0, 0, 1, 0, 0, 0, 1};
    CHECK(chunk_sizes_from_pos(all, failed, 10, 4, 16, sz, err, sizeof err) == 3);
    CHECK(sz[0] == 4 && sz[1] == 3 && sz[2] == 1);
    uint8_t dead[10] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    CHECK(chunk_sizes_from_pos(all, dead, 10, 4, 16, sz, err, sizeof err) == 0);
    CHECK(chunk_sizes_from_pos(NULL, NULL, 0, 4, 16, sz, err, sizeof err) == 0);
    /* refused */
    uint32_t twice[3] = {0, 2, 2};
    CHECK(chunk_sizes_from_pos(twice, NULL, 3, 4, 16, sz, err, sizeof err) == -1 &&
          strstr(err, "not strictly increasing at 2"));
    uint32_t far[2] = {1, 16};
    CHECK(chunk_sizes_from_pos(far, NULL, 2, 4, 16, sz, err, sizeof err) == -1 &&
          strstr(err, "past the rank's list"));
    CHECK(chunk_sizes_from_pos(all, NULL, 10, 0, 16, sz, err, sizeof err) == -1);
}

enum { LEN = 37, N = 4 };

/* Rank r's positions [*lo, *hi) of a step of len under W (docs/TRAINING.md,
 * sampler_shard_chunked: whole chunks, the first ranks one more). */
static void shard(int len, int w, int r, int *lo, int *hi)
{
    int nch = (len + N - 1) / N, base = nch / w, rem = nch % w;
    int c0 = r * base + (r < rem ? r : rem), c1 = c0 + base + (r < rem);
    *lo = c0 * N < len ? c0 * N : len;
    *hi = c1 * N < len ? c1 * N : len;
}

/* The step's chunk sizes gathered over W ranks: loaderd leaves the failed
 * samples out (by_flag 0), or gpud flags them (by_flag 1). */
static int gathered(const uint8_t *bad, int w, int by_flag, int *out)
{
    char err[256];
    int k = 0;
    for (int r = 0; r < w; r++) {
        int lo, hi, n = 0;
        shard(LEN, w, r, &lo, &hi);
        uint32_t pos[LEN];
        uint8_t flag[LEN];
        for (int p = lo; p < hi; p++) {
            if (bad[p] && !by_flag)
                continue;
            pos[n] = (uint32_t)(p - lo);
            flag[n++] = bad[p];
        }
        int got = chunk_sizes_from_pos(pos, by_flag ? flag : NULL, (uint32_t)n, N,
                                       (uint64_t)(hi - lo), out + k, err, sizeof err);
        CHECK_MSG(got >= 0, "%s", err);
        k += got > 0 ? got : 0;
    }
    return k;
}

static void test_any_w(void)
{
    srand(31);
    for (int trial = 0; trial < 200; trial++) {
        uint8_t bad[LEN];
        for (int p = 0; p < LEN; p++)
            bad[p] = rand() % 5 == 0;   /* about one in five fails */
        if (trial == 0)
            for (int p = 8; p < 12; p++)
                bad[p] = 1;             /* a whole chunk */
        int want[LEN], got[LEN];
        int k1 = gathered(bad, 1, 0, want);
        for (int w = 1; w <= 6; w++)
            for (int by_flag = 0; by_flag < 2; by_flag++) {
                int k = gathered(bad, w, by_flag, got);
                int same = k == k1;
                for (int j = 0; same && j < k; j++)
                    same = got[j] == want[j];
                CHECK_MSG(same, "trial %d W %d by_flag %d: %d chunks, want %d", trial, w,
                          by_flag, k, k1);
            }
    }
}

int main(void)
{
    test_basic();
    test_any_w();
    return check_exit("test_chunk_sizes");
}
