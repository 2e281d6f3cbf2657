/* parts — a train step's parts from several loaderds (loaderd --shard,
 * docs/SCALE.md "Several loaderds"): each loaderd sends rank r one BATCH
 * per step holding its own samples of r's list, each with its index in
 * that list (pos) and its part of global_count. The parts of (gen, step)
 * are kept until all N came, then merged in pos order — the order one
 * loaderd would have sent — with global_count the sum of the parts, so the
 * step (and the weights) are those of one loaderd.
 *
 *   parts_t *p = parts_new(3);
 *   parts_add(p, &batch, loader, err, sizeof err);     // takes its arrays
 *   ddp_batch_t merged; part_t *taken; int n;
 *   if (parts_take(p, gen, step, &merged, &taken, &n) == 1) { ...; parts_free_taken(&merged, taken, n); }
 */
#ifndef DDP_GPUD_PARTS_H
#define DDP_GPUD_PARTS_H

#include "proto/messages.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    ddp_batch_t b;             /* the part as received (owned): seq, ids, labels */
    int loader;                /* the loaderd it came from (index in gpud's --loader list) */
    uint32_t *at;              /* after parts_take: sample i is the merged batch's at[i] */
} part_t;

typedef struct parts parts_t;

parts_t *parts_new(int n_loaders);
void parts_destroy(parts_t **self_p);

/* Keeps B (its arrays and pixels are taken: B is zeroed) from loaderd
 * LOADER. -1 (with why) on a second part of that loaderd for the same
 * (gen, step), a part without pos, or out of memory. */
int parts_add(parts_t *self, ddp_batch_t *b, int loader, char *err, size_t errlen);
/* Drops the parts of generations before GEN and of steps before STEP in it. */
void parts_prune(parts_t *self, uint32_t gen, uint64_t step);
/* 1 when every loaderd's part of (gen, step) is in: *merged is the step's
 * batch (ids, labels, pixels, pos in pos order; global_count the parts' sum;
 * seq of the first part), *taken the n parts (owned by the caller now,
 * with their at[]). 0: not yet. -1 (with why): parts that do not fit
 * together (other image sizes, a pos twice) or out of memory. */
int parts_take(parts_t *self, uint32_t gen, uint64_t step, ddp_batch_t *merged, part_t **taken,
               int *n, char *err, size_t errlen);
/* Frees what parts_take handed out. */
void parts_free_taken(ddp_batch_t *merged, part_t *taken, int n);
/* Parts held. */
size_t parts_count(const parts_t *self);

#endif
