/* promstate — what reporterd exports on --metrics-http, in the Prometheus
 * text exposition format (version 0.0.4): every family has # HELP and
 * # TYPE lines, counters end in _total and never go down.
 *
 *   ddpipe_samples_processed_total       samples accounted for (result or failed), all epochs
 *   ddpipe_failed_images_total           samples that could not be loaded, all epochs
 *   ddpipe_images_per_second             current epoch's average rate (reducerd's progress)
 *   ddpipe_worker_samples_total{rank}    samples with a result from each rank
 *   ddpipe_worker_images_per_second{rank} each rank's rate over the last >= 2 s
 *   ddpipe_workers_alive                 gpud ranks alive
 *   ddpipe_epoch, ddpipe_phase_info{phase}, ddpipe_epoch_samples_planned,
 *   ddpipe_epoch_progress_ratio, ddpipe_eta_seconds
 *   ddpipe_loss{phase}, ddpipe_accuracy{phase,k="1"|"5"}   last epoch metric of each phase
 *   ddpipe_rejected_messages_total{daemon="reducerd"|"reporterd"}
 *   ddpipe_events_total{topic}           events reporterd received
 *   ddpipe_job_finished                  1 once the end event arrived
 *
 * Queue depths are not exported: no daemon publishes them (loaderd's
 * queues stay inside loaderd).
 *
 * Thread safety: the reporter's thread updates, the HTTP server's thread
 * renders; a mutex inside guards the state.
 */
#ifndef DDP_PROMSTATE_H
#define DDP_PROMSTATE_H

#include <stdint.h>

#include "proto/event.h"

typedef struct promstate promstate_t;

promstate_t *promstate_new(void);
void promstate_destroy(promstate_t **self_p);

/* A decoded event seen at now_s (monotonic seconds). */
void promstate_on_event(promstate_t *self, const ddp_event_t *ev, double now_s);
/* Messages reporterd itself rejected (malformed events, protocol). */
void promstate_add_rejected(promstate_t *self, uint64_t n);

/* The exposition text (caller frees), NULL when out of memory. */
char *promstate_render(promstate_t *self);

#endif
