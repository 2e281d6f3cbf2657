#include "reducerd/generation.h"

#include "reducerd/job.h"
#include "reducerd/nccl_relay.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

peer_t *generation_member(reducer_t *self, int32_t rank)
{
    return peers_at(self->peers, self->elastic->member[rank]);
}

void generation_announce(reducer_t *self, uint64_t step, uint32_t epoch, const char *reason)
{
    elastic_t *e = self->elastic;
    char **names = calloc((size_t)e->world, sizeof *names);
    peer_t **members = calloc((size_t)e->world, sizeof *members);
    if (!names || !members) {
        free(names);
        free(members);
        job_finish(self, 1, "out of memory telling the ranks their new membership");
        return;
    }
    for (int32_t r = 0; r < e->world; r++) {
        members[r] = generation_member(self, r);
        names[r] = members[r]->name;
    }
    bool nccl = nccl_relay_start(self, members, e->world);
    free(members);
    ddp_msg_t m = {.type = DDP_MEMBERS};
    ddp_members_t *mm = &m.u.members;
    *mm = (ddp_members_t){.gen = e->gen, .world = e->world, .step = step, .epoch = epoch,
                          .names = names, .paused = self->paused, .nccl = nccl};
    snprintf(mm->reason, sizeof mm->reason, "%s", reason);
    for (int32_t r = 0; r < e->world; r++) {
        peer_t *p = generation_member(self, r);
        mm->rank = r;
        snprintf(mm->next_ring, sizeof mm->next_ring, "%s",
                 e->world > 1 ? generation_member(self, (r + 1) % e->world)->ring : "");
        mm->session = self->session;
        token_compute(self->secret, self->session, DDP_ROLE_GPUD, r, p->name, mm->token);
        reducer_send(self, p->identity, &m);
    }
    mm->rank = -1;
    mm->nccl = 0;   /* loaderd has no part in it */
    mm->next_ring[0] = '\0';
    mm->session = 0;
    memset(mm->token, 0, sizeof mm->token);
    reducer_send_loaders(self, &m);
    free(names);
}
