#include "reporterd/tapcache.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    int32_t rank;
    zmsg_t *msg;
} worker_slot_t;

struct tapcache {
    zmsg_t *metric[2]; /* by phase */
    zmsg_t *progress;
    zmsg_t *membership;  /* the generation in force (training) */
    worker_slot_t *workers;
    size_t nworkers, capworkers;
};

tapcache_t *tapcache_new(void) { return calloc(1, sizeof(tapcache_t)); }

void tapcache_destroy(tapcache_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    tapcache_t *self = *self_p;
    zmsg_destroy(&self->metric[0]);
    zmsg_destroy(&self->metric[1]);
    zmsg_destroy(&self->progress);
    zmsg_destroy(&self->membership);
    for (size_t i = 0; i < self->nworkers; i++)
        zmsg_destroy(&self->workers[i].msg);
    free(self->workers);
    free(self);
    *self_p = NULL;
}

static int s_replace(zmsg_t **slot, zmsg_t *msg)
{
    zmsg_t *copy = zmsg_dup(msg);
    if (!copy)
        return -1;
    zmsg_destroy(slot);
    *slot = copy;
    return 0;
}

static zmsg_t **s_worker_slot(tapcache_t *self, int32_t rank)
{
    for (size_t i = 0; i < self->nworkers; i++)
        if (self->workers[i].rank == rank)
            return &self->workers[i].msg;
    if (self->nworkers == self->capworkers) {
        size_t cap = self->capworkers ? self->capworkers * 2 : 8;
        worker_slot_t *bigger = realloc(self->workers, cap * sizeof *bigger);
        if (!bigger)
            return NULL;
        self->workers = bigger;
        self->capworkers = cap;
    }
    self->workers[self->nworkers] = (worker_slot_t){rank, NULL};
    return &self->workers[self->nworkers++].msg;
}

int tapcache_keep(tapcache_t *self, const ddp_event_t *ev, zmsg_t *msg)
{
    switch (ev->topic) {
    case EV_METRIC: return s_replace(&self->metric[ev->u.metric.phase ? 1 : 0], msg);
    case EV_PROGRESS: return s_replace(&self->progress, msg);
    case EV_MEMBERSHIP: return s_replace(&self->membership, msg);
    case EV_WORKER: {
        zmsg_t **slot = s_worker_slot(self, ev->u.worker.rank);
        return slot ? s_replace(slot, msg) : -1;
    }
    default: return 0;
    }
}

static int s_send(zmsg_t *kept, zsock_t *pub, const char *prefix, size_t len)
{
    if (!kept)
        return 0;
    zframe_t *topic = zmsg_first(kept);
    if (len > zframe_size(topic) || memcmp(zframe_data(topic), prefix, len) != 0)
        return 0;
    zmsg_t *copy = zmsg_dup(kept);
    if (!copy)
        return 0;
    if (zmsg_send(&copy, pub) != 0) {
        zmsg_destroy(&copy);
        return 0;
    }
    return 1;
}

int tapcache_replay(tapcache_t *self, zsock_t *pub, const char *prefix, size_t len)
{
    int sent = 0;
    /* workers first: a monitor learns who runs before it reads their numbers */
    for (size_t i = 0; i < self->nworkers; i++)
        sent += s_send(self->workers[i].msg, pub, prefix, len);
    sent += s_send(self->membership, pub, prefix, len);
    sent += s_send(self->progress, pub, prefix, len);
    sent += s_send(self->metric[1], pub, prefix, len);
    sent += s_send(self->metric[0], pub, prefix, len);
    return sent;
}

size_t tapcache_size(const tapcache_t *self)
{
    size_t n = (self->metric[0] != NULL) + (self->metric[1] != NULL) + (self->progress != NULL) +
               (self->membership != NULL);
    for (size_t i = 0; i < self->nworkers; i++)
        n += self->workers[i].msg != NULL;
    return n;
}
