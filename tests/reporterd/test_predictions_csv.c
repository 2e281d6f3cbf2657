/* predictions.csv: exact bytes for results, failed and missing samples,
 * quoting, k < 5, chunk order checks, atomic publication. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "reporterd/predictions_csv.h"

static char s_path[4096];

static void test_rows(void)
{
    /* 5 entries in two chunks: result, failed (label known), missing,
     * result with an odd path, failed (label unknown) */
    uint8_t status[5] = {1, 2, 0, 1, 2};
    int32_t labels[5] = {3, 7, -1, 0, -1};
    int32_t topk[15] = {3, 1, 2, -1, -1, -1, -1, -1, -1, 0, 4, 9, -1, -1, -1};
    float loss[5] = {0.1f, 0, 0, 2.5e-8f, 0};
    char *paths[5] = {"a/0.jpg", "b/bad.jpg", "c/x.jpg", "d/say \"hi\", ok.jpg", "e/n.jpg"};
    ev_predictions_t c1 = {.epoch = 0, .phase = 0, .first = 0, .n = 2, .total = 5, .k = 3,
                           .status = status, .labels = labels, .topk = topk, .loss = loss,
                           .paths = paths};
    ev_predictions_t c2 = c1;
    c2.first = 2;
    c2.n = 3;
    c2.status += 2;
    c2.labels += 2;
    c2.topk += 2 * 3;
    c2.loss += 2;
    c2.paths += 2;
    char err[512];
    unlink(s_path);
    predcsv_t *w = predcsv_new(s_path, err, sizeof err);
    CHECK(w != NULL);
    if (!w)
        return;
    ev_predictions_t skip = c2;
    CHECK(predcsv_add(w, &skip, err, sizeof err) == -1); /* starts at 2: out of order */
    CHECK(strstr(err, "out of order") != NULL);
    CHECK(predcsv_add(w, &c1, err, sizeof err) == 0);
    CHECK(access(s_path, F_OK) != 0); /* nothing visible before commit */
    ev_predictions_t wrong_total = c2;
    wrong_total.total = 6;
    CHECK(predcsv_add(w, &wrong_total, err, sizeof err) == -1);
    CHECK(predcsv_add(w, &c2, err, sizeof err) == 0);
    CHECK(predcsv_next(w) == 5);
    CHECK(predcsv_commit(&w, err, sizeof err) == 0);
    CHECK(w == NULL);
    char *got = check_slurp(s_path, NULL);
    const char *want = "index,path,label,top1,top2,top3,top4,top5,loss\n"
                       "0,a/0.jpg,3,3,1,2,,,0.100000001\n"
                       "1,b/bad.jpg,7,,,,,,\n"
                       "3,\"d/say \"\"hi\"\", ok.jpg\",0,0,4,9,,,2.50000003e-08\n"
                       "4,e/n.jpg,,,,,,,\n";
    if (!got || strcmp(got, want) != 0) {
        fprintf(stderr, "got:\n%swant:\n%s", got ? got : "(none)", want);
        g_failures++;
    }
    /* the loss column reads back as the same float */
    CHECK(strtof("0.100000001", NULL) == 0.1f && strtof("2.50000003e-08", NULL) == 2.5e-8f);
    free(got);
}

static void test_k5_no_paths_and_incomplete(void)
{
    uint8_t status[2] = {1, 1};
    int32_t labels[2] = {1, 2};
    int32_t topk[10] = {1, 2, 3, 4, 5, 9, 8, 7, 6, 2};
    float loss[2] = {1.0f, 3.25f};
    ev_predictions_t c = {.epoch = 2, .phase = 1, .first = 0, .n = 2, .total = 3, .k = 5,
                          .status = status, .labels = labels, .topk = topk, .loss = loss,
                          .paths = NULL};
    char err[512];
    char path[4200];
    snprintf(path, sizeof path, "%s.k5", s_path);
    unlink(path);
    predcsv_t *w = predcsv_new(path, err, sizeof err);
    CHECK(w && predcsv_add(w, &c, err, sizeof err) == 0);
    /* one entry short: no file, an error saying how many */
    CHECK(predcsv_commit(&w, err, sizeof err) == -1);
    CHECK(w == NULL && strstr(err, "2 of 3") != NULL);
    CHECK(access(path, F_OK) != 0);
    c.total = 2;
    w = predcsv_new(path, err, sizeof err);
    CHECK(w && predcsv_add(w, &c, err, sizeof err) == 0 && predcsv_commit(&w, err, sizeof err) == 0);
    char *got = check_slurp(path, NULL);
    CHECK(got && strcmp(got, "index,path,label,top1,top2,top3,top4,top5,loss\n"
                             "0,,1,1,2,3,4,5,1\n"
                             "1,,2,9,8,7,6,2,3.25\n") == 0);
    free(got);
    /* abandoned writer leaves nothing behind */
    unlink(path);
    w = predcsv_new(path, err, sizeof err);
    predcsv_destroy(&w);
    CHECK(w == NULL && access(path, F_OK) != 0);
    CHECK(predcsv_new("/nonexistent-dir/p.csv", err, sizeof err) == NULL);
    CHECK(strstr(err, "/nonexistent-dir/p.csv") != NULL);
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "predictions_csv.out";
    mkdir(dir, 0777);
    snprintf(s_path, sizeof s_path, "%s/predictions.csv", dir);
    test_rows();
    test_k5_no_paths_and_incomplete();
    return check_done("test_predictions_csv");
}
