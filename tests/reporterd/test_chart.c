/* chart / tput / tapcache / promstate: the confusion heat map and F1 bars
 * are valid PNG/SVG for 10 classes (long and UTF-8 names), 1 class, 300
 * classes (labels dropped, still drawn) and 1,000 classes (ImageNet's: the
 * cells an image, the SVG a few MB, not the 206 MB of a million vector
 * rectangles); the throughput history gives
 * one series per rank; the tap cache keeps the last state per topic; the
 * Prometheus text has HELP/TYPE for every family and monotone counters. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "reporterd/chart.h"
#include "reporterd/plot.h"
#include "reporterd/promstate.h"
#include "reporterd/tapcache.h"
#include "reporterd/tput.h"

static const char *s_dir;

static int s_is_png(const char *path)
{
    size_t len = 0;
    char *d = check_slurp(path, &len);
    int ok = d && len > 100 && memcmp(d, "\x89PNG\r\n\x1a\n", 8) == 0 &&
             memcmp(d + len - 8, "IEND", 4) == 0;
    free(d);
    return ok;
}

static int s_is_svg(const char *path)
{
    char *d = check_slurp(path, NULL);
    int ok = d && strstr(d, "<svg") && strstr(d, "</svg>");
    free(d);
    return ok;
}

static void s_charts(const char *stem, uint32_t nc, char **names)
{
    uint64_t *conf = calloc((size_t)nc * nc, sizeof *conf);
    for (uint32_t t = 0; t < nc; t++)
        for (uint32_t p = 0; p < nc; p++)
            conf[(size_t)t * nc + p] = t == p ? 90 + t % 7 : (t + 2 * p) % 5;
    char png[512], svg[512], fpng[512], fsvg[512], why[256] = "";
    snprintf(png, sizeof png, "%s/%s-confusion.png", s_dir, stem);
    snprintf(svg, sizeof svg, "%s/%s-confusion.svg", s_dir, stem);
    snprintf(fpng, sizeof fpng, "%s/%s-f1.png", s_dir, stem);
    snprintf(fsvg, sizeof fsvg, "%s/%s-f1.svg", s_dir, stem);
    uint64_t ncells;
    ev_cell_t *cells = confusion_from_dense(conf, nc, &ncells);
    chart_classes_t c = {"Confusion matrix (test)", cells, ncells, nc, names, 0};
    CHECK(chart_confusion_write(&c, png, svg, why, sizeof why) == 0);
    CHECK(chart_f1_write(&c, fpng, fsvg, why, sizeof why) == 0);
    CHECK(s_is_png(png) && s_is_png(fpng) && s_is_svg(svg) && s_is_svg(fsvg));
    if (why[0])
        fprintf(stderr, "%s: %s\n", stem, why);
    free(cells);
    free(conf);
}

static void test_charts(void)
{
    char *names[10] = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal",
                       "Shirt", "Sneaker", "Bag",
                       "Ankle boot with a very long name that must be shortened \xc3\xa9\xc3\xa9"};
    s_charts("fmnist", 10, names);
    s_charts("one", 1, NULL);
    s_charts("many", 300, NULL);
    s_charts("imagenet", 1000, NULL);
    char svg[512];
    snprintf(svg, sizeof svg, "%s/imagenet-confusion.svg", s_dir);
    size_t len = 0;
    char *d = check_slurp(svg, &len);
    CHECK_MSG(d && len < 8u << 20, "1000-class confusion SVG: %zu bytes", len);
    CHECK(d && strstr(d, "<image") != NULL);
    free(d);
    char err[256];
    chart_classes_t none = {"x", NULL, 0, 0, NULL, 0};
    CHECK(chart_confusion_write(&none, "/nonexistent/a.png", NULL, err, sizeof err) == -1);
    /* past CHART_CONFUSION_MAX classes no heat map: refused, nothing allocated */
    chart_classes_t huge = {"x", NULL, 0, CHART_CONFUSION_MAX + 1, NULL, 0};
    CHECK(chart_confusion_write(&huge, "/nonexistent/a.png", NULL, err, sizeof err) == -1);
    CHECK(strstr(err, "more than the 1000") != NULL);
    ev_cell_t one = {0, 0, 1};
    chart_classes_t c = {"x", &one, 1, 1, NULL, 0};
    CHECK(chart_confusion_write(&c, "/nonexistent-dir/a.png", NULL, err, sizeof err) == -1);
    CHECK(strstr(err, "/nonexistent-dir/a.png") != NULL);
}

static void test_tput(void)
{
    tput_t *t = tput_new();
    uint64_t ranks[2] = {0, 0};
    ev_progress_t p = {.total = 1000, .nranks = 2, .rank_done = ranks, .elapsed_s = -1};
    for (int i = 0; i <= 10; i++) {
        ranks[0] = 30u * i;
        ranks[1] = 70u * i;
        p.done = ranks[0] + ranks[1];
        CHECK(tput_add(t, &p, 100.0 + i) == 0);
    }
    CHECK(tput_points(t) == 11);
    plot_t *pl = plot_new("Throughput", "s", "images/s");
    CHECK(tput_plot(t, pl) == 0);
    char path[512], why[256];
    snprintf(path, sizeof path, "%s/tput.png", s_dir);
    CHECK(plot_write_png(pl, path, 800, 500, why, sizeof why) == 0 && s_is_png(path));
    plot_destroy(&pl);
    tput_destroy(&t);
}

/* Points on reducerd's clock (elapsed_s), not on arrival: events sent
 * every 0.5 s but delivered with jitter (and two at once) give a series
 * sampled exactly every 0.5 s from the plan's arrival, whose rate is the
 * true 200 images/s. */
static void test_tput_half_second(void)
{
    tput_t *t = tput_new();
    static const double delay[] = {0.01, 0.3, 0.02, 0.45, 0.45, 0.1, 0.0, 0.2};
    ev_progress_t p = {.total = 1000};
    for (int i = 1; i <= 8; i++) {
        p.elapsed_s = 0.5 * i;
        p.done = 100u * (unsigned)i;
        CHECK(tput_add(t, &p, 1000.0 + 0.5 * i + delay[i - 1]) == 0);
    }
    CHECK(tput_points(t) == 9); /* the plan's origin + 8 events */
    double x[9], y[9];
    size_t k = tput_series(t, -1, x, y);
    CHECK(k == 9);
    for (size_t i = 0; i < k; i++) {
        CHECK_MSG(fabs(x[i] - 0.5 * (double)i) < 1e-9, "x[%zu] = %g", i, x[i]);
        CHECK_MSG(fabs(y[i] - 200.0) < 1e-6, "y[%zu] = %g", i, y[i]);
    }
    tput_destroy(&t);
}

/* A week at two events a second (1.2M events) over epochs of 3,000 events
 * stays within TPUT_MAX_POINTS, starts at the origin, ends at the newest
 * event, keeps every plan, and its rates are still exact: a steady 200
 * img/s everywhere. */
static void test_tput_bounded(void)
{
    tput_t *t = tput_new();
    const size_t events = 7 * 24 * 3600 * 2, per_plan = 3000;
    ev_progress_t p = {.total = 1000000};
    for (size_t i = 0; i < events; i++) {
        size_t k = i % per_plan;
        p.epoch = (uint32_t)(i / per_plan);
        p.elapsed_s = 0.5 * (double)(k + 1);
        p.done = 100u * (k + 1);
        CHECK(tput_add(t, &p, 1.0 + 0.5 * (double)(i + 1)) == 0);
        CHECK(tput_points(t) <= TPUT_MAX_POINTS);
    }
    size_t n = tput_points(t);
    CHECK_MSG(n > TPUT_MAX_POINTS / 4, "%zu points", n);
    double *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    CHECK(x && y);
    size_t k = tput_series(t, -1, x, y);
    CHECK(k > 0);
    CHECK_MSG(fabs(x[0]) < 1e-9, "first x %g", x[0]);
    CHECK_MSG(fabs(x[k - 1] - 0.5 * (double)events) < 1e-6, "last x %g", x[k - 1]);
    for (size_t i = 0; i < k; i++) {
        CHECK_MSG(fabs(y[i] - 200.0) < 1e-6, "y[%zu] = %g", i, y[i]);
        CHECK(i == 0 || x[i] >= x[i - 1]);
    }
    free(x);
    free(y);
    tput_destroy(&t);
}

/* A job shorter than one progress tick: its only event (elapsed_s since
 * the plan) still gives a curve from the plan's arrival, per rank too. */
static void test_tput_one_event(void)
{
    tput_t *t = tput_new();
    uint64_t ranks[2] = {300, 700};
    ev_progress_t p = {.done = 1000, .total = 1000, .elapsed_s = 0.5, .nranks = 2,
                       .rank_done = ranks};
    CHECK(tput_add(t, &p, 100.0) == 0);
    CHECK(tput_points(t) == 2);
    plot_t *pl = plot_new("Throughput", "s", "images/s");
    CHECK(tput_plot(t, pl) == 0);
    char path[512], why[256];
    snprintf(path, sizeof path, "%s/tput1.svg", s_dir);
    CHECK(plot_write_svg(pl, path, 800, 500, why, sizeof why) == 0);
    FILE *f = fopen(path, "r");
    char *svg = calloc(1, 1 << 20);
    CHECK(f && svg && fread(svg, 1, (1 << 20) - 1, f) > 0);
    if (f)
        fclose(f);
    /* tab10's first three colours: "all workers", rank 0, rank 1; each a
     * legend line and a curve */
    const char *colours[] = {"stroke:rgb(12.2%,46.7%,70.6%);", "stroke:rgb(100%,49.8%,5.5%);",
                             "stroke:rgb(17.3%,62.7%,17.3%);"};
    for (int c = 0; c < 3; c++) {
        int n = 0;
        for (const char *q = svg; (q = strstr(q, colours[c])) != NULL; q++)
            n++;
        CHECK(n >= 2);
    }
    free(svg);
    plot_destroy(&pl);
    tput_destroy(&t);
}

static zmsg_t *s_msg(const char *topic, const char *body)
{
    zmsg_t *m = zmsg_new();
    zmsg_addstr(m, topic);
    zmsg_addstr(m, body);
    return m;
}

static void test_tapcache(void)
{
    tapcache_t *c = tapcache_new();
    ddp_event_t ev = {.topic = EV_WORKER};
    for (int i = 0; i < 3; i++) { /* rank 0 twice: kept once */
        ev.u.worker.rank = i % 2;
        zmsg_t *m = s_msg("worker", i == 2 ? "w0-new" : "w");
        CHECK(tapcache_keep(c, &ev, m) == 0);
        zmsg_destroy(&m);
    }
    ev = (ddp_event_t){.topic = EV_LOG};
    zmsg_t *m = s_msg("log", "x");
    CHECK(tapcache_keep(c, &ev, m) == 0); /* not state: not kept */
    zmsg_destroy(&m);
    ev = (ddp_event_t){.topic = EV_METRIC};
    m = s_msg("metric", "eval");
    CHECK(tapcache_keep(c, &ev, m) == 0);
    zmsg_destroy(&m);
    CHECK(tapcache_size(c) == 3);
    /* the generation in force: the last membership event */
    for (int g = 0; g < 2; g++) {
        ev = (ddp_event_t){.topic = EV_MEMBERSHIP};
        m = s_msg("membership", g ? "gen1" : "gen0");
        CHECK(tapcache_keep(c, &ev, m) == 0);
        zmsg_destroy(&m);
    }
    CHECK(tapcache_size(c) == 4);
    /* replay through a real PUB/SUB pair */
    zsock_t *pub = zsock_new_pub("inproc://tapcache-test");
    zsock_t *sub = zsock_new_sub("inproc://tapcache-test", "");
    zclock_sleep(50);
    CHECK(tapcache_replay(c, pub, "met", 3) == 1);
    CHECK(tapcache_replay(c, pub, "", 0) == 4);
    char *topic = NULL, *body = NULL;
    CHECK(zsock_recv(sub, "ss", &topic, &body) == 0 && topic && strcmp(topic, "metric") == 0);
    free(topic);
    free(body);
    CHECK(zsock_recv(sub, "ss", &topic, &body) == 0 && body && strcmp(body, "w0-new") == 0);
    free(topic);
    free(body);
    CHECK(zsock_recv(sub, "ss", &topic, &body) == 0 && body && strcmp(body, "w") == 0);
    free(topic);
    free(body);
    CHECK(zsock_recv(sub, "ss", &topic, &body) == 0 && body && strcmp(body, "gen1") == 0);
    free(topic);
    free(body);
    zsock_destroy(&sub);
    zsock_destroy(&pub);
    tapcache_destroy(&c);
}

static uint64_t s_value(const char *text, const char *sample)
{
    const char *p = strstr(text, sample);
    return p ? strtoull(p + strlen(sample), NULL, 10) : UINT64_MAX;
}

static void test_promstate(void)
{
    promstate_t *s = promstate_new();
    uint64_t ranks[2] = {40, 50};
    ddp_event_t ev = {.topic = EV_PROGRESS};
    ev.u.progress = (ev_progress_t){.epoch = 0, .done = 100, .total = 200, .failed = 3,
                                    .images_per_sec = 12.5, .workers = 2, .rejected = 4,
                                    .nranks = 2, .rank_done = ranks};
    promstate_on_event(s, &ev, 1.0);
    ev.u.progress.epoch = 1; /* a new epoch: the counters keep counting */
    ev.u.progress.done = 10;
    ev.u.progress.failed = 0;
    ranks[0] = 60;
    promstate_on_event(s, &ev, 4.0);
    promstate_add_rejected(s, 2);
    char *text = promstate_render(s);
    CHECK(text != NULL);
    if (text) {
        CHECK(s_value(text, "\nddpipe_samples_processed_total ") == 110);
        CHECK(s_value(text, "\nddpipe_failed_images_total ") == 3);
        CHECK(s_value(text, "ddpipe_worker_samples_total{rank=\"0\"} ") == 60);
        CHECK(s_value(text, "ddpipe_rejected_messages_total{daemon=\"reporterd\"} ") == 2);
        CHECK(s_value(text, "ddpipe_rejected_messages_total{daemon=\"reducerd\"} ") == 4);
        CHECK(strstr(text, "ddpipe_worker_images_per_second{rank=\"0\"} 6.66666") != NULL);
        /* every family: HELP then TYPE; counters end in _total */
        int families = 0;
        for (const char *p = strstr(text, "# TYPE "); p; p = strstr(p + 1, "# TYPE ")) {
            families++;
            char name[128], type[32];
            CHECK(sscanf(p, "# TYPE %127s %31s", name, type) == 2);
            size_t n = strlen(name);
            if (strcmp(type, "counter") == 0)
                CHECK(n > 6 && strcmp(name + n - 6, "_total") == 0);
        }
        CHECK(families >= 15);
        CHECK(strstr(text, "ddpipe_world_size") == NULL); /* no membership: an eval job */
    }
    free(text);
    /* training: the live world size from the membership events */
    ddp_event_t mev = {.topic = EV_MEMBERSHIP};
    mev.u.membership = (ev_membership_t){.gen = 2, .world = 3};
    strcpy(mev.u.membership.change, "lost");
    promstate_on_event(s, &mev, 5.0);
    text = promstate_render(s);
    CHECK(text && s_value(text, "\nddpipe_world_size ") == 3);
    CHECK(text && s_value(text, "\nddpipe_membership_generation ") == 2);
    CHECK(text && s_value(text, "ddpipe_events_total{topic=\"membership\"} ") == 1);
    free(text);
    promstate_destroy(&s);
}

int main(int argc, char **argv)
{
    s_dir = argc > 1 ? argv[1] : ".";
    zsys_init();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", s_dir);
    if (system(cmd) != 0)
        return 1;
    test_charts();
    test_tput();
    test_tput_one_event();
    test_tput_half_second();
    test_tput_bounded();
    test_tapcache();
    test_promstate();
    plot_shutdown();
    return check_done("test_chart");
}
