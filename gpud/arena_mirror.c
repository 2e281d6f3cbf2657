/* arena_mirror — see arena_mirror.h. */
#include "gpud/arena_mirror.h"

#include <stdlib.h>

#include "common/errbuf.h"

int arena_mirror_init(arena_mirror_t *m, const bk_arena_t *a, char *err, size_t errlen)
{
    *m = (arena_mirror_t){.arena = a, .host = bk_arena_host_view(a, 0)};
    if (m->host || !a->base)
        return 0;
    m->copy = 1;
    if (!(m->host = malloc((a->floats ? a->floats : 1) * sizeof *m->host))) {
        err_set(err, errlen, "out of memory for the host mirror of %zu floats of the %s arena",
                a->floats, a->ops->name);
        return -1;
    }
    return 0;
}

void arena_mirror_fini(arena_mirror_t *m)
{
    if (m->copy)
        free(m->host);
    *m = (arena_mirror_t){0};
}

float *arena_mirror_pull(arena_mirror_t *m, size_t off, size_t n)
{
    if (!m->host || off > m->arena->floats || n > m->arena->floats - off)
        return NULL;
    if (m->copy && bk_arena_read(m->arena, off, n, m->host + off) < 0)
        return NULL;
    return m->host + off;
}

int arena_mirror_push(arena_mirror_t *m, size_t off, size_t n)
{
    if (!m->host)
        return -1;
    return m->copy ? bk_arena_write(m->arena, off, n, m->host + off) : 0;
}

float *arena_mirror_at(const arena_mirror_t *m, size_t off)
{
    return m->host && off <= m->arena->floats ? m->host + off : NULL;
}
