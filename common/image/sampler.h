/* sampler — which samples each rank trains on, step by step.
 *
 * An epoch plan is a permutation of the sample ids 0..n-1: a seeded shuffle
 * per (seed, epoch) for training, the identity for evaluation (shuffle = 0).
 * It depends only on (n, seed, epoch, shuffle), never on the worker count,
 * so a run with any --workers sees the same global order.
 *
 * Global step k takes the positions [k*G, min((k+1)*G, n)) of the
 * permutation (G: global batch; --batch-size B per worker gives G = B*W).
 * That slice is split over the W ranks in contiguous parts as evenly as
 * possible, the first ranks getting one more; in the last step a rank may
 * get none. There is no padding and nothing is dropped: over an epoch the
 * ranks' shards together are exactly the permutation, each sample once.
 * (torch's DistributedSampler pads to a multiple of W and interleaves
 * ranks; here every sample counts exactly once so metrics stay exact and a
 * global batch is the same samples whatever W is.)
 *
 * RNG: a counter-based generator (splitmix64). A stream is keyed by a hash
 * of up to four 64-bit words (e.g. seed, epoch, sample id, purpose); draw c
 * of a stream is mix64(key + (c+1) * 0x9e3779b97f4a7c15), mix64 being
 * splitmix64's finaliser. Nothing depends on threads or call order across
 * streams, so augment.c draws per-sample parameters from it too. It is not
 * torch's generator: the same seed gives other numbers than PyTorch.
 *
 * The shuffle is Fisher-Yates (i from n-1 down to 1, j = rng_below(i+1))
 * over the stream keyed (seed, epoch, 0, RNG_STREAM_SHUFFLE). */
#ifndef DDP_SAMPLER_H
#define DDP_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

/* ---- counter-based RNG ---- */

typedef struct {
    uint64_t key; /* the stream */
    uint64_t ctr; /* draws taken */
} rng_t;

/* Purposes, so different uses of one (seed, epoch, id) never share draws. */
enum {
    RNG_STREAM_SHUFFLE = 1,
    RNG_STREAM_CROP = 2,
    RNG_STREAM_FLIP = 3,
    RNG_STREAM_ROTATE = 4,
};

/* The stream keyed by (a, b, c, d), at its first draw. */
rng_t rng_stream(uint64_t a, uint64_t b, uint64_t c, uint64_t d);
/* The next 64 random bits. */
uint64_t rng_u64(rng_t *r);
/* Uniform double in [0, 1), 53 bits. */
double rng_unit(rng_t *r);
/* Uniform double in [lo, hi). */
double rng_uniform(rng_t *r, double lo, double hi);
/* Integer in [0, n), n >= 1: the high 64 bits of a 64x64-bit product
 * (bias below n / 2^64, irrelevant here and deterministic). 0 when n == 0. */
uint64_t rng_below(rng_t *r, uint64_t n);

/* ---- epoch plan ---- */

typedef struct sampler_t sampler_t;

/* What a checkpoint must keep to resume at the same place. */
typedef struct {
    uint64_t n;            /* dataset size */
    uint64_t seed;
    uint32_t epoch;
    uint32_t shuffle;      /* 0: identity order (eval) */
    uint64_t step;         /* next global step of the epoch */
    uint64_t global_batch; /* G of the run (0: not set) */
} sampler_state_t;

#define SAMPLER_STATE_BYTES 48

/* A plan for N samples, at epoch 0, step 0. NULL when out of memory
 * (n * 8 bytes for the permutation). N may be 0 (no steps). */
sampler_t *sampler_new(uint64_t n, uint64_t seed, int shuffle);
void sampler_destroy(sampler_t **s);

/* Makes EPOCH's permutation current and rewinds to step 0. Cheap when
 * EPOCH is already current or the plan does not shuffle. */
void sampler_epoch(sampler_t *s, uint32_t epoch);

/* ceil(n / G): global steps per epoch; 0 when G == 0 or n == 0. */
uint64_t sampler_steps(const sampler_t *s, uint64_t global_batch);

/* G for --batch-size B per worker: B * W (0 on overflow or bad input). */
uint64_t sampler_global_batch(uint64_t batch_per_worker, int world);

/* RANK's part of global STEP with global batch G over WORLD ranks: the
 * positions [*first_pos, *first_pos + *count) of the permutation (read the
 * ids with sampler_id). *count may be 0 (last step, late ranks). 0, or -1
 * with a reason (G == 0, world < 1, rank out of range, step past the
 * epoch's end). */
int sampler_shard(const sampler_t *s, uint64_t step, uint64_t global_batch, int world, int rank,
                  uint64_t *first_pos, uint64_t *count, char *err, size_t errlen);

/* Bitwise training (--chunk, docs/TRAINING.md "Bitwise training"): the
 * step's len positions [step*G, step*G + len) are cut into nch =
 * ceil(len / CHUNK) chunks of CHUNK consecutive positions (the last may be
 * short), and RANK gets a contiguous run of WHOLE chunks: with base = nch /
 * WORLD and rem = nch % WORLD, the chunks [r*base + min(r, rem), + base +
 * (r < rem)), as positions clipped to len. The chunks never depend on
 * WORLD, only which rank runs them; ranks beyond nch get *count = 0. 0, or
 * -1 with a reason (as sampler_shard, and CHUNK == 0). */
int sampler_shard_chunked(const sampler_t *s, uint64_t step, uint64_t global_batch,
                          uint64_t chunk, int world, int rank, uint64_t *first_pos,
                          uint64_t *count, char *err, size_t errlen);
/* The most samples sampler_shard_chunked gives one rank of WORLD in a step
 * of G: ceil(ceil(G / CHUNK) / WORLD) * CHUNK, at most G (0 on bad input). */
uint64_t sampler_chunked_max_shard(uint64_t global_batch, uint64_t chunk, int world);

/* The sample id at position POS (< n) of the current epoch's permutation. */
uint64_t sampler_id(const sampler_t *s, uint64_t pos);

uint64_t sampler_size(const sampler_t *s);
uint32_t sampler_current_epoch(const sampler_t *s);

/* The step position, kept for checkpoints: the caller records the next
 * global step with sampler_set_step as training moves on. */
void sampler_set_step(sampler_t *s, uint64_t step, uint64_t global_batch);
sampler_state_t sampler_state(const sampler_t *s);

/* A plan at the position ST describes (its epoch's permutation rebuilt).
 * NULL with a reason (out of memory, step past the epoch's end). */
sampler_t *sampler_restore(const sampler_state_t *st, char *err, size_t errlen);

/* Fixed little-endian layout for checkpoint files: "DDSM", version 1,
 * then the fields (SAMPLER_STATE_BYTES in all). unpack: 0, or -1 with a
 * reason (bad magic or version). */
void sampler_state_pack(const sampler_state_t *st, uint8_t out[SAMPLER_STATE_BYTES]);
int sampler_state_unpack(const uint8_t in[SAMPLER_STATE_BYTES], sampler_state_t *st, char *err,
                         size_t errlen);

#endif
