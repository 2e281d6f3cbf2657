/* summary.json: values against ones computed here from the counts, layout,
 * escaping, determinism of everything but the run-dependent keys. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "reporterd/summary.h"

static char *s_names[3] = {"cat", "dog \"big\"", "p\xc3\xa2t\xc3\xa9"};
/* true 0: 5 right, 1 as dog; true 1: 2 as cat, 3 right, 1 as class 2;
 * class 2: no support, predicted once. */
static ev_cell_t s_conf[] = {{0, 0, 5}, {0, 1, 1}, {1, 0, 2}, {1, 1, 3}, {1, 2, 1}};

static ev_metric_t s_metric(void)
{
    ev_metric_t m;
    memset(&m, 0, sizeof m);
    m.epoch = 4;
    m.phase = 0;
    m.planned = 14;
    m.samples = 12;
    m.failed = 2;
    m.correct_top1 = 8;
    m.correct_top5 = 11;
    m.duplicates = 3;
    m.loss_sum = 6.5;
    m.num_classes = 3;
    m.class_names = s_names;
    m.cells = s_conf;
    m.ncells = sizeof s_conf / sizeof s_conf[0];
    m.workers = 3;
    m.wall_s = 2.25;
    m.images_per_sec = 5.333;
    m.first_result_s = 0.75;
    m.steady_images_per_sec = 6.5;
    return m;
}

/* The number after the first `needle` at or after `from`. */
static double s_num(const char *from, const char *needle)
{
    const char *p = from ? strstr(from, needle) : NULL;
    if (!p) {
        fprintf(stderr, "missing %s\n", needle);
        g_failures++;
        return NAN;
    }
    return strtod(p + strlen(needle), NULL);
}

static double s_f1(double p, double r) { return p + r == 0.0 ? 0.0 : 2.0 * p * r / (p + r); }

static void test_values(void)
{
    ev_metric_t m = s_metric();
    char *j = summary_json(&m, NULL, 0, NULL);
    CHECK(j != NULL);
    if (!j)
        return;
    CHECK(s_num(j, "\"epoch\": ") == 4.0);
    CHECK(strstr(j, "\"phase\": \"eval\",\n") != NULL);
    CHECK(s_num(j, "\"planned\": ") == 14.0);
    CHECK(s_num(j, "\"samples\": ") == 12.0);
    CHECK(s_num(j, "\"failed\": ") == 2.0);
    CHECK(s_num(j, "\"duplicates_ignored\": ") == 3.0);
    CHECK(s_num(j, "\"correct_top1\": ") == 8.0);
    CHECK(s_num(j, "\"correct_top5\": ") == 11.0);
    /* fractions of samples with a result: failed are not in the denominator */
    CHECK(s_num(j, "\"top1\": ") == 8.0 / 12.0);
    CHECK(s_num(j, "\"top5\": ") == 11.0 / 12.0);
    CHECK(s_num(j, "\"loss\": ") == 6.5 / 12.0);
    double p[3] = {5.0 / 7.0, 3.0 / 4.0, 0.0}, r[3] = {5.0 / 6.0, 3.0 / 6.0, 0.0};
    const char *names_json[3] = {"\"cat\"", "\"dog \\\"big\\\"\"", "\"p\xc3\xa2t\xc3\xa9\""};
    double sup[3] = {6, 6, 0};
    double f[3];
    for (int c = 0; c < 3; c++) {
        f[c] = s_f1(p[c], r[c]);
        const char *at = strstr(j, names_json[c]);
        CHECK(at != NULL);
        CHECK(s_num(at, "\"precision\": ") == p[c]);
        CHECK(s_num(at, "\"recall\": ") == r[c]);
        CHECK(s_num(at, "\"f1\": ") == f[c]);
        CHECK(s_num(at, "\"support\": ") == sup[c]);
    }
    CHECK(s_num(j, "\"macro_f1\": ") == (f[0] + f[1] + f[2]) / 3.0);
    CHECK(s_num(j, "\"weighted_f1\": ") == (f[0] * 6 + f[1] * 6 + f[2] * 0) / 12.0);
    CHECK(strstr(j, "\"failed_files\": [],\n") != NULL);
    CHECK(s_num(j, "\"workers\": ") == 3.0);
    CHECK(s_num(j, "\"images_per_sec\": ") == 5.333);
    CHECK(s_num(j, "\"wall_seconds\": ") == 2.25);
    CHECK(s_num(j, "\"first_result_seconds\": ") == 0.75);
    CHECK(s_num(j, "\"steady_images_per_sec\": ") == 6.5);
    CHECK(strstr(j, "\"top1\": 0.6666666666666666,\n") != NULL); /* shortest round-trip */
    /* the run-dependent keys are the last five lines before the brace */
    const char *w = strstr(j, "  \"workers\"");
    CHECK(w && strstr(w, "\n  \"images_per_sec\"") && strstr(w, "\n  \"wall_seconds\"") &&
          strstr(w, ",\n  \"first_result_seconds\": 0.75,\n  \"steady_images_per_sec\": 6.5\n}\n"));
    free(j);
}

/* Text before "  \"workers\"": the deterministic part. */
static size_t s_stable_len(const char *j)
{
    const char *w = strstr(j, "  \"workers\"");
    return w ? (size_t)(w - j) : 0;
}

static void test_determinism_and_failed(const char *outdir)
{
    ev_metric_t a = s_metric(), b = s_metric();
    b.workers = 17;
    b.wall_s = 99.0;
    b.images_per_sec = 1e6;
    summary_failed_t fa[2] = {{9, "b,ad.jpg", "not a JPEG"}, {3, "x\"y\n.png", NULL}};
    summary_failed_t fb[2] = {fa[1], fa[0]}; /* other arrival order */
    char *ja = summary_json(&a, fa, 2, NULL), *jb = summary_json(&b, fb, 2, NULL);
    CHECK(ja && jb);
    if (!ja || !jb) {
        free(ja);
        free(jb);
        return;
    }
    size_t la = s_stable_len(ja);
    CHECK(la > 0 && la == s_stable_len(jb) && memcmp(ja, jb, la) == 0);
    CHECK(strcmp(ja, jb) != 0);
    const char *want = "  \"failed_files\": [\n"
                       "    {\"index\": 3, \"path\": \"x\\\"y\\n.png\", \"reason\": null},\n"
                       "    {\"index\": 9, \"path\": \"b,ad.jpg\", \"reason\": \"not a JPEG\"}\n"
                       "  ],\n";
    CHECK(strstr(ja, want) != NULL);
    char path[4096], why[256];
    mkdir(outdir, 0777);
    snprintf(path, sizeof path, "%s/summary.json", outdir);
    CHECK(summary_write(path, &a, fa, 2, NULL, why, sizeof why) == 0);
    char *disk = check_slurp(path, NULL);
    CHECK(disk && strcmp(disk, ja) == 0);
    free(disk);
    /* a directory that does not exist: an error with the path, no crash */
    CHECK(summary_write("/nonexistent-dir/x/summary.json", &a, NULL, 0, NULL, why, sizeof why) == -1);
    CHECK(strstr(why, "/nonexistent-dir/x/summary.json") != NULL);
    free(ja);
    free(jb);
}

static void test_no_samples_and_no_names(void)
{
    ev_metric_t m;
    memset(&m, 0, sizeof m);
    m.phase = 1;
    m.planned = 2;
    m.failed = 2;
    m.num_classes = 2;
    /* no cells: an empty matrix */
    char *j = summary_json(&m, NULL, 0, NULL);
    CHECK(j != NULL);
    if (!j)
        return;
    CHECK(strstr(j, "\"top1\": null,") && strstr(j, "\"top5\": null,") &&
          strstr(j, "\"loss\": null,"));
    CHECK(strstr(j, "\"phase\": \"train\"") != NULL);
    CHECK(strstr(j, "{\"name\": \"0\", \"precision\": 0.0, \"recall\": 0.0, \"f1\": 0.0, "
                    "\"support\": 0}") != NULL);
    CHECK(strstr(j, "{\"name\": \"1\"") != NULL);
    free(j);
}

/* A training run's object after the run-dependent keys; unknowns are null. */
static void test_training_object(void)
{
    ev_cell_t conf[2] = {{0, 0, 1}, {1, 1, 1}};
    ev_metric_t m;
    memset(&m, 0, sizeof m);
    m.planned = m.samples = m.correct_top1 = m.correct_top5 = 2;
    m.num_classes = 2;
    m.cells = conf;
    m.ncells = 2;
    m.wall_s = 0.5;
    summary_training_t t = {.epochs_run = 2, .last_epoch = 1, .stop_reason = NULL,
                            .best_val_top1 = NAN, .final_train_loss = 0.25,
                            .final_train_top1 = NAN, .total_seconds = 12.5, .ranks_lost = 2,
                            .steps_redone = 1, .world_size = 1};
    char *j = summary_json(&m, NULL, 0, &t);
    CHECK(j && strstr(j, "\"wall_seconds\": 0.5,\n  \"first_result_seconds\": null,\n"
                         "  \"steady_images_per_sec\": null,\n  \"training\": {\"epochs_run\": 2, \"last_epoch\": 1, "
                         "\"stopped_early\": false, \"stop_reason\": null, \"best_val_top1\": null, "
                         "\"best_val_epoch\": null, \"final_train_loss\": 0.25, \"final_train_top1\": null, "
                         "\"total_seconds\": 12.5, \"ranks_lost\": 2, \"ranks_joined\": 0, "
                         "\"steps_redone\": 1, \"world_size\": 1, \"checkpoint_failures\": 0, "
                         "\"checkpoint_error\": null, \"last_good_checkpoint\": null, \"stopped\": null, "
                         "\"loss_scale\": null, \"skipped_steps\": 0}\n}\n"));
    free(j);
    t.loss_scale = 32768; /* --precision fp16: the scaler's state */
    t.skipped_steps = 3;
    j = summary_json(&m, NULL, 0, &t);
    CHECK(j && strstr(j, "\"stopped\": null, \"loss_scale\": 32768.0, \"skipped_steps\": 3}\n}\n"));
    free(j);
    t.loss_scale = 0;
    t.skipped_steps = 0;
    t.world_size = -1; /* no membership event (an older reducerd) */
    t.checkpoint_failures = 1; /* stopped by a failed checkpoint write */
    t.checkpoint_error = "rank 0: checkpoint not written: ENOSPC";
    t.last_good_checkpoint = "run/checkpoint.safetensors";
    t.stopped = "checkpoint-failed";
    j = summary_json(&m, NULL, 0, &t);
    CHECK(j && strstr(j, "\"world_size\": null, \"checkpoint_failures\": 1, \"checkpoint_error\": "
                         "\"rank 0: checkpoint not written: ENOSPC\", \"last_good_checkpoint\": "
                         "\"run/checkpoint.safetensors\", \"stopped\": \"checkpoint-failed\", "
                         "\"loss_scale\": null, \"skipped_steps\": 0}\n}\n"));
    free(j);
    t.checkpoint_failures = 0; /* stopped by a non-finite step (docs/TRAINING.md) */
    t.checkpoint_error = NULL;
    t.stopped = "non-finite";
    t.stop_reason = "rank 0: step 3: the summed gradient fc.weight: element 1 of 10 is nan";
    j = summary_json(&m, NULL, 0, &t);
    CHECK(j && strstr(j, "\"stop_reason\": \"rank 0: step 3: the summed gradient fc.weight: element 1 "
                         "of 10 is nan\", ") && strstr(j, "\"checkpoint_error\": null, "
                         "\"last_good_checkpoint\": \"run/checkpoint.safetensors\", \"stopped\": "
                         "\"non-finite\", \"loss_scale\": null, \"skipped_steps\": 0}\n}\n"));
    free(j);
    j = summary_json(&m, NULL, 0, NULL); /* eval: no training key */
    CHECK(j && strstr(j, "\"wall_seconds\": 0.5,\n  \"first_result_seconds\": null,\n"
                         "  \"steady_images_per_sec\": null\n}\n") && !strstr(j, "training"));
    free(j);
}

int main(int argc, char **argv)
{
    test_training_object();
    test_values();
    test_determinism_and_failed(argc > 1 ? argv[1] : "summary.out");
    test_no_samples_and_no_names();
    return check_done("test_summary");
}
