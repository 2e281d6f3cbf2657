/* events — reporterd's consumer of reducerd's events: each one to the run
 * directory, /metrics and the tap; at the end, DONE back to reducerd with
 * whether the run directory is whole. */
#ifndef DDP_REPORTERD_EVENTS_H
#define DDP_REPORTERD_EVENTS_H

#include "reporterd/reporter.h"

/* One event from the SUB socket (rejected ones are counted and logged). */
void events_receive(reporter_t *self);
/* One message from reducerd's ROUTER (a WELCOME: nothing to do but count
 * a malformed one). */
void events_on_reducer(reporter_t *self);

#endif
