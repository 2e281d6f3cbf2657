#include "reporterd/metrics_csv.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "reporterd/afile.h"
#include "reporterd/summary.h"
#include "reporterd/textfmt.h"

#define HEADER "time,epoch,phase,samples,loss,top1,top5,images_per_sec,lr\n"

/* Copy the existing file (if any) into out; 1 if copied, 0 if absent. */
static int s_copy_existing(const char *path, FILE *out, char *why, size_t whylen)
{
    FILE *in = fopen(path, "r");
    if (!in) {
        if (errno == ENOENT)
            return 0;
        snprintf(why, whylen, "cannot read %s: %s", path, strerror(errno));
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
        snprintf(why, whylen, "cannot read %s", path);
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

int metrics_csv_append(const char *path, const ev_metric_t *m, double unix_time, char *why,
                       size_t whylen)
{
    afile_t *f = afile_new(path, why, whylen);
    if (!f)
        return -1;
    FILE *out = afile_stream(f);
    int had = s_copy_existing(path, out, why, whylen);
    if (had < 0) {
        afile_destroy(&f);
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
    return afile_commit(&f, why, whylen);
}
