#include "reporterd/class_report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/atomic_file.h"
#include "common/errbuf.h"
#include "common/utf8.h"
#include "reporterd/clsmetrics.h"
#include "reporterd/textfmt.h"

#define DIGITS 2

/* Python's "{:>{width}s}": right-align by code points, never truncate. */
static void s_name(FILE *out, const char *name, size_t width)
{
    size_t len = utf8_length(name);
    for (size_t i = len; i < width; i++)
        fputc(' ', out);
    fputs(name, out);
    fputc(' ', out);
}

static void s_row(FILE *out, const char *name, size_t width, double p, double r, double f1,
                  uint64_t support)
{
    s_name(out, name, width);
    fprintf(out, " %9.*f %9.*f %9.*f %9llu\n", DIGITS, p, DIGITS, r, DIGITS, f1,
            (unsigned long long)support);
}

static size_t s_width(uint32_t nc, char *const *names)
{
    size_t width = strlen("weighted avg");
    char num[16];
    for (uint32_t c = 0; c < nc; c++) {
        snprintf(num, sizeof num, "%u", c);
        size_t len = utf8_length(names ? names[c] : num);
        if (len > width)
            width = len;
    }
    return width; /* >= digits (2) always */
}

static void s_body(FILE *out, const clsmetrics_t *m, char *const *names)
{
    size_t width = s_width(m->nc, names);
    s_name(out, "", width);
    fprintf(out, " %9s %9s %9s %9s\n\n", "precision", "recall", "f1-score", "support");
    char num[16];
    for (uint32_t c = 0; c < m->nc; c++) {
        const cls_class_t *k = &m->per_class[c];
        snprintf(num, sizeof num, "%u", c);
        s_row(out, names ? names[c] : num, width, k->precision, k->recall, k->f1, k->support);
    }
    fputc('\n', out);
    if (m->micro_is_accuracy) {
        s_name(out, "accuracy", width);
        fprintf(out, " %9s %9s %9.*f %9llu\n", "", "", DIGITS, m->micro.f1,
                (unsigned long long)m->total);
    } else {
        s_row(out, "micro avg", width, m->micro.precision, m->micro.recall, m->micro.f1,
              m->total);
    }
    s_row(out, "macro avg", width, m->macro.precision, m->macro.recall, m->macro.f1, m->total);
    s_row(out, "weighted avg", width, m->weighted.precision, m->weighted.recall,
          m->weighted.f1, m->total);
}

char *class_report_text(const ev_cell_t *cells, uint64_t ncells, uint32_t nc,
                        char *const *names)
{
    return class_report_text_labels(cells, ncells, nc, nc, names);
}

char *class_report_text_labels(const ev_cell_t *cells, uint64_t ncells, uint32_t nc,
                               uint32_t nl, char *const *names)
{
    clsmetrics_t m;
    if (clsmetrics_compute_labels(cells, ncells, nc, nl, &m) != 0)
        return NULL;
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    if (!out) {
        clsmetrics_clear(&m);
        return NULL;
    }
    s_body(out, &m, names);
    int bad = ferror(out);
    if (fclose(out) != 0)
        bad = 1;
    clsmetrics_clear(&m);
    if (bad) {
        free(text);
        return NULL;
    }
    return text;
}

int class_report_write(const char *path, const ev_cell_t *cells, uint64_t ncells, uint32_t nc,
                       uint32_t nl, char *const *names, char *err, size_t errlen)
{
    char *text = class_report_text_labels(cells, ncells, nc, nl ? nl : nc, names);
    if (!text) {
        err_set(err, errlen, "cannot build the classification report (%u classes): %s", nc,
                nc ? "out of memory" : "no classes");
        return -1;
    }
    int rc = atomic_file_write(path, text, strlen(text), err, errlen);
    free(text);
    return rc;
}
