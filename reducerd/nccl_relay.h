/* nccl_relay — NCCL in gpud (docs/CUDA.md "NCCL in gpud"), reducerd's
 * part: whether a generation sums over NCCL, and the relay of its
 * communicator id.
 *
 * A generation uses NCCL when it has more than one member and every member
 * offered it (JOIN nccl=1: a cuda gpud built with NCCL, not disabled); its
 * WELCOME or MEMBERS then say nccl=1. Rank 0 of the generation makes the id
 * (ncclGetUniqueId: a bootstrap address in rank 0's process) and sends
 * NCCLID(gen, world, id) with its token; reducerd passes it on, once, to
 * every other member. Anything else is rejected and counted (trust_reject):
 * an id from another rank, with a wrong token, for a generation without
 * NCCL, a second one; an id of an older generation is stale (dropped). A
 * new generation (any membership change) is a new id: the old communicator
 * is aborted by its members. reducerd never links NCCL: the id is bytes. */
#ifndef DDP_REDUCERD_NCCL_RELAY_H
#define DDP_REDUCERD_NCCL_RELAY_H

#include "reducerd/reducer.h"

/* The generation of these world members (peers by rank) starts: true
 * when it sums over NCCL (then its rank 0's id is awaited). */
bool nccl_relay_start(reducer_t *self, peer_t *const *members, int32_t world);
/* NCCLID from route: checked, then passed on to the other members. */
void nccl_relay_on_id(reducer_t *self, zframe_t *route, const ddp_ncclid_t *id);

#endif
