/* nccl_relay — see nccl_relay.h. */
#include "reducerd/nccl_relay.h"

#include "common/log.h"
#include "reducerd/trust.h"

#include <stdio.h>
#include <string.h>

bool nccl_relay_start(reducer_t *self, peer_t *const *members, int32_t world)
{
    bool all = world > 1;
    for (int32_t r = 0; all && r < world; r++)
        all = members[r] && members[r]->nccl;
    self->nccl.on = all;
    self->nccl.relayed = false;
    return all;
}

/* Why the id cannot be passed on ("" when it can). */
static void judge(reducer_t *self, peer_t *from, const ddp_ncclid_t *id, char *why, size_t cap)
{
    const elastic_t *e = self->elastic;
    peer_t *rank0 = peers_at(self->peers, e->member[0]);
    why[0] = '\0';
    if (from != rank0)
        snprintf(why, cap, "only rank 0 of generation %u (%s) sends the NCCL id", e->gen,
                 rank0 ? rank0->name : "none");
    else if (!trust_auth_ok(self, &id->auth, DDP_ROLE_GPUD, 0, from->name))
        snprintf(why, cap, "without rank 0's session token");
    else if (id->gen != e->gen || id->world != e->world)
        snprintf(why, cap, "for generation %u of %d rank%s, the current is %u of %d", id->gen,
                 id->world, id->world == 1 ? "" : "s", e->gen, e->world);
    else if (!self->nccl.on)
        snprintf(why, cap, "generation %u does not sum over NCCL (a member did not offer it)",
                 e->gen);
    else if (self->nccl.relayed)
        snprintf(why, cap, "a second id for generation %u", e->gen);
}

void nccl_relay_on_id(reducer_t *self, zframe_t *route, const ddp_ncclid_t *id)
{
    peer_t *from = peers_by_identity(self->peers, route);
    char who[64], why[256];
    trust_peer_label(self, route, who, sizeof who);
    if (self->finished || !self->options.train || !self->elastic || !from ||
        from->role != DDP_ROLE_GPUD || from->removed) {
        trust_reject(self, who, "NCCLID", "not from a rank of a running training job");
        return;
    }
    if (reducer_stale_gen(self, id->gen, who, "NCCLID"))
        return;   /* rank 0 of a generation that just ended: its members abort */
    judge(self, from, id, why, sizeof why);
    if (why[0]) {
        trust_reject(self, who, "NCCLID", "%s", why);
        return;
    }
    ddp_msg_t m = {.type = DDP_NCCLID};
    m.u.ncclid = (ddp_ncclid_t){.gen = id->gen, .world = id->world};
    memcpy(m.u.ncclid.id, id->id, sizeof m.u.ncclid.id);
    const elastic_t *e = self->elastic;
    for (int32_t r = 1; r < e->world; r++) {
        peer_t *p = peers_at(self->peers, e->member[r]);
        if (p)
            reducer_send(self, p->identity, &m);
    }
    self->nccl.relayed = true;
    log_info("generation %u: rank 0's NCCL id passed on to %d rank%s", e->gen, e->world - 1,
             e->world == 2 ? "" : "s");
}
