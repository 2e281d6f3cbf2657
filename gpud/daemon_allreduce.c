#include "gpud/daemon_allreduce.h"

#include <czmq.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct allreduce {
    int rank, world;
    zsock_t *pull;             /* from rank - 1 */
    zsock_t *push;             /* to rank + 1 */
    uint64_t op;               /* operations so far: a stale chunk is detected */
    float *scratch;
    size_t scratch_cap;
};

typedef struct {
    uint64_t op;
    uint32_t step;
    uint32_t chunk;
    uint64_t count;
} chunk_hdr_t;

size_t allreduce_chunk_offset(size_t n, int world, int c)
{
    /* balanced split: sizes differ by at most one element */
    return (size_t)((unsigned __int128)n * (unsigned)c / (unsigned)world);
}

allreduce_t *allreduce_new(int rank, int world, const char *bind_ep, const char *next_ep,
                           char *err, size_t errlen)
{
    if (world < 1 || rank < 0 || rank >= world) {
        snprintf(err, errlen, "allreduce: rank %d of world %d is out of range", rank, world);
        return NULL;
    }
    allreduce_t *self = calloc(1, sizeof *self);
    if (!self) {
        snprintf(err, errlen, "allreduce: out of memory");
        return NULL;
    }
    self->rank = rank;
    self->world = world;
    if (world == 1)
        return self;
    self->pull = zsock_new(ZMQ_PULL);
    self->push = zsock_new(ZMQ_PUSH);
    if (!self->pull || !self->push) {
        snprintf(err, errlen, "allreduce: cannot create sockets: %s", zmq_strerror(zmq_errno()));
        allreduce_destroy(&self);
        return NULL;
    }
    zsock_set_linger(self->push, 1000);
    zsock_set_rcvhwm(self->pull, 0);
    zsock_set_sndhwm(self->push, 0);
    if (zsock_bind(self->pull, "%s", bind_ep) < 0) {
        snprintf(err, errlen, "allreduce: cannot bind %s: %s (is the port free?)", bind_ep,
                 zmq_strerror(zmq_errno()));
        allreduce_destroy(&self);
        return NULL;
    }
    if (zsock_connect(self->push, "%s", next_ep) < 0) {
        snprintf(err, errlen, "allreduce: cannot connect to rank %d at %s: %s", (rank + 1) % world,
                 next_ep, zmq_strerror(zmq_errno()));
        allreduce_destroy(&self);
        return NULL;
    }
    return self;
}

void allreduce_destroy(allreduce_t **self)
{
    if (!self || !*self)
        return;
    zsock_destroy(&(*self)->pull);
    zsock_destroy(&(*self)->push);
    free((*self)->scratch);
    free(*self);
    *self = NULL;
}

static int send_chunk(allreduce_t *self, uint32_t step, int c, const float *data, size_t count,
                      char *err, size_t errlen)
{
    chunk_hdr_t h = {.op = self->op, .step = step, .chunk = (uint32_t)c, .count = count};
    void *s = zsock_resolve(self->push);
    if (zmq_send(s, &h, sizeof h, ZMQ_SNDMORE) < 0 ||
        zmq_send(s, data, count * sizeof *data, 0) < 0) {
        snprintf(err, errlen, "allreduce: sending chunk %d to rank %d failed: %s", c,
                 (self->rank + 1) % self->world, zmq_strerror(zmq_errno()));
        return -1;
    }
    return 0;
}

/* Receives the expected chunk into self->scratch; checks every header field. */
static int recv_chunk(allreduce_t *self, uint32_t step, int c, size_t count, int timeout_ms,
                      char *err, size_t errlen)
{
    int prev = (self->rank + self->world - 1) % self->world;
    void *s = zsock_resolve(self->pull);
    zmq_pollitem_t item = {.socket = s, .events = ZMQ_POLLIN};
    int rc = zmq_poll(&item, 1, timeout_ms);
    if (rc <= 0) {
        snprintf(err, errlen, "allreduce: rank %d sent nothing for %d ms (step %u): is it dead? "
                 "(a dead rank ends the job; resume from the last checkpoint)", prev, timeout_ms, step);
        return -1;
    }
    chunk_hdr_t h;
    int more = 0;
    size_t more_size = sizeof more;
    int got = zmq_recv(s, &h, sizeof h, 0);
    zmq_getsockopt(s, ZMQ_RCVMORE, &more, &more_size);
    if (got != (int)sizeof h || !more) {
        snprintf(err, errlen, "allreduce: malformed chunk header from rank %d (%d bytes)", prev, got);
        while (more && zmq_recv(s, NULL, 0, 0) >= 0 &&
               zmq_getsockopt(s, ZMQ_RCVMORE, &more, &more_size) == 0)
            ;
        return -1;
    }
    zmq_msg_t body;
    zmq_msg_init(&body);
    if (zmq_msg_recv(&body, s, 0) < 0) {
        snprintf(err, errlen, "allreduce: receiving from rank %d: %s", prev, zmq_strerror(zmq_errno()));
        zmq_msg_close(&body);
        return -1;
    }
    int bad = h.op != self->op || h.step != step || h.chunk != (uint32_t)c || h.count != count ||
              zmq_msg_size(&body) != count * sizeof(float) || zmq_msg_more(&body);
    if (bad) {
        snprintf(err, errlen, "allreduce: rank %d sent op %llu step %u chunk %u of %llu floats "
                 "(%zu bytes), want op %llu step %u chunk %d of %zu: ranks out of step",
                 prev, (unsigned long long)h.op, h.step, h.chunk, (unsigned long long)h.count,
                 zmq_msg_size(&body), (unsigned long long)self->op, step, c, count);
    } else {
        memcpy(self->scratch, zmq_msg_data(&body), count * sizeof(float));
    }
    zmq_msg_close(&body);
    return bad ? -1 : 0;
}

static int ensure_scratch(allreduce_t *self, size_t n)
{
    if (n <= self->scratch_cap)
        return 0;
    float *p = realloc(self->scratch, n * sizeof *p);
    if (!p)
        return -1;
    self->scratch = p;
    self->scratch_cap = n;
    return 0;
}

int allreduce_sum(allreduce_t *self, float *data, size_t n, int timeout_ms, char *err, size_t errlen)
{
    int W = self->world, r = self->rank;
    if (W == 1)
        return 0;
    self->op++;
    size_t biggest = allreduce_chunk_offset(n, W, 1) + 1;
    if (ensure_scratch(self, biggest) < 0) {
        snprintf(err, errlen, "allreduce: out of memory for %zu floats", biggest);
        return -1;
    }
    /* reduce-scatter: after W-1 steps rank r holds the sum of chunk r+1 */
    for (int s = 0; s < W - 1; s++) {
        int cs = ((r - s) % W + W) % W, cr = ((r - s - 1) % W + W) % W;
        size_t so = allreduce_chunk_offset(n, W, cs), sn = allreduce_chunk_offset(n, W, cs + 1) - so;
        size_t ro = allreduce_chunk_offset(n, W, cr), rn = allreduce_chunk_offset(n, W, cr + 1) - ro;
        if (send_chunk(self, (uint32_t)s, cs, data + so, sn, err, errlen) < 0 ||
            recv_chunk(self, (uint32_t)s, cr, rn, timeout_ms, err, errlen) < 0)
            return -1;
        for (size_t i = 0; i < rn; i++)
            data[ro + i] = self->scratch[i] + data[ro + i];
    }
    /* all-gather: pass the finished chunks around the ring */
    for (int s = 0; s < W - 1; s++) {
        int cs = ((r + 1 - s) % W + W) % W, cr = ((r - s) % W + W) % W;
        size_t so = allreduce_chunk_offset(n, W, cs), sn = allreduce_chunk_offset(n, W, cs + 1) - so;
        size_t ro = allreduce_chunk_offset(n, W, cr), rn = allreduce_chunk_offset(n, W, cr + 1) - ro;
        uint32_t step = (uint32_t)(W - 1 + s);
        if (send_chunk(self, step, cs, data + so, sn, err, errlen) < 0 ||
            recv_chunk(self, step, cr, rn, timeout_ms, err, errlen) < 0)
            return -1;
        memcpy(data + ro, self->scratch, rn * sizeof(float));
    }
    return 0;
}
