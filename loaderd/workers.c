#include "loaderd/workers.h"

#include "common/log.h"
#include "proto/messages.h"
#include "proto/ratelog.h"
#include "proto/wire.h"

#include <stdlib.h>
#include <string.h>

#define LOADER_MAX_HELD 256

/* Counts a rejected message; logs it at most once per (peer, kind) per
 * RATELOG_WINDOW_S. */
static void reject(loader_t *self, const char *peer, const char *kind, const char *why)
{
    self->stats.rejected++;
    ratelog_reject(&self->stats.log, self, peer, kind, why);
}

/* A gpud message is trusted with the token reducerd gave (session, gpud,
 * rank, name), from the socket named after the worker (suffix: ".hb" for
 * the heartbeat socket). */
static bool trusted(const loader_t *self, zframe_t *route, const char *suffix, const char *name,
                    int32_t rank, const ddp_auth_t *a)
{
    char want[DDP_MAX_NAME + 8];
    snprintf(want, sizeof want, "%s%s", name, suffix);
    return rank >= 0 && a->session == self->auth.session && strcmp(a->job, self->auth.job) == 0 &&
           zframe_size(route) == strlen(want) &&
           memcmp(zframe_data(route), want, strlen(want)) == 0 &&
           token_valid(self->secret, self->auth.session, DDP_ROLE_GPUD, rank, name, a->token);
}

static void on_credit(loader_t *self, zframe_t *route, const ddp_credit_t *c)
{
    if (!trusted(self, route, "", c->worker, c->rank, &c->auth)) {
        reject(self, c->worker, "CREDIT", "no valid session token for this worker and rank "
               "(a gpud that did not join this job): it gets no batch");
        return;
    }
    if (self->options.train && c->gen < self->gen) {
        /* a rank of an older generation: removed, or a CREDIT from before
         * its MEMBERS; its credits went with that generation */
        log_debug("CREDIT of generation %u from %s ignored: the job is at generation %u", c->gen,
                  c->worker, self->gen);
        return;
    }
    dispatch_credit_gen(self->dispatch, route, c->worker, c->credits, c->acks, c->n_acks, c->gen);
    /* a CREDIT of a generation not announced here yet (a joiner is quick:
     * its MEMBERS from reducerd may still be on the way) names a rank of
     * that generation: its token says reducerd gave it, so it is kept */
    if (self->options.train && c->rank >= self->world && c->gen <= self->gen)
        log_warn("%s says it is rank %d but the job has %d rank%s: it gets no train shards",
                 c->worker, c->rank, self->world, self->world == 1 ? "" : "s");
    else
        dispatch_set_rank(self->dispatch, c->worker, c->rank);
}

/* CREDITs before the plan ack cannot be checked yet: kept (bounded) and
 * judged when the secret arrives. */
static void hold_credit(loader_t *self, zframe_t **route, ddp_credit_t *c)
{
    if (self->n_held >= LOADER_MAX_HELD) {
        reject(self, c->worker, "CREDIT", "too many CREDITs before reducerd acked the plan");
        return;
    }
    if (!self->held_credits) {
        self->held_credits = calloc(LOADER_MAX_HELD, sizeof *self->held_credits);
        self->held_routes = calloc(LOADER_MAX_HELD, sizeof *self->held_routes);
        if (!self->held_credits || !self->held_routes) {
            reject(self, c->worker, "CREDIT", "out of memory holding it");
            return;
        }
    }
    self->held_credits[self->n_held] = *c;
    c->acks = NULL; /* moved */
    self->held_routes[self->n_held++] = *route;
    *route = NULL;
}

void workers_judge_held_credits(loader_t *self)
{
    for (int i = 0; i < self->n_held; i++) {
        on_credit(self, self->held_routes[i], &self->held_credits[i]);
        free(self->held_credits[i].acks);
        zframe_destroy(&self->held_routes[i]);
    }
    self->n_held = 0;
}

static void on_heartbeat(loader_t *self, zframe_t *route, const ddp_heartbeat_t *hb)
{
    if (self->trusted && trusted(self, route, ".hb", hb->worker, hb->rank, &hb->auth))
        dispatch_heartbeat(self->dispatch, hb->worker);
    else if (self->trusted)
        reject(self, hb->worker, "HEARTBEAT", "no valid session token for this worker");
}

void workers_receive(loader_t *self)
{
    zframe_t *route = NULL;
    ddp_msg_t m;
    if (proto_recv(zsock_resolve(self->router), &route, &m, &self->stats) != 0) {
        zframe_destroy(&route);
        return;
    }
    if (m.type == DDP_CREDIT && !self->trusted)
        hold_credit(self, &route, &m.u.credit);
    else if (m.type == DDP_CREDIT)
        on_credit(self, route, &m.u.credit);
    else if (m.type == DDP_HEARTBEAT)
        on_heartbeat(self, route, &m.u.heartbeat);
    else
        reject(self, "a worker", proto_type_name(m.type), "unexpected on the worker socket");
    ddp_msg_clear(&m);
    zframe_destroy(&route);
}

void workers_broadcast_end(loader_t *self, uint32_t epoch, uint8_t phase)
{
    ddp_msg_t e = {.type = DDP_END};
    e.u.end.epoch = epoch;
    e.u.end.phase = phase;
    bool alive;
    zframe_t *identity;
    for (int i = 0; (identity = dispatch_worker_identity(self->dispatch, i, &alive)); i++) {
        if (!alive)
            continue;
        zframe_t *id = zframe_dup(identity);
        if (proto_send(zsock_resolve(self->router), id, &e) < 0)
            log_warn("cannot send END to a worker: %s", zmq_strerror(zmq_errno()));
        zframe_destroy(&id);
    }
}

void workers_reap(loader_t *self, int64_t now)
{
    if (dispatch_reap(self->dispatch, now) <= 0)
        return;
    if (self->stage == STAGE_IDLE && !self->options.train &&
        !dispatch_all_acked(self->dispatch))
        self->stage = STAGE_EVAL; /* re-queued work: the epoch is not done */
    if (self->options.train && (self->stage == STAGE_RANKS || self->stage == STAGE_TRAIN))
        log_warn("a rank died during training (epoch %u): reducerd decides whether the "
                 "survivors go on (a new membership) or the job stops", self->epoch);
}
