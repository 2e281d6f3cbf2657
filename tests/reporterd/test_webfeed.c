/* webfeed / metrics_http: the dashboard's event feed. A client gets the
 * replay (history of metrics without their matrices, the newest metric
 * whole, the throughput samples of the whole job, the last progress) then
 * live events as "data: {json}\n\n" frames equal to event_to_json (a
 * progress with its "t_s" added); predictions are not sent; a late client
 * after a long job still gets the first epoch and the first throughput
 * sample within the bounds; a client that falls
 * WEBFEED_CLIENT_BUF behind is dropped, never blocking the publisher; at
 * most WEBFEED_MAX_CLIENTS; close lets the queued end event out, then -1.
 * Then over HTTP on loopback: / is the embedded page, /events a
 * text/event-stream with the same frames, /metrics unchanged. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "check.h"
#include "proto/messages.h"
#include "reporterd/metrics_http.h"
#include "reporterd/tputhist.h"
#include "reporterd/webfeed.h"
#include "reporterd/webpage.h"

static char *s_names[3] = {"cat", "<b>dog</b>", "\"emu\""};
static ev_cell_t s_conf[] = {{0, 0, 5}, {0, 1, 1}, {1, 1, 6}, {2, 0, 1}, {2, 2, 7}};

static ddp_event_t s_metric(uint32_t epoch, uint8_t phase)
{
    ddp_event_t ev = {.topic = EV_METRIC};
    ev.u.metric = (ev_metric_t){.epoch = epoch, .phase = phase, .planned = 20, .samples = 20,
                                .correct_top1 = 18, .correct_top5 = 20, .loss_sum = 3.5,
                                .num_classes = 3, .class_names = s_names, .cells = s_conf,
                                .ncells = sizeof s_conf / sizeof s_conf[0],
                                .workers = 2, .wall_s = 1, .images_per_sec = 20};
    return ev;
}

static ddp_event_t s_progress(uint64_t done)
{
    ddp_event_t ev = {.topic = EV_PROGRESS};
    ev.u.progress = (ev_progress_t){.phase = DDP_PHASE_EVAL, .done = done, .total = 100,
                                    .images_per_sec = 10, .eta_s = 1, .workers = 2,
                                    .elapsed_s = (double)done / 80};
    return ev;
}

/* The frame webfeed sends for ev: event_to_json, with "t_s" on a progress. */
static void s_expect(char *frame, size_t cap, const ddp_event_t *ev, double t)
{
    char *json = event_to_json(ev);
    size_t n = strlen(json);
    if (ev->topic == EV_PROGRESS)
        snprintf(frame, cap, "data: %.*s,\"t_s\":%.3f}\n\n", (int)(n - 1), json, t);
    else
        snprintf(frame, cap, "data: %s\n\n", json);
    free(json);
}

/* Everything queued for c now (0 ms wait), NUL-terminated; caller frees. */
static char *s_drain(webfeed_t *w, webfeed_client_t *c, ssize_t *last)
{
    size_t cap = 1 << 16, len = 0;
    char *out = malloc(cap);
    ssize_t n;
    while ((n = webfeed_read(w, c, out + len, cap - len - 1, 0)) > 0) {
        len += (size_t)n;
        if (cap - len < 1024)
            out = realloc(out, cap *= 2);
    }
    out[len] = 0;
    if (last)
        *last = n;
    return out;
}

static size_t s_count(const char *hay, const char *needle)
{
    size_t n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p++)
        n++;
    return n;
}

static void s_feed(void)
{
    webfeed_t *w = webfeed_new();
    CHECK(w);
    ddp_event_t e0 = s_metric(0, DDP_PHASE_TRAIN), e1 = s_metric(0, DDP_PHASE_EVAL);
    ddp_event_t p = s_progress(40);
    CHECK(webfeed_on_event(w, &e0, 1) == 0 && webfeed_on_event(w, &e1, 1) == 0);
    CHECK(webfeed_on_event(w, &p, 1) == 0); /* 0.5 s into its plan: the job's t 0.5 */
    ddp_event_t pred = {.topic = EV_PREDICTIONS};
    CHECK(webfeed_on_event(w, &pred, 1) == 0); /* ignored, not even encoded */

    /* a late client: history (no matrix), newest metric whole, progress */
    webfeed_client_t *c = webfeed_attach(w);
    CHECK(c && webfeed_clients(w) == 1);
    char *got = s_drain(w, c, NULL);
    char frame[4096];
    s_expect(frame, sizeof frame, &e1, 0);
    CHECK_MSG(strstr(got, frame), "the newest metric whole in\n%s", got);
    s_expect(frame, sizeof frame, &p, 0.5);
    CHECK_MSG(strstr(got, frame), "the progress in\n%s", got);
    CHECK_MSG(strstr(got, "data: {\"topic\":\"tput_history\",\"window_s\":2,\"stride\":1,\"points\":[[0.500,0,\"eval\",40]]}\n\n"),
              "the throughput history in\n%s", got);
    CHECK(strstr(got, "tput_history") < strstr(got, "\"topic\":\"progress\"")); /* history, then the newest */
    CHECK(s_count(got, "\"topic\":\"metric\"") == 2 && s_count(got, "\"confusion_cells\"") == 1);
    CHECK(strstr(got, "\\\"emu\\\"") && strstr(got, "<b>dog</b>")); /* JSON-escaped, as sent */
    CHECK(s_count(got, "data: ") == 4 && !strstr(got, "predictions"));
    free(got);

    /* live: one frame per event, nothing when idle (0 = keep-alive time) */
    char buf[64];
    CHECK(webfeed_read(w, c, buf, sizeof buf, 10) == 0);
    ddp_event_t p2 = s_progress(80); /* 1 s into the plan: on reducerd's clock, whenever it arrives */
    CHECK(webfeed_on_event(w, &p2, 7) == 0);
    got = s_drain(w, c, NULL);
    s_expect(frame, sizeof frame, &p2, 1.0);
    CHECK_MSG(strcmp(got, frame) == 0, "live frame\n%s\nwant\n%s", got, frame);
    free(got);

    /* a client that never reads is dropped; the publisher never waits */
    webfeed_client_t *slow = webfeed_attach(w);
    CHECK(slow);
    free(s_drain(w, c, NULL));
    size_t frames = WEBFEED_CLIENT_BUF / strlen(frame) + 2;
    for (size_t i = 0; i < frames; i++) {
        CHECK(webfeed_on_event(w, &p2, 8) == 0);
        free(s_drain(w, c, NULL)); /* the reading client keeps up */
    }
    CHECK(webfeed_dropped(w) == 1);
    CHECK(webfeed_read(w, slow, buf, sizeof buf, 0) == -1);
    CHECK(webfeed_read(w, c, buf, sizeof buf, 0) == 0);
    webfeed_detach(w, slow);

    /* at most WEBFEED_MAX_CLIENTS */
    webfeed_client_t *more[WEBFEED_MAX_CLIENTS];
    size_t n = 0;
    while (n < WEBFEED_MAX_CLIENTS && (more[n] = webfeed_attach(w)))
        n++;
    CHECK(n == WEBFEED_MAX_CLIENTS - 1 && webfeed_clients(w) == WEBFEED_MAX_CLIENTS);
    CHECK(webfeed_attach(w) == NULL);
    for (size_t i = 0; i < n; i++)
        webfeed_detach(w, more[i]);

    /* close: the queued end still goes out, then -1; no new client */
    ddp_event_t end = {.topic = EV_END};
    snprintf(end.u.end.reason, sizeof end.u.end.reason, "done");
    CHECK(webfeed_on_event(w, &end, 9) == 0);
    webfeed_close(w);
    ssize_t last = 0;
    got = s_drain(w, c, &last);
    CHECK(strstr(got, "\"topic\":\"end\"") && last == -1);
    free(got);
    CHECK(webfeed_attach(w) == NULL);
    CHECK(!webfeed_wait_detached(w, 10));
    webfeed_detach(w, c);
    CHECK(webfeed_wait_detached(w, 10));
    webfeed_destroy(&w);
    CHECK(w == NULL);
}

/* GET path on 127.0.0.1:port; reads until `until` appears, EOF or 5 s. */
static char *s_http(int port, const char *path, const char *until)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct timeval tv = {.tv_sec = 5};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    char req[256];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", path);
    CHECK(write(fd, req, (size_t)n) == n);
    size_t cap = 1 << 17, len = 0;
    char *out = calloc(1, cap);
    ssize_t r;
    while (len + 1 < cap && (r = read(fd, out + len, cap - len - 1)) > 0) {
        len += (size_t)r;
        out[len] = 0;
        if (until && strstr(out, until))
            break;
    }
    close(fd);
    return out;
}

/* A free loopback port (bound then released). */
static int s_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    int port = -1;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}

static void s_server(void)
{
    promstate_t *prom = promstate_new();
    webfeed_t *w = webfeed_new();
    int port = s_port();
    char hp[64], err[256];
    snprintf(hp, sizeof hp, "127.0.0.1:%d", port);
    metrics_http_limits_t limits = {128, 64};
    metrics_http_t *h = metrics_http_new(hp, prom, w, &limits, err, sizeof err);
    CHECK_MSG(h, "%s", err);
    if (!h)
        goto out;
    char *page = s_http(port, "/", NULL);
    CHECK(page && strstr(page, "HTTP/1.1 200") && strstr(page, "text/html"));
    CHECK(page && strstr(page, "Content-Security-Policy: default-src 'none'"));
    CHECK(page && strstr(page, (const char *)web_index_html + web_index_html_len - 200));
    CHECK(web_index_html_len > 1000 && web_index_html_len < 30 * 1024);
    CHECK(strlen((const char *)web_index_html) == web_index_html_len);
    free(page);
    ddp_event_t p = s_progress(40);
    promstate_on_event(prom, &p, 1.0);
    CHECK(webfeed_on_event(w, &p, 1) == 0);
    char *ev = s_http(port, "/events", "\"done\":40");
    CHECK_MSG(ev && strstr(ev, "200 OK") && strstr(ev, "text/event-stream") &&
              strstr(ev, "data: {\"topic\":\"progress\""), "%s", ev ? ev : "(no answer)");
    free(ev);
    char *m = s_http(port, "/metrics", NULL);
    CHECK(m && strstr(m, "ddpipe_samples_processed_total 40"));
    free(m);
    char *nf = s_http(port, "/nope", NULL);
    CHECK(nf && strstr(nf, "404") && strstr(nf, "/metrics"));
    free(nf);
    metrics_http_destroy(&h);
out:
    webfeed_destroy(&w);
    promstate_destroy(&prom);
}

/* A late page after a long job (more epochs and progress events than the
 * history holds): the replay starts at the first epoch and the first
 * throughput sample, ends at the newest, and fits the client's buffer. */
static void s_long_job(void)
{
    webfeed_t *w = webfeed_new();
    CHECK(w);
    const uint32_t epochs = 3000; /* 6000 metrics, over the 2000 kept */
    double now = 1;
    for (uint32_t e = 0; e < epochs; e++) {
        for (uint64_t k = 1; k <= 4; k++) {
            ddp_event_t p = s_progress(20 * k);
            p.u.progress.epoch = e;
            p.u.progress.phase = DDP_PHASE_TRAIN;
            CHECK(webfeed_on_event(w, &p, now += 0.25) == 0);
        }
        ddp_event_t t = s_metric(e, DDP_PHASE_TRAIN), v = s_metric(e, DDP_PHASE_EVAL);
        t.u.metric.final = false;
        CHECK(webfeed_on_event(w, &t, now) == 0 && webfeed_on_event(w, &v, now) == 0);
    }
    webfeed_client_t *c = webfeed_attach(w);
    CHECK(c);
    ssize_t last = 0;
    char *got = c ? s_drain(w, c, &last) : NULL;
    CHECK(got && last == 0 && webfeed_dropped(w) == 0);
    if (got) {
        size_t metrics = s_count(got, "\"topic\":\"metric\"");
        CHECK_MSG(metrics > 500 && metrics <= 2001, "%zu metrics replayed", metrics);
        CHECK(strstr(got, ",\"epoch\":0,\"phase\":\"train\"")); /* the first epoch */
        char newest[64];
        snprintf(newest, sizeof newest, ",\"epoch\":%u,\"phase\":\"eval\"", epochs - 1);
        CHECK(strstr(got, newest));
        CHECK(strstr(got, "\"points\":[[0.250,0,\"train\",20],")); /* the first sample */
        const char *h = strstr(got, "tput_history");
        size_t samples = h ? s_count(h, "\"train\"") : 0; /* the history is one line: */
        CHECK_MSG(samples >= TPUTHIST_MAX / 4 && samples <= TPUTHIST_MAX + 1, "%zu samples", samples);
        CHECK_MSG(strlen(got) < WEBFEED_CLIENT_BUF / 4, "a %zu-byte replay", strlen(got));
    }
    free(got);
    webfeed_detach(w, c);
    webfeed_destroy(&w);
}

int main(void)
{
    s_feed();
    s_long_job();
    s_server();
    return check_done("test_webfeed");
}
