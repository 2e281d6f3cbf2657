/* job — the job as a whole: a plan acknowledged (batches may flow), the
 * end (the end event, STOP to every peer, the exit code), STOP to one
 * peer, and when reducerd may exit after the end. */
#ifndef DDP_REDUCERD_JOB_H
#define DDP_REDUCERD_JOB_H

#include "reducerd/reducer.h"

/* WELCOME to the loader: the plan is registered, batches may flow. */
void job_ack_plan(reducer_t *self, zframe_t *route);
/* Ends the job: the end event (its reason kept for a late reporterd) and
 * STOP to every live peer but the reporters; the exit code is the first
 * failure's. An eval job's issued batches end with it. Idempotent. */
void job_finish(reducer_t *self, int code, const char *reason);
void job_stop_peer(reducer_t *self, zframe_t *route, int code, const char *reason);
void job_stop_everyone(reducer_t *self, int code, const char *reason);
/* The run directory a failure's "resume with" hint names. */
const char *job_resume_dir(const reducer_t *self);
/* True when events can go out: reporterd subscribed, or none is expected. */
bool job_reporter_listening(reducer_t *self);
/* After the end, true once reducerd may exit (at now_ms): every reporterd
 * confirmed the run directory (or none listened), or --done-timeout
 * passed (exit code 1); a lost job stays up for its peers to hear STOP. */
bool job_over(reducer_t *self, int64_t now_ms);

#endif
