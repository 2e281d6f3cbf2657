#include "reporterd/rundir.h"
#include "reporterd/present.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/errbuf.h"
#include "proto/messages.h"
#include "reporterd/chart.h"
#include "reporterd/class_report.h"
#include "reporterd/membership_csv.h"
#include "reporterd/metrics_csv.h"
#include "reporterd/plot.h"
#include "reporterd/predictions_csv.h"
#include "reporterd/probcharts.h"
#include "reporterd/seed_csv.h"
#include "reporterd/summary.h"
#include "reporterd/tput.h"

#define PLOT_W 800
#define PLOT_H 500

typedef struct {
    uint32_t epoch;
    uint8_t phase;
    uint64_t id;
    char *path;   /* NULL: unknown */
    char *reason; /* NULL: unknown */
} failed_t;

struct rundir {
    char *dir;
    metrics_row_t *hist; /* one per (epoch, phase); training: sorted by epoch */
    size_t nhist, caphist;
    /* training: the rows go to metrics.csv (rewritten whole) and the seed CSV */
    bool training;
    bool loaded;          /* an existing metrics.csv's rows are in hist */
    long start_epoch;     /* --start-epoch: older rows of epochs >= it dropped; -1 */
    char *seed_csv;       /* file name in dir, or NULL */
    bool have_decision;   /* the last decision reducerd announced */
    uint8_t decision;
    uint32_t epochs;
    char reason[1024];
    double loss_scale;      /* fp16 training: the last train metric's (0: none) */
    uint64_t skipped_steps; /* and the job's skipped steps then (a running count) */
    ev_metric_t *last_eval; /* deep copies */
    ev_metric_t *last_any;
    failed_t *failed; /* may hold repeats; deduplicated when written */
    size_t nfailed, capfailed;
    predcsv_t *pred;
    tput_t *tput; /* throughput over time, from progress events */
    membership_log_t members; /* membership.csv and the elastic counts */
    int stop_code;            /* DDP_STOP_CHECKPOINT_FAILED, DDP_STOP_NONFINITE or 0 */
    char stop_reason[1024];   /* why, then (the end event's reason) */
};

static void s_metric_free(ev_metric_t **m_p)
{
    ev_metric_t *m = *m_p;
    if (!m)
        return;
    if (m->class_names)
        for (uint32_t c = 0; c < m->num_classes; c++)
            free(m->class_names[c]);
    free(m->class_names);
    free(m->cells);
    free(m->calib);
    free(m->auc);
    free(m->ap);
    free(m->curve_class);
    free(m->curve_pos);
    free(m->curve_neg);
    free(m);
    *m_p = NULL;
}

/* *p = a copy of the n bytes at src (NULL src or n 0: NULL). -1: out of memory. */
static int s_dup(void *p, const void *src, size_t n)
{
    void **out = p;
    *out = NULL;
    if (!src || !n)
        return 0;
    *out = malloc(n);
    if (!*out)
        return -1;
    memcpy(*out, src, n);
    return 0;
}

/* The probability metrics' arrays (borrowed from the event) copied. */
static int s_metric_copy_probs(ev_metric_t *m, const ev_metric_t *src)
{
    size_t nc = src->num_classes, h = (size_t)src->ncurves * EVENT_PROB_BINS * 4;
    bool probs = src->has_probs;
    return s_dup(&m->calib, probs ? src->calib : NULL, 3 * EVENT_CALIB_SLOTS * 8) |
           s_dup(&m->auc, probs ? src->auc : NULL, nc * 8) |
           s_dup(&m->ap, probs ? src->ap : NULL, nc * 8) |
           s_dup(&m->curve_class, src->curve_class, (size_t)src->ncurves * 4) |
           s_dup(&m->curve_pos, src->curve_pos, h) | s_dup(&m->curve_neg, src->curve_neg, h);
}

static ev_metric_t *s_metric_copy(const ev_metric_t *src)
{
    ev_metric_t *m = malloc(sizeof *m);
    if (!m)
        return NULL;
    *m = *src;
    m->class_names = NULL;
    m->cells = NULL;
    if (s_metric_copy_probs(m, src) != 0) {
        s_metric_free(&m);
        return NULL;
    }
    /* the sparse cells: without them (a publisher that left them out) the
     * matrix is all zeros, an empty non-NULL list */
    m->ncells = src->cells ? src->ncells : 0;
    m->cells = malloc((m->ncells ? m->ncells : 1) * sizeof *m->cells);
    if (!m->cells) {
        s_metric_free(&m);
        return NULL;
    }
    if (m->ncells)
        memcpy(m->cells, src->cells, m->ncells * sizeof *m->cells);
    if (src->class_names) {
        m->class_names = calloc(src->num_classes ? src->num_classes : 1, sizeof(char *));
        for (uint32_t c = 0; m->class_names && c < src->num_classes; c++)
            if (!(m->class_names[c] = strdup(src->class_names[c] ? src->class_names[c] : ""))) {
                s_metric_free(&m);
                return NULL;
            }
        if (!m->class_names) {
            s_metric_free(&m);
            return NULL;
        }
    }
    if (present_restrict(m) != 0)   /* --classes: the dataset's classes only */
        s_metric_free(&m);
    return m;
}

/* mkdir -p dir; it must end up a directory. 0, or -1 with path and errno. */
static int s_mkdirs(const char *dir, char *err, size_t errlen)
{
    if (!dir || !*dir) {
        err_set(err, errlen, "empty run directory name");
        return -1;
    }
    char *copy = strdup(dir);
    if (!copy) {
        err_set(err, errlen, "out of memory for run directory %s", dir);
        return -1;
    }
    int rc = 0;
    /* create each prefix in turn; EEXIST is fine as long as it is a dir */
    for (char *p = copy + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char saved = *p;
        *p = '\0';
        if (mkdir(copy, 0777) != 0 && errno != EEXIST) {
            err_set(err, errlen, "cannot create directory %s: %s", copy, strerror(errno));
            rc = -1;
            break;
        }
        *p = saved;
        if (saved == '\0')
            break;
    }
    struct stat st;
    if (rc == 0 && stat(dir, &st) != 0) {
        err_set(err, errlen, "cannot stat %s: %s", dir, strerror(errno));
        rc = -1;
    } else if (rc == 0 && !S_ISDIR(st.st_mode)) {
        err_set(err, errlen, "cannot use as run directory %s: %s", dir, strerror(ENOTDIR));
        rc = -1;
    }
    free(copy);
    return rc;
}

rundir_t *rundir_new(const char *out_dir, char *err, size_t errlen)
{
    if (s_mkdirs(out_dir, err, errlen) != 0)
        return NULL;
    rundir_t *self = calloc(1, sizeof *self);
    if (self) {
        self->start_epoch = -1;
        membership_log_init(&self->members);
    }
    if (!self || !(self->dir = strdup(out_dir)) || !(self->tput = tput_new())) {
        if (self)
            free(self->dir);
        free(self);
        err_set(err, errlen, "out of memory for run directory %s", out_dir);
        return NULL;
    }
    return self;
}

void rundir_destroy(rundir_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    rundir_t *self = *self_p;
    for (size_t i = 0; i < self->nfailed; i++) {
        free(self->failed[i].path);
        free(self->failed[i].reason);
    }
    free(self->failed);
    for (size_t i = 0; i < self->nhist; i++)
        metrics_csv_row_clear(&self->hist[i]);
    free(self->hist);
    free(self->seed_csv);
    s_metric_free(&self->last_eval);
    s_metric_free(&self->last_any);
    predcsv_destroy(&self->pred);
    tput_destroy(&self->tput);
    membership_log_free(&self->members);
    free(self->dir);
    free(self);
    *self_p = NULL;
}

const char *rundir_dir(const rundir_t *self) { return self->dir; }

static char *s_join(const rundir_t *self, const char *name)
{
    size_t len = strlen(self->dir) + strlen(name) + 2;
    char *p = malloc(len);
    if (p)
        snprintf(p, len, "%s/%s", self->dir, name);
    return p;
}

/* Grow an array of `size`-byte items to hold one more. */
static int s_grow(void **arr, size_t *cap, size_t n, size_t size)
{
    if (n < *cap)
        return 0;
    size_t ncap = *cap ? *cap * 2 : 16;
    void *bigger = realloc(*arr, ncap * size);
    if (!bigger)
        return -1;
    *arr = bigger;
    *cap = ncap;
    return 0;
}

/* Index of (epoch, phase) in the history, or nhist. */
static size_t s_find(const rundir_t *self, uint32_t epoch, uint8_t phase)
{
    size_t i = 0;
    while (i < self->nhist && !(self->hist[i].epoch == epoch && self->hist[i].phase == phase))
        i++;
    return i;
}

static int s_keep_metric(rundir_t *self, const ev_metric_t *m, char *err, size_t errlen)
{
    ev_metric_t *copy = s_metric_copy(m), *copy2 = NULL;
    if (copy && m->phase == DDP_PHASE_EVAL && !(copy2 = s_metric_copy(m)))
        s_metric_free(&copy);
    if (!copy) {
        err_set(err, errlen, "out of memory keeping the metric of epoch %u (%u classes)",
                 m->epoch, m->num_classes);
        return -1;
    }
    s_metric_free(&self->last_any);
    self->last_any = copy;
    if (copy2) {
        s_metric_free(&self->last_eval);
        self->last_eval = copy2;
    }
    return 0;
}

static int s_plots(rundir_t *self, char *err, size_t errlen);

int rundir_on_progress(rundir_t *self, const ev_progress_t *p, double now_s, char *err,
                       size_t errlen)
{
    if (tput_add(self->tput, p, now_s) != 0) {
        err_set(err, errlen, "out of memory for the throughput history");
        return -1;
    }
    return 0;
}

/* Rows by epoch, train before validation: the order metrics.csv lists. */
static int s_by_epoch_phase(const void *a, const void *b)
{
    const metrics_row_t *x = a, *y = b;
    if (x->epoch != y->epoch)
        return (x->epoch > y->epoch) - (x->epoch < y->epoch);
    return (y->phase > x->phase) - (y->phase < x->phase);
}

/* A resumed run's rows: whatever metrics.csv holds (epochs >= --start-epoch
 * are redone and dropped). Once per run. */
static int s_load(rundir_t *self, char *err, size_t errlen)
{
    if (self->loaded)
        return 0;
    self->loaded = true;
    char *path = s_join(self, "metrics.csv");
    metrics_row_t *rows = NULL;
    size_t n = 0, skipped = 0;
    int rc = path ? metrics_csv_read(path, &rows, &n, &skipped, err, errlen) : -1;
    if (!path)
        err_set(err, errlen, "out of memory");
    free(path);
    if (rc != 0)
        return -1;
    for (size_t i = 0; i < n; i++) {
        bool keep = self->start_epoch < 0 || rows[i].epoch < (uint64_t)self->start_epoch;
        keep = keep && s_find(self, rows[i].epoch, rows[i].phase) == self->nhist;
        if (keep && s_grow((void **)&self->hist, &self->caphist, self->nhist,
                           sizeof(metrics_row_t)) == 0)
            self->hist[self->nhist++] = rows[i];
        else
            metrics_csv_row_clear(&rows[i]);
    }
    free(rows);
    return 0;
}

/* metrics.csv (training layout) and the seed CSV from the rows. */
static int s_write_training(rundir_t *self, char *err, size_t errlen)
{
    if (self->nhist) /* none yet: a resume within the first epoch (hist is NULL) */
        qsort(self->hist, self->nhist, sizeof(metrics_row_t), s_by_epoch_phase);
    char *path = s_join(self, "metrics.csv");
    int rc = path ? metrics_csv_write_rows(path, self->hist, self->nhist, err, errlen) : -1;
    free(path);
    if (rc == 0 && self->seed_csv) {
        path = s_join(self, self->seed_csv);
        rc = path ? seed_csv_write(path, self->hist, self->nhist, err, errlen) : -1;
        free(path);
    }
    if (rc != 0 && !path)
        err_set(err, errlen, "out of memory");
    return rc;
}

int rundir_train_setup(rundir_t *self, long start_epoch, const char *seed_csv, char *err,
                       size_t errlen)
{
    if (seed_csv && (!seed_csv[0] || strchr(seed_csv, '/') || strcmp(seed_csv, "..") == 0)) {
        err_set(err, errlen, "--seed-csv '%s' must be a file name (it goes into %s)", seed_csv,
                 self->dir);
        return -1;
    }
    free(self->seed_csv);
    self->seed_csv = seed_csv ? strdup(seed_csv) : NULL;
    self->start_epoch = start_epoch;
    self->training = true;
    if ((seed_csv && !self->seed_csv) || s_load(self, err, errlen) != 0) {
        if (seed_csv && !self->seed_csv)
            err_set(err, errlen, "out of memory");
        return -1;
    }
    /* a resumed run's files cover the whole training from the start */
    return start_epoch >= 0 ? s_write_training(self, err, errlen) : 0;
}

static void s_keep_decision(rundir_t *self, const ev_metric_t *m)
{
    if (m->phase == DDP_PHASE_TRAIN && m->loss_scale > 0) {
        self->loss_scale = m->loss_scale;
        self->skipped_steps = m->skipped_steps;
    }
    if (!m->has_decision)
        return;
    self->have_decision = true;
    self->decision = m->decision;
    self->epochs = m->epochs;
    snprintf(self->reason, sizeof self->reason, "%s", m->decision_reason);
}

int rundir_on_metric(rundir_t *self, const ev_metric_t *m, char *err, size_t errlen)
{
    /* the first train metric makes this a training run (rows then go
     * through the training layout, an existing file's rows kept) */
    if (m->phase == DDP_PHASE_TRAIN && !self->training) {
        self->training = true;
        if (s_load(self, err, errlen) != 0)
            return -1;
    }
    size_t at = s_find(self, m->epoch, m->phase);
    bool repeated = at < self->nhist;
    if (!repeated) {
        if (s_grow((void **)&self->hist, &self->caphist, self->nhist, sizeof(metrics_row_t)) != 0) {
            err_set(err, errlen, "out of memory for the metric history");
            return -1;
        }
        memset(&self->hist[self->nhist++], 0, sizeof(metrics_row_t));
    }
    metrics_csv_row_clear(&self->hist[at]);
    if (metrics_csv_row(m, clock_wall_s(), &self->hist[at]) != 0 ||
        s_keep_metric(self, m, err, errlen) != 0) {
        err_set(err, errlen, "out of memory keeping the metric of epoch %u", m->epoch);
        return -1;
    }
    s_keep_decision(self, m);
    int rc = 0;
    if (self->training) {
        rc = s_write_training(self, err, errlen);
    } else if (!repeated) { /* one metrics.csv row per (epoch, phase) */
        char *path = s_join(self, "metrics.csv");
        if (!path) {
            err_set(err, errlen, "out of memory");
            return -1;
        }
        rc = metrics_csv_append(path, m, clock_wall_s(), err, errlen);
        free(path);
    } else {
        return 0;
    }
    /* refreshed after every epoch; the final metric's plots come with finish() */
    if (rc == 0 && !m->final)
        rc = s_plots(self, err, errlen);
    return rc;
}

static int s_add_failed(rundir_t *self, uint32_t epoch, uint8_t phase, uint64_t id,
                        const char *path, const char *reason)
{
    if (s_grow((void **)&self->failed, &self->capfailed, self->nfailed, sizeof(failed_t)) != 0)
        return -1;
    failed_t *f = &self->failed[self->nfailed];
    f->epoch = epoch;
    f->phase = phase;
    f->id = id;
    f->path = path ? strdup(path) : NULL;
    f->reason = reason ? strdup(reason) : NULL;
    if ((path && !f->path) || (reason && !f->reason)) {
        free(f->path);
        free(f->reason);
        return -1;
    }
    self->nfailed++;
    return 0;
}

int rundir_on_membership(rundir_t *self, const ev_membership_t *m, char *err, size_t errlen)
{
    if (membership_log_add(&self->members, m, clock_wall_s()) != 0) {
        err_set(err, errlen, "out of memory recording a membership change");
        return -1;
    }
    char *path = s_join(self, "membership.csv");
    if (!path) {
        err_set(err, errlen, "out of memory");
        return -1;
    }
    int rc = membership_log_write(&self->members, path, err, errlen);
    free(path);
    return rc;
}

int rundir_on_failed(rundir_t *self, const ev_failed_t *f)
{
    return s_add_failed(self, f->epoch, f->phase, f->id, f->path[0] ? f->path : NULL,
                        f->reason[0] ? f->reason : NULL);
}

int rundir_on_predictions(rundir_t *self, const ev_predictions_t *p, char *err, size_t errlen)
{
    for (uint64_t i = 0; i < p->n; i++)
        if (p->status[i] == 2 &&
            s_add_failed(self, p->epoch, p->phase, p->first + i, p->paths ? p->paths[i] : NULL,
                         NULL) != 0) {
            err_set(err, errlen, "out of memory recording failed samples");
            return -1;
        }
    if (p->first == 0) {
        predcsv_destroy(&self->pred); /* an unfinished earlier stream is dropped */
        char *path = s_join(self, "predictions.csv");
        self->pred = path ? predcsv_new(path, err, errlen) : NULL;
        if (!path)
            err_set(err, errlen, "out of memory");
        free(path);
        if (!self->pred)
            return -1;
    }
    if (!self->pred) {
        err_set(err, errlen, "predictions chunk from %llu without its start (first 0)",
                 (unsigned long long)p->first);
        return -1;
    }
    if (predcsv_add(self->pred, p, err, errlen) != 0) {
        predcsv_destroy(&self->pred);
        return -1;
    }
    if (predcsv_next(self->pred) == p->total)
        return predcsv_commit(&self->pred, err, errlen);
    return 0;
}

static int s_by_id(const void *a, const void *b)
{
    const failed_t *x = a, *y = b;
    return (x->id > y->id) - (x->id < y->id);
}

/* The summary's (epoch, phase) failures, one per id, sorted, the most
 * informative report of each (path and reason may come from different
 * events). Returns the count; *out borrows strings from self. */
static int s_failed_for(rundir_t *self, const ev_metric_t *m, summary_failed_t **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (self->nfailed == 0)
        return 0;
    qsort(self->failed, self->nfailed, sizeof(failed_t), s_by_id);
    summary_failed_t *list = calloc(self->nfailed, sizeof *list);
    if (!list)
        return -1;
    size_t k = 0;
    for (size_t i = 0; i < self->nfailed; i++) {
        const failed_t *f = &self->failed[i];
        if (f->epoch != m->epoch || f->phase != m->phase)
            continue;
        if (k == 0 || list[k - 1].index != f->id)
            list[k++] = (summary_failed_t){f->id, NULL, NULL};
        if (!list[k - 1].path)
            list[k - 1].path = f->path;
        if (!list[k - 1].reason)
            list[k - 1].reason = f->reason;
    }
    *out = list;
    *n = k;
    return 0;
}

/* Keep the first error, try everything. */
static void s_note(int *rc, int step_rc, char *err, size_t errlen, const char *step_why)
{
    if (step_rc != 0 && *rc == 0) {
        err_set(err, errlen, "%s", step_why);
        *rc = -1;
    }
}

/* The summary's "training" object from the rows (summary.h). */
static void s_training(const rundir_t *self, summary_training_t *t)
{
    memset(t, 0, sizeof *t);
    t->best_val_top1 = t->final_train_loss = t->final_train_top1 = NAN;
    const metrics_row_t *last_train = NULL;
    for (size_t i = 0; i < self->nhist; i++) {
        const metrics_row_t *w = &self->hist[i];
        t->last_epoch = w->epoch > t->last_epoch ? w->epoch : t->last_epoch;
        if (isfinite(w->epoch_seconds))
            t->total_seconds += w->epoch_seconds;
        if (w->phase == DDP_PHASE_TRAIN) {
            t->epochs_run++;
            if (!last_train || w->epoch > last_train->epoch)
                last_train = w;
        } else if (isfinite(w->top1) && (!(w->top1 <= t->best_val_top1) ||
                                         (w->top1 == t->best_val_top1 && w->epoch < t->best_val_epoch))) {
            t->best_val_top1 = w->top1;
            t->best_val_epoch = w->epoch;
        }
    }
    if (last_train) {
        t->final_train_loss = last_train->loss;
        t->final_train_top1 = last_train->top1;
    }
    bool stop = self->have_decision && self->decision == 1;
    t->stopped_early = stop && !self->stop_code && (uint64_t)t->last_epoch + 1 < self->epochs;
    t->stop_reason = self->stop_code ? self->stop_reason : stop ? self->reason : NULL;
    t->ranks_lost = self->members.ranks_lost;
    t->ranks_joined = self->members.ranks_joined;
    t->steps_redone = self->members.steps_redone;
    t->world_size = self->members.world_size;
    t->loss_scale = self->loss_scale;
    t->skipped_steps = self->skipped_steps;
    bool ckpt = self->stop_code == DDP_STOP_CHECKPOINT_FAILED;
    t->checkpoint_failures = ckpt;
    t->checkpoint_error = ckpt ? self->stop_reason : NULL;
    t->stopped = ckpt                                       ? "checkpoint-failed"
                 : self->stop_code == DDP_STOP_NONFINITE ? "non-finite"
                                                         : NULL;
}

void rundir_job_stopped(rundir_t *self, int code, const char *reason)
{
    self->stop_code = code;
    snprintf(self->stop_reason, sizeof self->stop_reason, "%s", reason);
}

static int s_write_summary(rundir_t *self, const ev_metric_t *m, char *err, size_t errlen)
{
    summary_failed_t *failed = NULL;
    size_t nfailed = 0;
    char *path = s_join(self, "summary.json");
    if (!path || s_failed_for(self, m, &failed, &nfailed) != 0) {
        free(path);
        err_set(err, errlen, "out of memory writing summary.json");
        return -1;
    }
    summary_training_t t;
    char *ckpt = self->training ? s_join(self, "checkpoint.safetensors") : NULL;
    if (self->training)
        s_training(self, &t);
    if (ckpt && access(ckpt, F_OK) == 0)
        t.last_good_checkpoint = ckpt;
    int rc = summary_write(path, m, failed, nfailed, self->training ? &t : NULL, err, errlen);
    free(ckpt);
    free(failed);
    free(path);
    return rc;
}

static int s_write_report(rundir_t *self, const ev_metric_t *m, char *err, size_t errlen)
{
    char *path = s_join(self, "classification_report.txt");
    if (!path) {
        err_set(err, errlen, "out of memory");
        return -1;
    }
    int rc = class_report_write(path, m->cells, m->ncells, m->num_classes, present_labelled(m),
                                m->class_names, err, errlen);
    free(path);
    return rc;
}

/* A series: one field of one phase's rows (F_RANK + r: rank r's images/s). */
enum { F_LOSS, F_TOP1, F_TOP5, F_IPS, F_RANK };

static double s_value(const metrics_row_t *w, int field)
{
    switch (field) {
    case F_LOSS: return w->loss;
    case F_TOP1: return w->top1;
    case F_TOP5: return w->top5;
    case F_IPS: return w->images_per_sec;
    }
    uint32_t r = (uint32_t)(field - F_RANK);
    return r < w->nranks ? w->rank_ips[r] : NAN;
}

static int s_by_epoch(const void *a, const void *b)
{
    const metrics_row_t *x = a, *y = b;
    return (x->epoch > y->epoch) - (x->epoch < y->epoch);
}

/* Add one phase's values of one field, in epoch order, as a series. */
static int s_add_series(plot_t *p, const rundir_t *self, uint8_t phase, int field,
                        const char *name)
{
    size_t n = 0;
    double *x = malloc((self->nhist + 1) * sizeof(double));
    double *y = malloc((self->nhist + 1) * sizeof(double));
    int rc = -1;
    if (x && y) {
        for (size_t i = 0; i < self->nhist; i++) {
            const metrics_row_t *w = &self->hist[i];
            if (w->phase != phase)
                continue;
            x[n] = w->epoch;
            y[n] = s_value(w, field);
            n++;
        }
        rc = n ? plot_add_series(p, name, x, y, n) : 0;
    }
    free(x);
    free(y);
    return rc;
}

static int s_write_plot(rundir_t *self, plot_t *p, const char *stem, char *err, size_t errlen)
{
    char name[64];
    snprintf(name, sizeof name, "%s.png", stem);
    char *png = s_join(self, name);
    snprintf(name, sizeof name, "%s.svg", stem);
    char *svg = s_join(self, name);
    int rc = -1;
    if (!png || !svg)
        err_set(err, errlen, "out of memory");
    else if (plot_write_png(p, png, PLOT_W, PLOT_H, err, errlen) == 0)
        rc = plot_write_svg(p, svg, PLOT_W, PLOT_H, err, errlen);
    free(png);
    free(svg);
    return rc;
}

typedef struct {
    uint8_t phase;
    int field;
    const char *name;
} series_t;

/* Rows of the series (its phase). */
static size_t s_rows(const rundir_t *self, uint8_t phase, const metrics_row_t **last)
{
    size_t n = 0;
    for (size_t i = 0; i < self->nhist; i++)
        if (self->hist[i].phase == phase) {
            *last = &self->hist[i];
            n++;
        }
    return n;
}

/* A single epoch (an eval): a line plot over epochs would be one point on
 * an epoch axis, so each series' value is a labelled bar instead. */
static int s_bars(rundir_t *self, const char *stem, const char *title, const char *ylabel,
                  const series_t *series, int nseries, double ymax, int decimals, char *err,
                  size_t errlen)
{
    const char *names[CHART_MAX_VALUES];
    double values[CHART_MAX_VALUES];
    size_t n = 0;
    long epoch = -1;
    for (int i = 0; i < nseries && n < CHART_MAX_VALUES; i++) {
        const metrics_row_t *w = NULL;
        if (s_rows(self, series[i].phase, &w) == 0)
            continue;
        names[n] = series[i].name;
        values[n++] = s_value(w, series[i].field);
        epoch = w->epoch;
    }
    char full[160], name[64];
    snprintf(full, sizeof full, "%s (epoch %ld)", title, epoch);
    chart_values_t v = {full, ylabel, n, names, values, ymax, decimals};
    snprintf(name, sizeof name, "%s.png", stem);
    char *png = s_join(self, name);
    snprintf(name, sizeof name, "%s.svg", stem);
    char *svg = s_join(self, name);
    int rc = -1;
    if (!png || !svg)
        err_set(err, errlen, "out of memory for plot %s", stem);
    else
        rc = chart_values_write(&v, png, svg, err, errlen);
    free(png);
    free(svg);
    return rc;
}

/* One per-epoch figure of the listed series; labelled bars (ymax: the
 * value axis' top, 0 auto) when no series has two epochs. */
static int s_figure(rundir_t *self, const char *stem, const char *title, const char *ylabel,
                    const series_t *series, int nseries, bool from_zero, double ymax,
                    int decimals, char *err, size_t errlen)
{
    size_t most = 0;
    for (int i = 0; i < nseries; i++) {
        const metrics_row_t *w = NULL;
        size_t n = s_rows(self, series[i].phase, &w);
        most = n > most ? n : most;
    }
    if (most == 1)
        return s_bars(self, stem, title, ylabel, series, nseries, ymax, decimals, err, errlen);
    plot_t *p = plot_new(title, "epoch", ylabel);
    if (!p) {
        err_set(err, errlen, "out of memory for plot %s", stem);
        return -1;
    }
    plot_set_integer_x(p, true);
    plot_set_y_from_zero(p, from_zero);
    int rc = 0;
    for (int i = 0; i < nseries && rc == 0; i++)
        rc = s_add_series(p, self, series[i].phase, series[i].field, series[i].name);
    if (rc != 0)
        err_set(err, errlen, "out of memory for plot %s", stem);
    else
        rc = s_write_plot(self, p, stem, err, errlen);
    plot_destroy(&p);
    return rc;
}

/* Training: images/s per epoch, all ranks and each rank's compute rate. */
static int s_throughput_epochs(rundir_t *self, char *err, size_t errlen)
{
    static char names[PLOT_MAX_SERIES][32];
    series_t s[PLOT_MAX_SERIES] = {{DDP_PHASE_TRAIN, F_IPS, "train (all ranks)"},
                                   {DDP_PHASE_EVAL, F_IPS, "val (all ranks)"}};
    uint32_t ranks = 0;
    for (size_t i = 0; i < self->nhist; i++)
        if (self->hist[i].phase == DDP_PHASE_TRAIN && self->hist[i].nranks > ranks)
            ranks = self->hist[i].nranks;
    int n = 2;
    for (uint32_t r = 0; r < ranks && n < PLOT_MAX_SERIES; r++, n++) {
        snprintf(names[n], sizeof names[n], "train rank %u (compute)", r);
        s[n] = (series_t){DDP_PHASE_TRAIN, F_RANK + (int)r, names[n]};
    }
    return s_figure(self, "throughput", "Throughput per epoch", "images/s", s, n, true, 0, 1, err,
                    errlen);
}

/* Images/s over the job's time, all workers and per rank; per epoch when
 * no progress event came (a job shorter than one progress tick). */
static int s_throughput(rundir_t *self, char *err, size_t errlen)
{
    static const series_t ips[] = {{DDP_PHASE_EVAL, F_IPS, "eval"}};
    if (self->training)
        return s_throughput_epochs(self, err, errlen);
    if (tput_points(self->tput) < 2)
        return s_figure(self, "throughput", "Throughput", "images/s", ips, 1, true, 0, 1, err,
                        errlen);
    plot_t *p = plot_new("Throughput", "seconds since the plan", "images/s");
    int rc = -1;
    if (!p || tput_plot(self->tput, p) != 0)
        err_set(err, errlen, "out of memory for plot throughput");
    else {
        plot_set_y_from_zero(p, true);
        rc = s_write_plot(self, p, "throughput", err, errlen);
    }
    plot_destroy(&p);
    return rc;
}

static int s_plots(rundir_t *self, char *err, size_t errlen)
{
    if (self->nhist && !self->training)
        qsort(self->hist, self->nhist, sizeof(metrics_row_t), s_by_epoch);
    static const series_t loss_eval[] = {{DDP_PHASE_EVAL, F_LOSS, "eval"}};
    static const series_t loss_train[] = {{DDP_PHASE_TRAIN, F_LOSS, "train"},
                                          {DDP_PHASE_EVAL, F_LOSS, "val"}};
    static const series_t acc_eval[] = {{DDP_PHASE_EVAL, F_TOP1, "eval top-1"},
                                        {DDP_PHASE_EVAL, F_TOP5, "eval top-5"}};
    static const series_t acc_train[] = {{DDP_PHASE_TRAIN, F_TOP1, "train top-1"},
                                         {DDP_PHASE_EVAL, F_TOP1, "val top-1"},
                                         {DDP_PHASE_EVAL, F_TOP5, "val top-5"}};
    bool t = self->training;
    char w[512] = "";
    int rc = 0;
    s_note(&rc, s_figure(self, "loss", "Loss", "cross-entropy loss", t ? loss_train : loss_eval,
                         t ? 2 : 1, false, 0, 4, w, sizeof w), err, errlen, w);
    s_note(&rc, s_figure(self, "accuracy", "Accuracy", "accuracy", t ? acc_train : acc_eval,
                         t ? 3 : 2, false, 1, 4, w, sizeof w), err, errlen, w);
    s_note(&rc, s_throughput(self, w, sizeof w), err, errlen, w);
    return rc;
}

/* confusion.png/svg and f1.png/svg of the summary's metric. */
static int s_class_charts(rundir_t *self, const ev_metric_t *m, char *err, size_t errlen)
{
    char title[128];
    const char *what = m->phase == DDP_PHASE_TRAIN ? "train" : self->training ? "validation" : "eval";
    char *png = s_join(self, "confusion.png"), *svg = s_join(self, "confusion.svg");
    char *fpng = s_join(self, "f1.png"), *fsvg = s_join(self, "f1.svg");
    int rc = -1;
    if (!png || !svg || !fpng || !fsvg) {
        err_set(err, errlen, "out of memory");
    } else {
        chart_classes_t c = {title, m->cells, m->ncells, m->num_classes, m->class_names,
                             present_labelled(m)};
        snprintf(title, sizeof title, "Confusion matrix (%s, epoch %u, %llu sample%s)", what,
                 m->epoch, (unsigned long long)m->samples, m->samples == 1 ? "" : "s");
        /* past CHART_CONFUSION_MAX classes no heat map (chart.h) */
        rc = m->num_classes > CHART_CONFUSION_MAX ? 0 : chart_confusion_write(&c, png, svg, err,
                                                                              errlen);
        snprintf(title, sizeof title, "Per-class precision, recall and F1 (%s, epoch %u)", what,
                 m->epoch);
        if (rc == 0)
            rc = chart_f1_write(&c, fpng, fsvg, err, errlen);
    }
    free(png);
    free(svg);
    free(fpng);
    free(fsvg);
    return rc;
}

int rundir_finish(rundir_t *self, char *err, size_t errlen)
{
    const ev_metric_t *m = self->last_eval ? self->last_eval : self->last_any;
    char w[1024] = "";
    int rc = 0;
    if (!m) {
        err_set(err, errlen, "no metric received: summary.json and "
                              "classification_report.txt not written");
        rc = -1;
    } else {
        s_note(&rc, s_write_summary(self, m, w, sizeof w), err, errlen, w);
        s_note(&rc, s_write_report(self, m, w, sizeof w), err, errlen, w);
        s_note(&rc, s_class_charts(self, m, w, sizeof w), err, errlen, w);
        s_note(&rc, probcharts_write(m, self->dir, PLOT_W, PLOT_H, w, sizeof w), err, errlen, w);
    }
    s_note(&rc, s_plots(self, w, sizeof w), err, errlen, w);
    if (self->pred) {
        snprintf(w, sizeof w, "predictions.csv incomplete: %llu entries received, not written",
                 (unsigned long long)predcsv_next(self->pred));
        s_note(&rc, -1, err, errlen, w);
        predcsv_destroy(&self->pred);
    }
    return rc;
}
