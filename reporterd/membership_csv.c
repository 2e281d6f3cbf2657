#include "reporterd/membership_csv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/atomic_file.h"
#include "reporterd/textfmt.h"

void membership_log_init(membership_log_t *self)
{
    memset(self, 0, sizeof *self);
    self->world_size = -1;
}

void membership_log_free(membership_log_t *self)
{
    free(self->text);
    membership_log_init(self);
}

/* The event's rows as text (open_memstream: fields through textfmt). */
static char *rows_of(const ev_membership_t *m, double unix_time, size_t *len)
{
    char *buf = NULL, t[32];
    FILE *out = open_memstream(&buf, len);
    if (!out)
        return NULL;
    textfmt_iso8601(unix_time, t);
    for (uint32_t i = 0; i < m->n; i++) {
        fprintf(out, "%s,%u,%d,%s,%d,", t, m->gen, m->world, m->change, m->ranks[i]);
        textfmt_csv_field(out, m->names[i]);
        fprintf(out, ",%llu,", (unsigned long long)m->step);
        textfmt_csv_field(out, m->reason);
        fputc('\n', out);
    }
    if (fclose(out) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

int membership_log_add(membership_log_t *self, const ev_membership_t *m, double unix_time)
{
    size_t len = 0;
    char *rows = rows_of(m, unix_time, &len);
    if (!rows)
        return -1;
    if (self->len + len + 1 > self->cap) {
        size_t cap = (self->len + len + 1) * 2;
        char *p = realloc(self->text, cap);
        if (!p) {
            free(rows);
            return -1;
        }
        self->text = p;
        self->cap = cap;
    }
    memcpy(self->text + self->len, rows, len + 1);
    self->len += len;
    free(rows);
    if (strcmp(m->change, "lost") == 0) {
        self->ranks_lost += m->n;
        self->steps_redone += m->redone;
    } else if (strcmp(m->change, "joined") == 0) {
        self->ranks_joined += m->n;
    }
    self->world_size = m->world;
    return 0;
}

int membership_log_write(const membership_log_t *self, const char *path, char *err, size_t errlen)
{
    atomic_file_t *f = atomic_file_new(path, err, errlen);
    if (!f)
        return -1;
    FILE *out = atomic_file_stream(f);
    fputs("time,gen,world,change,rank,name,step,reason\n", out);
    if (self->len)
        fwrite(self->text, 1, self->len, out);
    return atomic_file_commit(&f, err, errlen);
}
