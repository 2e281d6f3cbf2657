/* generation — the training gang's current generation as peers (elastic.h
 * keeps its members as peer indices) and the MEMBERS that announces it.
 * Both roles that start a generation use it: membership.c (ranks lost, the
 * --pause-at-step hook) and admission.c (a rank joined). */
#ifndef DDP_REDUCERD_GENERATION_H
#define DDP_REDUCERD_GENERATION_H

#include "reducerd/reducer.h"

/* The peer holding rank of the current generation. */
peer_t *generation_member(reducer_t *self, int32_t rank);
/* The MEMBERS of the current generation to every member (with its token
 * for its new rank) and to loaderd: the ring re-forms at step of epoch. */
void generation_announce(reducer_t *self, uint64_t step, uint32_t epoch, const char *reason);

#endif
