/* samples — see samples.h. */
#include "tests/proto/samples.h"
#include "proto/codec.h"

#include <stdlib.h>
#include <string.h>

static void *dup_mem(const void *p, size_t n)
{
    void *q = malloc(n);
    if (q)
        memcpy(q, p, n);
    return q;
}

static char **strv(const char *const *src, size_t n)
{
    char **v = calloc(n, sizeof *v);
    for (size_t i = 0; v && i < n; i++)
        v[i] = strdup(src[i]);
    return v;
}

static const char *const class_names[] = {"cat", "dog \"quoted\"", "b\\ird\n"};
static const char *const paths[] = {"val/cat/0001.jpg", "val/dog/0002.JPEG", "val/x/3.png"};

static void sample_batch(ddp_batch_t *b)
{
    static const uint64_t ids[] = {7, 0, (1ull << 40) - 1};
    static const int32_t labels[] = {2, -1, 0};
    b->seq = 123456789012ull;
    b->epoch = 3;
    b->phase = DDP_PHASE_TRAIN;
    b->n = 3;
    b->c = 1;
    b->h = 2;
    b->w = 3;
    b->ids = dup_mem(ids, sizeof ids);
    b->labels = dup_mem(labels, sizeof labels);
    unsigned char px[18];
    for (int i = 0; i < 18; i++)
        px[i] = (unsigned char)(i * 14);
    b->pixels = zframe_new(px, sizeof px);
    b->step = 1ull << 35;
    b->global_count = 7;
    b->gen = 2;
    b->steps_per_epoch = (1ull << 35) / 3; /* step 2^35 is in epoch 3 */
}

static void sample_auth(ddp_auth_t *a)
{
    strcpy(a->job, "job-7");
    a->session = 0xfedcba9876543210ull;
    for (int i = 0; i < DDP_TOKEN_LEN; i++)
        a->token[i] = (uint8_t)(0xa0 + i);
}

static void sample_result(ddp_result_t *r)
{
    static const uint64_t ids[] = {5, 99};
    static const int32_t labels[] = {1, -1};
    static const int32_t topk[] = {1, 0, 2, 7, 9, 99999, 3, 4, 5, 6};
    static const float loss[] = {0.125f, 7.5f};
    r->rank = 2;
    r->epoch = 1;
    r->phase = DDP_PHASE_EVAL;
    r->seq = 42;
    r->n = 2;
    r->k = 5;
    r->ids = dup_mem(ids, sizeof ids);
    r->labels = dup_mem(labels, sizeof labels);
    r->topk = dup_mem(topk, sizeof topk);
    r->loss = dup_mem(loss, sizeof loss);
    r->compute_s = 0.0625;
    r->lr = 0.1;
    r->step = 12345;
    r->gen = 70000;
    sample_auth(&r->auth);
}

int sample_msg(ddp_type_t t, ddp_msg_t *m)
{
    memset(m, 0, sizeof *m);
    m->type = t;
    switch (t) {
    case DDP_JOIN:
        m->u.join = (ddp_join_t){.role = DDP_ROLE_GPUD, .pid = 4242, .want_rank = -1};
        strcpy(m->u.join.name, "gpud-host-4242");
        strcpy(m->u.join.host, "host");
        strcpy(m->u.join.backend, "cpu");
        strcpy(m->u.join.ring, "tcp://127.0.0.1:41234");
        strcpy(m->u.join.config, "--model wideresnet --lr 0.1 --sync-bn --seed 3");
        strcpy(m->u.join.job, "0123456789abcdef0123456789abcdef");
        return 0;
    case DDP_WELCOME:
        m->u.welcome = (ddp_welcome_t){.rank = 1, .world = 3};
        strcpy(m->u.welcome.job, "job-7");
        m->u.welcome.train = 1;
        strcpy(m->u.welcome.next_ring, "ipc:///tmp/run/.ipc/ring-2");
        m->u.welcome.session = 0x0123456789abcdefull;
        for (int i = 0; i < DDP_TOKEN_LEN; i++)
            m->u.welcome.token[i] = (uint8_t)(i * 7);
        m->u.welcome.has_secret = true;
        for (int i = 0; i < DDP_SECRET_LEN; i++)
            m->u.welcome.secret[i] = (uint8_t)(255 - i);
        m->u.welcome.gen = 4;
        return 0;
    case DDP_PLAN:
        m->u.plan.epoch = 2;
        m->u.plan.phase = DDP_PHASE_EVAL;
        m->u.plan.n = 3;
        m->u.plan.num_classes = 3;
        m->u.plan.class_names = strv(class_names, 3);
        m->u.plan.paths = strv(paths, 3);
        strcpy(m->u.plan.dataset, "/data/imagenet/val");
        return 0;
    case DDP_CREDIT: {
        static const uint64_t acks[] = {10, 11, 15};
        strcpy(m->u.credit.worker, "gpud-host-4242");
        m->u.credit.credits = 4;
        m->u.credit.n_acks = 3;
        m->u.credit.acks = dup_mem(acks, sizeof acks);
        m->u.credit.rank = 2;
        m->u.credit.gen = 1;
        sample_auth(&m->u.credit.auth);
        return 0;
    }
    case DDP_HEARTBEAT:
        strcpy(m->u.heartbeat.worker, "gpud-host-4242");
        m->u.heartbeat.rank = 0;
        m->u.heartbeat.batches_done = 1ull << 33;
        m->u.heartbeat.rejected = 17;
        sample_auth(&m->u.heartbeat.auth);
        return 0;
    case DDP_BATCH: sample_batch(&m->u.batch); return 0;
    case DDP_END: m->u.end = (ddp_end_t){.epoch = 9, .phase = DDP_PHASE_TRAIN}; return 0;
    case DDP_RESULT: sample_result(&m->u.result); return 0;
    case DDP_FAILED:
        m->u.failed = (ddp_failed_t){.epoch = 1, .phase = 0, .id = 77};
        strcpy(m->u.failed.path, "val/cat/broken.jpg");
        strcpy(m->u.failed.reason, "Premature end of JPEG file");
        sample_auth(&m->u.failed.auth);
        return 0;
    case DDP_STOP:
        m->u.stop.code = 3;
        strcpy(m->u.stop.reason, "worker 2 died and no batches are left");
        return 0;
    case DDP_DONE:
        m->u.done.code = 0;
        strcpy(m->u.done.reason, "");
        return 0;
    case DDP_EPOCH:
        m->u.epoch = (ddp_epoch_t){.epoch = 4, .decision = DDP_DECISION_STOP, .streak = 2,
                                   .val_top1 = 0.8625};
        strcpy(m->u.epoch.reason, "val top-1 0.8625 >= 0.85 for 2 epochs");
        return 0;
    case DDP_ISSUED: {
        static const uint64_t ids[] = {5, 99, 3};
        static const int32_t labels[] = {1, -1, 2};
        m->u.issued = (ddp_issued_t){.seq = 42, .epoch = 1, .phase = DDP_PHASE_EVAL, .rank = 2,
                                     .n = 3, .rejected = 5};
        m->u.issued.ids = dup_mem(ids, sizeof ids);
        m->u.issued.labels = dup_mem(labels, sizeof labels);
        sample_auth(&m->u.issued.auth);
        return 0;
    }
    case DDP_REISSUE:
        m->u.reissue = (ddp_reissue_t){.seq = 42, .epoch = 1, .phase = DDP_PHASE_EVAL, .rank = 2};
        strcpy(m->u.reissue.reason, "rank 2 predicts class 99 but the dataset has 10 classes");
        return 0;
    case DDP_MEMBERS: {
        static const char *const names[] = {"gpud-a-12", "gpud-b-7"};
        m->u.members = (ddp_members_t){.gen = 3, .rank = 1, .world = 2, .step = 1ull << 34,
                                       .epoch = 5, .paused = 1};
        strcpy(m->u.members.next_ring, "ipc:///tmp/run/.ipc/ring-0");
        m->u.members.names = strv(names, 2);
        strcpy(m->u.members.reason, "rank 1 (gpud-c-9) lost: missed heartbeats");
        m->u.members.session = 0x0123456789abcdefull;
        for (int i = 0; i < DDP_TOKEN_LEN; i++)
            m->u.members.token[i] = (uint8_t)(3 * i + 1);
        return 0;
    }
    case DDP_STEP:
        m->u.step = (ddp_step_t){.rank = 2, .gen = 3, .epoch = 5, .step = 1ull << 34,
                                 .status = DDP_STEP_RING_FAILED, .suspect = 1};
        sample_auth(&m->u.step.auth);
        return 0;
    case DDP_COMMIT:
        m->u.commit = (ddp_commit_t){.gen = 3, .epoch = 5, .step = (1ull << 34) + 1,
                                     .snapshot = 1};
        return 0;
    case DDP_STATE: {
        static const char image[] = "a checkpoint's bytes";
        m->u.state = (ddp_state_t){.gen = 6, .epoch = 2, .step = 77,
                                   .image = zframe_new(image, sizeof image)};
        sample_auth(&m->u.state.auth);
        return 0;
    }
    case DDP_NCCLID:
        m->u.ncclid = (ddp_ncclid_t){.gen = 4, .world = 3};
        for (int i = 0; i < DDP_NCCL_ID_LEN; i++)
            m->u.ncclid.id[i] = (uint8_t)(7 * i + 2);
        sample_auth(&m->u.ncclid.auth);
        return 0;
    }
    return -1;
}

static void sample_metric(ev_metric_t *m)
{
    /* the dense {5, 1, 0, 0, 4, 2, 1, 0, 7} as its nonzero cells */
    static const ev_cell_t conf[] = {{0, 0, 5}, {0, 1, 1}, {1, 1, 4},
                                     {1, 2, 2}, {2, 0, 1}, {2, 2, 7}};
    *m = (ev_metric_t){.epoch = 4, .phase = 1, .final = true, .planned = 21, .samples = 20,
                       .failed = 1, .correct_top1 = 16, .correct_top5 = 20, .duplicates = 2,
                       .loss_sum = 12.345678901234567, .num_classes = 3, .workers = 3,
                       .wall_s = 1.5, .images_per_sec = 13.25, .lr = 0.1, .rejected = 6};
    m->class_names = strv(class_names, 3);
    m->cells = dup_mem(conf, sizeof conf);
    m->ncells = sizeof conf / sizeof conf[0];
}

static void sample_predictions(ev_predictions_t *p)
{
    static const uint8_t status[] = {1, 2};
    static const int32_t labels[] = {2, 0};
    static const int32_t topk[] = {2, 1, 0, -1, -1, -1, -1, -1, -1, -1};
    static const float loss[] = {0.5f, 0.0f};
    *p = (ev_predictions_t){.epoch = 0, .phase = 0, .first = 10, .n = 2, .total = 12, .k = 5};
    p->status = dup_mem(status, sizeof status);
    p->labels = dup_mem(labels, sizeof labels);
    p->topk = dup_mem(topk, sizeof topk);
    p->loss = dup_mem(loss, sizeof loss);
    p->paths = strv(paths, 2);
}

int sample_event(ev_topic_t t, ddp_event_t *ev)
{
    memset(ev, 0, sizeof *ev);
    ev->topic = t;
    switch (t) {
    case EV_METRIC: sample_metric(&ev->u.metric); return 0;
    case EV_PREDICTIONS: sample_predictions(&ev->u.predictions); return 0;
    case EV_PROGRESS:
        ev->u.progress = (ev_progress_t){.epoch = 1, .phase = 0, .done = 500, .total = 1000,
                                         .images_per_sec = 250.5, .eta_s = 2.0, .workers = 2};
        return 0;
    case EV_LOG:
        strcpy(ev->u.log.level, "warn");
        strcpy(ev->u.log.daemon, "loaderd");
        ev->u.log.rank = -1;
        strcpy(ev->u.log.msg, "cannot decode \"a.jpg\":\tbad\x01 marker");
        return 0;
    case EV_WORKER:
        ev->u.worker.rank = 1;
        strcpy(ev->u.worker.name, "gpud-h-1");
        strcpy(ev->u.worker.host, "h");
        strcpy(ev->u.worker.state, "dead");
        ev->u.worker.images_per_sec = 99.0;
        return 0;
    case EV_END:
        ev->u.end.code = 0;
        strcpy(ev->u.end.reason, "done");
        return 0;
    case EV_MEMBERSHIP: {
        static const int32_t ranks[] = {1, 3};
        static const char *const names[] = {"gpud-a-12", "gpud-b-\"7\""};
        ev->u.membership = (ev_membership_t){.gen = 2, .world = 2, .n = 2, .step = 17,
                                             .epoch = 1, .redone = true};
        strcpy(ev->u.membership.change, "lost");
        ev->u.membership.ranks = dup_mem(ranks, sizeof ranks);
        ev->u.membership.names = strv(names, 2);
        strcpy(ev->u.membership.reason, "ranks 1, 3 lost: silent for 10s");
        return 0;
    }
    case EV_FAILED:
        ev->u.failed = (ev_failed_t){.epoch = 2, .phase = 1, .id = 31};
        strcpy(ev->u.failed.path, "train/dog/bad.jpg");
        strcpy(ev->u.failed.reason, "Not a JPEG file: starts with 0x89 0x50");
        return 0;
    }
    return -1;
}

unsigned char *sample_msg_bytes(ddp_type_t t, size_t *size, zframe_t **pixels)
{
    ddp_msg_t m;
    *pixels = NULL;
    if (sample_msg(t, &m) != 0)
        return NULL;
    zmsg_t *z = proto_encode(&m);
    ddp_msg_clear(&m);
    if (!z)
        return NULL;
    zframe_t *head = zmsg_pop(z);
    *pixels = zmsg_pop(z);
    zmsg_destroy(&z);
    *size = zframe_size(head);
    unsigned char *out = dup_mem(zframe_data(head), *size);
    zframe_destroy(&head);
    return out;
}

unsigned char *sample_event_bytes(ev_topic_t t, size_t *size)
{
    ddp_event_t ev;
    if (sample_event(t, &ev) != 0)
        return NULL;
    zmsg_t *z = event_encode(&ev);
    event_clear(&ev);
    if (!z)
        return NULL;
    zframe_t *topic = zmsg_pop(z), *body = zmsg_pop(z);
    zmsg_destroy(&z);
    *size = zframe_size(body);
    unsigned char *out = dup_mem(zframe_data(body), *size);
    zframe_destroy(&topic);
    zframe_destroy(&body);
    return out;
}

int sample_repack(const void *in, size_t size, char op, const char *key, const void *raw,
                  size_t rawlen, msgpack_sbuffer *out)
{
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    size_t off = 0;
    if (msgpack_unpack_next(&u, in, size, &off) != MSGPACK_UNPACK_SUCCESS ||
        u.data.type != MSGPACK_OBJECT_MAP) {
        msgpack_unpacked_destroy(&u);
        return -1;
    }
    const msgpack_object_map *map = &u.data.via.map;
    size_t klen = strlen(key);
    int found = 0;
    for (uint32_t i = 0; i < map->size; i++)
        found |= map->ptr[i].key.type == MSGPACK_OBJECT_STR &&
                 map->ptr[i].key.via.str.size == klen &&
                 memcmp(map->ptr[i].key.via.str.ptr, key, klen) == 0;
    if (!found && op != 'a') {
        msgpack_unpacked_destroy(&u);
        return -1;
    }
    msgpack_packer pk;
    msgpack_packer_init(&pk, out, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, map->size + (op == 'a') - (op == 'd'));
    for (uint32_t i = 0; i < map->size; i++) {
        const msgpack_object_kv *kv = &map->ptr[i];
        int match = kv->key.type == MSGPACK_OBJECT_STR && kv->key.via.str.size == klen &&
                    memcmp(kv->key.via.str.ptr, key, klen) == 0;
        if (match && op == 'd')
            continue;
        msgpack_pack_object(&pk, kv->key);
        if (match && op == 's')
            msgpack_sbuffer_write(out, raw, rawlen);
        else
            msgpack_pack_object(&pk, kv->val);
    }
    if (op == 'a') {
        msgpack_pack_str_with_body(&pk, key, klen);
        msgpack_sbuffer_write(out, raw, rawlen);
    }
    msgpack_unpacked_destroy(&u);
    return 0;
}
