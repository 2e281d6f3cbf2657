#include "reporterd/metrics_csv.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "common/atomic_file.h"
#include "common/errbuf.h"
#include "reporterd/summary.h"
#include "reporterd/textfmt.h"

#define HEADER "time,epoch,phase,samples,loss,top1,top5,images_per_sec,lr\n"

/* Copy the existing file (if any) into out; 1 if copied, 0 if absent. */
static int s_copy_existing(const char *path, FILE *out, char *err, size_t errlen)
{
    FILE *in = fopen(path, "r");
    if (!in) {
        if (errno == ENOENT)
            return 0;
        err_set(err, errlen, "cannot read %s: %s", path, strerror(errno));
        return -1;
    }
    char buf[8192];
    size_t n, total = 0;
    char last = '\n';
    while ((n = fread(buf, 1, sizeof buf, in)) > 0) {
        fwrite(buf, 1, n, out);
        total += n;
        last = buf[n - 1];
    }
    int bad = ferror(in);
    fclose(in);
    if (bad) {
        err_set(err, errlen, "cannot read %s", path);
        return -1;
    }
    if (total == 0)
        return 0; /* empty file: treat as absent, write the header */
    if (last != '\n')
        fputc('\n', out); /* a torn last line must not glue onto ours */
    return 1;
}

static void s_field(FILE *out, double v, int present)
{
    char buf[TEXTFMT_NUM_LEN];
    fputc(',', out);
    if (present)
        fputs(textfmt_num(v, buf), out);
}

int metrics_csv_append(const char *path, const ev_metric_t *m, double unix_time, char *err,
                       size_t errlen)
{
    atomic_file_t *f = atomic_file_new(path, err, errlen);
    if (!f)
        return -1;
    FILE *out = atomic_file_stream(f);
    int had = s_copy_existing(path, out, err, errlen);
    if (had < 0) {
        atomic_file_destroy(&f);
        return -1;
    }
    if (!had)
        fputs(HEADER, out);
    char t[32];
    fprintf(out, "%s,%u,%s,%llu", textfmt_iso8601(unix_time, t), m->epoch,
            summary_phase_name(m->phase), (unsigned long long)m->samples);
    double n = m->samples ? (double)m->samples : 1.0; /* fields are empty when 0 */
    s_field(out, m->loss_sum / n, m->samples > 0);
    s_field(out, (double)m->correct_top1 / n, m->samples > 0);
    s_field(out, (double)m->correct_top5 / n, m->samples > 0);
    s_field(out, m->images_per_sec, 1);
    s_field(out, m->lr, 1);
    fputc('\n', out);
    return atomic_file_commit(&f, err, errlen);
}

/* ---- the training layout ------------------------------------------------- */

#define TRAIN_COLUMNS "epoch_seconds"
#define RANK_COLUMN "images_per_sec_rank"

int metrics_csv_row(const ev_metric_t *m, double unix_time, metrics_row_t *out)
{
    memset(out, 0, sizeof *out);
    char t[32];
    snprintf(out->time, sizeof out->time, "%s", textfmt_iso8601(unix_time, t));
    out->epoch = m->epoch;
    out->phase = m->phase;
    out->samples = m->samples;
    double n = (double)m->samples;
    out->loss = m->samples ? m->loss_sum / n : NAN;
    out->top1 = m->samples ? (double)m->correct_top1 / n : NAN;
    out->top5 = m->samples ? (double)m->correct_top5 / n : NAN;
    out->images_per_sec = m->images_per_sec;
    out->lr = m->lr;
    out->epoch_seconds = m->wall_s;
    if (m->nranks && m->rank_images_per_sec) {
        out->rank_ips = malloc(m->nranks * sizeof(double));
        if (!out->rank_ips)
            return -1;
        memcpy(out->rank_ips, m->rank_images_per_sec, m->nranks * sizeof(double));
        out->nranks = m->nranks;
    }
    return 0;
}

void metrics_csv_row_clear(metrics_row_t *row)
{
    free(row->rank_ips);
    memset(row, 0, sizeof *row);
}

int metrics_csv_write_rows(const char *path, const metrics_row_t *rows, size_t n, char *err,
                           size_t errlen)
{
    uint32_t ranks = 0;
    for (size_t i = 0; i < n; i++)
        ranks = rows[i].nranks > ranks ? rows[i].nranks : ranks;
    atomic_file_t *f = atomic_file_new(path, err, errlen);
    if (!f)
        return -1;
    FILE *out = atomic_file_stream(f);
    fputs("time,epoch,phase,samples,loss,top1,top5,images_per_sec,lr," TRAIN_COLUMNS, out);
    for (uint32_t r = 0; r < ranks; r++)
        fprintf(out, "," RANK_COLUMN "%u", r);
    fputc('\n', out);
    for (size_t i = 0; i < n; i++) {
        const metrics_row_t *w = &rows[i];
        fprintf(out, "%s,%u,%s,%llu", w->time, w->epoch, w->phase ? "train" : "val",
                (unsigned long long)w->samples);
        s_field(out, w->loss, isfinite(w->loss));
        s_field(out, w->top1, isfinite(w->top1));
        s_field(out, w->top5, isfinite(w->top5));
        s_field(out, w->images_per_sec, 1);
        s_field(out, w->lr, 1);
        s_field(out, w->epoch_seconds, isfinite(w->epoch_seconds));
        for (uint32_t r = 0; r < ranks; r++)
            s_field(out, r < w->nranks ? w->rank_ips[r] : 0, r < w->nranks);
        fputc('\n', out);
    }
    return atomic_file_commit(&f, err, errlen);
}

/* Column indices of the header fields a row is read from (-1: absent). */
typedef struct {
    int time, epoch, phase, samples, loss, top1, top5, ips, lr, secs;
    int rank[EVENT_MAX_RANKS];
    uint32_t nranks;
} columns_t;

/* Split line (modified in place) at commas: up to max fields. */
static int s_split(char *line, char **fields, int max)
{
    int n = 0;
    for (char *p = line; n < max;) {
        fields[n++] = p;
        char *c = strchr(p, ',');
        if (!c)
            break;
        *c = '\0';
        p = c + 1;
    }
    return n;
}

static int s_header(char *line, columns_t *c)
{
    static char *f[EVENT_MAX_RANKS + 16];
    int n = s_split(line, f, EVENT_MAX_RANKS + 16);
    memset(c, 0xff, sizeof *c); /* every index -1 */
    c->nranks = 0;
    struct { const char *name; int *at; } known[] = {
        {"time", &c->time}, {"epoch", &c->epoch}, {"phase", &c->phase}, {"samples", &c->samples},
        {"loss", &c->loss}, {"top1", &c->top1}, {"top5", &c->top5}, {"images_per_sec", &c->ips},
        {"lr", &c->lr}, {TRAIN_COLUMNS, &c->secs}};
    for (int i = 0; i < n; i++) {
        for (size_t k = 0; k < sizeof known / sizeof known[0]; k++)
            if (strcmp(f[i], known[k].name) == 0)
                *known[k].at = i;
        unsigned r;
        char tail;
        if (sscanf(f[i], RANK_COLUMN "%u%c", &r, &tail) == 1 && r < EVENT_MAX_RANKS) {
            c->rank[r] = i;
            c->nranks = r + 1 > c->nranks ? r + 1 : c->nranks;
        }
    }
    return c->epoch >= 0 && c->phase >= 0 ? 0 : -1;
}

/* The field at column i as a double; NaN when absent or empty. */
static double s_num(char **f, int nf, int i)
{
    if (i < 0 || i >= nf || !f[i][0])
        return NAN;
    char *end;
    double v = strtod(f[i], &end);
    return *end ? NAN : v;
}

static int s_row(char *line, const columns_t *c, metrics_row_t *w)
{
    static char *f[EVENT_MAX_RANKS + 16];
    int nf = s_split(line, f, EVENT_MAX_RANKS + 16);
    memset(w, 0, sizeof *w);
    double epoch = s_num(f, nf, c->epoch);
    if (!(epoch >= 0 && epoch <= UINT32_MAX) || c->phase >= nf)
        return -1;
    const char *ph = f[c->phase];
    if (strcmp(ph, "train") != 0 && strcmp(ph, "val") != 0 && strcmp(ph, "eval") != 0)
        return -1;
    w->epoch = (uint32_t)epoch;
    w->phase = strcmp(ph, "train") == 0;
    if (c->time >= 0 && c->time < nf)
        snprintf(w->time, sizeof w->time, "%s", f[c->time]);
    double samples = s_num(f, nf, c->samples);
    w->samples = samples >= 0 ? (uint64_t)samples : 0;
    w->loss = s_num(f, nf, c->loss);
    w->top1 = s_num(f, nf, c->top1);
    w->top5 = s_num(f, nf, c->top5);
    w->images_per_sec = s_num(f, nf, c->ips);
    w->lr = s_num(f, nf, c->lr);
    w->epoch_seconds = s_num(f, nf, c->secs);
    uint32_t nr = 0;
    for (uint32_t r = 0; r < c->nranks; r++)
        if (isfinite(s_num(f, nf, c->rank[r])))
            nr = r + 1;
    if (nr) {
        if (!(w->rank_ips = calloc(nr, sizeof(double))))
            return -2;
        for (uint32_t r = 0; r < nr; r++) {
            double v = s_num(f, nf, c->rank[r]);
            w->rank_ips[r] = isfinite(v) ? v : 0;
        }
        w->nranks = nr;
    }
    return 0;
}

static char *s_slurp(const char *path, char *err, size_t errlen, bool *absent)
{
    *absent = false;
    FILE *in = fopen(path, "r");
    if (!in) {
        *absent = errno == ENOENT;
        if (!*absent)
            err_set(err, errlen, "cannot read %s: %s", path, strerror(errno));
        return NULL;
    }
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    char buf[8192];
    size_t n;
    while (mem && (n = fread(buf, 1, sizeof buf, in)) > 0)
        fwrite(buf, 1, n, mem);
    int bad = ferror(in) || !mem;
    fclose(in);
    if (mem && fclose(mem) != 0)
        bad = 1;
    if (bad) {
        err_set(err, errlen, "cannot read %s", path);
        free(text);
        return NULL;
    }
    return text;
}

int metrics_csv_read(const char *path, metrics_row_t **rows, size_t *n, size_t *skipped,
                     char *err, size_t errlen)
{
    *rows = NULL;
    *n = *skipped = 0;
    if (errlen)
        err[0] = '\0';
    bool absent;
    char *text = s_slurp(path, err, errlen, &absent);
    if (!text)
        return absent ? 0 : -1;
    columns_t *c = malloc(sizeof *c);
    int rc = 0;
    char *save = NULL;
    char *line = strtok_r(text, "\r\n", &save);
    if (!c) {
        err_set(err, errlen, "out of memory reading %s", path);
        rc = -1;
    } else if (line && s_header(line, c) != 0) {
        err_set(err, errlen, "%s has no epoch/phase header: not a metrics.csv of ddpipe", path);
        rc = -1;
    }
    size_t cap = 0;
    while (rc == 0 && line && (line = strtok_r(NULL, "\r\n", &save))) {
        if (*n == cap) {
            metrics_row_t *more = realloc(*rows, (cap = cap ? 2 * cap : 16) * sizeof **rows);
            if (!more) {
                rc = -1;
                break;
            }
            *rows = more;
        }
        int r = s_row(line, c, &(*rows)[*n]);
        if (r == -2)
            rc = -1;
        *n += r == 0;
        *skipped += r == -1;
    }
    if (rc != 0 && !err[0])
        err_set(err, errlen, "out of memory reading %s", path);
    if (rc != 0) {
        for (size_t i = 0; i < *n; i++)
            metrics_csv_row_clear(&(*rows)[i]);
        free(*rows);
        *rows = NULL;
        *n = 0;
    }
    free(c);
    free(text);
    return rc;
}
