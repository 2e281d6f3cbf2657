#include "gpud/ring.h"

#include "common/errbuf.h"
#include "common/log.h"
#include "common/zsecurity.h"

#include <czmq.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint64_t op;
    uint32_t step;
    uint32_t chunk;
    uint64_t count;
    uint32_t gen;              /* membership generation of the sender */
    uint32_t kind;             /* ring_kind_t: what the values are and how they combine */
} chunk_hdr_t;

/* gpud/xsum_ring.c counts these bytes per chunk; test_ring_garbage forges them. */
_Static_assert(sizeof(chunk_hdr_t) == 32, "the ring's chunk header is 32 bytes");

/* An operation's element kind, carried by every chunk and checked on
 * receipt: four bytes of float sum and four bytes of int32 max are the same
 * size, and a chunk of one taken for the other would silently corrupt the
 * result. The low byte is the value's width in bytes (so the float and
 * double kinds keep the numbers the header's width field had). */
typedef enum {
    RING_F32 = 4,              /* float sum */
    RING_F64 = 8,              /* double sum */
    RING_I64_SUM = 0x100 | 8,  /* int64 sum, wrapping (xsum limbs) */
    RING_I32_MAX = 0x200 | 4   /* int32 max (xsum tops) */
} ring_kind_t;

static size_t kind_width(ring_kind_t kind)
{
    return (size_t)kind & 0xff;
}

/* A whole chunk of a newer generation, kept until this rank re-forms. */
typedef struct {
    chunk_hdr_t hdr;
    zmq_msg_t body;
} early_t;

/* At most this many early chunks: a peer of the next generation can be
 * only a few ring steps ahead (it needs our chunks to go on), so more is
 * junk and is dropped. */
#define RING_MAX_EARLY 64

struct allreduce {
    int rank, world;           /* -1, 0 until allreduce_connect */
    uint32_t gen;              /* membership generation */
    zsock_t *pull;             /* from rank - 1 */
    zsock_t *push;             /* to rank + 1 */
    char next_ep[256];         /* where push points */
    uint64_t op;               /* operations of this generation: a stale chunk is detected */
    ring_kind_t kind;          /* of the operation under way */
    size_t width;              /* its bytes per value: kind_width(kind) */
    void *scratch;             /* one received chunk */
    size_t scratch_cap;        /* bytes */
    allreduce_cancel_fn cancel;
    void *cancel_ctx;
    allreduce_failure_t failure;   /* of the last operation */
    int suspect;               /* the rank waited for in vain, -1 */
    early_t early[RING_MAX_EARLY];
    int n_early;
    uint64_t dropped;          /* frames that were not the chunk expected */
    uint64_t stale;            /* frames of an older generation */
    uint64_t held;             /* drops not logged since the last line */
    int64_t last_log_ms;       /* rate limit of the drop lines */
};

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

/* The PUSH to the next rank (self->rank, self->world set) at next_ep. */
static int open_push(allreduce_t *self, const char *next_ep, char *err, size_t errlen)
{
    int next = (self->rank + 1) % self->world;
    if (!next_ep || !next_ep[0]) {
        err_set(err, errlen, "allreduce: no endpoint for rank %d (reducerd sent no next_ring)",
                next);
        return -1;
    }
    if (strlen(next_ep) >= sizeof self->next_ep) {
        err_set(err, errlen, "allreduce: endpoint %s of rank %d is too long", next_ep, next);
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
        err_set(err, errlen, "allreduce: cannot secure the connection to rank %d at %s", next,
                next_ep);
        zsock_destroy(&self->push);
        return -1;
    }
    if (zmq_connect(zsock_resolve(self->push), next_ep) < 0) {
        err_set(err, errlen, "allreduce: cannot connect to rank %d at %s: %s", next, next_ep,
                zmq_strerror(zmq_errno()));
        zsock_destroy(&self->push);
        return -1;
    }
    snprintf(self->next_ep, sizeof self->next_ep, "%s", next_ep);
    return 0;
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
    if (world == 1)   /* no peers yet; the PULL stays bound for ranks that join */
        return 0;
    return open_push(self, next_ep, err, errlen);
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

void allreduce_set_cancel(allreduce_t *self, allreduce_cancel_fn fn, void *ctx)
{
    self->cancel = fn;
    self->cancel_ctx = ctx;
}

allreduce_failure_t allreduce_failure(const allreduce_t *self)
{
    return self->failure;
}

int allreduce_suspect(const allreduce_t *self)
{
    return self->suspect;
}

uint32_t allreduce_gen(const allreduce_t *self)
{
    return self->gen;
}

uint64_t allreduce_stale(const allreduce_t *self)
{
    return self->stale;
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

static void drop_early(allreduce_t *self, int i)
{
    zmq_msg_close(&self->early[i].body);
    self->early[i] = self->early[--self->n_early];
}

void allreduce_destroy(allreduce_t **self)
{
    if (!self || !*self)
        return;
    while ((*self)->n_early > 0)
        drop_early(*self, 0);
    zsock_destroy(&(*self)->pull);
    zsock_destroy(&(*self)->push);
    free((*self)->scratch);
    free(*self);
    *self = NULL;
}

/* -1 after an operation failed for `why` (the message is in err already). */
static int failed(allreduce_t *self, allreduce_failure_t why, int suspect)
{
    self->failure = why;
    self->suspect = suspect;
    return -1;
}

static int send_chunk(allreduce_t *self, uint32_t step, int c, const void *data, size_t count,
                      char *err, size_t errlen)
{
    chunk_hdr_t h = {.op = self->op, .step = step, .chunk = (uint32_t)c, .count = count,
                     .gen = self->gen, .kind = (uint32_t)self->kind};
    void *s = zsock_resolve(self->push);
    if (zmq_send(s, &h, sizeof h, ZMQ_SNDMORE) < 0 ||
        zmq_send(s, data, count * self->width, 0) < 0) {
        err_set(err, errlen, "allreduce: sending chunk %d to rank %d failed: %s", c,
                (self->rank + 1) % self->world, zmq_strerror(zmq_errno()));
        return failed(self, ALLREDUCE_ERROR, -1);
    }
    return 0;
}

/* Waits for a message until deadline (zclock_mono ms), in slices, so a
 * cancel (a signal, a new membership) ends the wait within 100 ms instead
 * of at the deadline. */
static int wait_readable(allreduce_t *self, void *s, int prev, uint32_t step, int64_t deadline,
                         int timeout_ms, char *err, size_t errlen)
{
    zmq_pollitem_t item = {.socket = s, .events = ZMQ_POLLIN};
    for (;;) {
        const char *why = self->cancel ? self->cancel(self->cancel_ctx) : NULL;
        if (why) {
            err_set(err, errlen, "allreduce: %s while waiting for rank %d (step %u)", why, prev,
                    step);
            return failed(self, ALLREDUCE_CANCELLED, -1);
        }
        int64_t left = deadline - zclock_mono();
        int rc = zmq_poll(&item, 1, left <= 0 ? 0 : (left < 100 ? (long)left : 100));
        if (rc > 0)
            return 0;
        if (rc < 0 && zmq_errno() != EINTR) {
            err_set(err, errlen, "allreduce: waiting for rank %d: %s", prev,
                    zmq_strerror(zmq_errno()));
            return failed(self, ALLREDUCE_ERROR, -1);
        }
        if (left <= 0)
            break;
    }
    err_set(err, errlen, "allreduce: rank %d sent nothing valid for %d ms (step %u, generation "
            "%u): is it dead?", prev, timeout_ms, step, self->gen);
    return failed(self, ALLREDUCE_TIMEOUT, prev);
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

/* A chunk of an older generation: the abandoned step, or a fenced rank. */
static void note_stale(allreduce_t *self, const chunk_hdr_t *h)
{
    self->stale++;
    log_debug("gradient ring: dropped a stale chunk of generation %u (op %llu step %u chunk %u), "
              "this ring is at generation %u (%llu stale so far)", h->gen,
              (unsigned long long)h->op, h->step, h->chunk, self->gen,
              (unsigned long long)self->stale);
}

/* One whole message: its first two frames in hdr and body (initialised
 * here, closed by the caller), the rest drained. The number of frames, or
 * -1 on a socket error (EAGAIN: nothing was there). */
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

typedef enum { MSG_JUNK, MSG_STALE, MSG_EARLY, MSG_CURRENT } msg_kind_t;

/* A message's shape and generation; h receives its header (not JUNK). */
static msg_kind_t classify(const allreduce_t *self, int frames, zmq_msg_t *hdr, chunk_hdr_t *h,
                           char *err, size_t errlen)
{
    if (frames != 2 || zmq_msg_size(hdr) != sizeof *h) {
        err_set(err, errlen, "%d frame(s), header of %zu bytes, want 2 frames and a %zu-byte "
                 "header", frames, zmq_msg_size(hdr), sizeof *h);
        return MSG_JUNK;
    }
    memcpy(h, zmq_msg_data(hdr), sizeof *h);
    return h->gen < self->gen ? MSG_STALE : h->gen > self->gen ? MSG_EARLY : MSG_CURRENT;
}

/* Is this chunk of the current generation exactly the one expected? */
static int check_chunk(const allreduce_t *self, const chunk_hdr_t *h, zmq_msg_t *body,
                       uint32_t step, int c, size_t count, char *err, size_t errlen)
{
    if (h->op != self->op || h->step != step || h->chunk != (uint32_t)c || h->count != count ||
        h->kind != (uint32_t)self->kind || zmq_msg_size(body) != count * self->width) {
        err_set(err, errlen, "op %llu step %u chunk %u of %llu values of kind 0x%x (%zu bytes), "
                 "want op %llu step %u chunk %d of %zu values of kind 0x%x",
                 (unsigned long long)h->op, h->step, h->chunk, (unsigned long long)h->count,
                 h->kind, zmq_msg_size(body), (unsigned long long)self->op, step, c, count,
                 (unsigned)self->kind);
        return -1;
    }
    return 0;
}

/* Keeps a chunk of a newer generation (its body moved) for after the re-form. */
static void hold_early(allreduce_t *self, const chunk_hdr_t *h, zmq_msg_t *hdr, zmq_msg_t *body)
{
    if (self->n_early >= RING_MAX_EARLY) {
        note_drop(self, hdr, "more chunks of a newer generation than a ring peer can send ahead");
        return;
    }
    early_t *e = &self->early[self->n_early++];
    e->hdr = *h;
    zmq_msg_init(&e->body);
    zmq_msg_move(&e->body, body);
}

/* The oldest held chunk of the current generation, or -1. */
static int early_of_gen(const allreduce_t *self)
{
    for (int i = 0; i < self->n_early; i++)
        if (self->early[i].hdr.gen == self->gen)
            return i;
    return -1;
}

/* Removes held chunk i, keeping the others in arrival order. */
static void remove_early(allreduce_t *self, int i)
{
    zmq_msg_close(&self->early[i].body);
    memmove(&self->early[i], &self->early[i + 1],
            (size_t)(self->n_early - i - 1) * sizeof self->early[0]);
    self->n_early--;
}

/* A held chunk of this generation, taken if it is the one expected
 * (else dropped as junk). 1: scratch filled; 0: none was held. */
static int take_early(allreduce_t *self, uint32_t step, int c, size_t count)
{
    int i;
    while ((i = early_of_gen(self)) >= 0) {
        early_t *e = &self->early[i];
        char why[256];
        int ok = check_chunk(self, &e->hdr, &e->body, step, c, count, why, sizeof why) == 0;
        if (ok)
            memcpy(self->scratch, zmq_msg_data(&e->body), count * self->width);
        else
            note_drop(self, NULL, why);
        remove_early(self, i);
        if (ok)
            return 1;
    }
    return 0;
}

/* One message off the PULL socket, sorted: 1 it is the chunk expected
 * (in scratch), 0 it was dropped or held, -1 a socket error (EAGAIN:
 * nothing there). Expect count = SIZE_MAX when draining: nothing is
 * expected, current chunks are held too. */
static int take_message(allreduce_t *self, void *s, uint32_t step, int c, size_t count)
{
    zmq_msg_t hdr, body;
    int frames = recv_message(s, &hdr, &body), rc = 0;
    if (frames >= 0) {
        chunk_hdr_t h;
        char why[256];
        msg_kind_t kind = classify(self, frames, &hdr, &h, why, sizeof why);
        if (kind == MSG_JUNK)
            note_drop(self, &hdr, why);
        else if (kind == MSG_STALE)
            note_stale(self, &h);
        else if (kind == MSG_EARLY || count == SIZE_MAX)
            hold_early(self, &h, &hdr, &body);
        else if (check_chunk(self, &h, &body, step, c, count, why, sizeof why) < 0)
            note_drop(self, &hdr, why);
        else
            memcpy(self->scratch, zmq_msg_data(&body), count * self->width), rc = 1;
    } else {
        rc = -1;
    }
    zmq_msg_close(&hdr);
    zmq_msg_close(&body);
    return rc;
}

/* Receives the expected chunk into self->scratch. Anything else that arrives
 * (garbage, a foreign or stale frame) is dropped and the wait goes on, but
 * never past the one deadline: junk cannot extend the timeout. */
static int recv_chunk(allreduce_t *self, uint32_t step, int c, size_t count, int timeout_ms,
                      char *err, size_t errlen)
{
    int prev = (self->rank + self->world - 1) % self->world;
    if (take_early(self, step, c, count))
        return 0;
    void *s = zsock_resolve(self->pull);
    int64_t deadline = zclock_mono() + (timeout_ms > 0 ? timeout_ms : 0);
    for (;;) {
        if (wait_readable(self, s, prev, step, deadline, timeout_ms, err, errlen) < 0)
            return -1;
        int rc = take_message(self, s, step, c, count);
        if (rc > 0)
            return 0;
        if (rc < 0 && zmq_errno() != EAGAIN) {   /* EAGAIN: a poll wake-up without a message */
            err_set(err, errlen, "allreduce: receiving from rank %d: %s", prev,
                    zmq_strerror(zmq_errno()));
            return failed(self, ALLREDUCE_ERROR, -1);
        }
    }
}

int allreduce_reform(allreduce_t *self, uint32_t gen, int rank, int world, const char *next_ep,
                     char *err, size_t errlen)
{
    if (world < 1 || rank < 0 || rank >= world) {
        err_set(err, errlen, "allreduce: rank %d of world %d is out of range", rank, world);
        return -1;
    }
    if (self->rank < 0 || gen <= self->gen) {
        err_set(err, errlen, "allreduce: cannot re-form as generation %u (%s generation %u)",
                gen, self->rank < 0 ? "not connected;" : "the ring is at", self->gen);
        return -1;
    }
    if (world > 1 && !self->pull) {
        err_set(err, errlen, "allreduce: a ring of one rank cannot grow to %d", world);
        return -1;
    }
    bool same_next = self->push && world > 1 && next_ep && strcmp(next_ep, self->next_ep) == 0;
    if (!same_next) {
        zsock_destroy(&self->push);
        self->next_ep[0] = 0;
    }
    self->gen = gen;
    self->rank = rank;
    self->world = world;
    self->op = 0;
    if (world > 1 && !same_next && open_push(self, next_ep, err, errlen) < 0)
        return -1;
    /* what is queued now: stale frames go, chunks of gen are held */
    for (int guard = 0; self->pull && guard < 100000; guard++)
        if (take_message(self, zsock_resolve(self->pull), 0, 0, SIZE_MAX) < 0)
            break;
    for (int i = 0; i < self->n_early;) {
        if (self->early[i].hdr.gen < gen) {
            note_stale(self, &self->early[i].hdr);
            remove_early(self, i);
        } else {
            i++;
        }
    }
    return 0;
}

static int ensure_scratch(allreduce_t *self, size_t bytes)
{
    if (bytes <= self->scratch_cap)
        return 0;
    void *p = realloc(self->scratch, bytes);
    if (!p)
        return -1;
    self->scratch = p;
    self->scratch_cap = bytes;
    return 0;
}

/* data[o, o + n) += the received chunk, in the operation's kind: the
 * received value first, as every rank's sum of a chunk runs around the ring.
 * int64 sums wrap (through uint64_t: no signed overflow), so they are
 * associative and exact whenever the true sum fits; a max is exact anyway. */
static void add_chunk(const allreduce_t *self, void *data, size_t o, size_t n)
{
    switch (self->kind) {
    case RING_F64: {
        double *d = (double *)data + o;
        const double *r = self->scratch;
        for (size_t i = 0; i < n; i++)
            d[i] = r[i] + d[i];
        break;
    }
    case RING_F32: {
        float *d = (float *)data + o;
        const float *r = self->scratch;
        for (size_t i = 0; i < n; i++)
            d[i] = r[i] + d[i];
        break;
    }
    case RING_I64_SUM: {
        int64_t *d = (int64_t *)data + o;
        const int64_t *r = self->scratch;
        for (size_t i = 0; i < n; i++)
            d[i] = (int64_t)((uint64_t)r[i] + (uint64_t)d[i]);
        break;
    }
    case RING_I32_MAX: {
        int32_t *d = (int32_t *)data + o;
        const int32_t *r = self->scratch;
        for (size_t i = 0; i < n; i++)
            d[i] = r[i] > d[i] ? r[i] : d[i];
        break;
    }
    }
}

/* Chunk c's boundary in the full n-array, clamped to [lo, hi). */
static size_t range_off(size_t n, int W, int c, size_t lo, size_t hi)
{
    size_t o = allreduce_chunk_offset(n, W, c);
    return o < lo ? lo : o > hi ? hi : o;
}

/* The ring over the full array's chunks, each cut to [lo, hi) (possibly
 * empty: an empty chunk still travels, so every rank sends and receives
 * the same frames): an element is summed in its full-array chunk's order.
 * data: n values of the kind's width. */
static int ring_sum(allreduce_t *self, void *data, ring_kind_t kind, size_t n, size_t lo,
                    size_t hi, int timeout_ms, char *err, size_t errlen)
{
    int W = self->world, r = self->rank;
    size_t width = kind_width(kind);
    unsigned char *bytes = data;
    self->failure = ALLREDUCE_OK;
    self->suspect = -1;
    if (r < 0) {
        err_set(err, errlen, "allreduce: not connected (allreduce_connect first)");
        return failed(self, ALLREDUCE_ERROR, -1);
    }
    if (lo > hi || hi > n) {
        err_set(err, errlen, "allreduce: range [%zu, %zu) of a %zu-value array", lo, hi, n);
        return failed(self, ALLREDUCE_ERROR, -1);
    }
    if (W == 1)
        return 0;
    self->op++;
    self->kind = kind;
    self->width = width;
    size_t biggest = allreduce_chunk_offset(n, W, 1) + 1;
    if (ensure_scratch(self, biggest * width) < 0) {
        err_set(err, errlen, "allreduce: out of memory for %zu values", biggest);
        return failed(self, ALLREDUCE_ERROR, -1);
    }
    /* reduce-scatter: after W-1 steps rank r holds the sum of chunk r+1 */
    for (int s = 0; s < W - 1; s++) {
        int cs = ((r - s) % W + W) % W, cr = ((r - s - 1) % W + W) % W;
        size_t so = range_off(n, W, cs, lo, hi), sn = range_off(n, W, cs + 1, lo, hi) - so;
        size_t ro = range_off(n, W, cr, lo, hi), rn = range_off(n, W, cr + 1, lo, hi) - ro;
        if (send_chunk(self, (uint32_t)s, cs, bytes + so * width, sn, err, errlen) < 0 ||
            recv_chunk(self, (uint32_t)s, cr, rn, timeout_ms, err, errlen) < 0)
            return -1;
        add_chunk(self, data, ro, rn);
    }
    /* all-gather: pass the finished chunks around the ring */
    for (int s = 0; s < W - 1; s++) {
        int cs = ((r + 1 - s) % W + W) % W, cr = ((r - s) % W + W) % W;
        size_t so = range_off(n, W, cs, lo, hi), sn = range_off(n, W, cs + 1, lo, hi) - so;
        size_t ro = range_off(n, W, cr, lo, hi), rn = range_off(n, W, cr + 1, lo, hi) - ro;
        uint32_t step = (uint32_t)(W - 1 + s);
        if (send_chunk(self, step, cs, bytes + so * width, sn, err, errlen) < 0 ||
            recv_chunk(self, step, cr, rn, timeout_ms, err, errlen) < 0)
            return -1;
        memcpy(bytes + ro * width, self->scratch, rn * width);
    }
    return 0;
}

int allreduce_sum(allreduce_t *self, float *data, size_t n, int timeout_ms, char *err,
                  size_t errlen)
{
    return ring_sum(self, data, RING_F32, n, 0, n, timeout_ms, err, errlen);
}

int allreduce_sum_range(allreduce_t *self, float *data, size_t n, size_t lo, size_t hi,
                        int timeout_ms, char *err, size_t errlen)
{
    return ring_sum(self, data, RING_F32, n, lo, hi, timeout_ms, err, errlen);
}

int allreduce_sum_f64(allreduce_t *self, double *data, size_t n, int timeout_ms, char *err,
                      size_t errlen)
{
    return ring_sum(self, data, RING_F64, n, 0, n, timeout_ms, err, errlen);
}

int allreduce_sum_i64(allreduce_t *self, int64_t *data, size_t n, int timeout_ms, char *err,
                      size_t errlen)
{
    return ring_sum(self, data, RING_I64_SUM, n, 0, n, timeout_ms, err, errlen);
}

int allreduce_max_i32(allreduce_t *self, int32_t *data, size_t n, int timeout_ms, char *err,
                      size_t errlen)
{
    return ring_sum(self, data, RING_I32_MAX, n, 0, n, timeout_ms, err, errlen);
}
