#include "reporterd/summary.h"
#include "reporterd/present.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/atomic_file.h"
#include "common/errbuf.h"
#include "common/json.h"
#include "common/utf8.h"
#include "reporterd/clsmetrics.h"

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

/* a / samples, or NaN (null) when there are no samples */
static double s_frac(double a, uint64_t samples)
{
    return samples ? a / (double)samples : NAN;
}

static json_t *s_per_class(const ev_metric_t *m, const clsmetrics_t *cm)
{
    json_t *all = json_array();
    for (uint32_t c = 0; all && c < cm->nc; c++) {
        const cls_class_t *k = &cm->per_class[c];
        char num[16];
        snprintf(num, sizeof num, "%u", c);
        json_t *o = json_object();
        int bad = json_array_append_new(all, o);
        bad |= json_object_set_new(o, "name", json_utf8_or_null(m->class_names ? m->class_names[c] : num));
        bad |= json_object_set_new(o, "precision", json_number_or_null(k->precision));
        bad |= json_object_set_new(o, "recall", json_number_or_null(k->recall));
        bad |= json_object_set_new(o, "f1", json_number_or_null(k->f1));
        bad |= json_object_set_new(o, "support", json_integer((json_int_t)k->support));
        if (m->has_probs) {
            bad |= json_object_set_new(o, "roc_auc", json_number_or_null(m->auc[c]));
            bad |= json_object_set_new(o, "average_precision", json_number_or_null(m->ap[c]));
        }
        if (bad) {
            json_decref(all);
            all = NULL;
        }
    }
    return all;
}

static int s_by_index(const void *a, const void *b)
{
    uint64_t x = ((const summary_failed_t *)a)->index, y = ((const summary_failed_t *)b)->index;
    return (x > y) - (x < y);
}

/* A failed file's path as predictions.csv writes it (README): valid UTF-8
 * as it is, '%' and bytes that are not UTF-8 percent-encoded, so two names
 * that differ only in such bytes stay apart. */
static json_t *s_path(const char *path)
{
    if (!path)
        return json_null();
    char *enc = utf8_percent_escape(path);
    json_t *j = enc ? json_string(enc) : NULL;
    free(enc);
    return j;
}

/* failed_files, sorted by index */
static json_t *s_failed_files(const summary_failed_t *failed, size_t n)
{
    summary_failed_t *sorted = n ? malloc(n * sizeof *sorted) : NULL;
    json_t *all = n && !sorted ? NULL : json_array();
    if (n && sorted) {
        memcpy(sorted, failed, n * sizeof *sorted);
        qsort(sorted, n, sizeof *sorted, s_by_index);
    }
    for (size_t i = 0; all && i < n; i++) {
        json_t *o = json_object();
        int bad = json_array_append_new(all, o);
        bad |= json_object_set_new(o, "index", json_integer((json_int_t)sorted[i].index));
        bad |= json_object_set_new(o, "path", s_path(sorted[i].path));
        bad |= json_object_set_new(o, "reason", json_utf8_or_null(sorted[i].reason));
        if (bad) {
            json_decref(all);
            all = NULL;
        }
    }
    free(sorted);
    return all;
}

static json_t *s_training(const summary_training_t *t)
{
    json_t *o = json_object();
    bool val = isfinite(t->best_val_top1);
    int bad = !o;
    bad |= json_object_set_new(o, "epochs_run", json_integer(t->epochs_run));
    bad |= json_object_set_new(o, "last_epoch", json_integer(t->last_epoch));
    bad |= json_object_set_new(o, "stopped_early", json_boolean(t->stopped_early));
    bad |= json_object_set_new(o, "stop_reason", json_utf8_or_null(t->stop_reason));
    bad |= json_object_set_new(o, "best_val_top1", json_number_or_null(t->best_val_top1));
    bad |= json_object_set_new(o, "best_val_epoch",
                               val ? json_integer(t->best_val_epoch) : json_null());
    bad |= json_object_set_new(o, "final_train_loss", json_number_or_null(t->final_train_loss));
    bad |= json_object_set_new(o, "final_train_top1", json_number_or_null(t->final_train_top1));
    bad |= json_object_set_new(o, "total_seconds", json_number_or_null(t->total_seconds));
    bad |= json_object_set_new(o, "ranks_lost", json_integer(t->ranks_lost));
    bad |= json_object_set_new(o, "ranks_joined", json_integer(t->ranks_joined));
    bad |= json_object_set_new(o, "steps_redone", json_integer(t->steps_redone));
    bad |= json_object_set_new(o, "world_size",
                               t->world_size >= 0 ? json_integer(t->world_size) : json_null());
    bad |= json_object_set_new(o, "checkpoint_failures", json_integer(t->checkpoint_failures));
    bad |= json_object_set_new(o, "checkpoint_error", json_utf8_or_null(t->checkpoint_error));
    bad |= json_object_set_new(o, "last_good_checkpoint",
                               json_utf8_or_null(t->last_good_checkpoint));
    bad |= json_object_set_new(o, "stopped", json_utf8_or_null(t->stopped));
    bad |= json_object_set_new(o, "loss_scale",
                               t->loss_scale > 0 ? json_real(t->loss_scale) : json_null());
    bad |= json_object_set_new(o, "skipped_steps", json_integer((json_int_t)t->skipped_steps));
    if (bad) {
        json_decref(o);
        o = NULL;
    }
    return o;
}

/* Mean over the classes where v is defined (not NaN); NaN when none. */
static double s_defined_mean(const double *v, uint32_t n)
{
    double sum = 0.0;
    uint32_t used = 0;
    for (uint32_t i = 0; i < n; i++)
        if (!isnan(v[i])) {
            sum += v[i];
            used++;
        }
    return used ? sum / used : NAN;
}

/* "probabilities": the exact ECE, its 16 bins, macro ROC-AUC / AP and the
 * classes whose curves the report draws. */
static json_t *s_probabilities(const ev_metric_t *m)
{
    json_t *o = json_object(), *bins = json_array(), *worst = json_array();
    int bad = !o || !bins || !worst;
    for (uint32_t b = 0; !bad && b < EVENT_CALIB_SLOTS; b++) {
        json_t *e = json_object();
        bad |= json_array_append_new(bins, e);
        bad |= json_object_set_new(e, "count", json_integer((json_int_t)m->calib[b]));
        bad |= json_object_set_new(
            e, "correct", json_integer((json_int_t)m->calib[EVENT_CALIB_SLOTS + b]));
        bad |= json_object_set_new(
            e, "confidence_sum_e4", json_integer((json_int_t)m->calib[2 * EVENT_CALIB_SLOTS + b]));
    }
    for (uint32_t i = 0; !bad && i < m->ncurves; i++)
        bad |= json_array_append_new(worst, json_integer(m->curve_class[i]));
    bad |= json_object_set_new(o, "resolution", json_real(1e-4));
    bad |= json_object_set_new(o, "ece", json_number_or_null(m->ece));
    bad |= json_object_set_new(o, "ece_bins", json_integer(15));
    bad |= json_object_set_new(o, "macro_roc_auc",
                               json_number_or_null(s_defined_mean(m->auc, m->num_classes)));
    bad |= json_object_set_new(o, "macro_average_precision",
                               json_number_or_null(s_defined_mean(m->ap, m->num_classes)));
    bad |= json_object_set_new(o, "calibration_bins", bins);
    bad |= json_object_set_new(o, "curve_classes", worst);
    if (bad) {
        json_decref(o);
        o = NULL;
    }
    return o;
}

static json_t *s_document(const ev_metric_t *m, const clsmetrics_t *cm,
                          const summary_failed_t *failed, size_t n_failed,
                          const summary_training_t *training)
{
    json_t *d = json_object();
    int bad = !d;
    bad |= json_object_set_new(d, "epoch", json_integer(m->epoch));
    bad |= json_object_set_new(d, "phase", json_string(summary_phase_name(m->phase)));
    bad |= json_object_set_new(d, "planned", json_integer((json_int_t)m->planned));
    bad |= json_object_set_new(d, "samples", json_integer((json_int_t)m->samples));
    bad |= json_object_set_new(d, "failed", json_integer((json_int_t)m->failed));
    bad |= json_object_set_new(d, "duplicates_ignored", json_integer((json_int_t)m->duplicates));
    bad |= json_object_set_new(d, "rejected_messages", json_integer((json_int_t)m->rejected));
    bad |= json_object_set_new(d, "correct_top1", json_integer((json_int_t)m->correct_top1));
    bad |= json_object_set_new(d, "correct_top5", json_integer((json_int_t)m->correct_top5));
    bad |= json_object_set_new(d, "top1", json_number_or_null(s_frac((double)m->correct_top1, m->samples)));
    bad |= json_object_set_new(d, "top5", json_number_or_null(s_frac((double)m->correct_top5, m->samples)));
    bad |= json_object_set_new(d, "loss", json_number_or_null(s_frac(m->loss_sum, m->samples)));
    bad |= json_object_set_new(d, "nonfinite_loss", json_integer((json_int_t)m->nonfinite_loss));
    bad |= json_object_set_new(d, "macro_f1", json_number_or_null(cm->macro.f1));
    bad |= json_object_set_new(d, "weighted_f1", json_number_or_null(cm->weighted.f1));
    bad |= json_object_set_new(d, "per_class", s_per_class(m, cm));
    bad |= json_object_set_new(d, "failed_files", s_failed_files(failed, n_failed));
    if (m->has_probs)
        bad |= json_object_set_new(d, "probabilities", s_probabilities(m));
    /* run-dependent keys last, one per line (see summary.h) */
    bad |= json_object_set_new(d, "workers", json_integer(m->workers));
    bad |= json_object_set_new(d, "images_per_sec", json_number_or_null(m->images_per_sec));
    bad |= json_object_set_new(d, "wall_seconds", json_number_or_null(m->wall_s));
    bad |= json_object_set_new(d, "first_result_seconds",
                               m->first_result_s > 0 ? json_real(m->first_result_s) : json_null());
    bad |= json_object_set_new(d, "steady_images_per_sec",
                               m->steady_images_per_sec > 0 ? json_real(m->steady_images_per_sec)
                                                            : json_null());
    if (training)
        bad |= json_object_set_new(d, "training", s_training(training));
    if (bad) {
        json_decref(d);
        d = NULL;
    }
    return d;
}

char *summary_json(const ev_metric_t *m, const summary_failed_t *failed, size_t n_failed,
                   const summary_training_t *training)
{
    clsmetrics_t cm;
    if (clsmetrics_compute_labels(m->cells, m->ncells, m->num_classes, present_labelled(m),
                                  &cm) != 0)
        return NULL;
    json_t *doc = s_document(m, &cm, failed, n_failed, training);
    clsmetrics_clear(&cm);
    char *text = doc ? json_to_text(doc, JSON_STYLE_LINES) : NULL;
    json_decref(doc);
    return text;
}

int summary_write(const char *path, const ev_metric_t *m, const summary_failed_t *failed,
                  size_t n_failed, const summary_training_t *training, char *err, size_t errlen)
{
    char *text = summary_json(m, failed, n_failed, training);
    if (!text) {
        err_set(err, errlen, "cannot build summary.json (%u classes): out of memory or no classes",
                m->num_classes);
        return -1;
    }
    int rc = atomic_file_write(path, text, strlen(text), err, errlen);
    free(text);
    return rc;
}
