/* reporterd/present.c and clsmetrics_compute_labels: a metric of a
 * dataset holding 2 of a model's 5 classes (`--classes`) cut to those 2,
 * with the "(not in the dataset)" column only when some sample was
 * predicted outside them; the numbers sklearn's
 * classification_report(labels=[1, 3]) gives (worked out by hand below). */
#include "reporterd/class_report.h"
#include "reporterd/clsmetrics.h"
#include "reporterd/present.h"
#include "tests/proto/check.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static const char *const s_names[5] = {"zero", "one", "two", "three", "four"};

/* An owned metric as rundir's copy is: 5 classes, present 1 and 3. */
static ev_metric_t s_metric(const uint64_t rows[2][5], uint32_t *present)
{
    ev_metric_t m = {.num_classes = 5, .present = present, .npresent = 2, .has_probs = true};
    uint64_t dense[25] = {0};
    m.class_names = calloc(5, sizeof *m.class_names);
    m.auc = malloc(5 * sizeof *m.auc);
    m.ap = malloc(5 * sizeof *m.ap);
    for (int c = 0; c < 5; c++) {
        m.class_names[c] = strdup(s_names[c]);
        m.auc[c] = 0.1 * c, m.ap[c] = 0.2 * c;
    }
    memcpy(dense + 1 * 5, rows[0], sizeof rows[0]);
    memcpy(dense + 3 * 5, rows[1], sizeof rows[1]);
    m.cells = confusion_from_dense(dense, 5, &m.ncells);
    return m;
}

/* The restricted metric's cells are exactly the nonzero ones of want. */
static bool s_cells_are(const ev_metric_t *m, const uint64_t *want, uint32_t nc)
{
    char err[256];
    uint64_t nonzero = 0;
    if (confusion_check(m->cells, m->ncells, nc, err, sizeof err) != 0)
        return false;
    for (uint32_t i = 0; i < nc * nc; i++) {
        nonzero += want[i] != 0;
        if (confusion_at(m->cells, m->ncells, i / nc, i % nc) != want[i])
            return false;
    }
    return nonzero == m->ncells;
}

static void s_free(ev_metric_t *m)
{
    for (uint32_t c = 0; c < m->num_classes; c++)
        free(m->class_names[c]);
    free(m->class_names), free(m->cells), free(m->auc), free(m->ap);
}

static void test_outside(void)
{
    /* class 1: 4 right, 1 as class 3; class 3: 3 right, 2 as class 0 (not in the dataset) */
    const uint64_t rows[2][5] = {{0, 4, 0, 1, 0}, {2, 0, 0, 3, 0}};
    uint32_t present[] = {1, 3};
    ev_metric_t m = s_metric(rows, present);
    CHECK(present_restrict(&m) == 0);
    CHECK(m.num_classes == 3 && m.present == NULL && m.npresent == 2);
    CHECK(present_labelled(&m) == 2);
    const uint64_t want[9] = {4, 1, 0, 0, 3, 2, 0, 0, 0};
    CHECK(s_cells_are(&m, want, 3));
    CHECK_STR(m.class_names[0], "one");
    CHECK_STR(m.class_names[1], "three");
    CHECK_STR(m.class_names[2], PRESENT_OTHER_NAME);
    CHECK(m.auc[1] == 0.1 * 3 && m.ap[0] == 0.2 * 1 && isnan(m.auc[2]));
    clsmetrics_t cm;
    CHECK(clsmetrics_compute_labels(m.cells, m.ncells, 3, 2, &cm) == 0);
    CHECK(cm.nc == 2 && cm.total == 10 && !cm.micro_is_accuracy);
    CHECK(cm.per_class[0].precision == 1.0 && cm.per_class[0].recall == 0.8);
    CHECK(cm.per_class[1].precision == 0.75 && cm.per_class[1].recall == 0.6);
    CHECK(cm.micro.precision == 7.0 / 8.0 && cm.micro.recall == 0.7);
    clsmetrics_clear(&cm);
    char *text = class_report_text_labels(m.cells, m.ncells, 3, 2, m.class_names);
    CHECK_MSG(text && strstr(text, "micro avg") && !strstr(text, PRESENT_OTHER_NAME) &&
              strstr(text, "       one       1.00      0.80      0.89         5\n"), "%s", text);
    free(text);
    s_free(&m);
}

static void test_inside(void)
{
    /* every prediction within the dataset's classes: no extra column */
    const uint64_t rows[2][5] = {{0, 4, 0, 1, 0}, {0, 0, 0, 5, 0}};
    uint32_t present[] = {1, 3};
    ev_metric_t m = s_metric(rows, present);
    CHECK(present_restrict(&m) == 0);
    CHECK(m.num_classes == 2 && present_labelled(&m) == 2);
    const uint64_t want[4] = {4, 1, 0, 5};
    CHECK(s_cells_are(&m, want, 2));
    char *text = class_report_text_labels(m.cells, m.ncells, 2, 2, m.class_names);
    CHECK_MSG(text && strstr(text, "accuracy") && !strstr(text, "micro avg"), "%s", text);
    free(text);
    s_free(&m);
}

static void test_no_map(void)
{
    ev_metric_t m = {.num_classes = 5};
    CHECK(present_restrict(&m) == 0 && m.num_classes == 5 && present_labelled(&m) == 5);
    ev_cell_t conf[2] = {{0, 0, 1}, {1, 1, 1}};
    clsmetrics_t a, b;
    CHECK(clsmetrics_compute(conf, 2, 2, &a) == 0 &&
          clsmetrics_compute_labels(conf, 2, 2, 2, &b) == 0);
    CHECK(a.nc == b.nc && a.micro_is_accuracy && b.micro_is_accuracy && a.macro.f1 == b.macro.f1);
    clsmetrics_clear(&a), clsmetrics_clear(&b);
    CHECK(clsmetrics_compute_labels(conf, 2, 2, 3, &a) == -1);
}

int main(void)
{
    test_outside();
    test_inside();
    test_no_map();
    return check_exit("test_present");
}
