/* publish — reducerd's events on the XPUB (proto/event.h, PROTOCOL.md
 * "Events") and the subscriptions that tell it reporterd listens. */
#ifndef DDP_REDUCERD_PUBLISH_H
#define DDP_REDUCERD_PUBLISH_H

#include "reducerd/reducer.h"

void publish_log(reducer_t *self, const char *level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void publish_worker(reducer_t *self, const peer_t *p, const char *state);
/* Progress of the active slot (nothing without one). */
void publish_progress(reducer_t *self);
void publish_failed_files(reducer_t *self, const slot_t *slot);
void publish_predictions(reducer_t *self, const slot_t *slot);
/* The slot's metric; decision NULL outside training. */
void publish_metric(reducer_t *self, const slot_t *slot, bool final, const ev_metric_t *decision);
void publish_end(reducer_t *self, int code, const char *reason);
/* A membership change (training): the ranks (and their names) that changed. */
void publish_membership(reducer_t *self, const char *change, uint32_t n, const int32_t *ranks,
                        char *const *names, bool redone, uint64_t step, uint32_t epoch,
                        const char *reason);
/* A (un)subscription arrived on the XPUB: counts reporterd's; a reporterd
 * back after a lost job hears the end again. true when a reporterd
 * subscribed (the caller may tell it what it missed: membership_replay). */
bool publish_on_subscription(reducer_t *self);

#endif
