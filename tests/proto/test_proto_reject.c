/* Every validation rule rejects, with a specific reason: a table of
 * mutations applied to valid sample messages (drop a key, replace a value,
 * add a key), then raw-frame attacks (truncation at every byte, trailing
 * bytes, hostile container sizes, deep nesting, wrong frame counts). */
#include "common/log.h"
#include "tests/proto/check.h"
#include "tests/proto/samples.h"
#include "proto/codec.h"

#include <stdlib.h>

typedef enum { OP_DROP, OP_SET, OP_ADD } op_t;

typedef struct {
    ddp_type_t type;
    op_t op;
    const char *key;
    const char *raw;  /* msgpack bytes of the new value (OP_SET/OP_ADD) */
    size_t rawlen;
    size_t fill_str;  /* instead of raw: a str of this many 'x' */
    size_t fill_bin;  /* instead of raw: a bin of this many zero bytes */
    const char *want; /* substring of the reason; NULL: must be accepted */
} mut_t;

#define RAW(s) s, sizeof(s) - 1, 0, 0
#define STR(n) NULL, 0, (n), 0
#define BIN(n) NULL, 0, 0, (n)

static const mut_t table[] = {
    /* version and type */
    {DDP_JOIN, OP_SET, "v", RAW("\x01"), "message: protocol version 1, want 2"},
    {DDP_JOIN, OP_SET, "v", RAW("\xa1" "1"), "'v' is a msgpack str, want uint"},
    {DDP_JOIN, OP_DROP, "v", RAW(""), "message: missing key 'v'"},
    {DDP_JOIN, OP_SET, "t", RAW("\x14"), "'t' is 20, want 1..19"},
    {DDP_JOIN, OP_SET, "t", RAW("\x00"), "'t' is 0, want 1..19"},
    {DDP_JOIN, OP_SET, "t", RAW("\xff"), "'t' is -1, want 1..19"},
    {DDP_JOIN, OP_SET, "t", RAW("\xcb\x3f\xf0\0\0\0\0\0\0"), "'t' is a msgpack float64, want uint"},
    {DDP_JOIN, OP_DROP, "t", RAW(""), "message: missing key 't'"},
    /* missing keys and nil (= absent) */
    {DDP_RESULT, OP_DROP, "loss", RAW(""), "RESULT: missing key 'loss'"},
    {DDP_BATCH, OP_DROP, "ids", RAW(""), "BATCH: missing key 'ids'"},
    {DDP_JOIN, OP_SET, "name", RAW("\xc0"), "JOIN: missing key 'name'"},
    {DDP_PLAN, OP_DROP, "class_names", RAW(""), "PLAN: missing key 'class_names'"},
    {DDP_CREDIT, OP_DROP, "acks", RAW(""), "CREDIT: missing key 'acks'"},
    {DDP_STOP, OP_DROP, "reason", RAW(""), "STOP: missing key 'reason'"},
    /* wrong msgpack types */
    {DDP_JOIN, OP_SET, "pid", RAW("\xa2" "42"), "JOIN: 'pid' is a msgpack str, want uint"},
    /* several loaderds: a shard only on a loader JOIN, shard < shards <= 256 */
    {DDP_JOIN, OP_ADD, "shards", RAW("\x03"), "JOIN: 'shards' 3 on a gpud JOIN: only a loader has a shard"},
    {DDP_JOIN, OP_ADD, "shard", RAW("\x05"), "JOIN: 'shard' 5 of 'shards' 0: want shard < shards <= 256"},
    {DDP_JOIN, OP_ADD, "shards", RAW("\xcd\x01\x01"), "'shards' 257: want shard < shards <= 256"},
    {DDP_JOIN, OP_ADD, "shard", RAW("\xa1" "1"), "JOIN: 'shard' is a msgpack str, want uint"},
    {DDP_BATCH, OP_ADD, "pos", BIN(8), "BATCH: 'pos' bin is 8 bytes, want n*4 = 12"},
    {DDP_BATCH, OP_ADD, "pos", BIN(12), "BATCH: 'pos' is not strictly increasing at 1 (0 after 0)"},
    {DDP_BATCH, OP_SET, "n", RAW("\xca\x40\x40\0\0"), "BATCH: 'n' is a msgpack float32, want uint"},
    {DDP_RESULT, OP_SET, "ids", RAW("\xa3" "abc"), "RESULT: 'ids' is a msgpack str, want bin"},
    {DDP_PLAN, OP_SET, "class_names", RAW("\xc4\x01x"), "'class_names' is a msgpack bin, want array of str"},
    {DDP_PLAN, OP_SET, "class_names", RAW("\x93\xa1" "a\x01\xa1" "c"), "PLAN: 'class_names[1]' is a msgpack uint, want str"},
    {DDP_CREDIT, OP_SET, "acks", RAW("\x90"), "CREDIT: 'acks' is a msgpack array, want bin"},
    {DDP_JOIN, OP_SET, "name", RAW("\xc4\x01x"), "JOIN: 'name' is a msgpack bin, want str"},
    {DDP_RESULT, OP_SET, "compute_s", RAW("\xc3"), "RESULT: 'compute_s' is a msgpack bool, want float"},
    {DDP_END, OP_SET, "epoch", RAW("\xff"), "END: 'epoch' is -1, want 0..4294967295"},
    {DDP_END, OP_SET, "epoch", RAW("\xcf\0\0\0\1\0\0\0\0"), "END: 'epoch' is 4294967296, want 0..4294967295"},
    {DDP_WELCOME, OP_SET, "rank", RAW("\xce\x80\0\0\0"), "WELCOME: 'rank' is 2147483648"},
    /* bin sizes */
    {DDP_RESULT, OP_SET, "topk", BIN(36), "RESULT: 'topk' bin is 36 bytes, want n*k*4 = 40"},
    {DDP_RESULT, OP_SET, "loss", BIN(12), "RESULT: 'loss' bin is 12 bytes, want n*4 = 8"},
    {DDP_BATCH, OP_SET, "ids", BIN(16), "BATCH: 'ids' bin is 16 bytes, want n*8 = 24"},
    {DDP_BATCH, OP_SET, "labels", BIN(16), "BATCH: 'labels' bin is 16 bytes, want n*4 = 12"},
    {DDP_CREDIT, OP_SET, "acks", BIN(12), "CREDIT: 'acks' bin is 12 bytes, want a multiple of 8"},
    {DDP_CREDIT, OP_SET, "acks", BIN(8 * 1025), "CREDIT: 1025 acks, want at most 1024"},
    {DDP_CREDIT, OP_SET, "acks", BIN(0), NULL},
    /* ranges */
    {DDP_RESULT, OP_SET, "k", RAW("\x00"), "RESULT: 'k' is 0, want 1..5"},
    {DDP_RESULT, OP_SET, "k", RAW("\x06"), "RESULT: 'k' is 6, want 1..5"},
    {DDP_RESULT, OP_SET, "n", RAW("\x00"), "RESULT: 'n' is 0, want 1..65536"},
    {DDP_RESULT, OP_SET, "rank", RAW("\xff"), "RESULT: 'rank' is -1, want >= 0"},
    {DDP_RESULT, OP_SET, "compute_s", RAW("\xcb\x7f\xf8\0\0\0\0\0\0"), "RESULT: 'compute_s' is nan"},
    {DDP_RESULT, OP_SET, "topk", RAW("\xc4\x28" "\xff\xff\xff\xff" "123456789012345678901234567890123456"),
     "RESULT: 'topk[0]' is -1, want 0..99999"},
    {DDP_BATCH, OP_SET, "n", RAW("\x00"), "BATCH: 'ids' bin is 24 bytes, want n*8 = 0"},
    {DDP_BATCH, OP_SET, "global_count", RAW("\x02"), "BATCH: 'global_count' is 2, less than this shard's n = 3"},
    {DDP_BATCH, OP_SET, "steps_per_epoch", RAW("\x01"), "BATCH: 'steps_per_epoch' 1 with step 34359738368 of epoch 3: the step is not in its epoch"},
    {DDP_BATCH, OP_DROP, "steps_per_epoch", RAW(""), NULL},
    {DDP_EPOCH, OP_SET, "decision", RAW("\x02"), "EPOCH: 'decision' is 2, want 0 (continue) or 1 (stop)"},
    /* trust keys (PROTOCOL.md "Trust"): optional, but well-formed when present */
    {DDP_RESULT, OP_SET, "token", BIN(15), "RESULT: 'token' bin is 15 bytes, want token = 16"},
    {DDP_RESULT, OP_DROP, "token", RAW(""), "RESULT: 'token' and a non-zero 'session' come together"},
    {DDP_CREDIT, OP_SET, "session", RAW("\x00"), "CREDIT: 'token' and a non-zero 'session' come together"},
    {DDP_HEARTBEAT, OP_SET, "session", RAW("\xa1" "1"), "HEARTBEAT: 'session' is a msgpack str, want uint"},
    {DDP_FAILED, OP_SET, "job", STR(64), "FAILED: 'job'"},
    {DDP_WELCOME, OP_SET, "secret", BIN(31), "WELCOME: 'secret' bin is 31 bytes, want secret = 32"},
    {DDP_WELCOME, OP_DROP, "secret", RAW(""), NULL},
    {DDP_RESULT, OP_DROP, "job", RAW(""), NULL},
    {DDP_ISSUED, OP_SET, "rank", RAW("\xff"), "ISSUED: 'rank' is -1, want >= 0"},
    {DDP_ISSUED, OP_SET, "ids", BIN(16), "ISSUED: 'ids' bin is 16 bytes, want n*8 = 24"},
    {DDP_ISSUED, OP_SET, "labels", RAW("\xc4\x0c" "\xfe\xff\xff\xff" "12345678"),
     "ISSUED: 'labels[0]' is -2"},
    {DDP_ISSUED, OP_SET, "phase", RAW("\x02"), "ISSUED: 'phase' is 2"},
    {DDP_REISSUE, OP_DROP, "seq", RAW(""), "REISSUE: missing key 'seq'"},
    {DDP_REISSUE, OP_SET, "rank", RAW("\xff"), "REISSUE: 'rank' is -1, want >= 0"},
    {DDP_CREDIT, OP_SET, "rank", RAW("\xfe"), "CREDIT: 'rank' is -2"},
    {DDP_BATCH, OP_SET, "n", RAW("\xce\0\1\0\1"), "BATCH: 'n' is 65537, want 0..65536"},
    {DDP_BATCH, OP_SET, "c", RAW("\x00"), "BATCH: 'c' is 0, want 1..4"},
    {DDP_BATCH, OP_SET, "c", RAW("\x05"), "BATCH: 'c' is 5, want 1..4"},
    {DDP_BATCH, OP_SET, "h", RAW("\x00"), "BATCH: 'h' x 'w' is 0 x 3, want both >= 1"},
    {DDP_BATCH, OP_SET, "w", RAW("\xce\0\1\0\0"), "BATCH: 'w' is 65536, want 0..65535"},
    {DDP_BATCH, OP_SET, "phase", RAW("\x02"), "BATCH: 'phase' is 2, want 0 (eval) or 1 (train)"},
    {DDP_BATCH, OP_SET, "labels", RAW("\xc4\x0c\xfe\xff\xff\xff\0\0\0\0\0\0\0\0"),
     "BATCH: 'labels[0]' is -2, want -1..99999"},
    {DDP_BATCH, OP_SET, "ids", RAW("\xc4\x18\0\0\0\0\0\1\0\0" "1234567812345678"),
     "BATCH: 'ids[0]' is 1099511627776, want < 2^40"},
    {DDP_BATCH, OP_SET, "h", RAW("\x03"), "BATCH: pixel frame is 18 bytes, want n*c*h*w = 27"},
    {DDP_END, OP_SET, "phase", RAW("\x07"), "END: 'phase' is 7"},
    {DDP_JOIN, OP_SET, "role", RAW("\x00"), "JOIN: 'role' is 0, want 1 (gpud), 2 (loader) or 3 (reporter)"},
    {DDP_JOIN, OP_SET, "role", RAW("\x04"), "JOIN: 'role' is 4"},
    {DDP_JOIN, OP_SET, "want_rank", RAW("\xfe"), "JOIN: 'want_rank' is -2"},
    {DDP_WELCOME, OP_SET, "rank", RAW("\x03"), "WELCOME: 'rank' is 3, want 0..world-1 = 0..2"},
    {DDP_WELCOME, OP_SET, "world", RAW("\x00"), "WELCOME: 'world' is 0, want >= 1"},
    {DDP_PLAN, OP_SET, "paths", RAW("\x92\xa1" "a\xa1" "b"), "PLAN: 'paths' has 2 entries, want 3"},
    {DDP_PLAN, OP_SET, "class_names", RAW("\x90"), "PLAN: 0 class names, want 1..100000"},
    /* --classes: the dataset's classes, increasing ids below num_classes (3) */
    {DDP_PLAN, OP_ADD, "present", RAW("\xc4\x08\0\0\0\0\2\0\0\0"), NULL},
    {DDP_PLAN, OP_ADD, "present", RAW("\xc4\x08\2\0\0\0\1\0\0\0"),
     "PLAN: 'present[1]' is 1: want strictly increasing class ids below 3"},
    {DDP_PLAN, OP_ADD, "present", RAW("\xc4\x04\3\0\0\0"),
     "PLAN: 'present[0]' is 3: want strictly increasing"},
    {DDP_PLAN, OP_ADD, "present", RAW("\xc4\x03\0\0\0"),
     "'present' must be a bin of n*4 bytes, 1 <= n <= 3"},
    {DDP_PLAN, OP_ADD, "present", RAW("\xc4\x10\0\0\0\0\1\0\0\0\2\0\0\0\3\0\0\0"),
     "'present' must be a bin of n*4 bytes, 1 <= n <= 3"},
    {DDP_PLAN, OP_SET, "n", RAW("\xcf\0\0\1\0\0\0\0\1"), "PLAN: 'n' is 1099511627777, want 0..1099511627776"},
    {DDP_FAILED, OP_SET, "id", RAW("\xcf\0\0\1\0\0\0\0\0"), "FAILED: 'id' is 1099511627776, want < 2^40"},
    {DDP_HEARTBEAT, OP_SET, "worker", RAW("\xa0"), "HEARTBEAT: 'worker' is empty"},
    /* string lengths: at the limit accepted, one over rejected, NULs rejected */
    {DDP_JOIN, OP_SET, "name", STR(63), NULL},
    {DDP_JOIN, OP_SET, "name", STR(64), "JOIN: 'name' is 64 bytes, want at most 63"},
    {DDP_JOIN, OP_SET, "backend", STR(16), "JOIN: 'backend' is 16 bytes, want at most 15"},
    {DDP_FAILED, OP_SET, "path", STR(4095), NULL},
    {DDP_FAILED, OP_SET, "path", STR(4096), "FAILED: 'path' is 4096 bytes, want at most 4095"},
    {DDP_STOP, OP_SET, "reason", STR(5000), "STOP: 'reason' is 5000 bytes, want at most 4095"},
    {DDP_PLAN, OP_SET, "class_names", RAW("\x91\xa3" "a\0b"), "PLAN: 'class_names[0]' contains a NUL byte"},
    {DDP_JOIN, OP_SET, "host", RAW("\xa3" "a\0b"), "JOIN: 'host' contains a NUL byte"},
    /* elastic training (docs/ELASTIC.md) */
    {DDP_MEMBERS, OP_DROP, "names", RAW(""), "MEMBERS: missing key 'names'"},
    {DDP_MEMBERS, OP_SET, "names", RAW("\x91\xa1" "a"), "MEMBERS: 'names' has 1 entries, want 2"},
    {DDP_MEMBERS, OP_SET, "names", RAW("\x92\xa1" "a\xa0"), "MEMBERS: 'names[1]' is empty"},
    {DDP_MEMBERS, OP_SET, "names", RAW("\x92\xa1" "a\x01"), "MEMBERS: 'names[1]' is a msgpack uint, want str"},
    {DDP_MEMBERS, OP_SET, "world", RAW("\x00"), "MEMBERS: 'world' is 0, want 1..4096"},
    {DDP_MEMBERS, OP_SET, "world", RAW("\xcd\x10\x01"), "MEMBERS: 'world' is 4097, want 1..4096"},
    {DDP_MEMBERS, OP_SET, "rank", RAW("\x02"), "MEMBERS: 'rank' is 2, want -1 (loaderd) or 0..world-1 = 0..1"},
    {DDP_MEMBERS, OP_SET, "rank", RAW("\xfe"), "MEMBERS: 'rank' is -2"},
    {DDP_MEMBERS, OP_SET, "rank", RAW("\xff"), "MEMBERS: a token for loaderd (rank -1)"},
    {DDP_MEMBERS, OP_DROP, "token", RAW(""), "MEMBERS: 'token' and a non-zero 'session' come together"},
    {DDP_MEMBERS, OP_SET, "token", BIN(17), "MEMBERS: 'token' bin is 17 bytes, want token = 16"},
    {DDP_MEMBERS, OP_SET, "gen", RAW("\x00"), "MEMBERS: 'gen' is 0, want >= 1"},
    {DDP_MEMBERS, OP_DROP, "step", RAW(""), "MEMBERS: missing key 'step'"},
    {DDP_MEMBERS, OP_SET, "reason", STR(1024), "MEMBERS: 'reason' is 1024 bytes, want at most 1023"},
    {DDP_STEP, OP_DROP, "gen", RAW(""), "STEP: missing key 'gen'"},
    {DDP_STEP, OP_SET, "status", RAW("\x02"), "STEP: 'status' is 2, want 0 (summed) or 1 (ring failed)"},
    {DDP_STEP, OP_SET, "status", RAW("\x00"), "STEP: 'suspect' is 1 with status 0, want -1"},
    {DDP_STEP, OP_SET, "suspect", RAW("\x02"), "STEP: 'suspect' is 2, want -1 or another rank"},
    {DDP_STEP, OP_SET, "suspect", RAW("\xfe"), "STEP: 'suspect' is -2"},
    {DDP_STEP, OP_SET, "suspect", RAW("\xff"), NULL},
    {DDP_STEP, OP_SET, "rank", RAW("\xff"), "STEP: 'rank' is -1, want >= 0"},
    {DDP_STEP, OP_SET, "token", BIN(15), "STEP: 'token' bin is 15 bytes, want token = 16"},
    {DDP_COMMIT, OP_DROP, "step", RAW(""), "COMMIT: missing key 'step'"},
    {DDP_COMMIT, OP_SET, "gen", RAW("\xa1" "1"), "COMMIT: 'gen' is a msgpack str, want uint"},
    {DDP_COMMIT, OP_SET, "gen", RAW("\x00"), NULL},
    {DDP_COMMIT, OP_SET, "snapshot", RAW("\x02"), "COMMIT: 'snapshot' is 2, want 0 or 1"},
    {DDP_MEMBERS, OP_SET, "paused", RAW("\x02"), "MEMBERS: 'paused' is 2, want 0 or 1"},
    {DDP_WELCOME, OP_ADD, "joining", RAW("\x01"), "WELCOME: 'rank' is 1, want -1 for a joiner"},
    {DDP_WELCOME, OP_ADD, "joining", RAW("\x02"), "WELCOME: 'joining' is 2"},
    {DDP_STATE, OP_DROP, "step", RAW(""), "STATE: missing key 'step'"},
    /* NCCL in gpud (docs/CUDA.md): the offer, the generation's flag, the id */
    {DDP_JOIN, OP_ADD, "nccl", RAW("\x01"), NULL},
    {DDP_JOIN, OP_ADD, "nccl", RAW("\x02"), "JOIN: 'nccl' is 2 on a gpud JOIN"},
    {DDP_JOIN, OP_ADD, "nccl", RAW("\xa1" "1"), "JOIN: 'nccl' is a msgpack str, want uint"},
    {DDP_WELCOME, OP_ADD, "nccl", RAW("\x01"), NULL},
    {DDP_WELCOME, OP_ADD, "nccl", RAW("\x02"), "WELCOME: 'nccl' is 2"},
    {DDP_MEMBERS, OP_ADD, "nccl", RAW("\x01"), NULL},
    {DDP_MEMBERS, OP_ADD, "nccl", RAW("\x02"), "MEMBERS: 'nccl' is 2, want 0 or 1"},
    {DDP_MEMBERS, OP_ADD, "nccl", RAW("\xcd\x01\x00"), "MEMBERS: 'nccl' is 256"},
    {DDP_NCCLID, OP_DROP, "id", RAW(""), "NCCLID: missing key 'id'"},
    {DDP_NCCLID, OP_SET, "id", BIN(127), "NCCLID: 'id' bin is 127 bytes, want id = 128"},
    {DDP_NCCLID, OP_SET, "id", BIN(129), "NCCLID: 'id' bin is 129 bytes, want id = 128"},
    {DDP_NCCLID, OP_SET, "id", BIN(128), "NCCLID: 'id' is all zeros"},
    {DDP_NCCLID, OP_SET, "id", STR(128), "NCCLID: 'id' is a msgpack str, want bin"},
    {DDP_NCCLID, OP_SET, "world", RAW("\x00"), "NCCLID: 'world' is 0, want 1..4096"},
    {DDP_NCCLID, OP_SET, "world", RAW("\xcd\x10\x01"), "NCCLID: 'world' is 4097, want 1..4096"},
    {DDP_NCCLID, OP_SET, "world", RAW("\xff"), "NCCLID: 'world' is -1"},
    {DDP_NCCLID, OP_DROP, "gen", RAW(""), "NCCLID: missing key 'gen'"},
    {DDP_NCCLID, OP_SET, "gen", RAW("\xcf\x00\x00\x00\x01\x00\x00\x00\x00"), "NCCLID: 'gen'"},
    {DDP_NCCLID, OP_DROP, "token", RAW(""), "NCCLID: 'token' and a non-zero 'session' come together"},
    {DDP_NCCLID, OP_SET, "job", STR(64), "NCCLID: 'job'"},
    {DDP_STATE, OP_SET, "token", BIN(15), "STATE: 'token' bin is 15 bytes, want token = 16"},
    {DDP_JOIN, OP_SET, "config", RAW("\x01"), "JOIN: 'config' is a msgpack"},
    {DDP_JOIN, OP_SET, "job", STR(64), "JOIN: 'job'"},
    {DDP_RESULT, OP_SET, "gen", RAW("\xcf\0\0\0\1\0\0\0\0"), "RESULT: 'gen' is 4294967296"},
    {DDP_BATCH, OP_SET, "gen", RAW("\xff"), "BATCH: 'gen' is -1"},
    {DDP_BATCH, OP_DROP, "gen", RAW(""), NULL},
    {DDP_CREDIT, OP_DROP, "gen", RAW(""), NULL},
    {DDP_WELCOME, OP_SET, "gen", RAW("\xc0"), NULL},
    /* duplicate keys are ambiguous; unknown keys are forward compatible */
    {DDP_RESULT, OP_ADD, "k", RAW("\x05"), "RESULT: key 'k' appears twice"},
    {DDP_JOIN, OP_ADD, "v", RAW("\x02"), "message: key 'v' appears twice"},
    {DDP_RESULT, OP_ADD, "zz_future", RAW("\x92\x01\xa1" "x"), NULL},
    {DDP_BATCH, OP_ADD, "mean", RAW("\xcb\x3f\xe0\0\0\0\0\0\0"), NULL},
    {DDP_STOP, OP_ADD, "", RAW("\xc0"), NULL},
};

/* The new value's msgpack bytes, in a fresh buffer. */
static void value_bytes(const mut_t *m, msgpack_sbuffer *v)
{
    msgpack_packer pk;
    msgpack_packer_init(&pk, v, msgpack_sbuffer_write);
    if (m->fill_str) {
        char *s = malloc(m->fill_str);
        memset(s, 'x', m->fill_str);
        msgpack_pack_str_with_body(&pk, s, m->fill_str);
        free(s);
    } else if (m->fill_bin || !m->rawlen) {
        char *b = calloc(1, m->fill_bin + 1);
        msgpack_pack_bin_with_body(&pk, b, m->fill_bin);
        free(b);
    } else {
        msgpack_sbuffer_write(v, m->raw, m->rawlen);
    }
}

static int mutate(const unsigned char *in, size_t size, const mut_t *m, msgpack_sbuffer *sb)
{
    static const char ops[] = {[OP_DROP] = 'd', [OP_SET] = 's', [OP_ADD] = 'a'};
    msgpack_sbuffer v;
    msgpack_sbuffer_init(&v);
    value_bytes(m, &v);
    int rc = sample_repack(in, size, ops[m->op], m->key, v.data, v.size, sb);
    msgpack_sbuffer_destroy(&v);
    return rc;
}

static void run_table(void)
{
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        const mut_t *m = &table[i];
        size_t size;
        zframe_t *px;
        unsigned char *bytes = sample_msg_bytes(m->type, &size, &px);
        msgpack_sbuffer sb;
        msgpack_sbuffer_init(&sb);
        CHECK_MSG(mutate(bytes, size, m, &sb) == 0, "row %zu: key '%s' not in the sample", i, m->key);
        ddp_msg_t out;
        char err[512] = "";
        int rc = proto_decode_bytes(sb.data, sb.size, px, &out, err, sizeof err);
        if (m->want) {
            CHECK_MSG(rc == -1, "row %zu (%s '%s') was accepted", i, proto_type_name(m->type), m->key);
            CHECK_MSG(strstr(err, m->want) != NULL, "row %zu: reason '%s' lacks '%s'", i, err, m->want);
            /* A rejected decode leaves nothing to free. */
            CHECK(out.type == 0);
        } else {
            CHECK_MSG(rc == 0, "row %zu (%s '%s') rejected: %s", i, proto_type_name(m->type), m->key, err);
        }
        ddp_msg_clear(&out);
        msgpack_sbuffer_destroy(&sb);
        zframe_destroy(&px);
        free(bytes);
    }
}

/* Every proper prefix of every sample is rejected (and ASan sees no overread). */
static void truncations(void)
{
    for (int t = DDP_JOIN; t <= DDP_TYPE_MAX; t++) {
        size_t size;
        zframe_t *px;
        unsigned char *bytes = sample_msg_bytes((ddp_type_t)t, &size, &px);
        for (size_t len = 0; len < size; len++) {
            /* a copy of exactly len bytes so ASan catches any read past it */
            unsigned char *cut = malloc(len ? len : 1);
            memcpy(cut, bytes, len);
            ddp_msg_t out;
            char err[256] = "";
            CHECK_MSG(proto_decode_bytes(cut, len, px, &out, err, sizeof err) == -1,
                      "%s cut to %zu bytes accepted", proto_type_name(t), len);
            CHECK(err[0] != '\0');
            free(cut);
        }
        /* one trailing byte is rejected too */
        unsigned char *more = malloc(size + 1);
        memcpy(more, bytes, size);
        more[size] = 0xc0;
        ddp_msg_t out;
        char err[256] = "";
        CHECK(proto_decode_bytes(more, size + 1, px, &out, err, sizeof err) == -1);
        CHECK_MSG(strstr(err, "1 trailing bytes") != NULL, "%s", err);
        free(more);
        zframe_destroy(&px);
        free(bytes);
    }
}

static void expect_reject(const void *data, size_t size, zframe_t *px, const char *want)
{
    ddp_msg_t out;
    char err[256] = "";
    CHECK_MSG(proto_decode_bytes(data, size, px, &out, err, sizeof err) == -1, "accepted, want '%s'", want);
    CHECK_MSG(strstr(err, want) != NULL, "reason '%s' lacks '%s'", err, want);
    ddp_msg_clear(&out);
}

static void hostile_frames(void)
{
    expect_reject("", 0, NULL, "empty frame");
    expect_reject("\xc1", 1, NULL, "invalid msgpack tag 0xc1");
    expect_reject("\x92\x01\x02", 3, NULL, "first frame is msgpack type 6, want a map");
    /* A 5-byte header claiming 4G elements must not make msgpack allocate. */
    expect_reject("\x81\xa1v\xdd\xff\xff\xff\xff", 8, NULL, "array of 4294967295 elements but only 0 bytes remain");
    expect_reject("\xdf\xff\xff\xff\xff", 5, NULL, "map of 4294967295 elements");
    expect_reject("\x81\xa1v\xc6\xff\xff\xff\xff", 8, NULL, "overruns the frame");
    /* 10000 nested arrays: msgpack-c's depth limit, not a stack overflow. */
    size_t deep = 10000;
    unsigned char *d = malloc(deep + 1);
    memset(d, 0x91, deep);
    d[deep] = 0x01;
    expect_reject(d, deep + 1, NULL, "nested too deep");
    free(d);

    /* Frame counts: pixels only for BATCH, exactly one pixel frame. */
    size_t size;
    zframe_t *px;
    unsigned char *join = sample_msg_bytes(DDP_JOIN, &size, &px);
    zframe_t *extra = zframe_new("abc", 3);
    expect_reject(join, size, extra, "JOIN: unexpected 2nd frame of 3 bytes (only BATCH and STATE have one)");
    unsigned char *batch = sample_msg_bytes(DDP_BATCH, &size, &px);
    expect_reject(batch, size, NULL, "BATCH: missing pixel frame (want n*c*h*w = 18 bytes)");
    zframe_t *short_px = zframe_new("12345678901234567", 17);
    expect_reject(batch, size, short_px, "BATCH: pixel frame is 17 bytes, want n*c*h*w = 18");

    ddp_msg_t out;
    char err[256];
    zmsg_t *z = zmsg_new();
    CHECK(proto_decode(z, &out, err, sizeof err) == -1 && strstr(err, "0 frames"));
    zmsg_addmem(z, batch, size);
    zmsg_append(z, &px);
    zmsg_addstr(z, "third");
    CHECK(proto_decode(z, &out, err, sizeof err) == -1 && strstr(err, "3 frames"));
    CHECK(zmsg_size(z) == 3); /* a rejected decode leaves the zmsg alone */
    zmsg_destroy(&z);
    CHECK(proto_decode(NULL, &out, err, sizeof err) == -1);
    CHECK(proto_decode_bytes(NULL, 5, NULL, &out, err, sizeof err) == -1);
    /* why may be NULL */
    CHECK(proto_decode_bytes("\xc1", 1, NULL, &out, NULL, 0) == -1);

    zframe_destroy(&extra);
    zframe_destroy(&short_px);
    free(join);
    free(batch);
}

int main(void)
{
    log_init("test_proto_reject", -1, 0);
    run_table();
    truncations();
    hostile_frames();
    return check_exit("test_proto_reject");
}
