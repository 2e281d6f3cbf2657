/* metrics.csv: header once, one row per call, appended across writers. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "reporterd/metrics_csv.h"
#include "reporterd/seed_csv.h"

/* The eval-layout file written above (3 good rows, 1 torn) reads back;
 * training rows round-trip through write_rows/read; the seed CSV. */
static void test_training_layout(const char *eval_path, const char *dir)
{
    char err[512], path[4096];
    metrics_row_t *rows;
    size_t n, skipped;
    CHECK(metrics_csv_read(eval_path, &rows, &n, &skipped, err, sizeof err) == 0);
    CHECK(n == 3 && skipped == 1 && rows[0].phase == 1 && rows[0].loss == 0.375 &&
          isnan(rows[1].top1) && isnan(rows[0].epoch_seconds) && rows[2].samples == 4 &&
          strcmp(rows[2].time, "2024-05-01T12:00:03.000Z") == 0 && rows[0].nranks == 0);
    double ips[3] = {10.5, 0, 7.25};
    ev_metric_t m = {.epoch = 4, .phase = 1, .samples = 10, .correct_top1 = 5, .correct_top5 = 9,
                     .loss_sum = 2.5, .images_per_sec = 40, .lr = 0.05, .wall_s = 0.25,
                     .nranks = 3, .rank_images_per_sec = ips};
    rows = realloc(rows, 4 * sizeof *rows);
    CHECK(rows && metrics_csv_row(&m, 1714564810.0, &rows[3]) == 0);
    snprintf(path, sizeof path, "%s/train.csv", dir);
    CHECK(metrics_csv_write_rows(path, rows, 4, err, sizeof err) == 0);
    char *got = check_slurp(path, NULL);
    const char *want = "time,epoch,phase,samples,loss,top1,top5,images_per_sec,lr,epoch_seconds,"
                       "images_per_sec_rank0,images_per_sec_rank1,images_per_sec_rank2\n"
                       "2024-05-01T12:00:00.000Z,1,train,8,0.375,0.75,1.0,250.5,0.1,,,,\n"
                       "2024-05-01T12:00:01.500Z,1,val,0,,,,250.5,0.0,,,,\n"
                       "2024-05-01T12:00:03.000Z,1,val,4,0.25,0.25,0.5,250.5,0.0,,,,\n"
                       "2024-05-01T12:00:10.000Z,4,train,10,0.25,0.5,0.9,40.0,0.05,0.25,10.5,0.0,7.25\n";
    CHECK_MSG(got && strcmp(got, want) == 0, "got:\n%s", got ? got : "(none)");
    free(got);
    metrics_row_t *back;
    size_t nb;
    CHECK(metrics_csv_read(path, &back, &nb, &skipped, err, sizeof err) == 0);
    CHECK(nb == 4 && skipped == 0 && back[3].nranks == 3 && back[3].rank_ips[2] == 7.25 &&
          back[3].epoch_seconds == 0.25 && back[1].phase == 0 && back[0].nranks == 0);
    for (size_t i = 0; i < nb; i++)
        metrics_csv_row_clear(&back[i]);
    free(back);
    for (size_t i = 0; i < 4; i++)
        metrics_csv_row_clear(&rows[i]);
    free(rows);
    CHECK(metrics_csv_read("/nonexistent-dir/none.csv", &back, &nb, &skipped, err, sizeof err) == 0 &&
          nb == 0);
    snprintf(path, sizeof path, "%s/other.csv", dir);
    FILE *f = fopen(path, "w");
    if (f) {
        fputs("a,b\n1,2\n", f);
        fclose(f);
    }
    CHECK(metrics_csv_read(path, &back, &nb, &skipped, err, sizeof err) == -1 && strstr(err, "header"));
}

/* Python's repr(round(v, d)), as the seed's csv.writer prints it. */
static void test_seed_round(void)
{
    char b[40];
    CHECK(strcmp(seed_csv_round(0.0, 1, b), "0.0") == 0);
    CHECK(strcmp(seed_csv_round(12.25, 1, b), "12.2") == 0);  /* tie: to even, as round() */
    CHECK(strcmp(seed_csv_round(12.35, 1, b), "12.3") == 0);  /* 12.35 is 12.3499999... */
    CHECK(strcmp(seed_csv_round(7.96, 1, b), "8.0") == 0);
    CHECK(strcmp(seed_csv_round(0.85, 4, b), "0.85") == 0);
    CHECK(strcmp(seed_csv_round(2.0 / 3.0, 4, b), "0.6667") == 0);
    CHECK(strcmp(seed_csv_round(1.0, 4, b), "1.0") == 0);
    CHECK(strcmp(seed_csv_round(1234.56, 1, b), "1234.6") == 0);
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "metrics_csv.out";
    mkdir(dir, 0777);
    char path[4096], why[512];
    snprintf(path, sizeof path, "%s/metrics.csv", dir);
    unlink(path);
    ev_metric_t m;
    memset(&m, 0, sizeof m);
    m.epoch = 1;
    m.phase = 1;
    m.samples = 8;
    m.correct_top1 = 6;
    m.correct_top5 = 8;
    m.loss_sum = 3.0;
    m.images_per_sec = 250.5;
    m.lr = 0.1;
    CHECK(metrics_csv_append(path, &m, 1714564800.0, why, sizeof why) == 0);
    m.phase = 0;
    m.samples = 0; /* nothing evaluated: empty loss/top1/top5 */
    m.lr = 0;
    CHECK(metrics_csv_append(path, &m, 1714564801.5, why, sizeof why) == 0);
    char *got = check_slurp(path, NULL);
    const char *want = "time,epoch,phase,samples,loss,top1,top5,images_per_sec,lr\n"
                       "2024-05-01T12:00:00.000Z,1,train,8,0.375,0.75,1.0,250.5,0.1\n"
                       "2024-05-01T12:00:01.500Z,1,eval,0,,,,250.5,0.0\n";
    if (!got || strcmp(got, want) != 0) {
        fprintf(stderr, "got:\n%swant:\n%s", got ? got : "(none)", want);
        g_failures++;
    }
    free(got);
    /* a torn last line (no newline) does not swallow the next row */
    FILE *f = fopen(path, "a");
    CHECK(f != NULL);
    if (f) {
        fputs("2024-05-01T12:00:02.000Z,2,tr", f);
        fclose(f);
    }
    m.samples = 4;
    m.loss_sum = 1.0;
    m.correct_top1 = 1;
    m.correct_top5 = 2;
    CHECK(metrics_csv_append(path, &m, 1714564803.0, why, sizeof why) == 0);
    got = check_slurp(path, NULL);
    CHECK(got && strstr(got, ",2,tr\n2024-05-01T12:00:03.000Z,1,eval,4,0.25,0.25,0.5,250.5,0.0\n"));
    free(got);
    CHECK(metrics_csv_append("/nonexistent-dir/metrics.csv", &m, 0, why, sizeof why) == -1);
    test_training_layout(path, dir);
    test_seed_round();
    return check_done("test_metrics_csv");
}
