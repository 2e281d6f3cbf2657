#include "reducerd/job.h"

#include "common/log.h"
#include "reducerd/publish.h"
#include "reducerd/results.h"
#include "reducerd/trust.h"

#include <stdio.h>
#include <string.h>

/* The loader hands out no batch before this ack: a result can then never
 * arrive before the plan it belongs to. It carries the loader's session
 * token and the job secret (loaderd checks gpud tokens with it). */
void job_ack_plan(reducer_t *self, zframe_t *route)
{
    ddp_msg_t w = {.type = DDP_WELCOME};
    w.u.welcome.rank = 0;
    w.u.welcome.world = 1;
    snprintf(w.u.welcome.job, sizeof w.u.welcome.job, "%s", self->options.job);
    loader_role_t *l = trust_loader_at(self, route);
    if (!l)
        return; /* only a joined loader plans (trust_from_loader) */
    trust_welcome_auth(self, &w.u.welcome, DDP_ROLE_LOADER, -1, l->name);
    w.u.welcome.has_secret = true;
    memcpy(w.u.welcome.secret, self->secret, sizeof self->secret);
    reducer_send(self, route, &w);
}

void job_stop_peer(reducer_t *self, zframe_t *route, int code, const char *reason)
{
    ddp_msg_t stop = {.type = DDP_STOP};
    stop.u.stop.code = code;
    snprintf(stop.u.stop.reason, sizeof stop.u.stop.reason, "%s", reason);
    reducer_send(self, route, &stop);
}

void job_stop_everyone(reducer_t *self, int code, const char *reason)
{
    for (int i = 0; i < peers_count(self->peers); i++) {
        peer_t *p = peers_at(self->peers, i);
        if (!p->dead && p->role != DDP_ROLE_REPORTER)
            job_stop_peer(self, p->identity, code, reason);
    }
}

void job_finish(reducer_t *self, int code, const char *reason)
{
    if (self->finished)
        return;
    slot_t *slot = reducer_active_slot(self);
    if (slot && !self->options.train)
        results_end_phase(self, slot_plan(slot)->epoch, slot_plan(slot)->phase);
    publish_end(self, code, reason);
    snprintf(self->end_reason, sizeof self->end_reason, "%s", reason);
    job_stop_everyone(self, code, reason);
    self->finished = true;
    self->exit_code = self->exit_code ? self->exit_code : code;
    if (code == 0)
        log_info("job complete: %s", reason);
    else
        log_error("job failed: %s", reason);
}

const char *job_resume_dir(const reducer_t *self)
{
    return self->options.resume_dir ? self->options.resume_dir : "<run directory>";
}

/* Events are lost on a PUB with nobody listening: results wait until the
 * expected reporter has subscribed. */
bool job_reporter_listening(reducer_t *self)
{
    if (self->options.reporters == 0 || self->reporters_subscribed >= 1)
        return true;
    if (!self->waiting_for_reporter_logged)
        log_info("results complete; waiting for reporterd to subscribe");
    self->waiting_for_reporter_logged = true;
    return false;
}

bool job_over(reducer_t *self, int64_t now_ms)
{
    if (!self->finished)
        return false;
    if (self->finished_at_ms == 0)
        self->finished_at_ms = now_ms;
    int64_t up = now_ms - self->finished_at_ms;
    /* A lost job stays up for --worker-timeout, so that every live peer of
     * the earlier reducerd (each speaks at least that often) hears its
     * STOP, and until a reporterd of it has resubscribed and heard the end
     * (at most --done-timeout); no DONE comes from it. */
    if (self->job_lost)
        return up > self->options.worker_timeout_s * 1000 &&
               (self->reporters_subscribed >= 1 || up > self->options.done_timeout_s * 1000);
    /* nobody to confirm when no reporter ever listened (a failure before
     * it subscribed): the end event went nowhere */
    if (self->reporters_done >= self->options.reporters || self->reporters_subscribed < 1)
        return true;
    if (up > self->options.done_timeout_s * 1000) {
        log_error("reporterd did not confirm the run directory within %lds; check its log",
                  self->options.done_timeout_s);
        self->exit_code = 1;
        return true;
    }
    return false;
}
