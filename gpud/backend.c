/* backend — what every backend answers through its table: its name, its
 * threads, its destruction. Which implementations exist is
 * backend_select.c's; graphs are the tape's (backend_train.c). */
#include "gpud/backend_impl.h"

void backend_destroy(backend_t **be)
{
    if (!be || !*be)
        return;
    (*be)->ops->destroy(*be);
    *be = NULL;
}

const char *backend_name(const backend_t *be)
{
    return be->ops->name;
}

int backend_threads(const backend_t *be)
{
    return be->threads;
}
