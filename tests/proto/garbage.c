/* ddpipe-garbage — throws malformed ddpipe messages at a daemon's socket.
 *
 *   ddpipe-garbage ENDPOINT KIND [--count N] [--socket dealer|push|pub]
 *                  [--bind] [--seed S] [--identity NAME]
 *   KIND: random | truncated | wrong-version | wrong-type | huge-n |
 *         bad-pixels | hostile | extra-frames | all
 *
 * Connects (or binds, --bind) a DEALER (default), PUSH or PUB socket and
 * sends N messages of each chosen kind, deterministic for a given --seed.
 * With --socket pub the messages are events (topic frame + map), for
 * daemons that subscribe (reporterd, ddpipe tap). Exits 0 once everything
 * was handed to ZeroMQ (linger 1 s), 1 when a send fails (no peer within
 * the 2 s send timeout), 2 on bad usage. Integration tests use it to check
 * that a daemon logs "rejected ..." and keeps running.
 */
#include "common/log.h"
#include "tests/proto/samples.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    uint64_t rng;
    bool events; /* pub: event-shaped garbage */
    void *sock;
    int sent;
} garbage_t;

static uint64_t next_rand(garbage_t *g)
{
    /* xorshift64*: deterministic across platforms for a given seed */
    g->rng ^= g->rng >> 12;
    g->rng ^= g->rng << 25;
    g->rng ^= g->rng >> 27;
    return g->rng * 2685821657736338717ull;
}

static int send_frames(garbage_t *g, zmsg_t **z)
{
    if (zmsg_send(z, g->sock) != 0) {
        zmsg_destroy(z); /* czmq keeps the message when the send fails */
        fprintf(stderr, "ddpipe-garbage: send failed (%s): is a daemon listening?\n",
                zmq_strerror(zmq_errno()));
        return -1;
    }
    g->sent++;
    return 0;
}

/* A valid sample for the i-th send: frames so far ([topic] for events),
 * its map bytes, and for BATCH its pixel frame (append after the map). */
static zmsg_t *valid_frames(garbage_t *g, int i, unsigned char **map, size_t *size,
                            zframe_t **px)
{
    zmsg_t *z = zmsg_new();
    *px = NULL;
    if (g->events) {
        ev_topic_t t = (ev_topic_t)(i % EV_TOPIC_LAST + 1);
        zmsg_addstr(z, event_topic_name(t));
        *map = sample_event_bytes(t, size);
    } else {
        *map = sample_msg_bytes((ddp_type_t)(i % DDP_TYPE_MAX + 1), size, px);
    }
    return z;
}

/* Appends the map and then the pixel frame, if any. */
static void add_map(zmsg_t *z, const void *map, size_t size, zframe_t **px)
{
    zmsg_addmem(z, map, size);
    if (*px)
        zmsg_append(z, px);
}

static int send_random(garbage_t *g, int i)
{
    (void)i;
    zmsg_t *z = zmsg_new();
    if (g->events)
        zmsg_addstr(z, "metric");
    int frames = 1 + (int)(next_rand(g) % 2);
    for (int f = 0; f < frames; f++) {
        size_t n = 1 + next_rand(g) % 256;
        unsigned char *b = malloc(n);
        for (size_t k = 0; k < n; k++)
            b[k] = (unsigned char)next_rand(g);
        zmsg_addmem(z, b, n);
        free(b);
    }
    return send_frames(g, &z);
}

static int send_truncated(garbage_t *g, int i)
{
    unsigned char *map;
    size_t size;
    zframe_t *px;
    zmsg_t *z = valid_frames(g, i, &map, &size, &px);
    add_map(z, map, size ? next_rand(g) % size : 0, &px);
    free(map);
    return send_frames(g, &z);
}

/* A valid sample with key set to the msgpack value raw[rawlen]. */
static int send_repacked(garbage_t *g, int i, const char *key, const void *raw, size_t rawlen)
{
    unsigned char *map;
    size_t size;
    zframe_t *px;
    zmsg_t *z = valid_frames(g, i, &map, &size, &px);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    if (sample_repack(map, size, 's', key, raw, rawlen, &sb) != 0) {
        /* this sample lacks the key: add it instead */
        msgpack_sbuffer_destroy(&sb);
        msgpack_sbuffer_init(&sb);
        sample_repack(map, size, 'a', key, raw, rawlen, &sb);
    }
    add_map(z, sb.data, sb.size, &px);
    msgpack_sbuffer_destroy(&sb);
    free(map);
    return send_frames(g, &z);
}

static int send_wrong_version(garbage_t *g, int i)
{
    static const unsigned char versions[][2] = {{0x01}, {0x00}, {0x7f}, {0xff}};
    return send_repacked(g, i, "v", versions[i % 4], 1);
}

static int send_wrong_type(garbage_t *g, int i)
{
    if (g->events && i % 2 == 0) { /* an unknown topic */
        zmsg_t *z = zmsg_new();
        zmsg_addstr(z, "bogus");
        zmsg_addmem(z, "\x81\xa1v\x02", 4);
        return send_frames(g, &z);
    }
    static const char *const types[] = {"\x0c", "\x00", "\xa4" "JOIN", "\xcb\x3f\xf0\0\0\0\0\0\0"};
    static const size_t lens[] = {1, 1, 5, 9};
    if (g->events) /* 'v' as a string */
        return send_repacked(g, i, "v", "\xa1" "1", 2);
    return send_repacked(g, i, "t", types[i % 4], lens[i % 4]);
}

/* BATCH/RESULT/predictions claiming far more samples than they carry. */
static int send_huge_n(garbage_t *g, int i)
{
    static const unsigned char ns[][9] = {
        {0xce, 0x00, 0x01, 0x00, 0x00},                         /* 65536 */
        {0xce, 0xff, 0xff, 0xff, 0xff},                         /* 2^32-1 */
        {0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, /* 2^64-1 */
    };
    static const size_t lens[] = {5, 5, 9};
    int which = (int)(next_rand(g) % 3);
    int base = g->events ? EV_PREDICTIONS - 1 : (i % 2 ? DDP_RESULT - 1 : DDP_BATCH - 1);
    return send_repacked(g, base, "n", ns[which], lens[which]);
}

/* BATCH with a pixel frame one byte short, none, or pixels on a JOIN. */
static int send_bad_pixels(garbage_t *g, int i)
{
    size_t size;
    zframe_t *px;
    ddp_type_t t = i % 3 == 2 ? DDP_JOIN : DDP_BATCH;
    unsigned char *map = sample_msg_bytes(t, &size, &px);
    zmsg_t *z = zmsg_new();
    if (g->events)
        zmsg_addstr(z, "predictions");
    zmsg_addmem(z, map, size);
    if (i % 3 == 0)
        zmsg_addmem(z, "short pixels", 12);
    else if (i % 3 == 2)
        zmsg_addmem(z, "pixels on a JOIN", 16);
    zframe_destroy(&px);
    free(map);
    return send_frames(g, &z);
}

/* Containers claiming 4G elements, a bin running past the frame, deep nesting. */
static int send_hostile(garbage_t *g, int i)
{
    static const char *const bombs[] = {"\x82\xa1v\x02\xa1t\xdd\xff\xff\xff\xff",
                                        "\xdf\xff\xff\xff\xff",
                                        "\x82\xa1v\x02\xa1t\xc6\xff\xff\xff\xf0"};
    static const size_t lens[] = {11, 5, 11};
    zmsg_t *z = zmsg_new();
    if (g->events)
        zmsg_addstr(z, "metric");
    if (i % 4 == 3) {
        unsigned char deep[4096];
        memset(deep, 0x91, sizeof deep);
        zmsg_addmem(z, deep, sizeof deep);
    } else {
        zmsg_addmem(z, bombs[i % 4], lens[i % 4]);
    }
    return send_frames(g, &z);
}

static int send_extra_frames(garbage_t *g, int i)
{
    unsigned char *map;
    size_t size;
    zframe_t *px;
    zmsg_t *z = valid_frames(g, i, &map, &size, &px);
    add_map(z, map, size, &px);
    zmsg_addstr(z, "extra");
    zmsg_addstr(z, "frames");
    free(map);
    return send_frames(g, &z);
}

typedef struct {
    const char *name;
    int (*send)(garbage_t *g, int i);
} kind_t;

static const kind_t kinds[] = {
    {"random", send_random},           {"truncated", send_truncated},
    {"wrong-version", send_wrong_version}, {"wrong-type", send_wrong_type},
    {"huge-n", send_huge_n},           {"bad-pixels", send_bad_pixels},
    {"hostile", send_hostile},         {"extra-frames", send_extra_frames},
};
#define NKINDS (sizeof kinds / sizeof kinds[0])

static int usage(const char *why)
{
    fprintf(stderr,
            "ddpipe-garbage: %s\n"
            "usage: ddpipe-garbage ENDPOINT KIND [--count N] [--socket dealer|push|pub]\n"
            "                      [--bind] [--seed S] [--identity NAME]\n"
            "KIND: random truncated wrong-version wrong-type huge-n bad-pixels hostile\n"
            "      extra-frames all\n",
            why);
    return 2;
}

typedef struct {
    const char *endpoint, *kind, *socket, *identity;
    long count;
    unsigned long long seed;
    bool bind;
} opts_t;

static int parse(int argc, char **argv, opts_t *o)
{
    *o = (opts_t){.socket = "dealer", .identity = "ddpipe-garbage", .count = 1, .seed = 1};
    int pos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has_val = i + 1 < argc;
        char *end;
        if (!strcmp(a, "--count") && has_val) {
            o->count = strtol(argv[++i], &end, 10);
            if (*end || o->count < 1 || o->count > 1000000)
                return usage("--count: want an integer in 1..1000000");
        } else if (!strcmp(a, "--seed") && has_val) {
            o->seed = strtoull(argv[++i], &end, 10);
            if (*end)
                return usage("--seed: want an unsigned integer");
        } else if (!strcmp(a, "--socket") && has_val) {
            o->socket = argv[++i];
        } else if (!strcmp(a, "--identity") && has_val) {
            o->identity = argv[++i];
        } else if (!strcmp(a, "--bind")) {
            o->bind = true;
        } else if (a[0] == '-' && a[1] == '-') {
            return usage("unknown option or missing value");
        } else if (pos == 0) {
            o->endpoint = a, pos++;
        } else if (pos == 1) {
            o->kind = a, pos++;
        } else {
            return usage("too many arguments");
        }
    }
    if (!o->endpoint || !o->kind)
        return usage("need ENDPOINT and KIND");
    return 0;
}

static zsock_t *open_socket(const opts_t *o)
{
    int type = !strcmp(o->socket, "dealer") ? ZMQ_DEALER
             : !strcmp(o->socket, "push")   ? ZMQ_PUSH
             : !strcmp(o->socket, "pub")    ? ZMQ_PUB
                                            : -1;
    if (type < 0) {
        usage("--socket: want dealer, push or pub");
        return NULL;
    }
    zsock_t *s = zsock_new(type);
    if (!s)
        return NULL;
    zsock_set_linger(s, 1000);
    zsock_set_sndtimeo(s, 2000);
    if (type == ZMQ_DEALER)
        zsock_set_identity(s, o->identity);
    /* Queue only on live connections: with no peer a send times out and we
     * exit 1, instead of "sending" into a pipe that linger then drops. */
    zsock_set_immediate(s, 1);
    int rc = o->bind ? zsock_bind(s, "%s", o->endpoint) : zsock_connect(s, "%s", o->endpoint);
    if (rc < 0) {
        fprintf(stderr, "ddpipe-garbage: cannot %s %s: %s\n", o->bind ? "bind" : "connect",
                o->endpoint, zmq_strerror(zmq_errno()));
        zsock_destroy(&s);
        return NULL;
    }
    if (type == ZMQ_PUB)
        zclock_sleep(300); /* let subscribers connect and subscribe first */
    return s;
}

int main(int argc, char **argv)
{
    opts_t o;
    int rc = parse(argc, argv, &o);
    if (rc)
        return rc;
    bool all = !strcmp(o.kind, "all");
    bool known = all;
    for (size_t k = 0; k < NKINDS; k++)
        known |= !strcmp(o.kind, kinds[k].name);
    if (!known)
        return usage("unknown KIND");
    log_init("ddpipe-garbage", -1, 0);
    zsys_init(); /* open_socket sets the socket's linger to 1 s */
    zsock_t *s = open_socket(&o);
    if (!s)
        return 1;
    garbage_t g = {.rng = o.seed * 0x9e3779b97f4a7c15ull + 1, .events = !strcmp(o.socket, "pub"),
                   .sock = s};
    rc = 0;
    for (size_t k = 0; k < NKINDS && rc == 0; k++) {
        if (!all && strcmp(o.kind, kinds[k].name))
            continue;
        for (long i = 0; i < o.count && rc == 0; i++)
            rc = kinds[k].send(&g, (int)i);
    }
    printf("ddpipe-garbage: sent %d messages to %s\n", g.sent, o.endpoint);
    zsock_destroy(&s); /* lingers up to 1 s to flush */
    return rc ? 1 : 0;
}
