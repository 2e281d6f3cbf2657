#include "reporterd/summary.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/atomic_file.h"
#include "common/errbuf.h"
#include "reporterd/clsmetrics.h"
#include "reporterd/textfmt.h"

const char *summary_phase_name(uint8_t phase)
{
    static char other[4][16];
    if (phase == 0)
        return "eval";
    if (phase == 1)
        return "train";
    /* never expected (validated upstream); keep it printable, not fatal */
    char *buf = other[phase % 4];
    snprintf(buf, 16, "phase%u", phase);
    return buf;
}

static void s_num(FILE *out, const char *key, double v, const char *sep)
{
    char buf[TEXTFMT_NUM_LEN];
    fprintf(out, "  \"%s\": %s%s\n", key, textfmt_num(v, buf), sep);
}

static void s_uint(FILE *out, const char *key, uint64_t v)
{
    fprintf(out, "  \"%s\": %llu,\n", key, (unsigned long long)v);
}

/* a / samples, or null when there are no samples */
static double s_frac(double a, uint64_t samples)
{
    return samples ? a / (double)samples : NAN;
}

static void s_per_class(FILE *out, const ev_metric_t *m, const clsmetrics_t *cm)
{
    char p[TEXTFMT_NUM_LEN], r[TEXTFMT_NUM_LEN], f[TEXTFMT_NUM_LEN], num[16];
    fputs("  \"per_class\": [", out);
    for (uint32_t c = 0; c < cm->nc; c++) {
        const cls_class_t *k = &cm->per_class[c];
        snprintf(num, sizeof num, "%u", c);
        fputs(c ? ",\n    {\"name\": " : "\n    {\"name\": ", out);
        textfmt_json_string(out, m->class_names ? m->class_names[c] : num);
        fprintf(out, ", \"precision\": %s, \"recall\": %s, \"f1\": %s, \"support\": %llu}",
                textfmt_num(k->precision, p), textfmt_num(k->recall, r), textfmt_num(k->f1, f),
                (unsigned long long)k->support);
    }
    fputs(cm->nc ? "\n  ],\n" : "],\n", out);
}

static int s_by_index(const void *a, const void *b)
{
    uint64_t x = ((const summary_failed_t *)a)->index, y = ((const summary_failed_t *)b)->index;
    return (x > y) - (x < y);
}

static int s_failed_files(FILE *out, const summary_failed_t *failed, size_t n)
{
    summary_failed_t *sorted = NULL;
    if (n) {
        sorted = malloc(n * sizeof *sorted);
        if (!sorted)
            return -1;
        memcpy(sorted, failed, n * sizeof *sorted);
        qsort(sorted, n, sizeof *sorted, s_by_index);
    }
    fputs("  \"failed_files\": [", out);
    for (size_t i = 0; i < n; i++) {
        fprintf(out, "%s    {\"index\": %llu, \"path\": ", i ? ",\n" : "\n",
                (unsigned long long)sorted[i].index);
        textfmt_json_string(out, sorted[i].path);
        fputs(", \"reason\": ", out);
        textfmt_json_string(out, sorted[i].reason);
        fputc('}', out);
    }
    fputs(n ? "\n  ],\n" : "],\n", out);
    free(sorted);
    return 0;
}

static void s_training(FILE *out, const summary_training_t *t)
{
    char a[TEXTFMT_NUM_LEN], b[TEXTFMT_NUM_LEN], c[TEXTFMT_NUM_LEN], d[TEXTFMT_NUM_LEN];
    fprintf(out, "  \"training\": {\"epochs_run\": %u, \"last_epoch\": %u, \"stopped_early\": %s, "
                 "\"stop_reason\": ", t->epochs_run, t->last_epoch,
            t->stopped_early ? "true" : "false");
    textfmt_json_string(out, t->stop_reason);
    fprintf(out, ", \"best_val_top1\": %s, \"best_val_epoch\": ", textfmt_num(t->best_val_top1, a));
    if (isfinite(t->best_val_top1))
        fprintf(out, "%u", t->best_val_epoch);
    else
        fputs("null", out);
    fprintf(out, ", \"final_train_loss\": %s, \"final_train_top1\": %s, \"total_seconds\": %s}\n",
            textfmt_num(t->final_train_loss, b), textfmt_num(t->final_train_top1, c),
            textfmt_num(t->total_seconds, d));
}

static int s_body(FILE *out, const ev_metric_t *m, const clsmetrics_t *cm,
                  const summary_failed_t *failed, size_t n_failed,
                  const summary_training_t *training)
{
    fprintf(out, "{\n  \"epoch\": %u,\n  \"phase\": \"%s\",\n", m->epoch,
            summary_phase_name(m->phase));
    s_uint(out, "planned", m->planned);
    s_uint(out, "samples", m->samples);
    s_uint(out, "failed", m->failed);
    s_uint(out, "duplicates_ignored", m->duplicates);
    s_uint(out, "rejected_messages", m->rejected);
    s_uint(out, "correct_top1", m->correct_top1);
    s_uint(out, "correct_top5", m->correct_top5);
    s_num(out, "top1", s_frac((double)m->correct_top1, m->samples), ",");
    s_num(out, "top5", s_frac((double)m->correct_top5, m->samples), ",");
    s_num(out, "loss", s_frac(m->loss_sum, m->samples), ",");
    s_uint(out, "nonfinite_loss", m->nonfinite_loss);
    s_num(out, "macro_f1", cm->macro.f1, ",");
    s_num(out, "weighted_f1", cm->weighted.f1, ",");
    s_per_class(out, m, cm);
    if (s_failed_files(out, failed, n_failed) != 0)
        return -1;
    /* run-dependent keys last, one per line (see summary.h) */
    fprintf(out, "  \"workers\": %d,\n", m->workers);
    s_num(out, "images_per_sec", m->images_per_sec, ",");
    s_num(out, "wall_seconds", m->wall_s, training ? "," : "");
    if (training)
        s_training(out, training);
    fputs("}\n", out);
    return 0;
}

char *summary_json(const ev_metric_t *m, const summary_failed_t *failed, size_t n_failed,
                   const summary_training_t *training)
{
    clsmetrics_t cm;
    if (clsmetrics_compute(m->confusion, m->num_classes, &cm) != 0)
        return NULL;
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    if (!out) {
        clsmetrics_clear(&cm);
        return NULL;
    }
    int bad = s_body(out, m, &cm, failed, n_failed, training) != 0 || ferror(out);
    if (fclose(out) != 0)
        bad = 1;
    clsmetrics_clear(&cm);
    if (bad) {
        free(text);
        return NULL;
    }
    return text;
}

int summary_write(const char *path, const ev_metric_t *m, const summary_failed_t *failed,
                  size_t n_failed, const summary_training_t *training, char *why, size_t whylen)
{
    char *text = summary_json(m, failed, n_failed, training);
    if (!text) {
        err_set(why, whylen, "cannot build summary.json (%u classes): out of memory or no classes",
                m->num_classes);
        return -1;
    }
    int rc = atomic_file_write(path, text, strlen(text), why, whylen);
    free(text);
    return rc;
}
