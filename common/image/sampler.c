#include "common/image/sampler.h"
#include "common/errbuf.h"
#include "common/mix64.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GOLDEN MIX64_GOLDEN

rng_t rng_stream(uint64_t a, uint64_t b, uint64_t c, uint64_t d)
{
    /* chained absorption: each word passes through a full mix, so keys
     * differing in any word are unrelated streams */
    uint64_t k = mix64(a + GOLDEN);
    k = mix64(k ^ (b + 2 * GOLDEN));
    k = mix64(k ^ (c + 3 * GOLDEN));
    k = mix64(k ^ (d + 4 * GOLDEN));
    return (rng_t){k, 0};
}

uint64_t rng_u64(rng_t *r)
{
    r->ctr++;
    return mix64(r->key + r->ctr * GOLDEN);
}

double rng_unit(rng_t *r)
{
    return (double)(rng_u64(r) >> 11) * (1.0 / 9007199254740992.0);
}

double rng_uniform(rng_t *r, double lo, double hi)
{
    return lo + (hi - lo) * rng_unit(r);
}

uint64_t rng_below(rng_t *r, uint64_t n)
{
    if (n == 0)
        return 0;
    __extension__ typedef unsigned __int128 u128; /* GCC/clang; exact 64x64 product */
    return (uint64_t)(((u128)rng_u64(r) * n) >> 64);
}

struct sampler_t {
    uint64_t n, seed;
    int shuffle;
    uint32_t epoch;
    int have_epoch;    /* perm holds EPOCH's permutation */
    uint64_t step, global_batch;
    uint64_t *perm;    /* n ids; NULL for the identity plan */
};

/* Fisher-Yates over the (seed, epoch) stream. */
static void shuffle_perm(sampler_t *s)
{
    rng_t r = rng_stream(s->seed, s->epoch, 0, RNG_STREAM_SHUFFLE);
    for (uint64_t i = 0; i < s->n; i++)
        s->perm[i] = i;
    for (uint64_t i = s->n; i > 1; i--) {
        uint64_t j = rng_below(&r, i), t = s->perm[i - 1];
        s->perm[i - 1] = s->perm[j];
        s->perm[j] = t;
    }
}

sampler_t *sampler_new(uint64_t n, uint64_t seed, int shuffle)
{
    sampler_t *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    *s = (sampler_t){.n = n, .seed = seed, .shuffle = shuffle != 0};
    if (s->shuffle && n > 0) {
        if (n > SIZE_MAX / sizeof *s->perm || !(s->perm = malloc(n * sizeof *s->perm))) {
            free(s);
            return NULL;
        }
    }
    sampler_epoch(s, 0);
    return s;
}

void sampler_destroy(sampler_t **s)
{
    if (!s || !*s)
        return;
    free((*s)->perm);
    free(*s);
    *s = NULL;
}

void sampler_epoch(sampler_t *s, uint32_t epoch)
{
    s->step = 0;
    if (s->have_epoch && s->epoch == epoch)
        return;
    s->epoch = epoch;
    s->have_epoch = 1;
    if (s->perm)
        shuffle_perm(s);
}

uint64_t sampler_steps(const sampler_t *s, uint64_t global_batch)
{
    if (global_batch == 0 || s->n == 0)
        return 0;
    return s->n / global_batch + (s->n % global_batch != 0);
}

uint64_t sampler_global_batch(uint64_t batch_per_worker, int world)
{
    if (world < 1 || batch_per_worker > UINT64_MAX / (uint64_t)world)
        return 0;
    return batch_per_worker * (uint64_t)world;
}

/* The step's [*lo, *lo + *len) of the permutation; -1 with a reason. */
static int step_span(const sampler_t *s, uint64_t step, uint64_t global_batch, int world,
                     int rank, uint64_t *lo, uint64_t *len, char *err, size_t errlen)
{
    if (global_batch == 0 || world < 1 || rank < 0 || rank >= world) {
        err_set(err, errlen, "bad shard request: global batch %llu, rank %d of %d (need G >= 1 "
                 "and 0 <= rank < world)", (unsigned long long)global_batch, rank, world);
        return -1;
    }
    uint64_t steps = sampler_steps(s, global_batch);
    if (step >= steps) {
        err_set(err, errlen, "step %llu is past the epoch's end (%llu steps of %llu for %llu "
                 "samples)", (unsigned long long)step, (unsigned long long)steps,
                 (unsigned long long)global_batch, (unsigned long long)s->n);
        return -1;
    }
    uint64_t left = s->n - step * global_batch;
    *lo = step * global_batch;
    *len = left < global_batch ? left : global_batch;
    return 0;
}

int sampler_shard(const sampler_t *s, uint64_t step, uint64_t global_batch, int world, int rank,
                  uint64_t *first_pos, uint64_t *count, char *err, size_t errlen)
{
    uint64_t lo, len;
    if (step_span(s, step, global_batch, world, rank, &lo, &len, err, errlen) < 0)
        return -1;
    uint64_t w = (uint64_t)world, r = (uint64_t)rank, base = len / w, rem = len % w;
    *first_pos = lo + r * base + (r < rem ? r : rem);
    *count = base + (r < rem);
    return 0;
}

int sampler_shard_chunked(const sampler_t *s, uint64_t step, uint64_t global_batch,
                          uint64_t chunk, int world, int rank, uint64_t *first_pos,
                          uint64_t *count, char *err, size_t errlen)
{
    uint64_t lo, len;
    if (chunk == 0) {
        err_set(err, errlen, "bad shard request: chunk 0 (sampler_shard splits by samples)");
        return -1;
    }
    if (step_span(s, step, global_batch, world, rank, &lo, &len, err, errlen) < 0)
        return -1;
    /* whole chunks per rank, the first rem ranks one more: the same rule
     * as sampler_shard's, over chunks instead of samples */
    uint64_t nch = len / chunk + (len % chunk != 0);
    uint64_t w = (uint64_t)world, r = (uint64_t)rank, base = nch / w, rem = nch % w;
    uint64_t c0 = r * base + (r < rem ? r : rem), c1 = c0 + base + (r < rem);
    uint64_t p0 = c0 * chunk, p1 = c1 * chunk;
    if (p0 > len)
        p0 = len;
    if (p1 > len)
        p1 = len;
    *first_pos = lo + p0;
    *count = p1 - p0;
    return 0;
}

uint64_t sampler_chunked_max_shard(uint64_t global_batch, uint64_t chunk, int world)
{
    if (global_batch == 0 || chunk == 0 || world < 1)
        return 0;
    uint64_t nch = global_batch / chunk + (global_batch % chunk != 0);
    uint64_t most = (nch / (uint64_t)world + (nch % (uint64_t)world != 0)) * chunk;
    return most < global_batch ? most : global_batch;
}

uint64_t sampler_id(const sampler_t *s, uint64_t pos)
{
    return s->perm ? s->perm[pos] : pos;
}

uint64_t sampler_size(const sampler_t *s)
{
    return s->n;
}

uint32_t sampler_current_epoch(const sampler_t *s)
{
    return s->epoch;
}

void sampler_set_step(sampler_t *s, uint64_t step, uint64_t global_batch)
{
    s->step = step;
    s->global_batch = global_batch;
}

sampler_state_t sampler_state(const sampler_t *s)
{
    return (sampler_state_t){s->n, s->seed, s->epoch, (uint32_t)s->shuffle, s->step,
                             s->global_batch};
}

sampler_t *sampler_restore(const sampler_state_t *st, char *err, size_t errlen)
{
    if (st->global_batch && st->step > st->n / st->global_batch + 1) {
        err_set(err, errlen, "sampler state: step %llu is past the end of an epoch of %llu "
                 "samples in batches of %llu", (unsigned long long)st->step,
                 (unsigned long long)st->n, (unsigned long long)st->global_batch);
        return NULL;
    }
    sampler_t *s = sampler_new(st->n, st->seed, (int)st->shuffle);
    if (!s) {
        err_set(err, errlen, "out of memory for a sampler of %llu samples",
                 (unsigned long long)st->n);
        return NULL;
    }
    sampler_epoch(s, st->epoch);
    sampler_set_step(s, st->step, st->global_batch);
    return s;
}

static void put_le(uint8_t *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *p, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

#define STATE_VERSION 1

void sampler_state_pack(const sampler_state_t *st, uint8_t out[SAMPLER_STATE_BYTES])
{
    memcpy(out, "DDSM", 4);
    put_le(out + 4, STATE_VERSION, 4);
    put_le(out + 8, st->n, 8);
    put_le(out + 16, st->seed, 8);
    put_le(out + 24, st->epoch, 4);
    put_le(out + 28, st->shuffle, 4);
    put_le(out + 32, st->step, 8);
    put_le(out + 40, st->global_batch, 8);
}

int sampler_state_unpack(const uint8_t in[SAMPLER_STATE_BYTES], sampler_state_t *st, char *err,
                         size_t errlen)
{
    if (memcmp(in, "DDSM", 4) != 0 || get_le(in + 4, 4) != STATE_VERSION) {
        err_set(err, errlen, "sampler state: not a version %d ddpipe sampler record "
                 "(bad magic or version); the checkpoint is from another build or corrupt",
                 STATE_VERSION);
        return -1;
    }
    *st = (sampler_state_t){get_le(in + 8, 8), get_le(in + 16, 8), (uint32_t)get_le(in + 24, 4),
                            (uint32_t)get_le(in + 28, 4), get_le(in + 32, 8),
                            get_le(in + 40, 8)};
    return 0;
}
