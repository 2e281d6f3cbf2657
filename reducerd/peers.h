/* peers — who joined reducerd: role, name, rank, ROUTER identity, liveness. */
#ifndef DDP_REDUCERD_PEERS_H
#define DDP_REDUCERD_PEERS_H

#include "proto/messages.h"
#include <stdbool.h>
#include <stdint.h>

#define PEERS_MAX 1024

typedef struct {
    zframe_t *identity;        /* ROUTER identity of the peer's main socket */
    uint8_t role;
    char name[DDP_MAX_NAME];
    char host[DDP_MAX_NAME];
    int32_t rank;              /* gpud only; -1 else */
    int64_t last_seen_ms;
    bool dead;
    uint64_t results;          /* samples received from this peer */
    char ring[DDP_MAX_EP];     /* gpud --train: its all-reduce endpoint (JOIN ring) */
    bool told_classes;         /* the class-mismatch hint went to the event log once */
    /* elastic training (docs/ELASTIC.md): ranks are renumbered at each
     * membership generation; a removed rank holds none and is fenced */
    int32_t prev_rank;         /* its rank in the previous generation, -1 none */
    bool removed;              /* lost: dead, holds no rank, answered with STOP(fenced) */
    uint32_t removed_gen;      /* the generation that left it out */
    bool told_fenced;          /* its STOP(fenced) went out (once) */
    bool joining;              /* welcomed into the running job, waiting for its place (rank -1) */
    bool nccl;                 /* its JOIN offered NCCL (docs/CUDA.md "NCCL in gpud") */
} peer_t;

typedef struct peers peers_t;

peers_t *peers_new(int world);
void peers_destroy(peers_t **self);
/* Register (or re-register after a restart) a JOIN; returns the peer. */
peer_t *peers_join(peers_t *self, zframe_t *identity, const ddp_join_t *join);
peer_t *peers_by_identity(peers_t *self, zframe_t *identity);
peer_t *peers_by_name(peers_t *self, const char *name);
/* The gpud that holds rank now (a removed one holds none). */
peer_t *peers_by_rank(peers_t *self, int32_t rank);
/* p's index (peers_at(index) == p), stable for the peer's life. */
int peers_index_of(const peers_t *self, const peer_t *p);
int peers_count(const peers_t *self);
peer_t *peers_at(peers_t *self, int i);
int peers_alive(const peers_t *self, uint8_t role);
/* gpud ranks that ever joined (the "workers" of the summary) */
int peers_gpud_ranks(const peers_t *self);
#endif
