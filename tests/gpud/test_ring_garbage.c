/* The gradient ring against garbage (issue 11: a 7-byte PUSH killed a
 * training job). Rank 1 is the real allreduce code in a thread; rank 0 is
 * played by this test over raw libzmq in its own context, as a peer process
 * would. Rank 0's single PUSH connection is FIFO, so the junk pushed before
 * each real chunk is certainly read first, mid-reduction: every junk frame
 * must be dropped and counted, and the sum must still be exact.
 *
 *   plain:   junk of every kind (7 bytes, wrong header size, wrong op, step,
 *            chunk, count, value width, value kind, body size, extra frames) before each
 *            real chunk;
 *   timeout: junk alone, pushed without end, cannot extend the ring timeout;
 *   curve:   the ring under --curve-dir (zsecurity): an authorized rank 0
 *            completes the sum, a stranger with its own certificate and a
 *            plain client get nothing in (no frame reaches the ring);
 *   gens:    membership generations (docs/ELASTIC.md): after a re-form,
 *            chunks of an older generation are dropped as stale (never
 *            summed, not counted as junk); a chunk of a newer generation
 *            that arrives before this rank re-forms is held and used after.
 */
#include "common/zsecurity.h"
#include "gpud/ring.h"

#include <czmq.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CHECK(c)                                                                                \
    do {                                                                                        \
        if (!(c)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c);              \
            exit(1);                                                                            \
        }                                                                                       \
    } while (0)

typedef struct {   /* the ring's chunk header, as ring.c sends it */
    uint64_t op;
    uint32_t step, chunk;
    uint64_t count;
    uint32_t gen, width;   /* the kind; its low byte the bytes per value: 4 for float sums */
} hdr_t;

enum { N = 1001 };

typedef struct {
    allreduce_t *ar;
    float data[N];
    int timeout_ms, rc;
    char err[512];
} rank1_t;

static float x0(size_t i) { return (float)i * 0.5f + 1.0f; }
static float x1(size_t i) { return (float)(i % 97) * -3.25f + 0.125f; }

static void *rank1_main(void *arg)
{
    rank1_t *r = arg;
    r->rc = allreduce_sum(r->ar, r->data, N, r->timeout_ms, r->err, sizeof r->err);
    return NULL;
}

static void send2(void *push, const void *a, size_t alen, const void *b, size_t blen)
{
    CHECK(zmq_send(push, a, alen, ZMQ_SNDMORE) == (int)alen);
    CHECK(zmq_send(push, b, blen, 0) == (int)blen);
}

/* Every kind of junk; returns how many messages were pushed. */
static int push_junk(void *push, uint32_t step, uint32_t chunk, uint64_t count)
{
    static float body[N];
    hdr_t good = {.op = 1, .step = step, .chunk = chunk, .count = count, .width = 4};
    int n = 0;
    CHECK(zmq_send(push, "garbage", 7, 0) == 7);                      /* the 7-byte PUSH */
    n++;
    send2(push, &good, sizeof good - 1, body, count * 4), n++;           /* short header */
    send2(push, &good, sizeof good, body, count * 4 - 4), n++;           /* short body */
    send2(push, &good, sizeof good, body, count * 4 + 4), n++;           /* long body */
    hdr_t h = good;
    h.op = 7;
    send2(push, &h, sizeof h, body, count * 4), n++;                      /* foreign op */
    h = good;
    h.step = step + 1;
    send2(push, &h, sizeof h, body, count * 4), n++;                      /* wrong step */
    h = good;
    h.chunk = chunk ^ 1;
    send2(push, &h, sizeof h, body, count * 4), n++;                      /* wrong chunk */
    h = good;
    h.count = UINT64_MAX / 4;
    send2(push, &h, sizeof h, body, count * 4), n++;                      /* huge count */
    h = good;
    h.width = 8;
    send2(push, &h, sizeof h, body, count * 4), n++;                      /* a double chunk */
    h.count = count / 2;   /* ... even with the float chunk's byte size */
    send2(push, &h, sizeof h, body, count / 2 * 8), n++;
    h = good;
    h.width = 0x204;   /* an int32 max chunk (xsum tops): the float chunk's very size */
    send2(push, &h, sizeof h, body, count * 4), n++;
    CHECK(zmq_send(push, &good, sizeof good, ZMQ_SNDMORE) == sizeof good);
    CHECK(zmq_send(push, body, count * 4, ZMQ_SNDMORE) == (int)(count * 4));
    CHECK(zmq_send(push, "x", 1, 0) == 1);                             /* extra frame */
    n++;
    CHECK(zmq_send(push, &good, sizeof good, 0) == sizeof good);     /* header alone */
    n++;
    return n;
}

/* Receives rank 1's chunk (step, chunk) into buf, checking its header. */
static void recv_chunk_gen(void *pull, uint32_t gen, uint32_t step, uint32_t chunk, float *buf,
                           size_t count)
{
    hdr_t h;
    CHECK(zmq_recv(pull, &h, sizeof h, 0) == sizeof h);
    CHECK(h.op == 1 && h.gen == gen && h.step == step && h.chunk == chunk && h.count == count &&
          h.width == 4);
    CHECK(zmq_recv(pull, buf, count * 4, 0) == (int)(count * 4));
}

static void recv_chunk(void *pull, uint32_t step, uint32_t chunk, float *buf, size_t count)
{
    recv_chunk_gen(pull, 0, step, chunk, buf, count);
}

/* Plays rank 0 of a world of 2 against the real rank 1; junk before each
 * real chunk when junk is set. Returns the junk messages pushed. */
static int play_rank0(void *ctx, rank1_t *r1, const char *r1_ep, void *pull, bool junk)
{
    void *push = zmq_socket(ctx, ZMQ_PUSH);
    CHECK(push && zmq_connect(push, r1_ep) == 0);
    size_t off = allreduce_chunk_offset(N, 2, 1);
    size_t n0 = off, n1 = N - off;
    static float got[N], send[N];
    pthread_t t;
    CHECK(pthread_create(&t, NULL, rank1_main, r1) == 0);
    int pushed = 0;
    /* step 0: rank 1 sends its chunk 1 and waits for our chunk 0 */
    recv_chunk(pull, 0, 1, got, n1);
    if (junk)
        pushed += push_junk(push, 0, 0, n0);
    for (size_t i = 0; i < n0; i++)
        send[i] = x0(i);
    hdr_t h = {.op = 1, .step = 0, .chunk = 0, .count = n0, .width = 4};
    send2(push, &h, sizeof h, send, n0 * 4);
    /* step 1: rank 1 passes on the finished chunk 0; we send the finished 1 */
    recv_chunk(pull, 1, 0, got, n0);
    for (size_t i = 0; i < n0; i++)
        CHECK(got[i] == x0(i) + x1(i));
    if (junk)
        pushed += push_junk(push, 1, 1, n1);
    for (size_t i = 0; i < n1; i++)
        send[i] = x1(off + i) + x0(off + i);
    h = (hdr_t){.op = 1, .step = 1, .chunk = 1, .count = n1, .width = 4};
    send2(push, &h, sizeof h, send, n1 * 4);
    CHECK(pthread_join(t, NULL) == 0);
    zmq_close(push);
    return pushed;
}

static void *bind_pull(void *ctx, char *ep, size_t len)
{
    void *pull = zmq_socket(ctx, ZMQ_PULL);
    CHECK(pull && zmq_bind(pull, "tcp://127.0.0.1:*") == 0);
    CHECK(zmq_getsockopt(pull, ZMQ_LAST_ENDPOINT, ep, &len) == 0);
    int t = 20000;   /* a generous bound: a broken ring fails the test, never hangs it */
    CHECK(zmq_setsockopt(pull, ZMQ_RCVTIMEO, &t, sizeof t) == 0);
    return pull;
}

static rank1_t *rank1_new(char *ep, size_t eplen, const char *rank0_ep, int timeout_ms)
{
    rank1_t *r = calloc(1, sizeof *r);
    CHECK(r);
    r->ar = allreduce_bind("tcp://127.0.0.1:0", ep, eplen, r->err, sizeof r->err);
    if (!r->ar)
        fprintf(stderr, "%s\n", r->err);
    CHECK(r->ar);
    CHECK(allreduce_connect(r->ar, 1, 2, rank0_ep, r->err, sizeof r->err) == 0);
    for (size_t i = 0; i < N; i++)
        r->data[i] = x1(i);
    r->timeout_ms = timeout_ms;
    return r;
}

static void check_sum(const rank1_t *r)
{
    if (r->rc != 0)
        fprintf(stderr, "rank 1: %s\n", r->err);
    CHECK(r->rc == 0);
    for (size_t i = 0; i < N; i++)
        CHECK(r->data[i] == x0(i) + x1(i));
}

static void test_plain(void *ctx)
{
    char r0_ep[256], r1_ep[256];
    void *pull = bind_pull(ctx, r0_ep, sizeof r0_ep);
    rank1_t *r = rank1_new(r1_ep, sizeof r1_ep, r0_ep, 20000);
    int pushed = play_rank0(ctx, r, r1_ep, pull, true);
    check_sum(r);
    CHECK(pushed == 26);   /* 13 kinds, before each of the 2 chunks */
    CHECK(allreduce_dropped(r->ar) == (uint64_t)pushed);
    allreduce_destroy(&r->ar);
    free(r);
    zmq_close(pull);
    printf("plain: %d junk messages dropped mid-reduction, sum exact\n", pushed);
}

static atomic_int s_done;

static void *junk_forever(void *arg)
{
    void *push = arg;
    /* bounded: 30 s of junk at most, far beyond the 300 ms timeout */
    for (int i = 0; i < 3000 && !atomic_load(&s_done); i++) {
        push_junk(push, 0, 0, 500);
        usleep(10000);
    }
    return (void *)(intptr_t)!atomic_load(&s_done);
}

static void test_timeout(void *ctx)
{
    char r0_ep[256], r1_ep[256];
    void *pull = bind_pull(ctx, r0_ep, sizeof r0_ep);
    rank1_t *r = rank1_new(r1_ep, sizeof r1_ep, r0_ep, 300);
    void *push = zmq_socket(ctx, ZMQ_PUSH);
    CHECK(push && zmq_connect(push, r1_ep) == 0);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, junk_forever, push) == 0);
    rank1_main(r);
    atomic_store(&s_done, 1);
    void *ran_out = NULL;
    CHECK(pthread_join(t, &ran_out) == 0);
    CHECK(ran_out == NULL);   /* the sum gave up while junk was still coming */
    CHECK(r->rc == -1 && strstr(r->err, "sent nothing valid"));
    CHECK(allreduce_failure(r->ar) == ALLREDUCE_TIMEOUT && allreduce_suspect(r->ar) == 0);
    CHECK(allreduce_dropped(r->ar) > 0);
    printf("timeout: junk did not extend the timeout (%llu dropped): %s\n",
           (unsigned long long)allreduce_dropped(r->ar), r->err);
    allreduce_destroy(&r->ar);
    free(r);
    zmq_close(push);
    zmq_close(pull);
}

static void make_certs(const char *dir, const char *sub)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, sub);
    CHECK(mkdir(path, 0700) == 0);
    zcert_t *server = zcert_new(), *client = zcert_new();
    CHECK(server && client);
    snprintf(path, sizeof path, "%s/%s/server.cert", dir, sub);
    CHECK(zcert_save(server, path) == 0);
    snprintf(path, sizeof path, "%s/%s/client.cert", dir, sub);
    CHECK(zcert_save(client, path) == 0);
    snprintf(path, sizeof path, "%s/%s/authorized", dir, sub);
    CHECK(mkdir(path, 0700) == 0);
    snprintf(path, sizeof path, "%s/%s/authorized/client.cert", dir, sub);
    CHECK(zcert_save_public(client, path) == 0);
    zcert_destroy(&server);
    zcert_destroy(&client);
}

/* Loads keys of a zcert file: what a peer process with those files has. */
static void key(const char *file, const char *which, char out[41])
{
    zconfig_t *c = zconfig_load(file);
    CHECK(c);
    const char *v = zconfig_resolve(c, which, NULL);
    CHECK(v && strlen(v) == 40);
    memcpy(out, v, 41);
    zconfig_destroy(&c);
}

static void *curve_push(void *ctx, const char *dir, const char *sub, const char *server_dir,
                        const char *ep, int immediate)
{
    char f[512], spub[41], pub[41], sec[41];
    snprintf(f, sizeof f, "%s/%s/server.cert", dir, server_dir);
    key(f, "/curve/public-key", spub);
    snprintf(f, sizeof f, "%s/%s/client.cert_secret", dir, sub);
    key(f, "/curve/public-key", pub);
    key(f, "/curve/secret-key", sec);
    void *s = zmq_socket(ctx, ZMQ_PUSH);
    CHECK(s);
    CHECK(zmq_setsockopt(s, ZMQ_CURVE_SERVERKEY, spub, 40) == 0);
    CHECK(zmq_setsockopt(s, ZMQ_CURVE_PUBLICKEY, pub, 40) == 0);
    CHECK(zmq_setsockopt(s, ZMQ_CURVE_SECRETKEY, sec, 40) == 0);
    CHECK(zmq_setsockopt(s, ZMQ_IMMEDIATE, &immediate, sizeof immediate) == 0);
    CHECK(zmq_connect(s, ep) == 0);
    return s;
}

static void test_curve(void *ctx, const char *dir)
{
    make_certs(dir, "keys");
    make_certs(dir, "other");
    char kd[512];
    snprintf(kd, sizeof kd, "%s/keys", dir);
    CHECK(zs_security_init(kd, false) == 0);
    /* rank 0's PULL, a CURVE server with the same keys (rank 1 connects as
     * a CURVE client); no zauth in this context: the test trusts rank 1 */
    char r0_ep[256], r1_ep[256], f[512], sec[41];
    void *pull = zmq_socket(ctx, ZMQ_PULL);
    int one = 1, t = 20000;
    snprintf(f, sizeof f, "%s/keys/server.cert_secret", dir);
    key(f, "/curve/secret-key", sec);
    CHECK(pull && zmq_setsockopt(pull, ZMQ_CURVE_SERVER, &one, sizeof one) == 0);
    CHECK(zmq_setsockopt(pull, ZMQ_CURVE_SECRETKEY, sec, 40) == 0);
    CHECK(zmq_setsockopt(pull, ZMQ_RCVTIMEO, &t, sizeof t) == 0);
    CHECK(zmq_bind(pull, "tcp://127.0.0.1:*") == 0);
    size_t len = sizeof r0_ep;
    CHECK(zmq_getsockopt(pull, ZMQ_LAST_ENDPOINT, r0_ep, &len) == 0);
    rank1_t *r = rank1_new(r1_ep, sizeof r1_ep, r0_ep, 20000);
    /* ZMQ_IMMEDIATE: a message queues only on a connection whose handshake
     * succeeded, so a send that times out means nothing could go in */
    int imm = 1, short_to = 1000, long_to = 20000;
    void *stranger = curve_push(ctx, dir, "other", "keys", r1_ep, imm);   /* cert not let in */
    void *plain = zmq_socket(ctx, ZMQ_PUSH);                               /* no CURVE at all */
    CHECK(plain && zmq_setsockopt(plain, ZMQ_IMMEDIATE, &imm, sizeof imm) == 0);
    CHECK(zmq_connect(plain, r1_ep) == 0);
    CHECK(zmq_setsockopt(stranger, ZMQ_SNDTIMEO, &short_to, sizeof short_to) == 0);
    CHECK(zmq_setsockopt(plain, ZMQ_SNDTIMEO, &short_to, sizeof short_to) == 0);
    CHECK(zmq_send(stranger, "garbage", 7, 0) == -1 && zmq_errno() == EAGAIN);
    CHECK(zmq_send(plain, "garbage", 7, 0) == -1 && zmq_errno() == EAGAIN);
    /* the authorized rank 0 gets in: its one junk frame (same connection,
     * FIFO, before the real chunk) is dropped, then the real sum */
    size_t off = allreduce_chunk_offset(N, 2, 1), n0 = off, n1 = N - off;
    static float got[N], send[N];
    void *push = curve_push(ctx, dir, "keys", "keys", r1_ep, imm);
    CHECK(zmq_setsockopt(push, ZMQ_SNDTIMEO, &long_to, sizeof long_to) == 0);
    pthread_t th;
    CHECK(pthread_create(&th, NULL, rank1_main, r) == 0);
    recv_chunk(pull, 0, 1, got, n1);
    CHECK(zmq_send(push, "garbage", 7, 0) == 7);
    for (size_t i = 0; i < n0; i++)
        send[i] = x0(i);
    hdr_t h = {.op = 1, .step = 0, .chunk = 0, .count = n0, .width = 4};
    send2(push, &h, sizeof h, send, n0 * 4);
    recv_chunk(pull, 1, 0, got, n0);
    for (size_t i = 0; i < n1; i++)
        send[i] = x1(off + i) + x0(off + i);
    h = (hdr_t){.op = 1, .step = 1, .chunk = 1, .count = n1, .width = 4};
    send2(push, &h, sizeof h, send, n1 * 4);
    CHECK(pthread_join(th, NULL) == 0);
    zmq_close(push);
    check_sum(r);
    CHECK(allreduce_dropped(r->ar) == 1);   /* the authorized junk only */
    printf("curve: authorized rank 0 summed; stranger cert and plain client got nothing in\n");
    allreduce_destroy(&r->ar);
    free(r);
    zmq_close(stranger);
    zmq_close(plain);
    zmq_close(pull);
    zs_security_shutdown();
}

/* Rank 0's two real chunks of generation gen (op 1), each preceded by
 * `stale` copies from generation gen - 1; before step 1, one chunk of
 * generation gen + 1 (step 0), which rank 1 must hold for later. */
static void play_gen(rank1_t *r1, void *push, void *pull, uint32_t gen, int stale, bool early,
                     bool skip_step0)
{
    size_t off = allreduce_chunk_offset(N, 2, 1), n0 = off, n1 = N - off;
    static float got[N], send[N];
    for (size_t i = 0; i < N; i++)
        r1->data[i] = x1(i);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, rank1_main, r1) == 0);
    recv_chunk_gen(pull, gen, 0, 1, got, n1);
    for (size_t i = 0; i < n0; i++)
        send[i] = x0(i);
    hdr_t h = {.op = 1, .step = 0, .chunk = 0, .count = n0, .gen = gen - 1, .width = 4};
    for (int k = 0; k < stale; k++) {   /* the right chunk, of the abandoned generation */
        static float poison[N];
        for (size_t i = 0; i < n0; i++)
            poison[i] = 1e30f;
        send2(push, &h, sizeof h, poison, n0 * 4);
    }
    h.gen = gen;
    if (!skip_step0)   /* else rank 1 held it from before its re-form */
        send2(push, &h, sizeof h, send, n0 * 4);
    recv_chunk_gen(pull, gen, 1, 0, got, n0);
    for (size_t i = 0; i < n0; i++)
        CHECK(got[i] == x0(i) + x1(i));
    if (early) {   /* the next generation's first chunk, sent ahead */
        hdr_t e = {.op = 1, .step = 0, .chunk = 0, .count = n0, .gen = gen + 1, .width = 4};
        send2(push, &e, sizeof e, send, n0 * 4);
    }
    for (size_t i = 0; i < n1; i++)
        send[i] = x1(off + i) + x0(off + i);
    h = (hdr_t){.op = 1, .step = 1, .chunk = 1, .count = n1, .gen = gen, .width = 4};
    send2(push, &h, sizeof h, send, n1 * 4);
    CHECK(pthread_join(t, NULL) == 0);
    check_sum(r1);
}

static void test_generations(void *ctx)
{
    char r0_ep[256], r1_ep[256], err[512];
    void *pull = bind_pull(ctx, r0_ep, sizeof r0_ep);
    rank1_t *r = rank1_new(r1_ep, sizeof r1_ep, r0_ep, 20000);
    void *push = zmq_socket(ctx, ZMQ_PUSH);
    CHECK(push && zmq_connect(push, r1_ep) == 0);
    CHECK(allreduce_gen(r->ar) == 0);
    CHECK(allreduce_reform(r->ar, 0, 1, 2, r0_ep, err, sizeof err) == -1);   /* not newer */
    CHECK(allreduce_reform(r->ar, 2, 1, 2, r0_ep, err, sizeof err) == 0);
    CHECK(allreduce_gen(r->ar) == 2);
    play_gen(r, push, pull, 2, 5, true, false);
    CHECK(allreduce_stale(r->ar) == 5 && allreduce_dropped(r->ar) == 0);
    /* a chunk of generation 1 still queued is drained by the next re-form
     * (the pause lets it arrive first). Should it arrive later, the sum of
     * generation 3 reads it first (one FIFO connection) and drops it as
     * stale: the same count either way (checked with the pause removed) */
    hdr_t h = {.op = 1, .step = 0, .chunk = 0, .count = 7, .gen = 1, .width = 4};
    static float body[N];
    send2(push, &h, sizeof h, body, 7 * 4);
    usleep(100000);
    CHECK(allreduce_reform(r->ar, 3, 1, 2, r0_ep, err, sizeof err) == 0);
    play_gen(r, push, pull, 3, 2, false, true);   /* step 0's chunk was held */
    CHECK(allreduce_stale(r->ar) == 8 && allreduce_dropped(r->ar) == 0);
    printf("gens: %llu stale chunks dropped, a chunk of the next generation held and summed\n",
           (unsigned long long)allreduce_stale(r->ar));
    allreduce_destroy(&r->ar);
    free(r);
    zmq_close(push);
    zmq_close(pull);
}

int main(void)
{
    zsys_init();
    void *ctx = zmq_ctx_new();   /* rank 0 and strangers: another process's context */
    CHECK(ctx);
    char dir[] = "/tmp/ddp-ring-garbage-XXXXXX";
    CHECK(mkdtemp(dir));
    test_plain(ctx);
    test_timeout(ctx);
    test_generations(ctx);
    test_curve(ctx, dir);   /* last: zsecurity stays set up in this process */
    zmq_ctx_term(ctx);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
    printf("ring garbage: OK\n");
    return 0;
}
