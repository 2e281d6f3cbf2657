/* classification_report.txt against sklearn's own text (goldens written by
 * tests/golden/gen_class_report.py), and the per-class/average doubles of
 * clsmetrics against sklearn's bit for bit. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "reporterd/class_report.h"
#include "reporterd/clsmetrics.h"

typedef struct {
    uint32_t nc;
    char **names; /* NULL when the case has none */
    uint64_t *confusion; /* dense, as the golden file writes it */
    ev_cell_t *cells;    /* its nonzero cells: what reporterd reads */
    uint64_t ncells;
    double avg[3][3]; /* macro, weighted, micro x p, r, f1 */
    double *cls;      /* nc x (p, r, f1) */
    uint64_t *support;
} golden_t;

static void s_free(golden_t *g)
{
    if (g->names)
        for (uint32_t c = 0; c < g->nc; c++)
            free(g->names[c]);
    free(g->names);
    free(g->confusion);
    free(g->cells);
    free(g->cls);
    free(g->support);
    memset(g, 0, sizeof *g);
}

static int s_parse_line(golden_t *g, char *line, uint32_t *n_names, uint32_t *n_rows)
{
    static const char *avgs[3] = {"macro ", "weighted ", "micro "};
    if (strncmp(line, "nc ", 3) == 0) {
        g->nc = (uint32_t)strtoul(line + 3, NULL, 10);
        g->confusion = calloc((size_t)g->nc * g->nc, sizeof *g->confusion);
        g->cls = calloc((size_t)g->nc * 3, sizeof *g->cls);
        g->support = calloc(g->nc, sizeof *g->support);
        return g->confusion && g->cls && g->support ? 0 : -1;
    }
    if (strncmp(line, "name ", 5) == 0) {
        if (!g->names)
            g->names = calloc(g->nc, sizeof *g->names);
        if (!g->names || *n_names >= g->nc)
            return -1;
        g->names[(*n_names)++] = strdup(line + 5);
        return 0;
    }
    if (strncmp(line, "row ", 4) == 0) {
        if (*n_rows >= g->nc)
            return -1;
        char *p = line + 4;
        for (uint32_t c = 0; c < g->nc; c++)
            g->confusion[(size_t)*n_rows * g->nc + c] = strtoull(p, &p, 10);
        (*n_rows)++;
        return 0;
    }
    for (int a = 0; a < 3; a++)
        if (strncmp(line, avgs[a], strlen(avgs[a])) == 0) {
            char *p = line + strlen(avgs[a]);
            for (int k = 0; k < 3; k++)
                g->avg[a][k] = strtod(p, &p);
            return 0;
        }
    if (strncmp(line, "class ", 6) == 0) {
        char *p = line + 6;
        unsigned long c = strtoul(p, &p, 10);
        if (c >= g->nc)
            return -1;
        for (int k = 0; k < 3; k++)
            g->cls[c * 3 + k] = strtod(p, &p);
        g->support[c] = strtoull(p, &p, 10);
        return 0;
    }
    return -1;
}

static int s_load(const char *path, golden_t *g)
{
    memset(g, 0, sizeof *g);
    char *text = check_slurp(path, NULL);
    if (!text)
        return -1;
    uint32_t n_names = 0, n_rows = 0;
    int rc = 0;
    for (char *save = NULL, *line = strtok_r(text, "\n", &save); line && rc == 0;
         line = strtok_r(NULL, "\n", &save))
        rc = s_parse_line(g, line, &n_names, &n_rows);
    free(text);
    if (rc == 0 && (n_rows != g->nc || (g->names && n_names != g->nc)))
        rc = -1;
    if (rc == 0 && !(g->cells = confusion_from_dense(g->confusion, g->nc, &g->ncells)))
        rc = -1;
    return rc;
}

static void s_check_metrics(const char *name, const golden_t *g)
{
    clsmetrics_t m;
    CHECK(clsmetrics_compute(g->cells, g->ncells, g->nc, &m) == 0);
    const cls_avg_t *avg[3] = {&m.macro, &m.weighted, &m.micro};
    for (int a = 0; a < 3; a++) {
        /* exact equality: the same IEEE operations as numpy/sklearn */
        if (avg[a]->precision != g->avg[a][0] || avg[a]->recall != g->avg[a][1] ||
            avg[a]->f1 != g->avg[a][2]) {
            fprintf(stderr, "%s: average %d: got %.17g %.17g %.17g want %.17g %.17g %.17g\n",
                    name, a, avg[a]->precision, avg[a]->recall, avg[a]->f1, g->avg[a][0],
                    g->avg[a][1], g->avg[a][2]);
            g_failures++;
        }
    }
    for (uint32_t c = 0; c < g->nc; c++) {
        const cls_class_t *k = &m.per_class[c];
        CHECK(k->precision == g->cls[c * 3] && k->recall == g->cls[c * 3 + 1]);
        CHECK(k->f1 == g->cls[c * 3 + 2] && k->support == g->support[c]);
    }
    clsmetrics_clear(&m);
}

static void s_case(const char *dir, const char *name)
{
    char path[4096];
    golden_t g;
    snprintf(path, sizeof path, "%s/%s.in", dir, name);
    if (s_load(path, &g) != 0) {
        fprintf(stderr, "cannot load golden %s\n", path);
        g_failures++;
        s_free(&g);
        return;
    }
    snprintf(path, sizeof path, "%s/%s.txt", dir, name);
    char *want = check_slurp(path, NULL);
    char *got = class_report_text(g.cells, g.ncells, g.nc, g.names);
    CHECK(want != NULL && got != NULL);
    if (want && got && strcmp(want, got) != 0) {
        fprintf(stderr, "%s: report differs from sklearn's\n--- sklearn\n%s--- ours\n%s", name,
                want, got);
        g_failures++;
    }
    s_check_metrics(name, &g);
    free(want);
    free(got);
    s_free(&g);
}

/* numpy's pairwise sum is not a left-to-right sum past 8 elements: check
 * against numpy's value for an array where the two differ:
 * i = np.arange(300); a = np.where(i % 7 == 0, 1e8 + i, 1 / (i + 1.0));
 * np.sum(a) == 4300006325.69454, sum(a.tolist()) == 4300006325.694542 */
static void test_pairwise(void)
{
    double a[300];
    double seq = 0.0;
    for (int i = 0; i < 300; i++) {
        a[i] = i % 7 == 0 ? 1e8 + i : 1 / (i + 1.0);
        seq += a[i];
    }
    CHECK(clsmetrics_pairwise_sum(a, 300) == 4300006325.69454);
    CHECK(seq == 4300006325.694542);
    CHECK(clsmetrics_pairwise_sum(a, 0) == 0.0);
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "tests/golden/class_report";
    static const char *cases[] = {"fmnist",   "never_predicted", "no_support", "absent_class",
                                  "long_names", "binary",        "many_classes", "numbered"};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        s_case(dir, cases[i]);
    test_pairwise();
    CHECK(class_report_text(NULL, 0, 0, NULL) == NULL);
    return check_done("test_class_report");
}
