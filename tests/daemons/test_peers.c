/* reducerd's peers: ranks are handed out once, a dead rank is reused by a
 * restarted worker, and a re-sent JOIN keeps its rank. */
#include "reducerd/peers.h"

#include <stdio.h>
#include <string.h>

#define CHECK(c)                                                                 \
    do {                                                                         \
        if (!(c)) {                                                              \
            fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #c); \
            return 1;                                                            \
        }                                                                        \
    } while (0)

static ddp_join_t J(const char *name, int want)
{
    ddp_join_t j = {.role = DDP_ROLE_GPUD, .want_rank = want};
    snprintf(j.name, sizeof j.name, "%s", name);
    return j;
}

int main(void)
{
    peers_t *p = peers_new(3);
    zframe_t *ia = zframe_new("a", 1), *ib = zframe_new("b", 1), *ic = zframe_new("c", 1);
    ddp_join_t ja = J("a", -1), jb = J("b", 0), jc = J("c", 5);
    peer_t *a = peers_join(p, ia, &ja);
    CHECK(a && a->rank == 0);
    peer_t *b = peers_join(p, ib, &jb); /* wants 0, held by live a */
    CHECK(b && b->rank == 1);
    peer_t *c = peers_join(p, ic, &jc);
    CHECK(c && c->rank == 5);
    CHECK(peers_join(p, ia, &ja)->rank == 0); /* re-sent JOIN */
    CHECK(peers_count(p) == 3 && peers_alive(p, DDP_ROLE_GPUD) == 3);
    b->dead = true;
    zframe_t *id = zframe_new("d", 1);
    ddp_join_t jd = J("d", -1);
    peer_t *d = peers_join(p, id, &jd);
    CHECK(d && d->rank == 1); /* takes the dead worker's rank */
    CHECK(peers_by_rank(p, 1) != NULL);
    CHECK(peers_gpud_ranks(p) == 3);
    zframe_destroy(&ia), zframe_destroy(&ib), zframe_destroy(&ic), zframe_destroy(&id);
    peers_destroy(&p);
    printf("1 passed, 0 failed\n");
    return 0;
}
