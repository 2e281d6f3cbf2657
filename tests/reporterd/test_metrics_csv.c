/* metrics.csv: header once, one row per call, appended across writers. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "reporterd/metrics_csv.h"

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
    return check_done("test_metrics_csv");
}
