/* Every message type survives encode -> decode with every field intact,
 * through both proto_decode (zmsg, zero-copy pixels) and proto_decode_bytes,
 * and through real sockets with proto_send/proto_recv. */
#include "common/log.h"
#include "tests/proto/check.h"
#include "tests/proto/samples.h"
#include "proto/codec.h"
#include "proto/wire.h"

#include <math.h>
#include <stdlib.h>

#define SAME_MEM(a, b, n) (memcmp((a), (b), (n)) == 0)

static void same_strv(char **a, char **b, uint64_t n)
{
    CHECK((a == NULL) == (b == NULL));
    for (uint64_t i = 0; a && b && i < n; i++)
        CHECK_STR(a[i], b[i]);
}

static void same_auth(const ddp_auth_t *a, const ddp_auth_t *b)
{
    CHECK_STR(a->job, b->job);
    CHECK(a->session == b->session && SAME_MEM(a->token, b->token, DDP_TOKEN_LEN));
}

static void same_msg(const ddp_msg_t *a, const ddp_msg_t *b)
{
    CHECK(a->type == b->type);
    switch (a->type) {
    case DDP_JOIN:
        CHECK(a->u.join.role == b->u.join.role && a->u.join.pid == b->u.join.pid &&
              a->u.join.want_rank == b->u.join.want_rank);
        CHECK_STR(a->u.join.name, b->u.join.name);
        CHECK_STR(a->u.join.host, b->u.join.host);
        CHECK_STR(a->u.join.backend, b->u.join.backend);
        CHECK_STR(a->u.join.ring, b->u.join.ring);
        CHECK_STR(a->u.join.config, b->u.join.config);
        CHECK_STR(a->u.join.job, b->u.join.job);
        CHECK(a->u.join.shard == b->u.join.shard && a->u.join.shards == b->u.join.shards);
        CHECK(a->u.join.nccl == b->u.join.nccl);
        CHECK_STR(a->u.join.failed, b->u.join.failed);
        break;
    case DDP_WELCOME:
        CHECK(a->u.welcome.rank == b->u.welcome.rank && a->u.welcome.world == b->u.welcome.world);
        CHECK_STR(a->u.welcome.job, b->u.welcome.job);
        CHECK(a->u.welcome.train == b->u.welcome.train);
        CHECK_STR(a->u.welcome.next_ring, b->u.welcome.next_ring);
        CHECK(a->u.welcome.session == b->u.welcome.session &&
              SAME_MEM(a->u.welcome.token, b->u.welcome.token, DDP_TOKEN_LEN));
        CHECK(a->u.welcome.has_secret == b->u.welcome.has_secret &&
              SAME_MEM(a->u.welcome.secret, b->u.welcome.secret, DDP_SECRET_LEN));
        CHECK(a->u.welcome.gen == b->u.welcome.gen &&
              a->u.welcome.joining == b->u.welcome.joining &&
              a->u.welcome.nccl == b->u.welcome.nccl);
        break;
    case DDP_PLAN:
        CHECK(a->u.plan.epoch == b->u.plan.epoch && a->u.plan.phase == b->u.plan.phase &&
              a->u.plan.n == b->u.plan.n && a->u.plan.num_classes == b->u.plan.num_classes);
        same_strv(a->u.plan.class_names, b->u.plan.class_names, a->u.plan.num_classes);
        same_strv(a->u.plan.paths, b->u.plan.paths, a->u.plan.n);
        CHECK_STR(a->u.plan.dataset, b->u.plan.dataset);
        CHECK(a->u.plan.skip == b->u.plan.skip);
        CHECK(a->u.plan.npresent == b->u.plan.npresent &&
              (a->u.plan.present == NULL) == (b->u.plan.present == NULL));
        if (a->u.plan.present && b->u.plan.present)
            CHECK(memcmp(a->u.plan.present, b->u.plan.present, 4u * a->u.plan.npresent) == 0);
        same_auth(&a->u.plan.auth, &b->u.plan.auth);
        break;
    case DDP_CREDIT:
        CHECK_STR(a->u.credit.worker, b->u.credit.worker);
        CHECK(a->u.credit.credits == b->u.credit.credits && a->u.credit.n_acks == b->u.credit.n_acks);
        CHECK(SAME_MEM(a->u.credit.acks, b->u.credit.acks, a->u.credit.n_acks * 8));
        CHECK(a->u.credit.rank == b->u.credit.rank && a->u.credit.gen == b->u.credit.gen);
        same_auth(&a->u.credit.auth, &b->u.credit.auth);
        break;
    case DDP_HEARTBEAT:
        CHECK_STR(a->u.heartbeat.worker, b->u.heartbeat.worker);
        CHECK(a->u.heartbeat.rank == b->u.heartbeat.rank &&
              a->u.heartbeat.batches_done == b->u.heartbeat.batches_done &&
              a->u.heartbeat.rejected == b->u.heartbeat.rejected);
        same_auth(&a->u.heartbeat.auth, &b->u.heartbeat.auth);
        break;
    case DDP_BATCH: {
        const ddp_batch_t *x = &a->u.batch, *y = &b->u.batch;
        CHECK(x->seq == y->seq && x->epoch == y->epoch && x->phase == y->phase && x->n == y->n &&
              x->c == y->c && x->h == y->h && x->w == y->w && x->step == y->step &&
              x->global_count == y->global_count && x->gen == y->gen &&
              x->steps_per_epoch == y->steps_per_epoch);
        CHECK(SAME_MEM(x->ids, y->ids, x->n * 8) && SAME_MEM(x->labels, y->labels, x->n * 4));
        CHECK(y->pixels && zframe_eq(x->pixels, y->pixels));
        break;
    }
    case DDP_END:
        CHECK(a->u.end.epoch == b->u.end.epoch && a->u.end.phase == b->u.end.phase);
        break;
    case DDP_RESULT: {
        const ddp_result_t *x = &a->u.result, *y = &b->u.result;
        CHECK(x->rank == y->rank && x->epoch == y->epoch && x->phase == y->phase &&
              x->seq == y->seq && x->n == y->n && x->k == y->k && x->compute_s == y->compute_s &&
              x->lr == y->lr && x->step == y->step && x->gen == y->gen);
        CHECK(SAME_MEM(x->ids, y->ids, x->n * 8) && SAME_MEM(x->labels, y->labels, x->n * 4));
        CHECK(SAME_MEM(x->topk, y->topk, x->n * x->k * 4) && SAME_MEM(x->loss, y->loss, x->n * 4));
        same_auth(&x->auth, &y->auth);
        break;
    }
    case DDP_FAILED:
        CHECK(a->u.failed.epoch == b->u.failed.epoch && a->u.failed.phase == b->u.failed.phase &&
              a->u.failed.id == b->u.failed.id);
        CHECK_STR(a->u.failed.path, b->u.failed.path);
        CHECK_STR(a->u.failed.reason, b->u.failed.reason);
        same_auth(&a->u.failed.auth, &b->u.failed.auth);
        break;
    case DDP_STOP:
        CHECK(a->u.stop.code == b->u.stop.code);
        CHECK_STR(a->u.stop.reason, b->u.stop.reason);
        break;
    case DDP_DONE:
        CHECK(a->u.done.code == b->u.done.code);
        CHECK_STR(a->u.done.reason, b->u.done.reason);
        break;
    case DDP_EPOCH:
        CHECK(a->u.epoch.epoch == b->u.epoch.epoch && a->u.epoch.decision == b->u.epoch.decision &&
              a->u.epoch.streak == b->u.epoch.streak && a->u.epoch.val_top1 == b->u.epoch.val_top1);
        CHECK_STR(a->u.epoch.reason, b->u.epoch.reason);
        break;
    case DDP_ISSUED: {
        const ddp_issued_t *x = &a->u.issued, *y = &b->u.issued;
        CHECK(x->seq == y->seq && x->epoch == y->epoch && x->phase == y->phase &&
              x->rank == y->rank && x->n == y->n && x->rejected == y->rejected);
        CHECK(SAME_MEM(x->ids, y->ids, x->n * 8) && SAME_MEM(x->labels, y->labels, x->n * 4));
        same_auth(&x->auth, &y->auth);
        break;
    }
    case DDP_REISSUE:
        CHECK(a->u.reissue.seq == b->u.reissue.seq && a->u.reissue.epoch == b->u.reissue.epoch &&
              a->u.reissue.phase == b->u.reissue.phase && a->u.reissue.rank == b->u.reissue.rank);
        CHECK_STR(a->u.reissue.reason, b->u.reissue.reason);
        break;
    case DDP_MEMBERS: {
        const ddp_members_t *x = &a->u.members, *y = &b->u.members;
        CHECK(x->gen == y->gen && x->rank == y->rank && x->world == y->world &&
              x->step == y->step && x->epoch == y->epoch);
        CHECK_STR(x->next_ring, y->next_ring);
        same_strv(x->names, y->names, (uint64_t)x->world);
        CHECK_STR(x->reason, y->reason);
        CHECK(x->session == y->session && SAME_MEM(x->token, y->token, DDP_TOKEN_LEN));
        CHECK(x->paused == y->paused && x->nccl == y->nccl);
        break;
    }
    case DDP_STEP: {
        const ddp_step_t *x = &a->u.step, *y = &b->u.step;
        CHECK(x->rank == y->rank && x->gen == y->gen && x->epoch == y->epoch &&
              x->step == y->step && x->status == y->status && x->suspect == y->suspect);
        same_auth(&x->auth, &y->auth);
        break;
    }
    case DDP_COMMIT:
        CHECK(a->u.commit.gen == b->u.commit.gen && a->u.commit.epoch == b->u.commit.epoch &&
              a->u.commit.step == b->u.commit.step &&
              a->u.commit.snapshot == b->u.commit.snapshot);
        break;
    case DDP_STATE: {
        const ddp_state_t *x = &a->u.state, *y = &b->u.state;
        CHECK(x->gen == y->gen && x->epoch == y->epoch && x->step == y->step);
        CHECK(x->image && y->image && zframe_eq(x->image, y->image));
        same_auth(&x->auth, &y->auth);
        break;
    }
    case DDP_NCCLID: {
        const ddp_ncclid_t *x = &a->u.ncclid, *y = &b->u.ncclid;
        CHECK(x->gen == y->gen && x->world == y->world &&
              SAME_MEM(x->id, y->id, DDP_NCCL_ID_LEN));
        same_auth(&x->auth, &y->auth);
        break;
    }
    }
}

static void roundtrip_zmsg(ddp_type_t t)
{
    ddp_msg_t in, out;
    char err[256] = "";
    CHECK(sample_msg(t, &in) == 0);
    zmsg_t *z = proto_encode(&in);
    CHECK_MSG(z != NULL, "encode %s", proto_type_name(t));
    if (!z) {
        ddp_msg_clear(&in);
        return;
    }
    CHECK(zmsg_size(z) == (t == DDP_BATCH || t == DDP_STATE ? 2u : 1u));
    int rc = proto_decode(z, &out, err, sizeof err);
    CHECK_MSG(rc == 0, "decode %s: %s", proto_type_name(t), err);
    if (rc == 0) {
        same_msg(&in, &out);
        /* The pixel frame moved out of the zmsg instead of being copied. */
        CHECK(zmsg_size(z) == 1);
    }
    ddp_msg_clear(&out);
    ddp_msg_clear(&out); /* twice: must be harmless */
    zmsg_destroy(&z);
    ddp_msg_clear(&in);
}

static void roundtrip_bytes(ddp_type_t t)
{
    size_t size;
    zframe_t *px;
    unsigned char *bytes = sample_msg_bytes(t, &size, &px);
    ddp_msg_t in, out;
    char err[256] = "";
    CHECK(bytes != NULL);
    sample_msg(t, &in);
    int rc = proto_decode_bytes(bytes, size, px, &out, err, sizeof err);
    CHECK_MSG(rc == 0, "decode_bytes %s: %s", proto_type_name(t), err);
    if (rc == 0)
        same_msg(&in, &out);
    /* The caller keeps its frame. */
    CHECK(t != DDP_BATCH || (px && zframe_size(px) == 18));
    ddp_msg_clear(&out);
    ddp_msg_clear(&in);
    zframe_destroy(&px);
    free(bytes);
}

static void encode_batch_moves_pixels(void)
{
    ddp_msg_t m, out;
    char err[256];
    sample_msg(DDP_BATCH, &m);
    zmsg_t *z = proto_encode_batch(&m.u.batch);
    CHECK(z && m.u.batch.pixels == NULL);
    CHECK(proto_decode(z, &out, err, sizeof err) == 0);
    CHECK(out.u.batch.pixels && zframe_size(out.u.batch.pixels) == 18);
    ddp_msg_clear(&out);
    zmsg_destroy(&z);
    ddp_msg_clear(&m);
}

static void encode_refuses_bad_structs(void)
{
    ddp_msg_t m;
    sample_msg(DDP_RESULT, &m);
    m.u.result.k = 6;
    CHECK(proto_encode(&m) == NULL);
    m.u.result.k = 5;
    m.u.result.rank = -1;
    CHECK(proto_encode(&m) == NULL);
    ddp_msg_clear(&m);
    sample_msg(DDP_BATCH, &m);
    zframe_t *px = m.u.batch.pixels;
    m.u.batch.pixels = zframe_new("abc", 3);
    CHECK(proto_encode_batch(&m.u.batch) == NULL);
    CHECK(m.u.batch.pixels != NULL); /* not consumed on failure */
    zframe_destroy(&m.u.batch.pixels);
    m.u.batch.pixels = px;
    m.u.batch.c = 5;
    CHECK(proto_encode(&m) == NULL);
    ddp_msg_clear(&m);
    sample_msg(DDP_JOIN, &m);
    memset(m.u.join.name, 'x', sizeof m.u.join.name); /* unterminated */
    CHECK(proto_encode(&m) == NULL);
    m.type = 0;
    CHECK(proto_encode(&m) == NULL);
    m.type = 12;
    CHECK(proto_encode(&m) == NULL);
    CHECK(proto_encode(NULL) == NULL);
}

static void plan_without_paths(void)
{
    ddp_msg_t m, out;
    char err[256];
    sample_msg(DDP_PLAN, &m);
    for (int i = 0; i < 3; i++)
        free(m.u.plan.paths[i]);
    free(m.u.plan.paths);
    m.u.plan.paths = NULL;
    m.u.plan.n = 1281167; /* ImageNet train: large n costs nothing without paths */
    zmsg_t *z = proto_encode(&m);
    CHECK(z != NULL);
    CHECK(proto_decode(z, &out, err, sizeof err) == 0);
    CHECK(out.u.plan.n == 1281167 && out.u.plan.paths == NULL && out.u.plan.num_classes == 3);
    ddp_msg_clear(&out);
    zmsg_destroy(&z);
    ddp_msg_clear(&m);
}

/* --classes: the present list survives a round trip. */
static void plan_present(void)
{
    ddp_msg_t m, out;
    char err[256];
    sample_msg(DDP_PLAN, &m);
    m.u.plan.present = malloc(2 * sizeof *m.u.plan.present);
    CHECK(m.u.plan.present != NULL);
    if (!m.u.plan.present)
        return;
    m.u.plan.present[0] = 1, m.u.plan.present[1] = 2, m.u.plan.npresent = 2;
    zmsg_t *z = proto_encode(&m);
    CHECK(z != NULL);
    CHECK(proto_decode(z, &out, err, sizeof err) == 0);
    CHECK(out.u.plan.npresent == 2 && out.u.plan.present && out.u.plan.present[0] == 1 &&
          out.u.plan.present[1] == 2);
    ddp_msg_clear(&out);
    zmsg_destroy(&z);
    ddp_msg_clear(&m);
}

static void names(void)
{
    CHECK_STR(proto_type_name(DDP_RESULT), "RESULT");
    CHECK_STR(proto_type_name(0), "UNKNOWN");
    CHECK_STR(proto_type_name(99), "UNKNOWN");
    CHECK_STR(proto_role_name(DDP_ROLE_LOADER), "loaderd");
    CHECK_STR(proto_role_name(7), "unknown");
}

/* ROUTER/DEALER over inproc: send, receive with route, answer by route,
 * count a rejected message. */
static void sockets(void)
{
    zsock_t *router = zsock_new_router("inproc://proto-test");
    zsock_t *dealer = zsock_new(ZMQ_DEALER);
    CHECK(router && dealer);
    zsock_set_identity(dealer, "w\x01");
    CHECK(zsock_connect(dealer, "inproc://proto-test") == 0);
    zsock_set_rcvtimeo(router, 2000);
    zsock_set_rcvtimeo(dealer, 2000);
    proto_stats_t stats = {0};
    ddp_msg_t m, got;
    zframe_t *route = NULL;

    sample_msg(DDP_JOIN, &m);
    CHECK(proto_send(dealer, NULL, &m) == 0);
    CHECK(proto_recv(router, &route, &got, &stats) == 0);
    same_msg(&m, &got);
    CHECK(route && zframe_size(route) == 2 && memcmp(zframe_data(route), "w\x01", 2) == 0);
    ddp_msg_clear(&got);
    ddp_msg_clear(&m);

    /* Reply by route, received on the raw libzmq socket of the dealer. */
    sample_msg(DDP_BATCH, &m);
    CHECK(proto_send_batch(router, route, &m.u.batch) == 0);
    CHECK(m.u.batch.pixels == NULL);
    CHECK(route != NULL); /* identity is not consumed */
    CHECK(proto_recv(zsock_resolve(dealer), NULL, &got, &stats) == 0);
    CHECK(got.type == DDP_BATCH && zframe_size(got.u.batch.pixels) == 18);
    ddp_msg_clear(&got);
    ddp_msg_clear(&m);

    /* Garbage is rejected, counted, and leaves no route behind. */
    zframe_t *junk = zframe_new("\x81\xa1v\x03", 4); /* {"v": 3} */
    CHECK(zframe_send(&junk, dealer, 0) == 0);
    zframe_t *r2 = (zframe_t *)1;
    CHECK(proto_recv(router, &r2, &got, &stats) == 1);
    CHECK(r2 == NULL);
    CHECK(stats.received == 3 && stats.rejected == 1);

    /* Timeout: -1, nothing counted. */
    zsock_set_rcvtimeo(router, 10);
    CHECK(proto_recv(router, &r2, &got, &stats) == -1);
    CHECK(stats.received == 3);

    zframe_destroy(&route);
    zsock_destroy(&dealer);
    zsock_destroy(&router);
}

/* Training additions: an empty train shard travels; an empty eval batch,
 * a shard larger than its global step, a bad decision or skip do not. */
static void train_additions(void)
{
    ddp_msg_t m, out;
    char err[256];
    memset(&m, 0, sizeof m);
    m.type = DDP_BATCH;
    m.u.batch = (ddp_batch_t){.seq = 9, .epoch = 1, .phase = DDP_PHASE_TRAIN, .n = 0, .c = 1,
                              .h = 28, .w = 28, .step = 17, .global_count = 5};
    m.u.batch.pixels = zframe_new(NULL, 0);
    zmsg_t *z = proto_encode(&m);
    CHECK_MSG(z != NULL, "an empty train shard encodes");
    if (z) {
        CHECK_MSG(proto_decode(z, &out, err, sizeof err) == 0, "empty shard decodes: %s", err);
        CHECK(out.u.batch.n == 0 && out.u.batch.step == 17 && out.u.batch.global_count == 5 &&
              zframe_size(out.u.batch.pixels) == 0);
        ddp_msg_clear(&out);
        zmsg_destroy(&z);
    }
    m.u.batch.phase = DDP_PHASE_EVAL;
    CHECK_MSG(proto_validate(&m, err, sizeof err) != 0, "an empty eval batch is refused");
    m.u.batch.phase = DDP_PHASE_TRAIN;
    m.u.batch.global_count = 0;
    CHECK(proto_validate(&m, err, sizeof err) == 0);
    ddp_msg_clear(&m);

    sample_msg(DDP_BATCH, &m);
    m.u.batch.global_count = 2; /* n = 3 */
    CHECK_MSG(proto_validate(&m, err, sizeof err) != 0, "global_count < n is refused");
    ddp_msg_clear(&m);

    sample_msg(DDP_EPOCH, &m);
    m.u.epoch.decision = 2;
    CHECK(proto_validate(&m, err, sizeof err) != 0);
    m.u.epoch.decision = 0;
    m.u.epoch.val_top1 = 1.5;
    CHECK(proto_validate(&m, err, sizeof err) != 0);
    m.u.epoch.val_top1 = -1;
    CHECK(proto_validate(&m, err, sizeof err) == 0);
    ddp_msg_clear(&m);

    sample_msg(DDP_PLAN, &m);
    m.u.plan.skip = 1;
    CHECK_MSG(proto_validate(&m, err, sizeof err) != 0, "skip in an eval plan is refused");
    m.u.plan.phase = DDP_PHASE_TRAIN;
    CHECK(proto_validate(&m, err, sizeof err) == 0);
    m.u.plan.skip = 4; /* n = 3 */
    CHECK(proto_validate(&m, err, sizeof err) != 0);
    ddp_msg_clear(&m);

    /* A CREDIT without rank (older sender) decodes as -1; rank is not encoded when < 0. */
    sample_msg(DDP_CREDIT, &m);
    m.u.credit.rank = -1;
    z = proto_encode(&m);
    CHECK(z != NULL);
    if (z) {
        CHECK(proto_decode(z, &out, err, sizeof err) == 0 && out.u.credit.rank == -1);
        ddp_msg_clear(&out);
        zmsg_destroy(&z);
    }
    ddp_msg_clear(&m);
}

/* Elastic training (docs/ELASTIC.md): gen is optional with 0 absent (not
 * encoded, so eval traffic keeps its bytes); MEMBERS for loaderd has rank -1;
 * a summed STEP suspects nobody. */
static void elastic_additions(void)
{
    ddp_msg_t m, out;
    char err[256];
    ddp_type_t with_gen[] = {DDP_WELCOME, DDP_CREDIT, DDP_BATCH, DDP_RESULT};
    for (size_t i = 0; i < sizeof with_gen / sizeof with_gen[0]; i++) {
        sample_msg(with_gen[i], &m);
        uint32_t *gen = with_gen[i] == DDP_WELCOME  ? &m.u.welcome.gen
                        : with_gen[i] == DDP_CREDIT ? &m.u.credit.gen
                        : with_gen[i] == DDP_BATCH  ? &m.u.batch.gen
                                                    : &m.u.result.gen;
        size_t with_size = 0;
        zmsg_t *z = proto_encode(&m);
        if (z)
            with_size = zframe_size(zmsg_first(z));
        zmsg_destroy(&z);
        *gen = 0;
        z = proto_encode(&m);
        CHECK(z != NULL);
        if (z) {
            CHECK_MSG(zframe_size(zmsg_first(z)) + 5 <= with_size, "%s: gen 0 is not encoded",
                      proto_type_name(with_gen[i]));
            CHECK(proto_decode(z, &out, err, sizeof err) == 0);
            CHECK(out.type == with_gen[i]);
            ddp_msg_clear(&out);
            zmsg_destroy(&z);
        }
        ddp_msg_clear(&m);
    }

    sample_msg(DDP_MEMBERS, &m);
    m.u.members.rank = -1;
    m.u.members.next_ring[0] = '\0';
    CHECK(proto_validate(&m, err, sizeof err) != 0 && strstr(err, "a token for loaderd"));
    m.u.members.session = 0;
    CHECK_MSG(proto_validate(&m, err, sizeof err) == 0, "MEMBERS for loaderd: %s", err);
    m.u.members.rank = 2;
    CHECK(proto_validate(&m, err, sizeof err) != 0 && strstr(err, "'rank' is 2"));
    m.u.members.rank = 0;
    m.u.members.gen = 0;
    CHECK(proto_validate(&m, err, sizeof err) != 0 && strstr(err, "'gen' is 0"));
    m.u.members.gen = 1;
    m.u.members.names[1][0] = '\0';
    CHECK(proto_validate(&m, err, sizeof err) != 0 && strstr(err, "'names[1]' is empty"));
    ddp_msg_clear(&m);

    sample_msg(DDP_STEP, &m);
    m.u.step.status = DDP_STEP_SUMMED;
    CHECK(proto_validate(&m, err, sizeof err) != 0 && strstr(err, "with status 0"));
    m.u.step.suspect = -1;
    CHECK(proto_validate(&m, err, sizeof err) == 0);
    m.u.step.status = DDP_STEP_RING_FAILED; /* a failed ring that cannot name the silent rank */
    CHECK(proto_validate(&m, err, sizeof err) == 0);
    m.u.step.suspect = m.u.step.rank;
    CHECK(proto_validate(&m, err, sizeof err) != 0);
    m.u.step.suspect = 0;
    m.u.step.status = 2;
    CHECK(proto_validate(&m, err, sizeof err) != 0 && strstr(err, "'status' is 2"));
    ddp_msg_clear(&m);
    CHECK_STR(proto_type_name(DDP_MEMBERS), "MEMBERS");
    CHECK_STR(proto_type_name(DDP_COMMIT), "COMMIT");
}

/* Several loaderds: a loader's JOIN carries its shard; a whole-dataset
 * loader's bytes stay as before (no shard keys); seqs name their shard. */
static void loader_shards(void)
{
    ddp_msg_t m, out;
    char err[256];
    sample_msg(DDP_JOIN, &m);
    m.u.join.role = DDP_ROLE_LOADER;
    m.u.join.ring[0] = m.u.join.config[0] = '\0';
    zmsg_t *whole = proto_encode(&m);
    m.u.join.shard = 2;
    m.u.join.shards = 3;
    zmsg_t *z = proto_encode(&m);
    CHECK(whole && z && zframe_size(zmsg_first(z)) > zframe_size(zmsg_first(whole)));
    CHECK(z && proto_decode(z, &out, err, sizeof err) == 0);
    CHECK(out.u.join.shard == 2 && out.u.join.shards == 3);
    ddp_msg_clear(&out);
    CHECK(whole && proto_decode(whole, &out, err, sizeof err) == 0);
    CHECK(out.u.join.shard == 0 && out.u.join.shards == 0);
    ddp_msg_clear(&out);
    m.u.join.shard = 3;   /* out of range: the encoder refuses it too */
    CHECK(proto_validate(&m, err, sizeof err) != 0 && strstr(err, "'shard' 3 of 'shards' 3"));
    CHECK(proto_encode(&m) == NULL);
    zmsg_destroy(&z);
    zmsg_destroy(&whole);
    ddp_msg_clear(&m);
    uint64_t seq = ((uint64_t)5 << DDP_SEQ_SHARD_SHIFT) + 17;
    CHECK(DDP_SEQ_SHARD(seq) == 5 && DDP_SEQ_SHARD(17) == 0);

    /* a train part of a sharded dataset: each sample's place in the rank's list */
    sample_msg(DDP_BATCH, &m);
    zmsg_t *plain = proto_encode(&m);
    m.u.batch.global_count = 5;
    m.u.batch.pos = malloc(3 * sizeof *m.u.batch.pos);
    CHECK(m.u.batch.pos != NULL);
    if (!m.u.batch.pos)
        return;
    m.u.batch.pos[0] = 0, m.u.batch.pos[1] = 4, m.u.batch.pos[2] = 9;
    z = proto_encode(&m);
    CHECK(z && proto_decode(z, &out, err, sizeof err) == 0);
    CHECK(out.u.batch.pos && out.u.batch.pos[0] == 0 && out.u.batch.pos[1] == 4 &&
          out.u.batch.pos[2] == 9 && out.u.batch.global_count == 5);
    ddp_msg_clear(&out);
    CHECK(plain && proto_decode(plain, &out, err, sizeof err) == 0 && out.u.batch.pos == NULL);
    ddp_msg_clear(&out);
    zmsg_destroy(&z);
    zmsg_destroy(&plain);
    m.u.batch.pos[2] = 4;   /* strictly increasing */
    CHECK(proto_validate(&m, err, sizeof err) != 0 &&
          strstr(err, "'pos' is not strictly increasing at 2 (4 after 4)"));
    m.u.batch.pos[2] = 9;
    m.u.batch.phase = DDP_PHASE_EVAL;   /* eval batches are never merged */
    CHECK(proto_validate(&m, err, sizeof err) != 0 && strstr(err, "'pos' in an eval batch"));
    ddp_msg_clear(&m);
}

/* --wire jpeg: a BATCH of encoded files (sizes, transform) and a RESULT
 * naming rows that failed to decode at gpud survive a round trip; sizes
 * that do not sum to the data frame, a zero size or a bad flag are
 * refused; failed rows are allowed in a train RESULT too. */
static void wire_additions(void)
{
    ddp_msg_t m, out;
    char err[256];
    static const uint64_t ids[] = {4, 5};
    static const int32_t labels[] = {1, 0};
    static const uint32_t sizes[] = {3, 5};
    memset(&m, 0, sizeof m);
    m.type = DDP_BATCH;
    m.u.batch = (ddp_batch_t){.seq = 11, .epoch = 0, .phase = DDP_PHASE_EVAL, .n = 2, .c = 3,
                              .h = 224, .w = 224, .wire = DDP_WIRE_ENCODED, .resize = 256,
                              .crop = 1, .dct = 0};
    m.u.batch.ids = malloc(sizeof ids);
    m.u.batch.labels = malloc(sizeof labels);
    m.u.batch.sizes = malloc(sizeof sizes);
    memcpy(m.u.batch.ids, ids, sizeof ids);
    memcpy(m.u.batch.labels, labels, sizeof labels);
    memcpy(m.u.batch.sizes, sizes, sizeof sizes);
    m.u.batch.pixels = zframe_new("\xff\xd8\xff" "ABCDE", 8);
    CHECK_MSG(proto_validate(&m, err, sizeof err) == 0, "encoded batch valid: %s", err);
    zmsg_t *z = proto_encode(&m);
    CHECK_MSG(z != NULL, "an encoded batch encodes");
    if (z) {
        CHECK_MSG(proto_decode(z, &out, err, sizeof err) == 0, "encoded batch decodes: %s", err);
        CHECK(out.u.batch.wire == DDP_WIRE_ENCODED && out.u.batch.resize == 256 &&
              out.u.batch.crop == 1 && out.u.batch.dct == 0 && out.u.batch.sizes &&
              SAME_MEM(out.u.batch.sizes, sizes, sizeof sizes) &&
              zframe_size(out.u.batch.pixels) == 8 &&
              SAME_MEM(zframe_data(out.u.batch.pixels), "\xff\xd8\xff" "ABCDE", 8));
        ddp_msg_clear(&out);
        zmsg_destroy(&z);
    }
    m.u.batch.sizes[1] = 4;
    CHECK_MSG(proto_validate(&m, err, sizeof err) != 0 &&
                  strstr(err, "data frame is 8 bytes, want the sum of 'sizes' = 7"),
              "sizes short of the frame refused: %s", err);
    m.u.batch.sizes[1] = 6;
    CHECK_MSG(proto_validate(&m, err, sizeof err) != 0, "sizes past the frame refused");
    m.u.batch.sizes[0] = 0;
    m.u.batch.sizes[1] = 8;
    CHECK_MSG(proto_validate(&m, err, sizeof err) != 0 && strstr(err, "'sizes[0]' is 0"),
              "an empty file refused: %s", err);
    m.u.batch.sizes[0] = 3;
    m.u.batch.sizes[1] = 5;
    m.u.batch.crop = 2;
    CHECK(proto_validate(&m, err, sizeof err) != 0);
    m.u.batch.crop = 1;
    m.u.batch.wire = 2;
    CHECK(proto_validate(&m, err, sizeof err) != 0);
    m.u.batch.wire = DDP_WIRE_ENCODED;
    CHECK(proto_validate(&m, err, sizeof err) == 0);
    ddp_msg_clear(&m);

    /* a plain BATCH stays as it was: no wire keys on the wire */
    sample_msg(DDP_BATCH, &m);
    z = proto_encode(&m);
    if (z) {
        CHECK(proto_decode(z, &out, err, sizeof err) == 0 && out.u.batch.wire == 0 &&
              out.u.batch.sizes == NULL);
        ddp_msg_clear(&out);
        zmsg_destroy(&z);
    }
    ddp_msg_clear(&m);

    sample_msg(DDP_RESULT, &m);
    m.u.result.phase = DDP_PHASE_EVAL;
    m.u.result.failed = calloc(m.u.result.n, 1);
    m.u.result.failed[m.u.result.n - 1] = 1;
    m.u.result.why = calloc(1, sizeof *m.u.result.why);
    m.u.result.why[0] = strdup("image file is truncated");
    m.u.result.nwhy = 1;
    z = proto_encode(&m);
    CHECK_MSG(z != NULL, "a RESULT with failed rows encodes");
    if (z) {
        CHECK_MSG(proto_decode(z, &out, err, sizeof err) == 0, "decodes: %s", err);
        CHECK(out.u.result.failed && out.u.result.failed[m.u.result.n - 1] == 1 &&
              out.u.result.failed[0] == 0);
        CHECK(out.u.result.nwhy == 1 && out.u.result.why);
        if (out.u.result.why)
            CHECK_STR(out.u.result.why[0], "image file is truncated");
        ddp_msg_clear(&out);
        zmsg_destroy(&z);
    }
    m.u.result.failed[0] = 2;
    CHECK(proto_validate(&m, err, sizeof err) != 0);
    m.u.result.failed[0] = 1; /* two failed rows, one reason */
    CHECK_MSG(proto_validate(&m, err, sizeof err) != 0 && strstr(err, "'why' has 1 reasons"),
              "a reason per failed row: %s", err);
    m.u.result.failed[0] = 0;
    m.u.result.phase = DDP_PHASE_TRAIN; /* --wire jpeg training: a row failed at gpud */
    CHECK_MSG(proto_validate(&m, err, sizeof err) == 0, "failed rows in training: %s", err);
    ddp_msg_clear(&m);
}

/* A train BATCH of encoded files with its augmentation round trip. */
static ddp_batch_t train_wire_batch(uint32_t n)
{
    static const uint64_t ids[] = {7, 3};
    static const int32_t labels[] = {2, 9};
    static const uint32_t sizes[] = {4, 2};
    ddp_batch_t b = {.seq = 5, .epoch = 1, .phase = DDP_PHASE_TRAIN, .n = n, .c = 1, .h = 28,
                     .w = 28, .step = 9, .global_count = 3, .gen = 1,
                     .wire = DDP_WIRE_ENCODED, .resize = 0, .crop = 0, .dct = 1,
                     .aug_seed = 0x123456789abcULL, .aug_flags = DDP_AUG_CROP | DDP_AUG_ROTATE,
                     .aug_scale = {0.08, 1.0}, .aug_ratio = {3.0 / 4.0, 4.0 / 3.0},
                     .aug_flip_p = 0.5, .aug_degrees = {-15.25, 15.25}};
    if (n) {
        b.ids = malloc(sizeof ids), b.labels = malloc(sizeof labels);
        b.sizes = malloc(sizeof sizes);
        memcpy(b.ids, ids, sizeof ids), memcpy(b.labels, labels, sizeof labels);
        memcpy(b.sizes, sizes, sizeof sizes);
    }
    b.pixels = zframe_new("\xff\xd8\xff\xe0" "AB", n ? 6 : 0);
    return b;
}

static void train_wire_additions(void)
{
    ddp_msg_t m = {.type = DDP_BATCH}, out;
    char err[256];
    for (uint32_t n = 0; n <= 2; n += 2) { /* an empty shard too: no sizes, an empty frame */
        m.type = DDP_BATCH; /* ddp_msg_clear zeroes it */
        m.u.batch = train_wire_batch(n);
        CHECK_MSG(proto_validate(&m, err, sizeof err) == 0, "train wire batch (n %u): %s", n, err);
        zmsg_t *z = proto_encode(&m);
        CHECK(z != NULL);
        if (z) {
            CHECK_MSG(proto_decode(z, &out, err, sizeof err) == 0, "decodes: %s", err);
            const ddp_batch_t *b = &out.u.batch;
            CHECK(b->wire == DDP_WIRE_ENCODED && b->phase == DDP_PHASE_TRAIN && b->n == n &&
                  b->dct == 1 && b->aug_seed == 0x123456789abcULL &&
                  b->aug_flags == (DDP_AUG_CROP | DDP_AUG_ROTATE) && b->aug_scale[0] == 0.08 &&
                  b->aug_scale[1] == 1.0 && b->aug_ratio[0] == 3.0 / 4.0 &&
                  b->aug_ratio[1] == 4.0 / 3.0 && b->aug_flip_p == 0.5 &&
                  b->aug_degrees[0] == -15.25 && b->aug_degrees[1] == 15.25 &&
                  b->global_count == 3 && b->step == 9);
            CHECK(n == 0 || (b->sizes && b->sizes[0] == 4 && b->sizes[1] == 2));
            ddp_msg_clear(&out);
            zmsg_destroy(&z);
        }
        ddp_msg_clear(&m);
    }
    m.type = DDP_BATCH;
    m.u.batch = train_wire_batch(2);
    m.u.batch.aug_flags = 4;
    CHECK_MSG(proto_validate(&m, err, sizeof err) != 0 && strstr(err, "'aug' is 4"),
              "unknown augmentation bits refused: %s", err);
    m.u.batch.aug_flags = DDP_AUG_CROP;
    m.u.batch.aug_scale[0] = 0;
    CHECK_MSG(proto_validate(&m, err, sizeof err) != 0 && strstr(err, "crop scale"),
              "a crop scale of 0 refused: %s", err);
    m.u.batch.aug_scale[0] = 0.08;
    m.u.batch.aug_flip_p = 1.5;
    CHECK_MSG(proto_validate(&m, err, sizeof err) != 0 && strstr(err, "flip probability"),
              "a flip probability of 1.5 refused: %s", err);
    m.u.batch.aug_flip_p = 0.5;
    m.u.batch.aug_flags = DDP_AUG_ROTATE;
    m.u.batch.aug_degrees[0] = NAN;
    CHECK_MSG(proto_validate(&m, err, sizeof err) != 0 && strstr(err, "rotation"),
              "a NaN rotation refused: %s", err);
    m.u.batch.aug_degrees[0] = -1;
    CHECK(proto_validate(&m, err, sizeof err) == 0);
    ddp_msg_clear(&m);
}

/* Whether the encoded header of m holds the msgpack str "nccl". */
static bool has_nccl_key(const ddp_msg_t *m)
{
    zmsg_t *z = proto_encode(m);
    CHECK(z != NULL);
    if (!z)
        return false;
    zframe_t *f = zmsg_first(z);
    static const char key[] = "\xa4nccl";
    bool found = false;
    for (size_t i = 0; i + 5 <= zframe_size(f) && !found; i++)
        found = memcmp(zframe_data(f) + i, key, 5) == 0;
    zmsg_destroy(&z);
    return found;
}

/* NCCL in gpud (docs/CUDA.md): the optional 'nccl' flags are sent only when
 * set, so jobs without NCCL keep their bytes; where they may appear. */
static void nccl_additions(void)
{
    char err[256];
    ddp_type_t types[] = {DDP_JOIN, DDP_WELCOME, DDP_MEMBERS};
    for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
        ddp_msg_t m;
        CHECK(sample_msg(types[i], &m) == 0);
        CHECK_MSG(!has_nccl_key(&m), "%s without NCCL carries 'nccl'", proto_type_name(types[i]));
        if (types[i] == DDP_JOIN)
            m.u.join.nccl = 1;
        else if (types[i] == DDP_WELCOME)
            m.u.welcome.nccl = 1;
        else
            m.u.members.nccl = 1;
        CHECK_MSG(has_nccl_key(&m), "%s with NCCL lacks 'nccl'", proto_type_name(types[i]));
        ddp_msg_clear(&m);
    }
    ddp_msg_t m;
    sample_msg(DDP_JOIN, &m);
    m.u.join.nccl = 1;
    CHECK(proto_validate(&m, err, sizeof err) == 0);
    m.u.join.ring[0] = '\0';
    CHECK_MSG(proto_validate(&m, err, sizeof err) != 0 && strstr(err, "without a ring"),
              "an NCCL offer without a ring refused: %s", err);
    strcpy(m.u.join.ring, "tcp://127.0.0.1:1");
    m.u.join.role = DDP_ROLE_LOADER;
    CHECK_MSG(proto_validate(&m, err, sizeof err) != 0 && strstr(err, "loaderd JOIN"),
              "a loader's NCCL offer refused: %s", err);
    ddp_msg_clear(&m);
    sample_msg(DDP_WELCOME, &m);
    m.u.welcome.nccl = 1;
    m.u.welcome.train = 0;
    CHECK_MSG(proto_validate(&m, err, sizeof err) != 0 && strstr(err, "'nccl' is 1 (train 0"),
              "NCCL in an eval WELCOME refused: %s", err);
    m.u.welcome.train = 1;
    m.u.welcome.joining = 1;
    m.u.welcome.rank = -1;
    CHECK_MSG(proto_validate(&m, err, sizeof err) != 0 && strstr(err, "joining 1"),
              "NCCL in a joiner's WELCOME (its generation comes with MEMBERS) refused: %s", err);
    ddp_msg_clear(&m);
    /* NCCLID: a relayed one has no token; the id is opaque but never blank */
    sample_msg(DDP_NCCLID, &m);
    m.u.ncclid.auth = (ddp_auth_t){0};
    CHECK(proto_validate(&m, err, sizeof err) == 0);
    CHECK(!has_nccl_key(&m));
    memset(m.u.ncclid.id, 0, sizeof m.u.ncclid.id);
    CHECK_MSG(proto_validate(&m, err, sizeof err) != 0 && strstr(err, "all zeros"),
              "a blank id refused: %s", err);
    m.u.ncclid.id[DDP_NCCL_ID_LEN - 1] = 1;
    CHECK(proto_validate(&m, err, sizeof err) == 0);
    m.u.ncclid.world = 0;
    CHECK(proto_validate(&m, err, sizeof err) != 0);
    ddp_msg_clear(&m);
    CHECK_STR(proto_type_name(DDP_NCCLID), "NCCLID");
}

/* A gpud that could not start says why in JOIN `failed`: it round-trips,
 * it is absent from an ordinary JOIN's bytes, only a gpud may say it, and
 * an unterminated one is refused. */
static void failed_start(void)
{
    char err[256];
    ddp_msg_t m, out;
    CHECK(sample_msg(DDP_JOIN, &m) == 0);
    m.u.join.role = DDP_ROLE_GPUD;
    zmsg_t *z = proto_encode(&m);
    CHECK(z && zframe_size(zmsg_first(z)) > 0);
    static const char key[] = "\xa6" "failed";
    bool found = false;
    for (size_t i = 0; z && i + 7 <= zframe_size(zmsg_first(z)) && !found; i++)
        found = memcmp(zframe_data(zmsg_first(z)) + i, key, 7) == 0;
    CHECK_MSG(!found, "a JOIN without a failure carries 'failed'");
    zmsg_destroy(&z);
    snprintf(m.u.join.failed, sizeof m.u.join.failed, "cannot set up model resnet18: no device");
    CHECK(proto_validate(&m, err, sizeof err) == 0);
    z = proto_encode(&m);
    CHECK(z && proto_decode(z, &out, err, sizeof err) == 0);
    if (z) {
        same_msg(&m, &out);
        ddp_msg_clear(&out);
    }
    zmsg_destroy(&z);
    m.u.join.role = DDP_ROLE_LOADER;
    CHECK_MSG(proto_validate(&m, err, sizeof err) != 0 && strstr(err, "only a gpud"),
              "a loader's failed start refused: %s", err);
    m.u.join.role = DDP_ROLE_GPUD;
    memset(m.u.join.failed, 'x', sizeof m.u.join.failed);
    CHECK_MSG(proto_validate(&m, err, sizeof err) != 0 && strstr(err, "'failed'"),
              "an unterminated 'failed' refused: %s", err);
    ddp_msg_clear(&m);
}

int main(void)
{
    log_init("test_proto", -1, 0);
    for (int t = DDP_JOIN; t <= DDP_TYPE_MAX; t++) {
        roundtrip_zmsg((ddp_type_t)t);
        roundtrip_bytes((ddp_type_t)t);
    }
    encode_batch_moves_pixels();
    encode_refuses_bad_structs();
    plan_without_paths();
    plan_present();
    train_additions();
    elastic_additions();
    loader_shards();
    wire_additions();
    train_wire_additions();
    names();
    sockets();
    nccl_additions();
    failed_start();
    return check_exit("test_proto_roundtrip");
}
