#include "loaderd/step_window.h"

#include <stdlib.h>
#include <string.h>

void step_clear(step_t *step, int world)
{
    for (int r = 0; r < world; r++) {
        free(step->shard[r].ids);
        free(step->shard[r].labels);
        free(step->shard[r].sizes);
        free(step->shard[r].pos);
        zframe_destroy(&step->shard[r].pixels);
        memset(&step->shard[r], 0, sizeof step->shard[r]);
        step->sent[r] = false;
    }
    step->k = 0;
    step->global_count = 0;
}

step_window_t *step_window_new(int world, int depth)
{
    if (world < 1 || depth < 1)
        return NULL;
    step_window_t *self = calloc(1, sizeof *self);
    if (!self)
        return NULL;
    self->world = world;
    self->depth = depth;
    self->steps = calloc((size_t)depth, sizeof *self->steps);
    self->next_send = calloc((size_t)world, sizeof *self->next_send);
    bool ok = self->steps && self->next_send;
    for (int i = 0; ok && i < depth; i++) {
        self->steps[i].shard = calloc((size_t)world, sizeof *self->steps[i].shard);
        self->steps[i].sent = calloc((size_t)world, sizeof *self->steps[i].sent);
        ok = self->steps[i].shard && self->steps[i].sent;
    }
    if (!ok)
        step_window_destroy(&self);
    return self;
}

void step_window_destroy(step_window_t **self_p)
{
    step_window_t *self = self_p ? *self_p : NULL;
    if (!self)
        return;
    for (int i = 0; self->steps && i < self->depth; i++) {
        if (self->steps[i].shard && self->steps[i].sent)
            step_clear(&self->steps[i], self->world);
        free(self->steps[i].shard);
        free(self->steps[i].sent);
    }
    free(self->steps);
    free(self->next_send);
    free(self);
    *self_p = NULL;
}

void step_window_reset(step_window_t *self, uint64_t first_step)
{
    while (self->count > 0) {
        step_clear(&self->steps[self->head], self->world);
        self->head = (self->head + 1) % self->depth;
        self->count--;
    }
    self->head = 0;
    self->next_k = first_step;
    for (int r = 0; r < self->world; r++)
        self->next_send[r] = first_step;
}

step_t *step_window_next_slot(step_window_t *self)
{
    return &self->steps[(self->head + self->count) % self->depth];
}

void step_window_push(step_window_t *self)
{
    self->count++;
    self->next_k++;
}

step_t *step_window_step(step_window_t *self, uint64_t k)
{
    uint64_t head_k = self->steps[self->head].k;
    return &self->steps[(self->head + (int)(k - head_k)) % self->depth];
}

void step_window_release(step_window_t *self)
{
    while (self->count > 0) {
        step_t *step = &self->steps[self->head];
        for (int r = 0; r < self->world; r++)
            if (!step->sent[r])
                return;
        step_clear(step, self->world);
        self->head = (self->head + 1) % self->depth;
        self->count--;
    }
}
