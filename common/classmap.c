#include "common/classmap.h"

#include "common/errbuf.h"
#include "common/utf8.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME_MAX_BYTES 1024   /* a folder or a label: well inside a PLAN string */

typedef struct {
    char *folder, *label;   /* label NULL: none given */
    uint32_t index;
    long line;
} entry_t;

struct classmap {
    bool numeric;
    char *path;
    uint32_t outputs;
    entry_t *e;
    size_t n, cap;
    entry_t **by_folder;     /* n, sorted by folder: lookups */
    const char **names;      /* outputs: classmap_name */
};

void classmap_destroy(classmap_t **mp)
{
    if (!mp || !*mp)
        return;
    classmap_t *m = *mp;
    for (size_t i = 0; i < m->n; i++)
        free(m->e[i].folder), free(m->e[i].label);
    free(m->e);
    free(m->by_folder);
    free(m->names);
    free(m->path);
    free(m);
    *mp = NULL;
}

/* A decimal number of at most 10 digits, no sign; -1 otherwise. */
static int64_t s_number(const char *s, size_t len)
{
    if (len == 0 || len > 10)
        return -1;
    int64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

static const char *s_skip_space(const char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    return s;
}

static size_t s_token_len(const char *s)
{
    size_t n = 0;
    while (s[n] && s[n] != ' ' && s[n] != '\t')
        n++;
    return n;
}

/* The line with its end (\n, \r\n) and trailing blanks cut. */
static void s_chomp(char *s)
{
    size_t n = strlen(s);
    while (n && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' ' || s[n - 1] == '\t'))
        s[--n] = 0;
}

static int s_push(classmap_t *m, const char *folder, size_t flen, const char *label,
                  uint32_t index, long line)
{
    if (m->n == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 64;
        entry_t *e = realloc(m->e, cap * sizeof *e);
        if (!e)
            return -1;
        m->e = e, m->cap = cap;
    }
    entry_t *e = &m->e[m->n];
    *e = (entry_t){.folder = strndup(folder, flen), .index = index, .line = line};
    if (label && *label)
        e->label = strdup(label);
    if (!e->folder || (label && *label && !e->label)) {
        free(e->folder), free(e->label);
        return -1;
    }
    m->n++;
    return 0;
}

/* One entry of the file: "folder index [label]" when indexed, else
 * "folder [label]" at position pos. 0, or -1 with "FILE:LINE: why". */
static int s_parse_line(classmap_t *m, const char *s, long line, bool indexed, uint32_t pos,
                        char *err, size_t errlen)
{
    size_t flen = s_token_len(s);
    const char *rest = s_skip_space(s + flen);
    int64_t index = pos;
    if (indexed) {
        size_t ilen = s_token_len(rest);
        index = s_number(rest, ilen);
        if (index < 0) {
            err_set(err, errlen, "%s:%ld: want 'folder index [label]' like the lines above, "
                    "got '%.60s'", m->path, line, s);
            return -1;
        }
        rest = s_skip_space(rest + ilen);
    }
    if (flen > NAME_MAX_BYTES || strlen(rest) > NAME_MAX_BYTES) {
        err_set(err, errlen, "%s:%ld: a folder or label longer than %d bytes", m->path, line,
                NAME_MAX_BYTES);
        return -1;
    }
    if (!utf8_is_valid(s)) {
        err_set(err, errlen, "%s:%ld: not valid UTF-8", m->path, line);
        return -1;
    }
    if (index >= m->outputs) {
        err_set(err, errlen, "%s:%ld: index %lld, but the model has %u outputs (0..%u)%s",
                m->path, line, (long long)index, m->outputs, m->outputs - 1,
                indexed ? "" : ": the file lists more classes than the model has");
        return -1;
    }
    if (s_push(m, s, flen, rest, (uint32_t)index, line) < 0) {
        err_set(err, errlen, "%s: out of memory", m->path);
        return -1;
    }
    return 0;
}

static int s_read(classmap_t *m, FILE *f, char *err, size_t errlen)
{
    char *buf = NULL;
    size_t cap = 0;
    long line = 0;
    int indexed = -1, rc = 0;
    uint32_t pos = 0;
    while (rc == 0 && getline(&buf, &cap, f) >= 0) {
        line++;
        s_chomp(buf);
        const char *s = s_skip_space(buf);
        if (!*s || *s == '#')
            continue;
        if (indexed < 0) {   /* the first entry decides the form */
            const char *second = s_skip_space(s + s_token_len(s));
            indexed = s_number(second, s_token_len(second)) >= 0;
        }
        rc = s_parse_line(m, s, line, indexed == 1, pos++, err, errlen);
    }
    if (rc == 0 && ferror(f)) {
        err_set(err, errlen, "%s: read error after line %ld: %s", m->path, line, strerror(errno));
        rc = -1;
    }
    if (rc == 0 && m->n == 0) {
        err_set(err, errlen, "%s: no classes in the file (want 'folder index [label]' lines or "
                "a list of folder names in model order)", m->path);
        rc = -1;
    }
    free(buf);
    return rc;
}

static int s_by_folder(const void *a, const void *b)
{
    const entry_t *x = *(entry_t *const *)a, *y = *(entry_t *const *)b;
    int c = strcmp(x->folder, y->folder);
    return c ? c : (x->line > y->line) - (x->line < y->line);
}

static int s_by_folder_name(const void *a, const void *b)
{
    return strcmp((*(entry_t *const *)a)->folder, (*(entry_t *const *)b)->folder);
}

/* The lookup table and the names; folders and indices given twice. */
static int s_index(classmap_t *m, char *err, size_t errlen)
{
    m->by_folder = malloc(m->n * sizeof *m->by_folder);
    m->names = calloc(m->outputs, sizeof *m->names);
    long *line_of = calloc(m->outputs, sizeof *line_of);
    if (!m->by_folder || !m->names || !line_of) {
        free(line_of);
        err_set(err, errlen, "%s: out of memory", m->path);
        return -1;
    }
    int rc = 0;
    for (size_t i = 0; i < m->n && rc == 0; i++) {
        entry_t *e = &m->e[i];
        m->by_folder[i] = e;
        if (line_of[e->index]) {
            err_set(err, errlen, "%s:%ld: index %u is already given on line %ld", m->path,
                    e->line, e->index, line_of[e->index]);
            rc = -1;
        }
        line_of[e->index] = e->line;
        m->names[e->index] = e->label ? e->label : e->folder;
    }
    free(line_of);
    if (rc < 0)
        return -1;
    qsort(m->by_folder, m->n, sizeof *m->by_folder, s_by_folder);
    for (size_t i = 1; i < m->n; i++)
        if (strcmp(m->by_folder[i - 1]->folder, m->by_folder[i]->folder) == 0) {
            err_set(err, errlen, "%s:%ld: folder '%s' is already mapped on line %ld", m->path,
                    m->by_folder[i]->line, m->by_folder[i]->folder, m->by_folder[i - 1]->line);
            return -1;
        }
    return 0;
}

classmap_t *classmap_load(const char *spec, uint32_t outputs, char *err, size_t errlen)
{
    if (!spec || !*spec || outputs == 0) {
        err_set(err, errlen, "class map: no file, or a model without outputs");
        return NULL;
    }
    classmap_t *m = calloc(1, sizeof *m);
    if (!m || !(m->path = strdup(spec))) {
        free(m);
        err_set(err, errlen, "class map: out of memory");
        return NULL;
    }
    m->outputs = outputs;
    if (strcmp(spec, "numeric") == 0) {
        m->numeric = true;
        return m;
    }
    FILE *f = fopen(spec, "r");
    if (!f) {
        err_set(err, errlen, "%s: %s", spec, strerror(errno));
        classmap_destroy(&m);
        return NULL;
    }
    int rc = s_read(m, f, err, errlen);
    fclose(f);
    if (rc < 0 || s_index(m, err, errlen) < 0)
        classmap_destroy(&m);
    return m;
}

int32_t classmap_index(const classmap_t *m, const char *folder, char *err, size_t errlen)
{
    if (m->numeric) {
        int64_t v = s_number(folder, strlen(folder));
        if (v < 0 || (v > 0 && folder[0] == '0')) {
            err_set(err, errlen, "--classes numeric: folder '%s' is not a number (0, 1, ... "
                    "without leading zeros)", folder);
            return -1;
        }
        if (v >= m->outputs) {
            err_set(err, errlen, "--classes numeric: folder '%s' is past the model's %u outputs",
                    folder, m->outputs);
            return -1;
        }
        return (int32_t)v;
    }
    entry_t key = {.folder = (char *)folder}, *kp = &key;
    entry_t **hit = bsearch(&kp, m->by_folder, m->n, sizeof *m->by_folder, s_by_folder_name);
    if (!hit) {
        err_set(err, errlen, "%s: no line maps folder '%s' (the file maps %zu folders)",
                m->path, folder, m->n);
        return -1;
    }
    return (int32_t)(*hit)->index;
}

const char *classmap_name(const classmap_t *m, uint32_t index)
{
    return !m->numeric && index < m->outputs ? m->names[index] : NULL;
}

uint32_t classmap_outputs(const classmap_t *m) { return m->outputs; }
