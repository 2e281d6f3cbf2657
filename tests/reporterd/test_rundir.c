/* rundir: a short training run and an eval run, event by event, then the
 * files of the run directory. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "proto/messages.h"
#include "reporterd/class_report.h"
#include "reporterd/plot.h"
#include "reporterd/rundir.h"

#define NC 3
static char *s_names[NC] = {"ant", "bee", "cicada"};

/* The nonzero cells of a dense NC x NC matrix, in one of a ring of
 * buffers (a metric borrows them until rundir has copied it). */
static ev_cell_t *s_cells(const uint64_t *conf, uint64_t *n)
{
    static ev_cell_t ring[8][NC * NC];
    static unsigned next;
    ev_cell_t *cells = ring[next++ % 8];
    *n = 0;
    for (uint32_t i = 0; i < NC * NC; i++)
        if (conf[i])
            cells[(*n)++] = (ev_cell_t){i / NC, i % NC, conf[i]};
    return cells;
}

/* The report of a dense matrix, as reporterd builds it from the cells. */
static char *s_report(const uint64_t *conf)
{
    uint64_t n;
    const ev_cell_t *cells = s_cells(conf, &n);
    return class_report_text(cells, n, NC, s_names);
}

static ev_metric_t s_metric(uint32_t epoch, uint8_t phase, uint64_t *conf, uint64_t failed)
{
    ev_metric_t m;
    memset(&m, 0, sizeof m);
    m.epoch = epoch;
    m.phase = phase;
    m.num_classes = NC;
    m.class_names = s_names;
    m.cells = s_cells(conf, &m.ncells);
    for (int t = 0; t < NC; t++)
        for (int p = 0; p < NC; p++) {
            m.samples += conf[t * NC + p];
            m.correct_top1 += t == p ? conf[t * NC + p] : 0;
        }
    m.correct_top5 = m.samples;
    m.failed = failed;
    m.planned = m.samples + failed;
    m.loss_sum = 2.0 / (epoch + 1) * (double)m.samples * (phase ? 1.0 : 1.2);
    m.images_per_sec = phase ? 900.0 + 10 * epoch : 2500.0;
    m.lr = phase ? 0.1 : 0.0;
    m.workers = 2;
    return m;
}

static int s_count_lines(const char *text)
{
    int n = 0;
    for (const char *p = text; p && *p; p++)
        n += *p == '\n';
    return n;
}

static void s_expect_file(const char *dir, const char *name, size_t min_size)
{
    char path[4096];
    struct stat st;
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path) {
        fprintf(stderr, "%s/%s: path too long\n", dir, name);
        g_failures++;
        return;
    }
    if (stat(path, &st) != 0 || (size_t)st.st_size < min_size) {
        fprintf(stderr, "%s: missing or smaller than %zu bytes\n", path, min_size);
        g_failures++;
    }
}

static void s_no_temporaries(const char *dir)
{
    DIR *d = opendir(dir);
    CHECK(d != NULL);
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strstr(e->d_name, ".tmp.")) {
            fprintf(stderr, "left behind: %s/%s\n", dir, e->d_name);
            g_failures++;
        }
    if (d)
        closedir(d);
}

static char *s_read(const char *dir, const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return check_slurp(path, NULL);
}

static void test_training(const char *base)
{
    char dir[4096], why[1024];
    snprintf(dir, sizeof dir, "%s/train/nested", base); /* mkdir -p */
    char old[4200];
    snprintf(old, sizeof old, "%s/metrics.csv", dir); /* appended to: start afresh */
    unlink(old);
    rundir_t *r = rundir_new(dir, why, sizeof why);
    CHECK(r != NULL);
    if (!r)
        return;
    uint64_t conf[3][NC * NC] = {{3, 2, 1, 1, 3, 2, 2, 1, 3},
                                 {5, 1, 0, 1, 4, 1, 0, 1, 5},
                                 {6, 0, 0, 0, 5, 1, 0, 0, 6}};
    for (uint32_t e = 1; e <= 3; e++) {
        ev_metric_t tr = s_metric(e, DDP_PHASE_TRAIN, conf[e - 1], 0);
        ev_metric_t va = s_metric(e, DDP_PHASE_EVAL, conf[e - 1], 1);
        CHECK(rundir_on_metric(r, &tr, why, sizeof why) == 0);
        CHECK(rundir_on_metric(r, &va, why, sizeof why) == 0);
        ev_failed_t f = {.epoch = e, .phase = DDP_PHASE_EVAL, .id = 7};
        snprintf(f.path, sizeof f.path, "val/bee/broken.jpg");
        snprintf(f.reason, sizeof f.reason, "epoch %u: Not a JPEG file", e);
        CHECK(rundir_on_failed(r, &f) == 0);
    }
    /* a repeated metric replaces the kept one, no second CSV row */
    ev_metric_t again = s_metric(3, DDP_PHASE_EVAL, conf[2], 1);
    CHECK(rundir_on_metric(r, &again, why, sizeof why) == 0);
    CHECK(rundir_finish(r, why, sizeof why) == 0);
    rundir_destroy(&r);
    CHECK(r == NULL);

    char *csv = s_read(dir, "metrics.csv");
    CHECK(csv && s_count_lines(csv) == 7);
    /* a training run: the training layout, validation rows as "val" */
    CHECK(csv && strncmp(csv, "time,epoch,phase,samples,loss,top1,top5,images_per_sec,lr,"
                              "epoch_seconds\n", 70) == 0 && strstr(csv, ",3,val,18,"));
    free(csv);
    char *sum = s_read(dir, "summary.json");
    CHECK(sum && strstr(sum, "\"epoch\": 3,\n  \"phase\": \"eval\""));
    CHECK(sum && strstr(sum, "\"failed_files\": [\n    {\"index\": 7, \"path\": "
                             "\"val/bee/broken.jpg\", \"reason\": \"epoch 3: Not a JPEG file\"}\n  ]"));
    free(sum);
    char *rep = s_read(dir, "classification_report.txt");
    char *want = s_report(conf[2]);
    CHECK(rep && want && strcmp(rep, want) == 0);
    free(rep);
    free(want);
    const char *plots[] = {"loss.png", "loss.svg", "accuracy.png", "accuracy.svg",
                           "throughput.png", "throughput.svg"};
    for (size_t i = 0; i < 6; i++)
        s_expect_file(dir, plots[i], 5000);
    s_no_temporaries(dir);
}

/* A training epoch's metrics with times, per-rank rates and the decision. */
static void s_epoch(rundir_t *r, uint32_t e, uint64_t *conf, uint8_t decision, const char *reason,
                    bool final)
{
    char err[1024];
    double ranks[2] = {100.0 + e, 50.5};
    ev_metric_t tr = s_metric(e, DDP_PHASE_TRAIN, conf, 0);
    ev_metric_t va = s_metric(e, DDP_PHASE_EVAL, conf, 0);
    tr.wall_s = 10.25 + e;
    va.wall_s = 1.5;
    tr.nranks = 2;
    tr.rank_images_per_sec = ranks;
    for (int i = 0; i < 2; i++) {
        ev_metric_t *m = i ? &va : &tr;
        m->has_decision = true;
        m->decision = decision;
        m->epochs = 10;
        snprintf(m->decision_reason, sizeof m->decision_reason, "%s", reason);
    }
    va.final = final;
    CHECK(rundir_on_metric(r, &tr, err, sizeof err) == 0);
    CHECK(rundir_on_metric(r, &va, err, sizeof err) == 0);
}

/* Two runs of one training job: epochs 0-2, then a resume from epoch 2
 * (its row redone) to an early stop after epoch 3. metrics.csv and the
 * seed CSV cover the whole training; summary.json has the training object. */
static void test_resume(const char *base)
{
    char dir[4096], why[1024], path[4200];
    snprintf(dir, sizeof dir, "%s/resume", base);
    snprintf(path, sizeof path, "%s/metrics.csv", dir);
    unlink(path);
    const char *seed = "2ranks-16bs-0.1lr-0.9m-5.0w.csv";
    uint64_t conf[4][NC * NC] = {{3, 2, 1, 1, 3, 2, 2, 1, 3},   /* 9/18 */
                                 {5, 1, 0, 1, 4, 1, 0, 1, 5},   /* 14/18 */
                                 {6, 0, 0, 0, 5, 1, 0, 0, 6},   /* 17/18 */
                                 {6, 0, 0, 0, 6, 0, 1, 0, 5}};  /* 17/18 */
    rundir_t *r = rundir_new(dir, why, sizeof why);
    CHECK(r && rundir_train_setup(r, -1, seed, why, sizeof why) == 0);
    for (uint32_t e = 0; r && e < 3; e++)
        s_epoch(r, e, conf[e], 0, "continue", false);
    rundir_destroy(&r); /* killed before the end: no finish */
    r = rundir_new(dir, why, sizeof why);
    CHECK(r && rundir_train_setup(r, -1, "a/b.csv", why, sizeof why) == -1 && strstr(why, "file name"));
    CHECK(r && rundir_train_setup(r, 2, seed, why, sizeof why) == 0);
    char *csv = s_read(dir, "metrics.csv");
    CHECK(csv && s_count_lines(csv) == 5 && !strstr(csv, ",2,train,"));
    free(csv);
    s_epoch(r, 2, conf[2], 0, "continue", false);
    s_epoch(r, 3, conf[3], 1, "early stop after epoch 3: val top-1 0.9444", true);
    CHECK(r && rundir_finish(r, why, sizeof why) == 0);
    rundir_destroy(&r);
    csv = s_read(dir, "metrics.csv");
    CHECK(csv && s_count_lines(csv) == 9);
    CHECK(csv && strncmp(csv, "time,epoch,phase,samples,loss,top1,top5,images_per_sec,lr,epoch_seconds,"
                              "images_per_sec_rank0,images_per_sec_rank1\n", 113) == 0);
    /* rows in epoch order, train first; the validation rows have no rank rates */
    CHECK(csv && strstr(csv, ",0,train,18,2.0,0.5,1.0,900.0,0.1,10.25,100.0,50.5\n"));
    CHECK(csv && strstr(csv, ",3,train,18,0.5,0.9444444444444444,1.0,930.0,0.1,13.25,103.0,50.5\n"));
    CHECK(csv && strstr(csv, ",3,val,18,0.6,0.9444444444444444,1.0,2500.0,0.0,1.5,,\n"));
    free(csv);
    char *sc = s_read(dir, seed);
    CHECK_MSG(sc && strcmp(sc, "time,val_accuracy\n0.0,0.0\n10.2,0.5\n21.5,0.7778\n33.8,0.9444\n"
                              "47.0,0.9444\n") == 0, "seed csv:\n%s", sc ? sc : "(none)");
    free(sc);
    char *sum = s_read(dir, "summary.json");
    CHECK_MSG(sum && strstr(sum, "\"epoch\": 3,\n  \"phase\": \"eval\"") &&
              strstr(sum, "  \"training\": {\"epochs_run\": 4, \"last_epoch\": 3, \"stopped_early\": true, "
                          "\"stop_reason\": \"early stop after epoch 3: val top-1 0.9444\", "
                          "\"best_val_top1\": 0.9444444444444444, \"best_val_epoch\": 2, "
                          "\"final_train_loss\": 0.5, \"final_train_top1\": 0.9444444444444444, "
                          "\"total_seconds\": 53.0, \"ranks_lost\": 0, \"ranks_joined\": 0, "
                          "\"steps_redone\": 0, \"world_size\": null, \"checkpoint_failures\": 0, "
                          "\"checkpoint_error\": null, \"last_good_checkpoint\": null, \"stopped\": null, "
                          "\"loss_scale\": null, \"skipped_steps\": 0}\n}\n"),
              "summary:\n%s", sum ? sum : "(none)");
    free(sum);
    char *rep = s_read(dir, "classification_report.txt");
    char *want = s_report(conf[3]);
    CHECK(rep && want && strcmp(rep, want) == 0); /* of the last validation */
    free(rep);
    free(want);
    s_no_temporaries(dir);
}

static ev_predictions_t s_chunk(uint64_t first, uint64_t n, uint8_t *st, int32_t *lab,
                                int32_t *topk, float *loss, char **paths)
{
    ev_predictions_t p = {.epoch = 0, .phase = DDP_PHASE_EVAL, .first = first, .n = n,
                          .total = 4, .k = 1, .status = st + first, .labels = lab + first,
                          .topk = topk + first, .loss = loss + first, .paths = paths + first};
    return p;
}

static void test_eval(const char *base)
{
    char dir[4096], why[1024];
    snprintf(dir, sizeof dir, "%s/eval", base);
    rundir_t *r = rundir_new(dir, why, sizeof why);
    CHECK(r != NULL);
    if (!r)
        return;
    uint8_t st[4] = {1, 2, 1, 1};
    int32_t lab[4] = {0, -1, 2, 1}, topk[4] = {0, -1, 2, 2};
    float loss[4] = {0.5f, 0, 0.25f, 1.5f};
    char *paths[4] = {"a.jpg", "b.jpg", "c.jpg", "d.jpg"};
    ev_predictions_t c1 = s_chunk(0, 2, st, lab, topk, loss, paths);
    ev_predictions_t c2 = s_chunk(2, 2, st, lab, topk, loss, paths);
    CHECK(rundir_on_predictions(r, &c2, why, sizeof why) == -1); /* no start */
    CHECK(rundir_on_predictions(r, &c1, why, sizeof why) == 0);
    CHECK(rundir_on_predictions(r, &c2, why, sizeof why) == 0);
    uint64_t conf[NC * NC] = {1, 0, 0, 0, 0, 1, 0, 0, 1};
    ev_metric_t m = s_metric(0, DDP_PHASE_EVAL, conf, 1);
    CHECK(rundir_on_metric(r, &m, why, sizeof why) == 0);
    CHECK(rundir_finish(r, why, sizeof why) == 0);
    rundir_destroy(&r);
    char *pred = s_read(dir, "predictions.csv");
    CHECK(pred && strcmp(pred, "index,path,label,top1,top2,top3,top4,top5,loss\n"
                               "0,a.jpg,0,0,,,,,0.5\n"
                               "1,b.jpg,,,,,,,\n"
                               "2,c.jpg,2,2,,,,,0.25\n"
                               "3,d.jpg,1,2,,,,,1.5\n") == 0);
    free(pred);
    /* the failed sample came with the predictions: path known, reason not */
    char *sum = s_read(dir, "summary.json");
    CHECK(sum && strstr(sum, "{\"index\": 1, \"path\": \"b.jpg\", \"reason\": null}"));
    free(sum);
    s_expect_file(dir, "accuracy.png", 5000);
    s_no_temporaries(dir);
}

static void test_errors(const char *base)
{
    char dir[4096], why[1024];
    snprintf(dir, sizeof dir, "%s/empty", base);
    rundir_t *r = rundir_new(dir, why, sizeof why);
    CHECK(r != NULL);
    CHECK(rundir_finish(r, why, sizeof why) == -1 && strstr(why, "no metric"));
    s_expect_file(dir, "loss.png", 3000); /* the plots are still there */
    rundir_destroy(&r);
    /* a file where the directory should be */
    snprintf(dir, sizeof dir, "%s/empty/loss.png", base);
    CHECK(rundir_new(dir, why, sizeof why) == NULL && strstr(why, "loss.png"));
}

int main(int argc, char **argv)
{
    const char *base = argc > 1 ? argv[1] : "rundir.out";
    mkdir(base, 0777);
    test_training(base);
    test_resume(base);
    test_eval(base);
    test_errors(base);
    plot_shutdown();
    return check_done("test_rundir");
}
