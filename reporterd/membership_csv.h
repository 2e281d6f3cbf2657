/* membership_csv — membership.csv of a training run (docs/ELASTIC.md): one
 * row per rank of every membership event, rewritten whole after each:
 *
 *   time,gen,world,change,rank,name,step,reason
 *
 * time: ISO-8601 UTC wall clock of the event; change: formed (each rank of
 * the gang), lost (each lost rank, its rank of the previous generation),
 * joined; step: the generation's first step (lost: the step redone when one
 * was in flight); reason: reducerd's words, a CSV field (RFC 4180). The
 * counts go to summary.json's "training" object: ranks_lost, ranks_joined,
 * steps_redone, world_size (the last generation's; -1 none seen). */
#ifndef DDP_MEMBERSHIP_CSV_H
#define DDP_MEMBERSHIP_CSV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/event.h"

typedef struct {
    char *text;                 /* the rows so far (no header) */
    size_t len, cap;
    uint32_t ranks_lost, ranks_joined, steps_redone;
    int32_t world_size;         /* -1 until an event */
} membership_log_t;

void membership_log_init(membership_log_t *self);
void membership_log_free(membership_log_t *self);
/* The event's rows and counts; 0 or -1 (OOM: nothing added). */
int membership_log_add(membership_log_t *self, const ev_membership_t *m, double unix_time);
/* Atomically writes the header and the rows to path. 0 or -1 with why. */
int membership_log_write(const membership_log_t *self, const char *path, char *err, size_t errlen);

#endif
