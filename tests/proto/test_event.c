/* Events: round trip of every topic, rejection of bad events, and the
 * exact JSON text of the tap's --json mirror (escaping, confusion cells,
 * arrays, NaN -> null). */
#include "common/log.h"
#include "tests/proto/check.h"
#include "tests/proto/samples.h"

#include <math.h>
#include <stdlib.h>

static void same_event(const ddp_event_t *a, const ddp_event_t *b)
{
    CHECK(a->topic == b->topic);
    switch (a->topic) {
    case EV_METRIC: {
        const ev_metric_t *x = &a->u.metric, *y = &b->u.metric;
        CHECK(x->epoch == y->epoch && x->phase == y->phase && x->final == y->final &&
              x->planned == y->planned && x->samples == y->samples && x->failed == y->failed &&
              x->correct_top1 == y->correct_top1 && x->correct_top5 == y->correct_top5 &&
              x->duplicates == y->duplicates && x->loss_sum == y->loss_sum &&
              x->num_classes == y->num_classes && x->workers == y->workers &&
              x->wall_s == y->wall_s && x->images_per_sec == y->images_per_sec && x->lr == y->lr &&
              x->first_result_s == y->first_result_s &&
              x->steady_images_per_sec == y->steady_images_per_sec);
        for (uint32_t i = 0; i < x->num_classes && y->class_names; i++)
            CHECK_STR(x->class_names[i], y->class_names[i]);
        CHECK((x->cells == NULL) == (y->cells == NULL) && x->ncells == y->ncells);
        if (x->cells && y->cells)
            CHECK(memcmp(x->cells, y->cells, sizeof *x->cells * x->ncells) == 0);
        CHECK(x->rejected == y->rejected && x->nranks == y->nranks && (x->rank_images_per_sec == NULL) == (y->rank_images_per_sec == NULL));
        if (x->rank_images_per_sec && y->rank_images_per_sec)
            CHECK(memcmp(x->rank_images_per_sec, y->rank_images_per_sec, 8u * x->nranks) == 0);
        CHECK(x->has_decision == y->has_decision && x->decision == y->decision &&
              x->streak == y->streak && x->epochs == y->epochs);
        CHECK_STR(x->decision_reason, y->decision_reason);
        break;
    }
    case EV_PREDICTIONS: {
        const ev_predictions_t *x = &a->u.predictions, *y = &b->u.predictions;
        CHECK(x->epoch == y->epoch && x->phase == y->phase && x->first == y->first &&
              x->n == y->n && x->total == y->total && x->k == y->k);
        CHECK(memcmp(x->status, y->status, x->n) == 0 && memcmp(x->labels, y->labels, 4 * x->n) == 0 &&
              memcmp(x->topk, y->topk, 4 * x->n * x->k) == 0 && memcmp(x->loss, y->loss, 4 * x->n) == 0);
        CHECK((x->paths == NULL) == (y->paths == NULL));
        for (uint64_t i = 0; x->paths && y->paths && i < x->n; i++)
            CHECK_STR(x->paths[i], y->paths[i]);
        break;
    }
    case EV_PROGRESS: {
        const ev_progress_t *x = &a->u.progress, *y = &b->u.progress;
        CHECK(x->epoch == y->epoch && x->phase == y->phase && x->done == y->done &&
              x->total == y->total && x->images_per_sec == y->images_per_sec &&
              x->eta_s == y->eta_s && x->workers == y->workers && x->elapsed_s == y->elapsed_s &&
              x->failed == y->failed && x->rejected == y->rejected && x->nranks == y->nranks);
        CHECK((x->rank_done == NULL) == (y->rank_done == NULL));
        if (x->rank_done && y->rank_done)
            CHECK(memcmp(x->rank_done, y->rank_done, 8u * x->nranks) == 0);
        break;
    }
    case EV_LOG:
        CHECK_STR(a->u.log.level, b->u.log.level);
        CHECK_STR(a->u.log.daemon, b->u.log.daemon);
        CHECK_STR(a->u.log.msg, b->u.log.msg);
        CHECK(a->u.log.rank == b->u.log.rank);
        break;
    case EV_WORKER:
        CHECK(a->u.worker.rank == b->u.worker.rank &&
              a->u.worker.images_per_sec == b->u.worker.images_per_sec);
        CHECK_STR(a->u.worker.name, b->u.worker.name);
        CHECK_STR(a->u.worker.host, b->u.worker.host);
        CHECK_STR(a->u.worker.state, b->u.worker.state);
        break;
    case EV_END:
        CHECK(a->u.end.code == b->u.end.code);
        CHECK_STR(a->u.end.reason, b->u.end.reason);
        break;
    case EV_FAILED:
        CHECK(a->u.failed.epoch == b->u.failed.epoch && a->u.failed.phase == b->u.failed.phase &&
              a->u.failed.id == b->u.failed.id);
        CHECK_STR(a->u.failed.path, b->u.failed.path);
        CHECK_STR(a->u.failed.reason, b->u.failed.reason);
        break;
    case EV_MEMBERSHIP: {
        const ev_membership_t *x = &a->u.membership, *y = &b->u.membership;
        CHECK(x->gen == y->gen && x->world == y->world && x->n == y->n && x->step == y->step &&
              x->epoch == y->epoch && x->redone == y->redone);
        CHECK_STR(x->change, y->change);
        CHECK_STR(x->reason, y->reason);
        CHECK(x->n == 0 || memcmp(x->ranks, y->ranks, 4u * x->n) == 0);
        for (uint32_t i = 0; i < x->n && y->names; i++)
            CHECK_STR(x->names[i], y->names[i]);
        break;
    }
    }
}

static void roundtrip(ev_topic_t t)
{
    ddp_event_t in, out;
    char err[256] = "";
    CHECK(sample_event(t, &in) == 0);
    zmsg_t *z = event_encode(&in);
    CHECK(z && zmsg_size(z) == 2);
    CHECK(z && zframe_streq(zmsg_first(z), event_topic_name(t)));
    int rc = event_decode(z, &out, err, sizeof err);
    CHECK_MSG(rc == 0, "%s: %s", event_topic_name(t), err);
    if (rc == 0)
        same_event(&in, &out);
    event_clear(&out);
    event_clear(&out);
    zmsg_destroy(&z);
    event_clear(&in);
}

static void metric_without_confusion(void)
{
    ddp_event_t in, out;
    char err[256];
    sample_event(EV_METRIC, &in);
    free(in.u.metric.cells);
    in.u.metric.cells = NULL;
    in.u.metric.ncells = 0;
    zmsg_t *z = event_encode(&in);
    CHECK(event_decode(z, &out, err, sizeof err) == 0 && out.u.metric.cells == NULL);
    same_event(&in, &out);
    event_clear(&out);
    zmsg_destroy(&z);
    event_clear(&in);
}

/* --classes: the dataset's classes ride along the metric; bad lists refused. */
/* The sparse confusion cells: order, range and counts checked on both
 * sides (encode refuses, decode rejects bytes another encoder wrote). */
static void metric_cells(void)
{
    ddp_event_t ev, out;
    char err[256] = "";
    sample_event(EV_METRIC, &ev);
    ev_cell_t *c = ev.u.metric.cells, keep = c[0];
    c[0] = c[1], c[1] = keep;   /* out of order */
    CHECK(event_encode(&ev) == NULL);
    c[1] = c[0], c[0] = keep;
    c[5].pred = 3;              /* a class past num_classes */
    CHECK(event_encode(&ev) == NULL);
    c[5].pred = 2;
    c[2].count = 0;             /* a zero cell */
    CHECK(event_encode(&ev) == NULL);
    c[2].count = 4;
    ev.u.metric.samples = ev.u.metric.correct_top5 = 5; /* more cells than samples */
    ev.u.metric.correct_top1 = 5;
    CHECK(event_encode(&ev) == NULL);
    ev.u.metric.samples = ev.u.metric.correct_top5 = 20;
    ev.u.metric.correct_top1 = 16;
    /* decode: the same faults written into valid bytes */
    zmsg_t *z = event_encode(&ev);
    CHECK(z != NULL);
    zframe_t *body = zmsg_last(z);
    unsigned char *b = zframe_data(body);
    size_t size = zframe_size(body);
    unsigned char *at = memmem(b, size, c, 2 * sizeof *c);
    CHECK(at != NULL);
    if (at) {
        unsigned char *copy = malloc(size);
        memcpy(copy, b, size);
        unsigned char *p = copy + (at - b);
        memcpy(p, &c[1], sizeof *c);   /* cell 1 before cell 0 */
        memcpy(p + sizeof *c, &c[0], sizeof *c);
        CHECK(event_decode_bytes(EV_METRIC, copy, size, &out, err, sizeof err) == -1);
        CHECK_MSG(strstr(err, "is not after the one before"), "%s", err);
        memcpy(p, &c[0], sizeof *c);
        memcpy(p + sizeof *c, &c[1], sizeof *c);
        p[4] = 7;                      /* pred 7 of 3 classes */
        CHECK(event_decode_bytes(EV_METRIC, copy, size, &out, err, sizeof err) == -1);
        CHECK_MSG(strstr(err, "want both classes < 3"), "%s", err);
        p[4] = 0;
        CHECK(event_decode_bytes(EV_METRIC, copy, size, &out, err, sizeof err) == 0);
        CHECK(out.u.metric.ncells == 6 && out.u.metric.cells[5].count == 7);
        event_clear(&out);
        free(copy);
    }
    zmsg_destroy(&z);
    event_clear(&ev);
    /* the accessor and normaliser */
    ev_cell_t raw[] = {{2, 1, 3}, {0, 4, 1}, {2, 1, 2}, {1, 1, 0}};
    uint64_t n = 4;
    confusion_normalize(raw, &n);
    CHECK(n == 2 && raw[0].truth == 0 && raw[0].pred == 4 && raw[1].count == 5);
    CHECK(confusion_at(raw, n, 2, 1) == 5 && confusion_at(raw, n, 1, 1) == 0);
    CHECK(confusion_check(raw, n, 5, err, sizeof err) == 0);
    CHECK(confusion_check(raw, n, 4, err, sizeof err) == -1);
}

static void metric_present(void)
{
    ddp_event_t in, out;
    char err[256] = "";
    sample_event(EV_METRIC, &in);
    uint32_t present[] = {0, 2};
    in.u.metric.present = present;
    in.u.metric.npresent = 2;
    zmsg_t *z = event_encode(&in);
    CHECK(z && event_decode(z, &out, err, sizeof err) == 0);
    CHECK(out.u.metric.npresent == 2 && out.u.metric.present && out.u.metric.present[0] == 0 &&
          out.u.metric.present[1] == 2);
    char *text = event_to_json(&out);
    CHECK_MSG(text && strstr(text, "\"present\":[0,2]"), "%s", text ? text : "(null)");
    free(text);
    event_clear(&out);
    zmsg_destroy(&z);
    present[1] = 3;   /* past the 3 classes */
    z = event_encode(&in);
    CHECK(z == NULL);
    present[0] = 2, present[1] = 1;   /* not increasing */
    CHECK(event_validate(&in, err, sizeof err) == -1);
    CHECK_MSG(strstr(err, "'present[1]' is 1: want strictly increasing"), "%s", err);
    zmsg_destroy(&z);
    in.u.metric.present = NULL;
    in.u.metric.npresent = 0;
    event_clear(&in);
}

/* The optional progress keys: per-rank counts survive a round trip, and a
 * progress map without the keys added in version 1 still decodes. */
static void progress_optional(void)
{
    ddp_event_t in, out;
    char err[256] = "";
    uint64_t ranks[3] = {7, 0, 1ull << 40};
    sample_event(EV_PROGRESS, &in);
    in.u.progress.elapsed_s = 3.25;
    in.u.progress.failed = 4;
    in.u.progress.rejected = 9;
    in.u.progress.nranks = 3;
    in.u.progress.rank_done = ranks;
    zmsg_t *z = event_encode(&in);
    CHECK(event_decode(z, &out, err, sizeof err) == 0);
    same_event(&in, &out);
    char *json = event_to_json(&in);
    CHECK(json && strstr(json, "\"elapsed_s\":3.25,\"failed\":4,\"rejected\":9,"
                               "\"rank_done\":[7,0,1099511627776]}"));
    free(json);
    event_clear(&out);
    zmsg_destroy(&z);
    /* an old publisher's map: the 8 original keys only */
    static const char old[] = "\x88\xa1v\x02\xa5" "epoch\x01\xa5phase\x00\xa4" "done\x05\xa5total\x0a"
                              "\xaeimages_per_sec\x02\xa5" "eta_s\x03\xa7workers\x01";
    CHECK_MSG(event_decode_bytes(EV_PROGRESS, old, sizeof old - 1, &out, err, sizeof err) == 0,
              "%s", err);
    CHECK(out.u.progress.done == 5 && out.u.progress.total == 10 &&
          out.u.progress.elapsed_s == -1 && out.u.progress.nranks == 0 &&
          out.u.progress.rank_done == NULL && out.u.progress.failed == 0);
    event_clear(&out);
    /* rank_done must be whole u64s */
    static const char bad[] = "\x89\xa1v\x02\xa5" "epoch\x01\xa5phase\x00\xa4" "done\x05\xa5total\x0a"
                              "\xaeimages_per_sec\x02\xa5" "eta_s\x03\xa7workers\x01"
                              "\xa9rank_done\xc4\x03\x01\x02\x03";
    CHECK(event_decode_bytes(EV_PROGRESS, bad, sizeof bad - 1, &out, err, sizeof err) == -1);
    CHECK_MSG(strstr(err, "rank_done") != NULL, "%s", err);
}

/* The optional training keys of a metric: per-rank images/s and the
 * epoch's decision survive a round trip and reach the JSON mirror; a bad
 * decision is refused on both sides. */
static void metric_optional(void)
{
    ddp_event_t in, out;
    char err[256] = "";
    double ips[2] = {120.5, 0.1};
    sample_event(EV_METRIC, &in);
    free(in.u.metric.cells);
    in.u.metric.cells = NULL;
    in.u.metric.ncells = 0;
    in.u.metric.nranks = 2;
    in.u.metric.rank_images_per_sec = ips;
    in.u.metric.has_decision = true;
    in.u.metric.decision = 1; /* stop */
    in.u.metric.streak = 2;
    in.u.metric.epochs = 10;
    snprintf(in.u.metric.decision_reason, sizeof in.u.metric.decision_reason, "target \"met\"");
    in.u.metric.first_result_s = 0.25;       /* the start-up apart */
    in.u.metric.steady_images_per_sec = 16.5;
    zmsg_t *z = event_encode(&in);
    CHECK_MSG(z && event_decode(z, &out, err, sizeof err) == 0, "%s", err);
    same_event(&in, &out);
    event_clear(&out);
    zmsg_destroy(&z);
    char *json = event_to_json(&in);
    CHECK_MSG(json && strstr(json, "\"lr\":0.1,\"rank_images_per_sec\":[120.5,0.1],\"rejected\":6,"
                                   "\"first_result_s\":0.25,\"steady_images_per_sec\":16.5,\"decision\":1,"
                                   "\"streak\":2,\"epochs\":10,"
                                   "\"decision_reason\":\"target \\\"met\\\"\"}"),
              "%s", json ? json : "(null)");
    free(json);
    in.u.metric.steady_images_per_sec = NAN;   /* not a rate */
    CHECK(event_validate(&in, err, sizeof err) == -1);
    CHECK_MSG(strstr(err, "steady_images_per_sec"), "%s", err);
    in.u.metric.steady_images_per_sec = 16.5;
    in.u.metric.first_result_s = -1;
    CHECK(event_encode(&in) == NULL);
    in.u.metric.first_result_s = 0.25;
    in.u.metric.decision = 2;
    CHECK(event_encode(&in) == NULL);
    in.u.metric.rank_images_per_sec = NULL;
    in.u.metric.has_decision = false;
    in.u.metric.nranks = 0;
    event_clear(&in);
    /* a rank array that is not whole doubles, a decision out of range */
    static const char base[] = "\xa1v\x02\xa5" "epoch\x00\xa5phase\x01\xa5" "final\xc2\xa7planned\x01"
                               "\xa7samples\x01\xa6" "failed\x00\xac" "correct_top1\x00\xac"
                               "correct_top5\x00\xaa" "duplicates\x00\xa8loss_sum\x00\xab"
                               "class_names\x91\xa1" "a\xa7workers\x01\xa6wall_s\x00\xae"
                               "images_per_sec\x00\xa2lr\x00";
    static const char ranks[] = "\xb3rank_images_per_sec\xc4\x03\x01\x02\x03";
    static const char decision[] = "\xa8" "decision\x07\xa6streak\x00\xa6" "epochs\x01"
                                   "\xaf" "decision_reason\xa0";
    char bad[512];
    size_t n = sizeof base - 1;
    memcpy(bad, "\xde\x00\x11", 3); /* map16 of 17 keys */
    memcpy(bad + 3, base, n);
    memcpy(bad + 3 + n, ranks, sizeof ranks - 1);
    CHECK(event_decode_bytes(EV_METRIC, bad, 3 + n + sizeof ranks - 1, &out, err, sizeof err) == -1);
    CHECK_MSG(strstr(err, "rank_images_per_sec") != NULL, "%s", err);
    bad[2] = 20; /* the decision group instead, with decision 7 */
    memcpy(bad + 3 + n, decision, sizeof decision - 1);
    size_t size = 3 + n + sizeof decision - 1;
    CHECK(event_decode_bytes(EV_METRIC, bad, size, &out, err, sizeof err) == -1);
    CHECK_MSG(strstr(err, "decision") != NULL, "%s", err);
    bad[3 + n + 9] = 1; /* decision 1: fine */
    CHECK_MSG(event_decode_bytes(EV_METRIC, bad, size, &out, err, sizeof err) == 0, "%s", err);
    CHECK(out.u.metric.has_decision && out.u.metric.decision == 1 && out.u.metric.epochs == 1 &&
          out.u.metric.nranks == 0);
    event_clear(&out);
}

/* Re-encodes a sample with one field broken, bypassing event_encode's own
 * check, by swapping the body frame for hand-written msgpack. */
static void expect_reject_frames(const char *topic, const void *body, size_t size, const char *want)
{
    zmsg_t *z = zmsg_new();
    zmsg_addstr(z, topic);
    zmsg_addmem(z, body, size);
    ddp_event_t out;
    char err[256] = "";
    CHECK_MSG(event_decode(z, &out, err, sizeof err) == -1, "accepted, want '%s'", want);
    CHECK_MSG(strstr(err, want) != NULL, "reason '%s' lacks '%s'", err, want);
    CHECK(out.topic == 0);
    zmsg_destroy(&z);
}

#define REJ(topic, lit, want) expect_reject_frames(topic, lit, sizeof(lit) - 1, want)

static void rejects(void)
{
    REJ("nope", "\x81\xa1v\x02", "unknown event topic frame of 4 bytes");
    REJ("end", "\x82\xa1v\x03\xa4" "code\x00", "end: protocol version 3, want 2");
    REJ("end", "\x82\xa1v\x02\xa4" "code\x00", "end: missing key 'reason'");
    REJ("log",
        "\x85\xa1v\x02\xa5level\xa5" "fatal\xa6" "daemon\xa1x\xa4rank\x00\xa3msg\xa0",
        "log: 'level' is not one of error, warn, info");
    REJ("worker",
        "\x86\xa1v\x02\xa4rank\x00\xa4name\xa0\xa4host\xa0\xa5state\xa4gone\xaeimages_per_sec\x00",
        "worker: 'state' is not one of joined, dead, left");
    REJ("progress", "\xdd\xff\xff\xff\xff", "array of 4294967295 elements");
    /* predictions: status bin shorter than n */
    REJ("predictions",
        "\x8b\xa1v\x02\xa5" "epoch\x00\xa5phase\x00\xa5" "first\x00\xa1n\x02\xa5total\x02\xa1k\x01"
        "\xa6status\xc4\x01\x01\xa6labels\xc4\x08\0\0\0\0\0\0\0\0\xa4topk\xc4\x08\0\0\0\0\0\0\0\0"
        "\xa4loss\xc4\x08\0\0\0\0\0\0\0\0",
        "predictions: 'status' bin is 1 bytes, want n = 2");
    REJ("predictions",
        "\x8b\xa1v\x02\xa5" "epoch\x00\xa5phase\x00\xa5" "first\x00\xa1n\x02\xa5total\x01\xa1k\x01"
        "\xa6status\xc4\x02\x01\x01\xa6labels\xc4\x08\0\0\0\0\0\0\0\0\xa4topk\xc4\x08\0\0\0\0\0\0\0\0"
        "\xa4loss\xc4\x08\0\0\0\0\0\0\0\0",
        "predictions: chunk first=0 n=2 does not fit in total=1");
    REJ("predictions",
        "\x8b\xa1v\x02\xa5" "epoch\x00\xa5phase\x00\xa5" "first\x00\xa1n\x02\xa5total\x02\xa1k\x01"
        "\xa6status\xc4\x02\x01\x03\xa6labels\xc4\x08\0\0\0\0\0\0\0\0\xa4topk\xc4\x08\0\0\0\0\0\0\0\0"
        "\xa4loss\xc4\x08\0\0\0\0\0\0\0\0",
        "predictions: 'status[1]' is 3, want 1 (result) or 2 (failed)");

    ddp_event_t out;
    char err[256];
    zmsg_t *z = zmsg_new();
    zmsg_addstr(z, "end");
    CHECK(event_decode(z, &out, err, sizeof err) == -1 && strstr(err, "1 frames"));
    zmsg_destroy(&z);

    /* encode refuses what decode would reject */
    ddp_event_t ev;
    sample_event(EV_METRIC, &ev);
    ev.u.metric.correct_top1 = 21;
    CHECK(event_encode(&ev) == NULL);
    CHECK(event_to_json(&ev) == NULL);
    event_clear(&ev);
    sample_event(EV_MEMBERSHIP, &ev);
    strcpy(ev.u.membership.change, "left");
    CHECK(event_encode(&ev) == NULL);
    strcpy(ev.u.membership.change, "joined");
    ev.u.membership.world = 0;
    CHECK(event_encode(&ev) == NULL);
    ev.u.membership.world = 2;
    ev.u.membership.ranks[1] = -1;
    CHECK(event_encode(&ev) == NULL);
    event_clear(&ev);
    sample_event(EV_WORKER, &ev);
    strcpy(ev.u.worker.state, "zombie");
    CHECK(event_encode(&ev) == NULL);
    ev.topic = 0;
    CHECK(event_encode(&ev) == NULL);

    /* truncation of every sample at every length */
    for (int t = EV_METRIC; t <= EV_TOPIC_LAST; t++) {
        size_t size;
        unsigned char *bytes = sample_event_bytes((ev_topic_t)t, &size);
        for (size_t len = 0; len < size; len++) {
            unsigned char *cut = malloc(len ? len : 1);
            memcpy(cut, bytes, len);
            CHECK(event_decode_bytes((ev_topic_t)t, cut, len, &out, err, sizeof err) == -1);
            free(cut);
        }
        free(bytes);
    }
}

static void json_of(ev_topic_t t, void (*tweak)(ddp_event_t *), const char *want)
{
    ddp_event_t ev;
    sample_event(t, &ev);
    if (tweak)
        tweak(&ev);
    char *json = event_to_json(&ev);
    CHECK_MSG(json && strcmp(json, want) == 0, "\n got  %s\n want %s", json ? json : "(null)", want);
    free(json);
    event_clear(&ev);
}

static void nan_rate(ddp_event_t *ev) { ev->u.progress.eta_s = NAN; }
static void inf_loss(ddp_event_t *ev) { ev->u.predictions.loss[1] = INFINITY; }

static void json(void)
{
    json_of(EV_METRIC, NULL,
            "{\"topic\":\"metric\",\"v\":2,\"epoch\":4,\"phase\":\"train\",\"final\":true,\"planned\":21,"
            "\"samples\":20,\"failed\":1,\"correct_top1\":16,\"correct_top5\":20,\"duplicates\":2,"
            "\"loss_sum\":12.345678901234567,\"class_names\":[\"cat\",\"dog \\\"quoted\\\"\","
            "\"b\\\\ird\\n\"],\"workers\":3,\"wall_s\":1.5,\"images_per_sec\":13.25,\"lr\":0.1,"
            "\"confusion_cells\":[[0,0,5],[0,1,1],[1,1,4],[1,2,2],[2,0,1],[2,2,7]],\"rejected\":6}");
    json_of(EV_PREDICTIONS, inf_loss,
            "{\"topic\":\"predictions\",\"v\":2,\"epoch\":0,\"phase\":\"eval\",\"first\":10,\"n\":2,"
            "\"total\":12,\"k\":5,\"status\":[1,2],\"labels\":[2,0],"
            "\"topk\":[[2,1,0,-1,-1],[-1,-1,-1,-1,-1]],\"loss\":[0.5,null],"
            "\"paths\":[\"val/cat/0001.jpg\",\"val/dog/0002.JPEG\"]}");
    json_of(EV_PROGRESS, nan_rate,
            "{\"topic\":\"progress\",\"v\":2,\"epoch\":1,\"phase\":\"eval\",\"done\":500,\"total\":1000,"
            "\"images_per_sec\":250.5,\"eta_s\":null,\"workers\":2,\"elapsed_s\":0,"
            "\"failed\":0,\"rejected\":0}");
    json_of(EV_LOG, NULL,
            "{\"topic\":\"log\",\"v\":2,\"level\":\"warn\",\"daemon\":\"loaderd\",\"rank\":-1,"
            "\"msg\":\"cannot decode \\\"a.jpg\\\":\\tbad\\u0001 marker\"}");
    json_of(EV_WORKER, NULL,
            "{\"topic\":\"worker\",\"v\":2,\"rank\":1,\"name\":\"gpud-h-1\",\"host\":\"h\","
            "\"state\":\"dead\",\"images_per_sec\":99}");
    json_of(EV_END, NULL, "{\"topic\":\"end\",\"v\":2,\"code\":0,\"reason\":\"done\"}");
    json_of(EV_FAILED, NULL,
            "{\"topic\":\"failed\",\"v\":2,\"epoch\":2,\"phase\":\"train\",\"id\":31,"
            "\"path\":\"train/dog/bad.jpg\",\"reason\":\"Not a JPEG file: starts with 0x89 0x50\"}");
    json_of(EV_MEMBERSHIP, NULL,
            "{\"topic\":\"membership\",\"v\":2,\"gen\":2,\"world\":2,\"change\":\"lost\","
            "\"ranks\":[1,3],\"names\":[\"gpud-a-12\",\"gpud-b-\\\"7\\\"\"],\"step\":17,"
            "\"epoch\":1,\"redone\":true,\"reason\":\"ranks 1, 3 lost: silent for 10s\"}");
    CHECK(event_to_json(NULL) == NULL);
}

int main(void)
{
    log_init("test_event", -1, 0);
    for (int t = EV_METRIC; t <= EV_TOPIC_LAST; t++)
        roundtrip((ev_topic_t)t);
    CHECK_STR(event_topic_name(EV_PREDICTIONS), "predictions");
    CHECK_STR(event_topic_name((ev_topic_t)0), "unknown");
    metric_without_confusion();
    metric_cells();
    metric_present();
    progress_optional();
    metric_optional();
    rejects();
    json();
    return check_exit("test_event");
}
