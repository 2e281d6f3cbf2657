/* reducer_link — loaderd's side of reducerd (PROTOCOL.md): what goes
 * there (JOIN, PLAN, ISSUED, FAILED, HEARTBEAT) and what comes back on
 * the DEALER (WELCOME: the plan ack with the trust tokens; REISSUE;
 * EPOCH; MEMBERS and COMMIT, kept for the phases; STOP). A role over
 * loader_t (loader.h). */
#ifndef DDP_LOADERD_REDUCER_LINK_H
#define DDP_LOADERD_REDUCER_LINK_H

#include "loaderd/loader.h"

/* JOIN as the loader role (names us: self->name). 0, or -1 (logged). */
int reducer_link_join(loader_t *self);
/* The PLAN of the current (epoch, phase): the train set (skipping what a
 * resumed run already trained of its first epoch) or the eval/val set.
 * 0, or -1 (logged). */
int reducer_link_send_plan(loader_t *self);
/* ISSUED to reducerd for batch B about to go to worker NAME (an empty
 * train shard has no RESULT to match: nothing is sent). */
void reducer_link_send_issued(loader_t *self, const ddp_batch_t *b, const char *name);
/* Sample ID of SET could not be loaded (REASON): logged, counted, FAILED
 * to reducerd so the tally stays exact. */
void reducer_link_report_failed(loader_t *self, const dataset_t *set, uint32_t epoch,
                                uint8_t phase, uint64_t id, const char *reason);
/* Every second once trusted: reducerd keeps the loader role bound to us
 * while it hears from us, and learns our rejected count. */
void reducer_link_beat(loader_t *self);
/* One message from reducerd, handled. */
void reducer_link_receive(loader_t *self);

#endif
