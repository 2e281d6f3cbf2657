/* tapcache — the last value of each piece of state on the tap, so a
 * monitor that subscribes mid-run starts from the current picture instead
 * of waiting for the next change: the last `metric` of each phase, the last
 * `progress`, the last `membership` (the generation in force: a monitor
 * that subscribed after the gang formed still learns it did — the
 * launcher tells a rank lost from a failed start by it), and the last
 * `worker` event of each rank. reporterd's tap is
 * an XPUB; when a subscription arrives it replays the kept events whose
 * topic the subscription's prefix matches (tapcache_replay). PUB semantics
 * send a replay to every subscriber of the topic, so a monitor can see an
 * event twice: these topics are state (last value wins), so a repeat is
 * harmless. */
#ifndef DDP_TAPCACHE_H
#define DDP_TAPCACHE_H

#include <czmq.h>
#include <stddef.h>

#include "proto/event.h"

typedef struct tapcache tapcache_t;

tapcache_t *tapcache_new(void);
void tapcache_destroy(tapcache_t **self_p);

/* Keeps a copy of msg (the event as received: topic frame + body) when its
 * decoded event ev is state. 0, or -1 when out of memory. */
int tapcache_keep(tapcache_t *self, const ddp_event_t *ev, zmsg_t *msg);

/* Sends copies of the kept events whose topic starts with prefix[0..len)
 * on pub (never blocks: a PUB drops at its high-water mark). Returns how
 * many were sent. */
int tapcache_replay(tapcache_t *self, zsock_t *pub, const char *prefix, size_t len);

/* Kept events (for tests). */
size_t tapcache_size(const tapcache_t *self);

#endif
