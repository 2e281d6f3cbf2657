#include "gpud/ring.h"

#include "common/errbuf.h"
#include "common/log.h"
#include "common/zsecurity.h"

#include <czmq.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct allreduce {
    int rank, world;           /* -1, 0 until allreduce_connect */
    zsock_t *pull;             /* from rank - 1 */
    zsock_t *push;             /* to rank + 1 */
    uint64_t op;               /* operations so far: a stale chunk is detected */
    float *scratch;
    size_t scratch_cap;
    int (*cancelled)(void);
    uint64_t dropped;          /* frames that were not the chunk expected */
    uint64_t held;             /* drops not logged since the last line */
    int64_t last_log_ms;       /* rate limit of the drop lines */
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

allreduce_t *allreduce_bind(const char *bind_ep, char *resolved, size_t resolved_len, char *err,
                            size_t errlen)
{
    allreduce_t *self = calloc(1, sizeof *self);
    if (!self) {
        err_set(err, errlen, "allreduce: out of memory");
        return NULL;
    }
    self->rank = -1;
    self->pull = zsock_new(ZMQ_PULL);
    if (!self->pull) {
        err_set(err, errlen, "allreduce: cannot create a socket: %s", zmq_strerror(zmq_errno()));
        allreduce_destroy(&self);
        return NULL;
    }
    zsock_set_rcvhwm(self->pull, 0);
    if (zs_secure_server(self->pull, bind_ep, "gradient ring") < 0) {
        err_set(err, errlen, "allreduce: %s cannot be served (see the error above)", bind_ep);
        allreduce_destroy(&self);
        return NULL;
    }
    /* zmq_bind, not zsock_bind: czmq gives ":*" / ":!" port forms its own
     * meaning; libzmq picks a free port for ":0" or ":*" and reports it in
     * ZMQ_LAST_ENDPOINT */
    if (zmq_bind(zsock_resolve(self->pull), bind_ep) < 0) {
        err_set(err, errlen, "allreduce: cannot bind %s: %s (is the port free? use --ring-bind "
                "tcp://HOST:0 to let the system pick one)", bind_ep, zmq_strerror(zmq_errno()));
        allreduce_destroy(&self);
        return NULL;
    }
    char ep[256] = "";
    size_t len = sizeof ep;
    if (zmq_getsockopt(zsock_resolve(self->pull), ZMQ_LAST_ENDPOINT, ep, &len) < 0 || !ep[0]) {
        err_set(err, errlen, "allreduce: cannot read the endpoint bound for %s: %s", bind_ep,
                zmq_strerror(zmq_errno()));
        allreduce_destroy(&self);
        return NULL;
    }
    if (resolved && (size_t)snprintf(resolved, resolved_len, "%s", ep) >= resolved_len) {
        err_set(err, errlen, "allreduce: endpoint %s is longer than %zu characters", ep,
                resolved_len - 1);
        allreduce_destroy(&self);
        return NULL;
    }
    return self;
}

int allreduce_connect(allreduce_t *self, int rank, int world, const char *next_ep, char *err,
                      size_t errlen)
{
    if (world < 1 || rank < 0 || rank >= world) {
        err_set(err, errlen, "allreduce: rank %d of world %d is out of range", rank, world);
        return -1;
    }
    if (self->push) {
        err_set(err, errlen, "allreduce: already connected as rank %d of %d", self->rank,
                self->world);
        return -1;
    }
    self->rank = rank;
    self->world = world;
    if (world == 1) {   /* no peers: nothing may ever arrive */
        zsock_destroy(&self->pull);
        return 0;
    }
    if (!next_ep || !next_ep[0]) {
        err_set(err, errlen, "allreduce: no endpoint for rank %d (reducerd sent no next_ring)",
                (rank + 1) % world);
        return -1;
    }
    self->push = zsock_new(ZMQ_PUSH);
    if (!self->push) {
        err_set(err, errlen, "allreduce: cannot create a socket: %s", zmq_strerror(zmq_errno()));
        return -1;
    }
    zsock_set_linger(self->push, 1000);
    zsock_set_sndhwm(self->push, 0);
    if (zs_secure_client(self->push, next_ep, "gradient ring") < 0) {
        err_set(err, errlen, "allreduce: cannot secure the connection to rank %d at %s",
                (rank + 1) % world, next_ep);
        zsock_destroy(&self->push);
        return -1;
    }
    if (zmq_connect(zsock_resolve(self->push), next_ep) < 0) {
        err_set(err, errlen, "allreduce: cannot connect to rank %d at %s: %s", (rank + 1) % world,
                next_ep, zmq_strerror(zmq_errno()));
        zsock_destroy(&self->push);
        return -1;
    }
    return 0;
}

allreduce_t *allreduce_new(int rank, int world, const char *bind_ep, const char *next_ep,
                           char *err, size_t errlen)
{
    if (world < 1 || rank < 0 || rank >= world) {
        err_set(err, errlen, "allreduce: rank %d of world %d is out of range", rank, world);
        return NULL;
    }
    allreduce_t *self = world == 1 ? calloc(1, sizeof *self)
                                   : allreduce_bind(bind_ep, NULL, 0, err, errlen);
    if (!self) {
        if (world == 1)
            err_set(err, errlen, "allreduce: out of memory");
        return NULL;
    }
    if (allreduce_connect(self, rank, world, next_ep, err, errlen) < 0)
        allreduce_destroy(&self);
    return self;
}

void allreduce_set_cancel(allreduce_t *self, int (*cancelled)(void))
{
    self->cancelled = cancelled;
}

int allreduce_rank(const allreduce_t *self)
{
    return self->rank;
}

int allreduce_world(const allreduce_t *self)
{
    return self->world;
}

uint64_t allreduce_dropped(const allreduce_t *self)
{
    return self->dropped;
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
        err_set(err, errlen, "allreduce: sending chunk %d to rank %d failed: %s", c,
                (self->rank + 1) % self->world, zmq_strerror(zmq_errno()));
        return -1;
    }
    return 0;
}

/* Waits for a message until deadline (zclock_mono ms), in slices, so a
 * cancel (a signal) ends the wait within 100 ms instead of at the deadline. */
static int wait_readable(allreduce_t *self, void *s, int prev, uint32_t step, int64_t deadline,
                         int timeout_ms, char *err, size_t errlen)
{
    zmq_pollitem_t item = {.socket = s, .events = ZMQ_POLLIN};
    for (;;) {
        if (self->cancelled && self->cancelled()) {
            err_set(err, errlen, "allreduce: interrupted while waiting for rank %d (step %u)",
                    prev, step);
            return -1;
        }
        int64_t left = deadline - zclock_mono();
        int rc = zmq_poll(&item, 1, left <= 0 ? 0 : (left < 100 ? (long)left : 100));
        if (rc > 0)
            return 0;
        if (rc < 0 && zmq_errno() != EINTR) {
            err_set(err, errlen, "allreduce: waiting for rank %d: %s", prev,
                    zmq_strerror(zmq_errno()));
            return -1;
        }
        if (left <= 0)
            break;
    }
    err_set(err, errlen, "allreduce: rank %d sent nothing valid for %d ms (step %u): is it "
            "dead? (a dead rank ends the job; resume from the last checkpoint)", prev,
            timeout_ms, step);
    return -1;
}

/* A dropped frame: counted always, logged at most once per 10 s (with the
 * count held back), so garbage can neither kill the job nor flood the log. */
static void note_drop(allreduce_t *self, zmq_msg_t *first, const char *why)
{
    self->dropped++;
    int64_t now = zclock_mono();
    if (self->last_log_ms && now - self->last_log_ms < 10000) {
        self->held++;
        return;
    }
    const char *peer = first ? zmq_msg_gets(first, "Peer-Address") : NULL;
    log_warn("gradient ring: dropped a frame from %s: %s (%llu dropped so far, %llu not logged "
             "since the last line); a stranger or a rank of another job is pushing into this "
             "ring's endpoint", peer ? peer : "a peer", why, (unsigned long long)self->dropped,
             (unsigned long long)self->held);
    self->held = 0;
    self->last_log_ms = now;
}

/* One whole message: its first two frames in hdr and body (initialised
 * here, closed by the caller), the rest drained. The number of frames, or
 * -1 on a socket error. */
static int recv_message(void *s, zmq_msg_t *hdr, zmq_msg_t *body)
{
    zmq_msg_init(hdr);
    zmq_msg_init(body);
    if (zmq_msg_recv(hdr, s, ZMQ_DONTWAIT) < 0)
        return -1;
    int frames = 1;
    if (zmq_msg_more(hdr)) {
        if (zmq_msg_recv(body, s, 0) < 0)
            return -1;
        frames++;
        zmq_msg_t extra;
        zmq_msg_init(&extra);
        int more = zmq_msg_more(body);
        while (more && zmq_msg_recv(&extra, s, 0) >= 0) {
            frames++;
            more = zmq_msg_more(&extra);
        }
        zmq_msg_close(&extra);
        if (more)
            return -1;
    }
    return frames;
}

/* Is this message exactly the chunk expected? Sizes first, then the header
 * (copied out of the frame only once its size is right). */
static int check_chunk(const allreduce_t *self, int frames, zmq_msg_t *hdr, zmq_msg_t *body,
                       uint32_t step, int c, size_t count, char *err, size_t errlen)
{
    if (frames != 2 || zmq_msg_size(hdr) != sizeof(chunk_hdr_t)) {
        err_set(err, errlen, "%d frame(s), header of %zu bytes, want 2 frames and a %zu-byte "
                 "header", frames, zmq_msg_size(hdr), sizeof(chunk_hdr_t));
        return -1;
    }
    chunk_hdr_t h;
    memcpy(&h, zmq_msg_data(hdr), sizeof h);
    if (h.op != self->op || h.step != step || h.chunk != (uint32_t)c || h.count != count ||
        zmq_msg_size(body) != count * sizeof(float)) {
        err_set(err, errlen, "op %llu step %u chunk %u of %llu floats (%zu bytes), want op %llu "
                 "step %u chunk %d of %zu floats", (unsigned long long)h.op, h.step, h.chunk,
                 (unsigned long long)h.count, zmq_msg_size(body), (unsigned long long)self->op,
                 step, c, count);
        return -1;
    }
    return 0;
}

/* Receives the expected chunk into self->scratch. Anything else that arrives
 * (garbage, a foreign or stale frame) is dropped and the wait goes on, but
 * never past the one deadline: junk cannot extend the timeout. */
static int recv_chunk(allreduce_t *self, uint32_t step, int c, size_t count, int timeout_ms,
                      char *err, size_t errlen)
{
    int prev = (self->rank + self->world - 1) % self->world;
    void *s = zsock_resolve(self->pull);
    int64_t deadline = zclock_mono() + (timeout_ms > 0 ? timeout_ms : 0);
    for (;;) {
        if (wait_readable(self, s, prev, step, deadline, timeout_ms, err, errlen) < 0)
            return -1;
        zmq_msg_t hdr, body;
        int frames = recv_message(s, &hdr, &body);
        if (frames < 0 && zmq_errno() == EAGAIN) {   /* a poll wake-up without a message */
            zmq_msg_close(&hdr);
            zmq_msg_close(&body);
            continue;
        }
        if (frames < 0) {
            err_set(err, errlen, "allreduce: receiving from rank %d: %s", prev,
                    zmq_strerror(zmq_errno()));
            zmq_msg_close(&hdr);
            zmq_msg_close(&body);
            return -1;
        }
        char why[256];
        int ok = check_chunk(self, frames, &hdr, &body, step, c, count, why, sizeof why) == 0;
        if (ok)
            memcpy(self->scratch, zmq_msg_data(&body), count * sizeof(float));
        else
            note_drop(self, &hdr, why);
        zmq_msg_close(&hdr);
        zmq_msg_close(&body);
        if (ok)
            return 0;
    }
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
    if (r < 0) {
        err_set(err, errlen, "allreduce: not connected (allreduce_connect first)");
        return -1;
    }
    if (W == 1)
        return 0;
    self->op++;
    size_t biggest = allreduce_chunk_offset(n, W, 1) + 1;
    if (ensure_scratch(self, biggest) < 0) {
        err_set(err, errlen, "allreduce: out of memory for %zu floats", biggest);
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
